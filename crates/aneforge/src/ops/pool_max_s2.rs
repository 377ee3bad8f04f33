//! Max-pooling planes at column stride 2 with AVX2. A 3-wide kernel with left padding 1
//! (ResNet's 3×3 / 2 pool) takes each input row's windows once, 8 a step from the row's
//! even and odd columns split in registers, then each output row's max over its rows of
//! those. Other kernels split each input row once into its even and odd columns between
//! margins of −inf, so every tap of an output row is one unclamped run of a phase, and 16
//! outputs keep their running max in two registers over all taps.
//!
//! Bits: each output is the chain max(…max(max(−inf, t₀), t₁)…) over the taps in (ky, kx)
//! order, with `a.max(v)` = (v > a ? v : a) for a never NaN (it starts at −inf and a NaN tap
//! keeps it), exactly what `vmaxps(v, a)` computes; a tap in the padding reads −inf, which
//! keeps a, as skipping it does. The chain's result is its first tap (in that order) equal
//! to the largest, so the max over rows of each row's chain (from −inf, ties keeping the
//! earlier row) is the same value with the same sign of zero.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables))]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Lanes of one step.
const LANES: usize = 8;

/// A stride-2 (along the width) max-pool of one [H, W] plane: kernel [kH, kW], strides
/// [sH, 2], padding (top, left); `out` holds the [H', W'] output. `phases` is scratch.
pub(super) struct MaxS2<'a> {
    pub kernel: [usize; 2],
    pub stride_h: usize,
    pub pad_top_left: [usize; 2],
    pub phases: &'a mut Vec<f32>,
}

