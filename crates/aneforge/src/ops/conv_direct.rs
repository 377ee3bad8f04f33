//! A conv product on the packed kernel reading its taps straight from the zero-padded input
//! split into stride phases, instead of from im2col panels (stride 1 or 2 both ways, dilation
//! 1): phase (ry, rx) holds the padded input's rows ry, ry + s, … and columns rx, rx + s, …,
//! so tap (c, ky, kx) of output (oy, ox) is element (oy + ⌊ky / s⌋, ox + ⌊kx / s⌋) of channel
//! c's plane in phase (ky mod s, kx mod s). Counting output columns over the phase width Wq
//! (≥ W'), virtual column j = oy·Wq + ox reads B[p][j] = phase[offset(p) + j]: every 16
//! columns of every depth row are one run, found by [`Offsets`]. The Wq − W' columns of each
//! row past the output are computed and dropped, so it runs only where they are few.
//!
//! Bits: B's values are the im2col's (the padding is +0 in both), every element is the
//! kernel's chain over the same depth blocks as the tiles it replaces, and C is written once
//! (or added to the bias it holds, as `sgemm` accumulating).

use std::cell::RefCell;

use rayon::prelude::*;

use super::conv::gather_strided;
use super::conv_gemm::{with_scratch, Product, SyncPtr};
use super::gemm::PAR_MIN_MACS;
use super::gemm_avx2::{self as avx2, Offsets, MR, NR};
use super::gemm_packed::{self, BLOCK_PANELS};
use super::pool_max_s2::deinterleave_avx2;
use crate::error::Result;

/// Most virtual columns computed per output column: 25 / 24 (Wq ≤ W' + W' / 24).
const MAX_EXTRA: usize = 24;

/// Fewest output columns for the direct path (small planes keep their panels).
const MIN_COLS: usize = 512;

/// Most input channels (per group) for the direct path: an image stem's few channels make
/// panels costly per multiply-add (ResNet's 7×7 / 2 on 3 channels: 3050 → 2700 µs), while
/// with many channels the kernel's reads over scattered phase rows lose more than the panels
/// cost (64 channels: 3×3 / 1 at 56×56 no gain, 3×3 / 2 1380 → 1700 µs; BENCHMARKS.md lead
/// round 16).
const MAX_CHANNELS: usize = 4;

/// Virtual columns per block: the C block [m, BLOCK] of all strips stays in cache.
const BLOCK: usize = BLOCK_PANELS * NR;

