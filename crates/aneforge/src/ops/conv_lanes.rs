//! A conv product with the output channels in the vector lanes, without im2col (AVX2+FMA,
//! stride 1 or 2, dilation 1, at least [`LANES`] output channels): a register tile is
//! [`LANES`] channels (two 8-lane vectors) × up to [`PIXELS`] consecutive output pixels (rows
//! flattened, so narrow outputs keep full tiles). Each work item (16 channels, some rows)
//! packs its weight rows as [K][16] (zero lanes past Cout), so each depth step loads two
//! vectors in order, and each pixel's tap is broadcast from a zero-padded copy of the input
//! [Cin][H + pads][W + pads]: tap p = (c, ky, kx) of output (oy, ox) is element
//! (oy·s + ky, ox·s + kx) of channel c's padded plane. `conv_gemm` sends it the products
//! where it was measured faster than the `gemm` crate ([`Product::prefers_lanes`]).
//!
//! Bits: every element is one fused multiply-add chain from +0 over p in increasing order per
//! depth block of the `gemm` crate's tiles ([`Product::lanes_block`], `gemm_order`), the
//! padding taps multiplied by the padding's +0 as in im2col; C = acc after the first block
//! (C + acc when accumulating onto a bias) and C = C + acc after the others. Within a depth
//! block the chains continue across chunks of [`CHUNK`] steps through an f32 buffer (storing
//! and reloading an accumulator changes no bit).

use std::cell::RefCell;
use std::ops::Range;

use rayon::prelude::*;

use super::conv_gemm::{with_scratch, Product, SyncPtr};
use super::gemm::PAR_MIN_MACS;
use super::gemm_avx2;
use super::gemm_order;
use crate::error::Result;

/// Output channels of a register tile (two vectors of 8 lanes).
const LANES: usize = 16;

/// Output pixels of a full register tile (with two vectors each: 12 accumulators).
const PIXELS: usize = 6;

/// Deepest product the dispatch sends here ([`Product::prefers_lanes`]): at 64 channels 3×3
/// (K = 576) the kernel takes 0.87–0.89 of the crate's time, at K ≥ 1152 1.0–1.13. On Zen 4,
/// K = 1152 on 28×28 ties the weight blocks (`conv_blocks`) that take it: 0.999–1.002 per op.
const MAX_DEPTH: usize = 576;

/// Fewest output pixels the dispatch sends here (28×28: the 56×56-input convs measured).
const MIN_PIXELS: usize = 784;

/// Depth steps per sweep over the rows: the packed weight's [CHUNK][16] (8 KiB) stays in L1.
/// One chunk per depth block (288 at 64 channels 3×3) measured no faster in ResNet-18.
const CHUNK: usize = 128;

/// Deepest depth block swept as one chunk (the stem's 147 steps of 3 channels 7×7, whose
/// second chunk of 19 steps stored and reloaded every tile's sums for few products).
const ONE_CHUNK: usize = 192;

thread_local! {
    /// The zero-padded input (every element read is written).
    static PADDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// One work item's packed weight [K][16] (every element read is written).
    static PACKED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// The running sums [pixels][16] of one work item (every element read is written).
    static SUMS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Whether this CPU runs the kernel (AVX2 and FMA).
fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return true;
    }
    false
}

/// The geometry one call's kernels read.
struct Geometry {
    /// Padded plane rows and columns.
    hp: usize,
    wp: usize,
    /// Output [H', W'] and H'·W'.
    output: [usize; 2],
    p: usize,
    /// Offset of tap p in the padded input, in im2col's depth order.
    offsets: Vec<usize>,
}

impl Product {
    /// Whether `run_on` tries the lane kernel first: where it was measured faster than the
    /// `gemm` crate (AVX-512 CPUs, on which the packed AVX2 kernels are off; see
    /// [`MAX_DEPTH`], [`MIN_PIXELS`]).
    pub(super) fn prefers_lanes(&self) -> bool {
        let p = self.output[0] * self.output[1];
        !gemm_avx2::available() && available() && self.depth() <= MAX_DEPTH && p >= MIN_PIXELS
    }