impl MaxS2<'_> {
    /// Pool plane `x` [H, W] into `out` [H', W'] (W' = `ow`) when the CPU has AVX2; returns
    /// false (nothing written) otherwise.
    pub fn run(&mut self, x: &[f32], [h, w]: [usize; 2], out: &mut [f32], ow: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            if self.kernel[1] == 3 && self.pad_top_left[1] == 1 {
                // SAFETY: AVX2 was just detected.
                unsafe { self.rows3_avx2(x, [h, w], out, ow) };
                return true;
            }
            self.split(x, [h, w], ow);
            // SAFETY: AVX2 was just detected; `split` sized every phase row for the runs read.
            unsafe { self.rows_avx2(h, out, ow) };
            return true;
        }
        false
    }

    /// Left margin of a phase row: phase index t of output column ox and tap kx is
    /// ox + ⌊(kx − pL) / 2⌋ ≥ −⌈pL / 2⌉.
    fn margin(&self) -> usize {
        self.pad_top_left[1].div_ceil(2)
    }

    /// Length of a phase row: the margin, then every index a tap reads for ox < W' (runs of
    /// two whole steps, so up to W' rounded up to 2·[`LANES`]), −inf wherever no column is.
    fn row_len(&self, ow: usize) -> usize {
        let reach = (self.kernel[1] - 1) / 2 + 1;
        self.margin() + ow.next_multiple_of(2 * LANES) + reach
    }

    /// Fill `phases` with [even, odd] rows per input row: phase q's slot margin + t holds
    /// x[2t + q] where that column exists, else −inf.
    fn split(&mut self, x: &[f32], [h, w]: [usize; 2], ow: usize) {
        let (len, margin) = (self.row_len(ow), self.margin());
        assert!(
            margin + w.div_ceil(2) <= len,
            "max-pool phases: {w} columns, row {len}"
        );
        self.phases.resize(2 * h * len, 0.0);
        for (row, dst) in x.chunks_exact(w).zip(self.phases.chunks_exact_mut(2 * len)) {
            let (even, odd) = dst.split_at_mut(len);
            // Every slot but the columns' own is −inf (the columns are written below).
            for (phase, cols) in [(&mut *even, w.div_ceil(2)), (&mut *odd, w / 2)] {
                phase[..margin].fill(f32::NEG_INFINITY);
                phase[margin + cols..].fill(f32::NEG_INFINITY);
            }
            // SAFETY: `run` calls `split` only after detecting AVX2.
            unsafe { deinterleave_avx2(row, &mut even[margin..], &mut odd[margin..]) };
        }
    }

    /// The output rows from the phase rows (see the module's contract).
    ///
    /// # Safety
    /// The CPU has AVX2; `phases` holds 2·H rows of [`MaxS2::row_len`]`(ow)` floats.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn rows_avx2(&self, h: usize, out: &mut [f32], ow: usize) {
        let ([kh, kw], [pt, pl]) = (self.kernel, self.pad_top_left);
        let (len, margin) = (self.row_len(ow), self.margin() as isize);
        // Each tap kx reads phase (kx − pL) mod 2 from index margin + ox + ⌊(kx − pL) / 2⌋.
        let taps: Vec<usize> = (0..kw)
            .map(|kx| {
                let s = kx as isize - pl as isize;
                let start = margin + s.div_euclid(2);
                s.rem_euclid(2) as usize * len + start as usize
            })
            .collect();
        let base = self.phases.as_ptr();
        for (oy, acc_row) in out.chunks_exact_mut(ow).enumerate() {
            // The input rows of the window in the plane: iy = oy·sH + ky − pT for ky < kH.
            let top = oy * self.stride_h;
            let rows = top.saturating_sub(pt)..(top + kh).saturating_sub(pt).min(h);
            let mut ox = 0;
            while ox < ow {
                // Two independent steps of 8 lanes (the second past W' only when W' ≤ 8 more).
                let mut acc = [_mm256_set1_ps(f32::NEG_INFINITY); 2];
                for iy in rows.clone() {
                    for &t in &taps {
                        let at = 2 * iy * len + t + ox;
                        for (s, acc) in acc.iter_mut().enumerate() {
                            // SAFETY: at + 8·s + 8 ≤ 2·iy·len + (phase) + len: t − phase ≤
                            // margin + ⌊(kW − 1 − pL) / 2⌋ and ox + 16 ≤ W' rounded up to 16
                            // (`row_len`); iy < H, a row written by `split`.
                            let v = unsafe { _mm256_loadu_ps(base.add(at + LANES * s)) };
                            *acc = _mm256_max_ps(v, *acc);
                        }
                    }
                }
                let n = (ow - ox).min(2 * LANES);
                let mut lanes = [0f32; 2 * LANES];
                let whole = n == 2 * LANES;
                let dst = match whole {
                    true => acc_row[ox..].as_mut_ptr(),
                    false => lanes.as_mut_ptr(),
                };
                // SAFETY: `dst` holds 16 f32: acc_row from ox when 16 remain, else `lanes`.
                unsafe {
                    _mm256_storeu_ps(dst, acc[0]);
                    _mm256_storeu_ps(dst.add(LANES), acc[1]);
                }
                if !whole {
                    acc_row[ox..ox + n].copy_from_slice(&lanes[..n]);
                }
                ox += 2 * LANES;
            }
        }
    }
}