thread_local! {
    /// The stride phases of the padded input (every element read is written).
    static PHASES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// One block of virtual columns of C (every element copied out is written first).
    static BLOCK_C: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The geometry of the phases of one product.
struct Phases {
    stride: usize,
    /// Rows and columns of a phase plane.
    hq: usize,
    wq: usize,
    /// Phases used along each axis: min(s, kernel).
    used: [usize; 2],
}

impl Phases {
    /// Elements of one phase (all channels).
    fn phase_len(&self, channels: usize) -> usize {
        channels * self.hq * self.wq
    }

    /// Index of phase (ry, rx) among the used ones.
    fn phase(&self, ry: usize, rx: usize) -> usize {
        ry * self.used[1] + rx
    }
}

impl Product {
    /// The phases and the depth block of the direct path when it runs this product on the
    /// packed kernel with the bits of the tiles for `threads` threads, else None.
    fn direct_plan(&self, threads: usize) -> Option<(Phases, usize)> {
        let ([cg, h, w], [kh, kw], [oh, ow]) = (self.input, self.kernel, self.output);
        let ([s, s2], [pt, pb, pl, pr]) = (self.strides, self.pad);
        let (m, k) = (self.cog, self.depth());
        let ok = avx2::available() && s == s2 && (1..=2).contains(&s) && self.dilations == [1, 1];
        let channels = (1..=MAX_CHANNELS).contains(&cg);
        if !ok || !channels || (s == 1 && [kh, kw] == [1, 1]) || oh * ow < MIN_COLS {
            return None;
        }
        let (hq, wq) = ((h + pt + pb).div_ceil(s), (w + pl + pr).div_ceil(s));
        if wq * MAX_EXTRA > ow * (MAX_EXTRA + 1) {
            return None;
        }
        // Every tile would take the packed kernel with the same depth block (its `gemm` path).
        let mut blocks = self.tile_rows(threads).into_iter();
        let kc = gemm_packed::depth_block(m, blocks.next()?.len() * ow, k)?;
        let same = blocks.all(|r| gemm_packed::depth_block(m, r.len() * ow, k) == Some(kc));
        let used = [s.min(kh), s.min(kw)];
        same.then_some((
            Phases {
                stride: s,
                hq,
                wq,
                used,
            },
            kc,
        ))
    }

    /// [`Product::run`] on the direct path when [`Product::direct_plan`] allows; false when
    /// it does not (nothing done).
    pub(super) fn run_direct(
        &self,
        (xs, a): (&[f32], &[f32]),
        out: &mut [f32],
        accumulate: bool,
    ) -> Result<bool> {
        let threads = rayon::current_num_threads();
        let Some((ph, kc)) = self.direct_plan(threads) else {
            return Ok(false);
        };
        let ([cg, _, _], [kh, kw], [oh, ow]) = (self.input, self.kernel, self.output);
        let (m, k, s) = (self.cog, self.depth(), ph.stride);
        let (n_v, plane) = (oh * ph.wq, ph.hq * ph.wq);
        // Offsets of tap p = (c, ky, kx) in the phases, the depth order of the im2col.
        let offsets: Vec<usize> = (0..k)
            .map(|p| {
                let (c, ky, kx) = (p / (kh * kw), p / kw % kh, p % kw);
                let phase = ph.phase(ky % s, kx % s) * ph.phase_len(cg);
                phase + c * plane + ky / s * ph.wq + kx / s
            })
            .collect();
        // The last panel reads 16 columns from its start, past n_v by < 16, and a garbage
        // column reads up to ⌊(kW − 1) / s⌋ past its row.
        let slack = NR + ph.wq;
        let len = ph.used[0] * ph.used[1] * ph.phase_len(cg) + slack;
        with_scratch(&PHASES, len, "the conv phases", |phases| {
            self.fill_phases(xs, &ph, phases);
            let blocks = n_v.div_ceil(BLOCK);
            let dst = SyncPtr(out.as_mut_ptr());
            let (p, out_len) = (oh * ow, out.len());
            assert!(out_len >= m * p, "direct conv: output {out_len} < {m}·{p}");
            let run = |range: std::ops::Range<usize>| {
                with_scratch(&BLOCK_C, m * BLOCK, "the conv output block", |cb| {
                    for blk in range {
                        let j0 = blk * BLOCK;
                        let cols = BLOCK.min(n_v - j0);
                        let view = BlockView {
                            ph: &ph,
                            j0,
                            cols,
                            ow,
                            p,
                        };
                        let b = (&phases[..], &offsets[..]);
                        // SAFETY: `out` holds m·p floats (asserted); the blocks of one call copy
                        // disjoint output columns. AVX2+FMA (`direct_plan`); see `block`.
                        unsafe {
                            if accumulate {
                                view.copy(dst.get(), cb, true);
                            }
                            block(kc, (m, k), a, b, (j0, cols), cb, accumulate);
                            view.copy(dst.get(), cb, false);
                        }
                    }
                })
            };
            let parallel = threads > 1 && m * k * p >= PAR_MIN_MACS && blocks > 1;
            if parallel {
                let parts = (2 * threads).min(blocks);
                (0..parts)
                    .into_par_iter()
                    .try_for_each(|t| run(blocks * t / parts..blocks * (t + 1) / parts))
            } else {
                run(0..blocks)
            }
        })??;
        Ok(true)
    }

    /// Write the used stride phases of the zero-padded input `xs` [Cin/g, H, W] into `phases`
    /// (the rest of `phases`, the slack, zero).
    fn fill_phases(&self, xs: &[f32], ph: &Phases, phases: &mut [f32]) {
        let ([cg, h, w], [pt, _, pl, _]) = (self.input, self.pad);
        let (s, wq, plane) = (ph.stride, ph.wq, ph.hq * ph.wq);
        phases.fill(0.0);
        let phase_len = ph.phase_len(cg);
        for (c, rows) in xs.chunks_exact(h * w).take(cg).enumerate() {
            for (iy, row) in rows.chunks_exact(w).enumerate() {
                let y = iy + pt;
                let ry = y % s;
                if ry >= ph.used[0] {
                    continue;
                }
                let at = |rx: usize| ph.phase(ry, rx) * phase_len + c * plane + y / s * wq;
                if s == 1 {
                    phases[at(0) + pl..at(0) + pl + w].copy_from_slice(row);
                    continue;
                }
                // Column ix + pL of the padded row: x[2t] at phase pL mod 2, column t + ⌊pL/2⌋;
                // x[2t + 1] at the other phase, column t + ⌈pL / 2⌉.
                let (re, ro) = (pl % 2, (pl + 1) % 2);
                let (ce, co) = (at(re) + pl / 2, at(ro) + pl.div_ceil(2));
                match (re < ph.used[1], ro < ph.used[1]) {
                    (true, true) => {
                        let (lo, hi) = phases.split_at_mut(ce.max(co));
                        let (even, odd) = match ce < co {
                            true => (&mut lo[ce..], &mut hi[..w / 2]),
                            false => (&mut hi[..w.div_ceil(2)], &mut lo[co..]),
                        };
                        // SAFETY: `direct_plan` checked AVX2; each run holds its columns.
                        unsafe { deinterleave_avx2(row, even, odd) };
                    }
                    _ => {
                        let (first, col) = if re < ph.used[1] { (0, ce) } else { (1, co) };
                        let len = (w - first).div_ceil(2);
                        gather_strided(&row[first..], 2, &mut phases[col..col + len]);
                    }
                }
            }
        }
    }
}

/// Where block columns j0..j0 + cols of the virtual output go in the real one [m, p]
/// (p = H'·W').
struct BlockView<'a> {
    ph: &'a Phases,
    j0: usize,
    cols: usize,
    ow: usize,
    p: usize,
}