    /// The depth block with which [`Product::run_lanes`] runs this product with the bits of
    /// the `gemm` crate's tiles for `threads` threads, or `None` where it does not run: every
    /// tile on the crate's blocked path with one depth block.
    pub(super) fn lanes_block(&self, threads: usize) -> Option<usize> {
        let ([s, s2], ow) = (self.strides, self.output[1]);
        let (m, k) = (self.cog, self.depth());
        let shape = s == s2 && (1..=2).contains(&s) && self.dilations == [1, 1];
        if !available() || !shape || self.kernel == [1, 1] || m < LANES {
            return None;
        }
        let mut blocks = self.tile_rows(threads).into_iter().map(|r| {
            let n = r.len() * ow;
            gemm_order::blocked_path(m, n, k).then(|| gemm_order::depth_block(m, n, k))?
        });
        let kc = blocks.next()??;
        blocks.all(|b| b == Some(kc)).then_some(kc)
    }

    /// [`Product::run`] of (input, weight of the group) on the lane kernel when
    /// [`Product::lanes_block`] allows; false when it does not (nothing done).
    pub(super) fn run_lanes(
        &self,
        (xs, a): (&[f32], &[f32]),
        out: &mut [f32],
        accumulate: bool,
    ) -> Result<bool> {
        let threads = rayon::current_num_threads();
        let Some(kc) = self.lanes_block(threads) else {
            return Ok(false);
        };
        let ([cin, h, w], [kh, kw], [oh, ow]) = (self.input, self.kernel, self.output);
        let ([pt, pb, pl, pr], s) = (self.pad, self.strides[0]);
        let (m, k) = (self.cog, self.depth());
        let (hp, wp) = (h + pt + pb, w + pl + pr);
        assert!(
            (oh - 1) * s + kh <= hp && (ow - 1) * s + kw <= wp,
            "lane conv: output {oh}×{ow} past the padded input {hp}×{wp}"
        );
        assert!(xs.len() >= cin * h * w && a.len() >= m * k && out.len() >= m * oh * ow);
        let geo = Geometry {
            hp,
            wp,
            output: [oh, ow],
            p: oh * ow,
            offsets: (0..k)
                .map(|p| (p / (kh * kw) * hp + p / kw % kh) * wp + p % kw)
                .collect(),
        };
        with_scratch(&PADDED, cin * hp * wp, "the padded conv input", |padded| {
            padded.fill(0.0);
            for (plane, src) in padded.chunks_exact_mut(hp * wp).zip(xs.chunks_exact(h * w)) {
                let rows = plane[pt * wp..].chunks_exact_mut(wp);
                for (row, src) in rows.zip(src.chunks_exact(w)) {
                    row[pl..pl + w].copy_from_slice(src);
                }
            }
            let parallel = threads > 1 && m * k * geo.p >= PAR_MIN_MACS;
            run_items(&geo, s, (a, kc), padded, (out, m), parallel, accumulate)
        })??;
        Ok(true)
    }
}