impl MaxS2<'_> {
    /// The output rows for a 3-wide kernel with left padding 1 (ResNet's pool): each input
    /// row's windows first (hmax[iy][ox] = the chain over kx of x[iy][2·ox + kx − 1], 8
    /// outputs a step from one row copied between −inf margins, phases split in registers),
    /// then per output row the chain over its rows of those; ties keep the earlier value, so
    /// the result is the (ky, kx)-order chain's (see the module's contract).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn rows3_avx2(&mut self, x: &[f32], [h, w]: [usize; 2], out: &mut [f32], ow: usize) {
        let ([kh, _], pt, sh) = (self.kernel, self.pad_top_left[0], self.stride_h);
        let owr = ow.next_multiple_of(LANES);
        // The row copy: −inf, the W columns, −inf through the last step's 2·owr + 2 reads.
        let len = (2 * owr + 2).max(w + 1);
        assert!(
            x.len() >= h * w,
            "max-pool: {h}×{w} plane of {} floats",
            x.len()
        );
        self.phases.resize(len + h * owr, 0.0);
        let (row, hmax) = self.phases.split_at_mut(len);
        row.fill(f32::NEG_INFINITY);
        for (src, dst) in x.chunks_exact(w).zip(hmax.chunks_exact_mut(owr)) {
            row[1..=w].copy_from_slice(src);
            for ox in (0..owr).step_by(LANES) {
                // SAFETY: floats 2·ox .. 2·ox + 18 ≤ 2·owr + 2 of `row`, 8 of `dst` from ox.
                unsafe {
                    let p = row.as_ptr().add(2 * ox);
                    let (a, b) = (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(LANES)));
                    let (c, d) = (_mm256_loadu_ps(p.add(2)), _mm256_loadu_ps(p.add(LANES + 2)));
                    // Lanes in the order 0 1 4 5 2 3 6 7 of the outputs, put back at the end.
                    let t0 = _mm256_shuffle_ps::<0x88>(a, b);
                    let t1 = _mm256_shuffle_ps::<0xDD>(a, b);
                    let t2 = _mm256_shuffle_ps::<0x88>(c, d);
                    let m = _mm256_max_ps(t0, _mm256_set1_ps(f32::NEG_INFINITY));
                    let m = _mm256_max_ps(t2, _mm256_max_ps(t1, m));
                    let m = _mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(m));
                    _mm256_storeu_ps(dst.as_mut_ptr().add(ox), _mm256_castpd_ps(m));
                }
            }
        }
        for (oy, dst) in out.chunks_exact_mut(ow).enumerate() {
            let top = oy * sh;
            let rows = top.saturating_sub(pt)..(top + kh).saturating_sub(pt).min(h);
            for ox in (0..ow).step_by(LANES) {
                let mut acc = _mm256_set1_ps(f32::NEG_INFINITY);
                for iy in rows.clone() {
                    // SAFETY: row iy < H of `hmax` holds owr ≥ ox + 8 floats.
                    acc = _mm256_max_ps(unsafe { _mm256_loadu_ps(&hmax[iy * owr + ox]) }, acc);
                }
                let n = (ow - ox).min(LANES);
                let mut lanes = [0f32; LANES];
                let to = match n {
                    LANES => dst[ox..].as_mut_ptr(),
                    _ => lanes.as_mut_ptr(),
                };
                // SAFETY: `to` holds 8 floats: `dst` from ox when 8 remain, else `lanes`.
                unsafe { _mm256_storeu_ps(to, acc) };
                if n < LANES {
                    dst[ox..ox + n].copy_from_slice(&lanes[..n]);
                }
            }
        }
    }
}

/// even[t] = row[2t], odd[t] = row[2t + 1] for every such column of `row`, 16 columns a step.
///
/// # Safety
/// The CPU has AVX2; `even` holds ⌈W / 2⌉ and `odd` ⌊W / 2⌋ values (W = `row.len()`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn deinterleave_avx2(row: &[f32], even: &mut [f32], odd: &mut [f32]) {
    let w = row.len();
    assert!(even.len() >= w.div_ceil(2) && odd.len() >= w / 2);
    let mut i = 0;
    while i + 16 <= w {
        // SAFETY: 16 values of `row` from i, and 8 of `even` / `odd` from i / 2 (asserted).
        unsafe {
            let (a, b) = (
                _mm256_loadu_ps(row.as_ptr().add(i)),
                _mm256_loadu_ps(row.as_ptr().add(i + 8)),
            );
            // Within each 128-bit lane: [a0 a2 b0 b2], then the 64-bit pairs put in order.
            let e =
                _mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(_mm256_shuffle_ps::<0x88>(a, b)));
            let o =
                _mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(_mm256_shuffle_ps::<0xDD>(a, b)));
            _mm256_storeu_ps(even.as_mut_ptr().add(i / 2), _mm256_castpd_ps(e));
            _mm256_storeu_ps(odd.as_mut_ptr().add(i / 2), _mm256_castpd_ps(o));
        }
        i += 16;
    }
    for (j, &v) in row.iter().enumerate().skip(i) {
        match j % 2 {
            0 => even[j / 2] = v,
            _ => odd[j / 2] = v,
        }
    }
}

/// Never called off x86_64 (callers detect AVX2 first); keeps them arch-independent.
///
/// # Safety
/// None needed: it panics.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn deinterleave_avx2(_row: &[f32], _even: &mut [f32], _odd: &mut [f32]) {
    unreachable!("the AVX2 deinterleave runs on x86_64 only")
}