impl BlockView<'_> {
    /// Copy the block's real columns from the block `cb` [m, BLOCK] into the output at
    /// `out` (`m·p` floats), or (`into_block`) from the output into `cb`.
    ///
    /// # Safety
    /// `out` holds m·p floats (m = cb.len() / BLOCK) whose columns in this block no one else
    /// accesses meanwhile.
    unsafe fn copy(&self, out: *mut f32, cb: &mut [f32], into_block: bool) {
        let (wq, ow, p) = (self.ph.wq, self.ow, self.p);
        let mut j = self.j0;
        while j < self.j0 + self.cols {
            let (oy, ox) = (j / wq, j % wq);
            let run_end = (j - ox + wq).min(self.j0 + self.cols);
            if ox < ow {
                let n = (ow - ox).min(run_end - j);
                let (o, b) = (oy * ow + ox, j - self.j0);
                assert!(o + n <= p && b + n <= BLOCK, "direct conv: copy past a row");
                for (i, crow) in cb.chunks_exact_mut(BLOCK).enumerate() {
                    // SAFETY: o + n ≤ p (asserted) in row i < m of the output (the contract).
                    let orow = unsafe { out.add(i * p + o) };
                    let crow = crow[b..b + n].as_mut_ptr();
                    // SAFETY: n floats at both, in different buffers.
                    unsafe {
                        match into_block {
                            true => std::ptr::copy_nonoverlapping(orow, crow, n),
                            false => std::ptr::copy_nonoverlapping(crow, orow, n),
                        }
                    }
                }
            }
            j = run_end;
        }
    }
}