/// C [m, p] `out` (+)= A [m, k] × the taps of `padded` (depth block `kc`) per work item
/// (block of 16 channels, part of the rows), each packing its weight rows and writing its
/// outputs; the items on the rayon pool when `parallel`, the rows cut so that every thread
/// gets two.
fn run_items(
    geo: &Geometry,
    s: usize,
    (a, kc): (&[f32], usize),
    padded: &[f32],
    (out, m): (&mut [f32], usize),
    parallel: bool,
    accumulate: bool,
) -> Result<()> {
    let ([oh, ow], k, p) = (geo.output, geo.offsets.len(), geo.p);
    assert!(out.len() >= m * p && a.len() >= m * k);
    let (dst, cbs) = (SyncPtr(out.as_mut_ptr()), m.div_ceil(LANES));
    let parts = match parallel {
        true => (2 * rayon::current_num_threads()).div_ceil(cbs),
        false => 1,
    };
    let item = |i: usize| {
        let (cb, t) = (i / parts, i % parts);
        let rows = oh * t / parts..oh * (t + 1) / parts;
        let valid = LANES.min(m - cb * LANES);
        let sums_len = rows.len() * ow * LANES;
        with_scratch(&PACKED, k * LANES, "the packed conv weight", |wb| {
            pack_weight(&a[cb * LANES * k..(cb * LANES + valid) * k], k, wb);
            with_scratch(&SUMS, sums_len, "the lane conv sums", |sums| {
                // SAFETY: `out` holds m·p floats (asserted) of which item i alone writes
                // channels cb·16.. of `rows`; AVX2+FMA (`lanes_block`).
                unsafe {
                    let c = dst.get().add(cb * LANES * p);
                    block(geo, s, (wb, kc), padded, rows, (c, valid), sums, accumulate)
                }
            })
        })?
    };
    match parallel {
        true => (0..cbs * parts).into_par_iter().try_for_each(item),
        false => (0..cbs).try_for_each(item),
    }
}

/// `packed` [k][16] ← the ≤ 16 rows of `rows` [·, k], transposed (zeros in the lanes past them).
fn pack_weight(rows: &[f32], k: usize, packed: &mut [f32]) {
    let m = rows.len() / k;
    for half in 0..LANES / 8 {
        let i0 = half * 8;
        let mut p0 = 0;
        if i0 + 8 <= m {
            p0 = k / 8 * 8;
            // SAFETY: AVX2 (`lanes_block`); rows i0..i0 + 8 hold k floats each (i0 + 8 ≤ m)
            // and `packed` [k][16].
            unsafe { x86::pack8(&rows[i0 * k..(i0 + 8) * k], k, &mut packed[i0..]) };
        }
        for p in p0..k {
            for l in 0..8 {
                let i = i0 + l;
                packed[p * LANES + i] = if i < m { rows[i * k + p] } else { 0.0 };
            }
        }
    }
}

/// Widths of the register tiles covering `ow` pixels of a row: [`PIXELS`] each, a remainder
/// under 4 joined with one full tile and split in two (7 = 4 + 3, 14 = 6 + 4 + 4), since a
/// tile of few pixels has too few independent chains to keep the FMA units busy.
fn tile_widths(ow: usize) -> Vec<usize> {
    let (full, r) = (ow / PIXELS, ow % PIXELS);
    let mut widths = vec![PIXELS; full];
    if (1..4).contains(&r) && full > 0 {
        let last = PIXELS + r;
        widths[full - 1] = last.div_ceil(2);
        widths.push(last / 2);
    } else if r > 0 {
        widths.push(r);
    }
    widths
}

/// Output rows `rows` of one channel block: C [valid, p] at `c` (rows p apart) (+)= the packed
/// weight block `wb` [k][16] × the taps of `padded`, in depth blocks of `kc`, each swept over
/// the rows in chunks of [`CHUNK`] depth steps (one chunk up to [`ONE_CHUNK`]) with the
/// running sums in `acc` [pixels][16].
///
/// # Safety
/// The CPU has AVX2+FMA; `c` holds `valid` ≤ 16 rows of p floats, columns of `rows` the
/// caller's alone; `padded` holds the padded planes of `geo`.
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    geo: &Geometry,
    s: usize,
    (wb, kc): (&[f32], usize),
    padded: &[f32],
    rows: Range<usize>,
    (c, valid): (*mut f32, usize),
    acc: &mut [f32],
    accumulate: bool,
) {
    let ([_, ow], k) = (geo.output, geo.offsets.len());
    let last = geo.offsets.iter().max().copied().unwrap_or(0);
    let span = (rows.end.max(1) - 1) * s * geo.wp + (ow - 1) * s + last;
    assert!(
        span < padded.len() && geo.hp * geo.wp > 0,
        "lane conv: taps past the input"
    );
    assert!(wb.len() >= k * LANES && acc.len() >= rows.len() * ow * LANES && kc > 0);
    // Where each pixel of the rows (flattened) reads its taps, in order.
    let starts = || {
        let row = |oy: usize| (0..ow).map(move |ox| (oy * geo.wp + ox) * s);
        rows.clone().flat_map(row)
    };
    let widths = tile_widths(rows.len() * ow);
    for p0 in (0..k).step_by(kc) {
        let end = (p0 + kc).min(k);
        let chunk = if end - p0 <= ONE_CHUNK {
            ONE_CHUNK
        } else {
            CHUNK
        };
        for c0 in (p0..end).step_by(chunk) {
            let c1 = (c0 + chunk).min(end);
            let (w, offsets) = (&wb[c0 * LANES..c1 * LANES], &geo.offsets[c0..c1]);
            let (mut q, mut at) = (0, starts());
            for &n in &widths {
                let mut x = [padded.as_ptr(); PIXELS];
                for (j, o) in at.by_ref().take(n).enumerate() {
                    x[j] = padded[o..].as_ptr();
                }
                let sums = &mut acc[q * LANES..(q + n) * LANES];
                // SAFETY: pixel j < n of this tile reads x[j] + offsets[t] ≤ `span` (asserted);
                // AVX2+FMA (the caller's).
                unsafe { x86::chain(n, w, (x, offsets), sums, c0 == p0) };
                q += n;
            }
        }
        let first = p0 == 0 && !accumulate;
        for (oy, row) in rows.clone().zip(acc.chunks_exact(ow * LANES)) {
            // SAFETY: rows i < valid of C hold the p floats of the contract, whose columns of
            // output row oy are the caller's; AVX2 (the caller's).
            unsafe { x86::write_row(row, (c.add(oy * ow), geo.p, valid), first) };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::simd_transpose::transpose8;
    use super::{LANES, PIXELS};

    /// `dst[p·16 + l]` = rows[l·k + p] for the 8 rows of `rows` (k apart) and p < ⌊k / 8⌋·8.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pack8(rows: &[f32], k: usize, dst: &mut [f32]) {
        assert!(rows.len() >= 8 * k && dst.len() + 8 >= k / 8 * 8 * LANES);
        for p0 in (0..k / 8 * 8).step_by(8) {
            // SAFETY: row l's floats p0..p0 + 8 lie inside `rows`; the stores at (p0 + j)·16
            // inside `dst` (asserted).
            unsafe {
                let r = std::array::from_fn(|l| _mm256_loadu_ps(rows.as_ptr().add(l * k + p0)));
                for (j, v) in transpose8(r).into_iter().enumerate() {
                    _mm256_storeu_ps(dst.as_mut_ptr().add((p0 + j) * LANES), v);
                }
            }
        }
    }

    /// C[i, ox] (i < valid, rows p apart) = sums[ox][i] for the sums [W'][16] of one output
    /// row (`first`), else C[i, ox] + sums[ox][i].
    ///
    /// # Safety
    /// The CPU has AVX2; C's rows i < valid hold sums.len() / 16 floats at c + i·p.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn write_row(
        sums: &[f32],
        (c, p, valid): (*mut f32, usize, usize),
        first: bool,
    ) {
        let ow = sums.len() / LANES;
        let put = |d: *mut f32, v: f32| {
            // SAFETY: `d` is an element of C (the contract).
            unsafe { *d = if first { v } else { *d + v } };
        };
        let mut ox = 0;
        while ox + 8 <= ow {
            for half in 0..LANES / 8 {
                // SAFETY: pixels ox..ox + 8 of `sums` hold 16 floats each; C's rows as the
                // contract, 8 floats from ox.
                unsafe {
                    let at = |j: usize| sums.as_ptr().add((ox + j) * LANES + half * 8);
                    let cols = transpose8(std::array::from_fn(|j| _mm256_loadu_ps(at(j))));
                    for (l, v) in cols
                        .into_iter()
                        .enumerate()
                        .take(valid.saturating_sub(half * 8))
                    {
                        let d = c.add((half * 8 + l) * p + ox);
                        let v = if first {
                            v
                        } else {
                            _mm256_add_ps(_mm256_loadu_ps(d), v)
                        };
                        _mm256_storeu_ps(d, v);
                    }
                }
            }
            ox += 8;
        }
        for i in 0..valid {
            for x in ox..ow {
                // SAFETY: as above.
                put(unsafe { c.add(i * p + x) }, sums[x * LANES + i]);
            }
        }
    }

    /// One register tile of `n` ≤ 6 pixels: see [`chain_n`].
    ///
    /// # Safety
    /// As [`chain_n`].
    pub(super) unsafe fn chain(
        n: usize,
        w: &[f32],
        x: ([*const f32; PIXELS], &[usize]),
        sums: &mut [f32],
        fresh: bool,
    ) {
        // SAFETY: the caller's contract.
        unsafe {
            match n {
                6 => chain_n::<6>(w, x, sums, fresh),
                5 => chain_n::<5>(w, x, sums, fresh),
                4 => chain_n::<4>(w, x, sums, fresh),
                3 => chain_n::<3>(w, x, sums, fresh),
                2 => chain_n::<2>(w, x, sums, fresh),
                1 => chain_n::<1>(w, x, sums, fresh),
                _ => unreachable!("lane conv tile of {n} pixels"),
            }
        }
    }

    /// sums[j][i] (j < N, i < 16) continues its fused multiply-add chain (from +0 when
    /// `fresh`) over the taps t: sums[j][i] = fma(w[t][i], x[j][offsets[t]], sums[j][i]).
    ///
    /// # Safety
    /// The CPU has AVX2+FMA; x[j] + offsets[t] is readable for every t and j < N.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn chain_n<const N: usize>(
        w: &[f32],
        (x, offsets): ([*const f32; PIXELS], &[usize]),
        sums: &mut [f32],
        fresh: bool,
    ) {
        assert!(w.len() >= offsets.len() * LANES && sums.len() >= N * LANES);
        let mut acc = [[_mm256_setzero_ps(); 2]; N];
        if !fresh {
            for (acc, s) in acc.iter_mut().zip(sums.chunks_exact(LANES)) {
                // SAFETY: `s` holds 16 floats.
                unsafe { *acc = [_mm256_loadu_ps(s.as_ptr()), _mm256_loadu_ps(&s[8])] };
            }
        }
        for (&o, wv) in offsets.iter().zip(w.chunks_exact(LANES)) {
            // SAFETY: `wv` holds 16 floats; x[j] + o is readable (the contract).
            unsafe {
                let (w0, w1) = (_mm256_loadu_ps(wv.as_ptr()), _mm256_loadu_ps(&wv[8]));
                for (acc, x) in acc.iter_mut().zip(x) {
                    let b = _mm256_broadcast_ss(&*x.add(o));
                    acc[0] = _mm256_fmadd_ps(w0, b, acc[0]);
                    acc[1] = _mm256_fmadd_ps(w1, b, acc[1]);
                }
            }
        }
        for (acc, s) in acc.iter().zip(sums.chunks_exact_mut(LANES)) {
            // SAFETY: `s` holds 16 floats.
            unsafe {
                _mm256_storeu_ps(s.as_mut_ptr(), acc[0]);
                _mm256_storeu_ps(s[8..].as_mut_ptr(), acc[1]);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    /// Never called: [`super::available`] is false off x86_64.
    pub(super) unsafe fn chain(
        _n: usize,
        _w: &[f32],
        _x: ([*const f32; super::PIXELS], &[usize]),
        _sums: &mut [f32],
        _fresh: bool,
    ) {
        unreachable!("the lane conv runs on x86_64 only")
    }

    /// Never called, as [`chain`].
    pub(super) unsafe fn pack8(_rows: &[f32], _k: usize, _dst: &mut [f32]) {
        unreachable!("the lane conv runs on x86_64 only")
    }

    /// Never called, as [`chain`].
    pub(super) unsafe fn write_row(_sums: &[f32], _c: (*mut f32, usize, usize), _first: bool) {
        unreachable!("the lane conv runs on x86_64 only")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::conv_gemm::tests::case_product;
    use crate::ops::gemm::tests::rand_vec;

    /// The lane kernel gives every bit of the `gemm` crate's product (`run_on` unpacked) on
    /// 1, 2 and 3 threads, writing or accumulating onto a bias: strides 1 and 2, 3×3, 5×5,
    /// 1×3, 2×4 and 7×7 kernels, asymmetric padding, output widths 1 to 56 (tiles across
    /// rows, 1–5 pixel edge tiles), Cout not a multiple of 16 (17, 33, 130), depth past one
    /// block and one chunk of up to [`ONE_CHUNK`] steps, and an infinite weight on padding
    /// taps (inf · 0 = NaN, as in im2col).
    #[test]
    fn lanes_match_the_crate_bit_for_bit() {
        // (Cin, kernel, input [H, W], stride, pad (t, b, l, r), Cout)
        let cases = [
            (64, [3, 3], [14, 14], 1, [1; 4], 64),
            (3, [3, 3], [9, 9], 1, [1; 4], 16),
            (5, [3, 3], [7, 9], 1, [1; 4], 33),
            (3, [3, 3], [40, 1], 1, [1; 4], 130),
            (7, [3, 3], [11, 13], 2, [1; 4], 17),
            (8, [5, 5], [12, 10], 1, [2, 1, 0, 2], 20),
            (4, [1, 3], [9, 23], 1, [0, 0, 1, 1], 130),
            (6, [2, 4], [10, 17], 2, [1, 0, 2, 1], 48),
            (100, [3, 3], [8, 8], 1, [1; 4], 32),
            (64, [3, 3], [56, 56], 1, [1; 4], 16),
            (128, [3, 3], [15, 15], 2, [1; 4], 32),
            (24, [3, 3], [5, 37], 2, [0, 1, 1, 0], 40),
            // ResNet's stem: 147 steps in one chunk ([`ONE_CHUNK`]).
            (3, [7, 7], [29, 31], 2, [3; 4], 64),
            (3, [7, 7], [12, 9], 2, [3, 2, 3, 1], 20),
        ];
        let mut depth_blocks = false;
        for (ci, &(cin, kernel, [h, w], s, pad, cog)) in cases.iter().enumerate() {
            let product = case_product(cin, kernel, [h, w], s, pad, cog);
            let output = product.output;
            let (k, p) = (product.depth(), output[0] * output[1]);
            let seed = 10 * ci as u64;
            let (x, mut wt) = (rand_vec(cin * h * w, seed), rand_vec(2 * cog * k, seed + 1));
            if ci == 2 {
                // Channel 0 of group 1: tap (0, 0, 0) reads padding for output row 0.
                wt[cog * k] = f32::INFINITY;
            }
            let bias = rand_vec(cog * p, seed + 2);
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                for accumulate in [false, true] {
                    let (mut want, mut got) = (bias.clone(), bias.clone());
                    let ran = pool.install(|| {
                        depth_blocks |= product.lanes_block(threads).is_some_and(|kc| kc < k);
                        product.run_on((&x, &wt, 1), &mut want, accumulate, false)?;
                        product.run_lanes((&x, &wt[cog * k..]), &mut got, accumulate)
                    });
                    let tag = format!("case {ci} threads {threads} accumulate {accumulate}");
                    assert!(ran.unwrap(), "{tag}: the lane kernel runs");
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{tag}");
                    if ci == 2 {
                        assert!(got[0].is_nan(), "{tag}: inf · padding is NaN");
                    }
                }
            }
        }
        assert!(
            depth_blocks || !available(),
            "a case runs several depth blocks"
        );
    }
}