/// C block `cb` [m, BLOCK] (its first `cols` columns) (+)= A [m, k] · B for virtual columns
/// j0.., B[p][j] = phases[offsets[p] + j], in depth blocks of `kc` (the first overwrites
/// unless `accumulate`).
///
/// # Safety
/// The CPU has AVX2+FMA; phases[offsets[p] + j0 + 16·⌈cols / 16⌉ − 1] exists for every p.
unsafe fn block(
    kc: usize,
    (m, k): (usize, usize),
    a: &[f32],
    (phases, offsets): (&[f32], &[usize]),
    (j0, cols): (usize, usize),
    cb: &mut [f32],
    accumulate: bool,
) {
    assert!(a.len() >= m * k && offsets.len() == k && cb.len() >= m * BLOCK);
    let last = offsets.iter().max().copied().unwrap_or(0) + j0 + cols.next_multiple_of(NR);
    assert!(
        last <= phases.len(),
        "direct conv: phases {} < {last}",
        phases.len()
    );
    let mut p0 = 0;
    while p0 < k {
        let kb = kc.min(k - p0);
        for i0 in (0..m).step_by(MR) {
            for jb in (0..cols).step_by(NR) {
                let shape = [MR.min(m - i0), NR.min(cols - jb)];
                let b = Offsets(phases.as_ptr().wrapping_add(j0 + jb), &offsets[p0..p0 + kb]);
                // SAFETY: AVX2+FMA (the caller's); A's rows i0.. hold kb values from p0, B's
                // rows are inside `phases` (asserted), the C tile inside `cb` (asserted).
                unsafe {
                    let (a, c) = (
                        a.as_ptr().add(i0 * k + p0),
                        cb.as_mut_ptr().add(i0 * BLOCK + jb),
                    );
                    avx2::tile_with(kb, (a, k), b, (c, BLOCK), shape, p0 == 0 && !accumulate)
                };
            }
        }
        p0 += kb;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::conv_gemm::tests::{assert_packed_matches_crate, case_product};

    /// The direct path gives the bits of the `gemm` crate's product (`run_on` unpacked) on 1,
    /// 2 and 3 threads, writing or accumulating onto a bias: strides 1 and 2, asymmetric and
    /// odd padding (phase order of the even / odd columns both ways), 1×1 / 2 (its one phase taking
    /// the even or the odd columns), a kernel wider
    /// than 2 phases, odd widths, depth past one block, Cout not a multiple of the strip.
    #[test]
    fn direct_path_matches_the_crate_bit_for_bit() {
        // (Cin, kernel, input [H, W], stride, pad (t, b, l, r), Cout)
        let cases = [
            (1, [3, 3], [20, 56], 1, [1, 1, 1, 1], 7),
            (3, [7, 7], [40, 224], 2, [3, 3, 3, 3], 64),
            (3, [3, 3], [21, 113], 2, [1, 1, 1, 1], 13),
            (3, [1, 1], [30, 112], 2, [0; 4], 9),
            (3, [1, 1], [30, 112], 2, [1, 0, 1, 1], 9),
            (4, [2, 4], [25, 100], 2, [1, 0, 2, 1], 6),
            (4, [3, 5], [30, 97], 2, [0, 2, 1, 2], 11),
            (4, [11, 11], [6, 260], 1, [5, 5, 5, 5], 64),
            (4, [13, 13], [4, 300], 1, [6; 4], 8),
        ];
        if !avx2::available() {
            return;
        }
        let mut depth_blocks = false;
        for (ci, &(cin, kernel, [h, w], s, pad, cog)) in cases.iter().enumerate() {
            let product = case_product(cin, kernel, [h, w], s, pad, cog);
            let k = product.depth();
            let plan = product.direct_plan(1);
            let (_, kc) = plan.unwrap_or_else(|| panic!("case {ci} takes the direct path"));
            depth_blocks |= kc < k;
            assert_packed_matches_crate(
                &product,
                10 * ci as u64,
                &[1, 2, 3],
                &format!("case {ci}"),
            );
        }
        assert!(depth_blocks, "a case runs several depth blocks");
    }
}
