//! Depthwise convolution with eight channels in the vector lanes, for small planes (where one
//! plane alone is a few short rows and per-plane overhead dominates): eight input planes are
//! interleaved into a zero-padded [rows][cols][8] scratch, each output accumulates its taps one
//! channel per lane exactly as the per-plane kernel (`conv_depthwise`) does — bias (or, without
//! bias, the first tap's product x·w), then fma(x, w, acc) per later tap in (ky, kx) order, a
//! padding tap reading 0 — and the outputs are transposed back to planes: the same bits.

use std::cell::RefCell;

use rayon::prelude::*;

use super::conv_depthwise::Depthwise;
use super::conv_gemm::grow_scratch;
use crate::error::Result;
use crate::limits::Limits;

/// Channels per vector (one per lane of an AVX register).
const LANES: usize = 8;

thread_local! {
    /// The scratch (interleaved padded input, interleaved outputs, weights, bias), reused across
    /// groups, convs and calls, and the geometry whose padding zeros it holds.
    static SCRATCH: RefCell<(Vec<f32>, Option<Depthwise>)> = const { RefCell::new((Vec::new(), None)) };
}

/// Whether this CPU runs the lane kernel (AVX2 and FMA).
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The interleaved padded input: `rows` × `cols` positions of [`LANES`] values, padded position
/// (r, c) reading input (r − pad top, c − pad left), and the offset of each tap (ky, kx) from
/// an output's first tap, in values.
struct Layout {
    rows: usize,
    cols: usize,
    offsets: Vec<usize>,
}

impl Layout {
    /// The padded rows and columns the outputs read (as `conv_depthwise`'s scratch plane).
    fn of(dw: &Depthwise) -> Self {
        let span = |a: usize| {
            (dw.output[a] - 1) * dw.strides[a] + (dw.kernel[a] - 1) * dw.dilations[a] + 1
        };
        let (rows, cols) = (span(0), span(1));
        let ([kh, kw], [dh, dwid]) = (dw.kernel, dw.dilations);
        let offsets = (0..kh * kw)
            .map(|t| ((t / kw) * dh * cols + (t % kw) * dwid) * LANES)
            .collect();
        Layout {
            rows,
            cols,
            offsets,
        }
    }
    fn len(&self) -> usize {
        self.rows * self.cols * LANES
    }
}

/// `Depthwise::run_then` through the lane kernel: `x` [planes, H, W], `w` [C, kH, kW],
/// optional `bias` [C], `out` [planes, H', W'] fully written, `post(i, planes)` on each group's
/// output planes i.. right after they are written. Needs [`available`] and plane counts that
/// agree (the caller checks); errors (Resource) when the scratch exceeds the memory limits.
pub(super) fn run_then(
    dw: &Depthwise,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    post: &(impl Fn(usize, &mut [f32]) + Sync),
) -> Result<()> {
    let [hw, taps, p] = dw.sizes();
    let (c, out_len) = (w.len() / taps, out.len());
    let lay = Layout::of(dw);
    let room = lay.len() + (p + taps + 1) * LANES;
    let bytes = (room as u64).saturating_mul(4);
    Limits::current()?.bytes("conv", "the depthwise lane scratch", bytes)?;
    // Group g of batch n: channels 8·g.. (fewer in the last group), output planes `o`.
    let group = |(n, g, o): (usize, usize, &mut [f32])| {
        let (k0, count) = (g * LANES, o.len() / p);
        // Lane l reads channel k0 + l; the lanes past the group repeat its last channel (their
        // outputs are never kept).
        let ch = |l: usize| k0 + l.min(count - 1);
        let planes: [&[f32]; LANES] = std::array::from_fn(|l| &x[(n * c + ch(l)) * hw..][..hw]);
        let filters: [&[f32]; LANES] = std::array::from_fn(|l| &w[ch(l) * taps..][..taps]);
        SCRATCH.with_borrow_mut(|(s, zeroed)| {
            grow_scratch(s, room, "depthwise scratch")?;
            let (pin, rest) = s[..room].split_at_mut(lay.len());
            let (pout, rest) = rest.split_at_mut(p * LANES);
            let (wv, bv) = rest.split_at_mut(taps * LANES);
            if *zeroed != Some(*dw) {
                pin.fill(0.0);
            }
            *zeroed = None;
            let bv = bias.map(|b| {
                bv.iter_mut().enumerate().for_each(|(l, v)| *v = b[ch(l)]);
                &*bv
            });
            // SAFETY: `available` holds (the caller's contract); the buffers have the lengths
            // `group` requires: pin = lay.len(), pout = p·8, wv = taps·8, planes of H·W, o of
            // count·p with 1 ≤ count ≤ 8.
            unsafe { kernel::group(dw, &lay, [planes, filters], pin, wv, bv, pout, o) };
            *zeroed = Some(*dw);
            post(n * c + k0, o);
            Ok(())
        })
    };
    // (batch, group, its output planes), on the pool above the depthwise work threshold.
    let tasks: Vec<(usize, usize, &mut [f32])> = (out.chunks_mut(c * p).enumerate())
        .flat_map(|(n, b)| (b.chunks_mut(LANES * p).enumerate()).map(move |(g, o)| (n, g, o)))
        .collect();
    if out_len * taps >= super::conv_depthwise::PAR_MIN_TAPS {
        tasks.into_par_iter().try_for_each(group)
    } else {
        tasks.into_iter().try_for_each(group)
    }
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use std::arch::x86_64::*;

    use super::{Layout, LANES};
    use crate::ops::conv_depthwise::Depthwise;
    use crate::ops::simd_transpose::transpose8;

    /// Output positions per row of a block (two rows of 7 accumulators and the weight fill 15
    /// of the 16 AVX registers).
    const BLOCK: usize = 7;

    /// One group of up to eight channels: interleave `filters` into `wv` [taps][8] and
    /// `planes` into `pin` (its padding already zero), every output into `pout` [H'·W'][8]
    /// with bias `bv` [8], then the first o.len() / (H'·W') lanes transposed into the planes
    /// of `o`.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; pin.len() = lay.len(), pout.len() = 8·H'·W', wv.len() =
    /// 8·taps, bv.len() = 8, every plane H·W values, every filter taps values, o 1 to 8
    /// planes of H'·W'.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn group(
        dw: &Depthwise,
        lay: &Layout,
        [planes, filters]: [[&[f32]; LANES]; 2],
        pin: &mut [f32],
        wv: &mut [f32],
        bv: Option<&[f32]>,
        pout: &mut [f32],
        o: &mut [f32],
    ) {
        let taps = wv.len() / LANES;
        interleave_row(filters.map(|f| f.as_ptr()), taps, wv.as_mut_ptr());
        interleave(dw, lay, planes, pin);
        outputs(dw, lay, pin, wv, bv, pout);
        deinterleave(pout, o);
    }

    /// Lanes 0..n on (n ≤ 8).
    #[inline(always)]
    unsafe fn mask(n: usize) -> __m256i {
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }

    /// The input rows and columns the layout reads, each input value's eight channels
    /// stored as one vector at its padded position.
    #[inline(always)]
    unsafe fn interleave(dw: &Depthwise, lay: &Layout, planes: [&[f32]; LANES], pin: &mut [f32]) {
        let ([h, w], [pt, pl]) = (dw.input, [dw.pad[0], dw.pad[2]]);
        let rows = h.min(lay.rows.saturating_sub(pt));
        let cols = w.min(lay.cols.saturating_sub(pl));
        let dst = pin.as_mut_ptr();
        for iy in 0..rows {
            // In bounds: iy·W + cols ≤ H·W; padded columns pl.. pl + cols of row pt + iy.
            let src = planes.map(|p| p.as_ptr().add(iy * w));
            interleave_row(src, cols, dst.add(((pt + iy) * lay.cols + pl) * LANES));
        }
    }

    /// dst[8·j + l] = src[l][j] for j < n: blocks of eight columns transposed, the last
    /// block's loads masked to the row.
    ///
    /// # Safety
    /// AVX2; each src[l] readable for n values, dst writable for 8·n.
    #[inline(always)]
    unsafe fn interleave_row(src: [*const f32; LANES], n: usize, dst: *mut f32) {
        let mut ix = 0;
        while ix < n {
            let k = (n - ix).min(LANES);
            let (mut r, m) = ([_mm256_setzero_ps(); LANES], mask(k));
            // Plain loops, no closures: intrinsics inline only into AVX2 code.
            for (v, p) in r.iter_mut().zip(src) {
                // Masked lanes are not read.
                *v = match k {
                    LANES => _mm256_loadu_ps(p.add(ix)),
                    _ => _mm256_maskload_ps(p.add(ix), m),
                };
            }
            for (j, v) in transpose8(r).into_iter().take(k).enumerate() {
                _mm256_storeu_ps(dst.add((ix + j) * LANES), v);
            }
            ix += k;
        }
    }

    /// Every output position's eight channels into `pout`: pairs of output rows (the last
    /// pair overlapping the one before when H' is odd, one row twice when H' = 1; recomputed
    /// outputs get the same bits) in blocks of at most 7 positions (as even as possible), so
    /// up to 14 independent fma chains; the column stride as a constant for strides 1 and 2.
    #[inline(always)]
    unsafe fn outputs(
        dw: &Depthwise,
        lay: &Layout,
        pin: &[f32],
        wv: &[f32],
        bv: Option<&[f32]>,
        pout: &mut [f32],
    ) {
        match dw.strides[1] {
            1 => outputs_at::<1>(dw, lay, pin, wv, bv, pout),
            2 => outputs_at::<2>(dw, lay, pin, wv, bv, pout),
            _ => outputs_at::<0>(dw, lay, pin, wv, bv, pout),
        }
    }

    /// [`outputs`] at column stride S (0: the geometry's, read at run time).
    #[inline(always)]
    unsafe fn outputs_at<const S: usize>(
        dw: &Depthwise,
        lay: &Layout,
        pin: &[f32],
        wv: &[f32],
        bv: Option<&[f32]>,
        pout: &mut [f32],
    ) {
        let ([oh, ow], [sh, sw]) = (dw.output, dw.strides);
        let bias = bv.map(|b| _mm256_loadu_ps(b.as_ptr()));
        let blocks = ow.div_ceil(BLOCK);
        let (src, dst) = (pin.as_ptr(), pout.as_mut_ptr());
        let mut oy = 0;
        while oy < oh {
            // Rows oy and oy + next (next = 0 when H' = 1).
            let top = oy.min(oh.saturating_sub(2));
            let next = usize::from(oh > 1);
            let mut ox = 0;
            for b in 0..blocks {
                let n = ow / blocks + usize::from(b < ow % blocks);
                let at = Block {
                    src: src.add((top * sh * lay.cols + ox * sw) * LANES),
                    steps: [sw * LANES, next * sh * lay.cols * LANES],
                    dst: dst.add((top * ow + ox) * LANES),
                    dst_row: next * ow * LANES,
                };
                match n {
                    1 => at.run::<1, S>(&lay.offsets, wv, bias),
                    2 => at.run::<2, S>(&lay.offsets, wv, bias),
                    3 => at.run::<3, S>(&lay.offsets, wv, bias),
                    4 => at.run::<4, S>(&lay.offsets, wv, bias),
                    5 => at.run::<5, S>(&lay.offsets, wv, bias),
                    6 => at.run::<6, S>(&lay.offsets, wv, bias),
                    _ => at.run::<7, S>(&lay.offsets, wv, bias),
                }
                ox += n;
            }
            oy = top + 2;
        }
    }

    /// N consecutive output positions in each of two rows: position j of row r reads its taps
    /// at `src + r·steps[1] + j·steps[0] + offsets[t]` and writes `dst + r·dst_row + 8·j`.
    struct Block {
        src: *const f32,
        steps: [usize; 2],
        dst: *mut f32,
        dst_row: usize,
    }

    impl Block {
        /// acc = bias (or the first tap's product), then acc = fma(x, w, acc) per later tap;
        /// the column step is S·8 when S > 0.
        #[inline(always)]
        unsafe fn run<const N: usize, const S: usize>(
            &self,
            offsets: &[usize],
            wv: &[f32],
            bias: Option<__m256>,
        ) {
            let step = if S > 0 { S * LANES } else { self.steps[0] };
            let rows = [self.src, self.src.add(self.steps[1])];
            let mut acc = [[bias.unwrap_or(_mm256_setzero_ps()); N]; 2];
            let first = usize::from(bias.is_none());
            if first == 1 {
                let w = _mm256_loadu_ps(wv.as_ptr());
                for (row, src) in acc.iter_mut().zip(rows) {
                    for (j, a) in row.iter_mut().enumerate() {
                        *a = _mm256_mul_ps(_mm256_loadu_ps(src.add(offsets[0] + j * step)), w);
                    }
                }
            }
            for (t, &off) in offsets.iter().enumerate().skip(first) {
                let w = _mm256_loadu_ps(wv.as_ptr().add(t * LANES));
                for (row, src) in acc.iter_mut().zip(rows) {
                    let src = src.add(off);
                    for (j, a) in row.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(_mm256_loadu_ps(src.add(j * step)), w, *a);
                    }
                }
            }
            for (r, row) in acc.into_iter().enumerate() {
                for (j, a) in row.into_iter().enumerate() {
                    _mm256_storeu_ps(self.dst.add(r * self.dst_row + j * LANES), a);
                }
            }
        }
    }

    /// The planes of `o` (lane l of `pout` [p][8] to plane l): blocks of eight positions
    /// transposed, the last block's stores masked to the plane.
    #[inline(always)]
    unsafe fn deinterleave(pout: &[f32], o: &mut [f32]) {
        let p = pout.len() / LANES;
        let (src, dst) = (pout.as_ptr(), o.as_mut_ptr());
        let count = o.len() / p;
        let mut q = 0;
        while q < p {
            let n = (p - q).min(LANES);
            let mut r = [_mm256_setzero_ps(); LANES];
            for (j, v) in r.iter_mut().enumerate().take(n) {
                *v = _mm256_loadu_ps(src.add((q + j) * LANES));
            }
            for (l, v) in transpose8(r).into_iter().take(count).enumerate() {
                // In bounds: l·p + q + n ≤ count·p = o.len(); masked lanes are not written.
                match n {
                    LANES => _mm256_storeu_ps(dst.add(l * p + q), v),
                    _ => _mm256_maskstore_ps(dst.add(l * p + q), mask(n), v),
                }
            }
            q += n;
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod kernel {
    use super::{Layout, LANES};
    use crate::ops::conv_depthwise::Depthwise;

    /// Never called: [`super::available`] is false off x86-64.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn group(
        _dw: &Depthwise,
        _lay: &Layout,
        _inputs: [[&[f32]; LANES]; 2],
        _pin: &mut [f32],
        _wv: &mut [f32],
        _bv: Option<&[f32]>,
        _pout: &mut [f32],
        _o: &mut [f32],
    ) {
        unreachable!("depthwise lanes need AVX2 and FMA")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::{available, run_then};
    use crate::ops::conv_depthwise::Depthwise;
    use crate::ops::gemm::tests::rand_vec;

    /// The geometry of a square `size` input, kernel `k`, stride `s`, padding `pad` each side.
    fn geometry(size: usize, k: usize, s: usize, pad: usize) -> Depthwise {
        let out = (size + 2 * pad - k) / s + 1;
        Depthwise {
            input: [size, size],
            kernel: [k, k],
            output: [out, out],
            strides: [s, s],
            dilations: [1, 1],
            pad: [pad; 4],
        }
    }

    /// The lane kernel against the per-plane kernel, bit for bit, and each output plane handed
    /// to `post` once with its index and final values: 3×3 and 5×5, strides 1 and 2, planes
    /// 1×1 to 16×16, channel counts not a multiple of 8, batches, with and without bias, at 1, 2
    /// and 3 threads (the larger cases past the parallel threshold; each pool's scratch reused
    /// from geometry to geometry), NaN, ±inf and ±0 in the inputs and an infinite weight that
    /// meets the padding zeros.
    #[test]
    fn lanes_match_the_plane_kernel_bit_for_bit() {
        if !available() {
            return;
        }
        let mut cases: Vec<(Depthwise, usize, usize)> = Vec::new();
        for size in 1..=16 {
            for (k, s) in [(3, 1), (3, 2), (5, 1), (5, 2)] {
                let dw = geometry(size, k, s, k / 2);
                if dw.matches_gemv() {
                    cases.push((dw, 1, [1, 5, 8, 13, 24][size % 5]));
                }
            }
        }
        // Asymmetric padding, a wide stride, dilation, rectangles, batches of 2, the parallel
        // path (≥ 2^17 taps), MobileNetV3's 576 channels on 7×7.
        let odd = Depthwise {
            input: [9, 6],
            kernel: [3, 5],
            output: [4, 3],
            strides: [3, 2],
            dilations: [2, 1],
            pad: [2, 1, 0, 3],
        };
        cases.extend([
            (odd, 2, 11),
            (geometry(7, 5, 1, 2), 2, 19),
            (geometry(14, 5, 1, 2), 1, 61),
            (geometry(14, 3, 2, 1), 2, 300),
            (geometry(7, 5, 1, 2), 1, 576),
            (geometry(4, 3, 1, 3), 1, 9),
        ]);
        // Pools kept across the cases: each thread's scratch goes from geometry to geometry.
        let pools = crate::ops::gemm::tests::pools(3);
        for (ci, &(dw, batch, c)) in cases.iter().enumerate() {
            let [hw, taps, p] = dw.sizes();
            let mut x = rand_vec(batch * c * hw, 51 + ci as u64);
            let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
            for (i, v) in x.iter_mut().enumerate().filter(|(i, _)| i % 7 == 3) {
                *v = specials[(i / 7) % specials.len()];
            }
            let mut w = rand_vec(c * taps, 52);
            w[taps * (c / 2)] = f32::INFINITY;
            let b = rand_vec(c, 53);
            for (pool, threads) in pools.iter().zip(1..) {
                for bias in [None, Some(&b[..])] {
                    let tag = format!(
                        "case {ci} {dw:?} batch {batch} c {c} t {threads} bias {}",
                        bias.is_some()
                    );
                    let (mut want, mut got) =
                        (vec![0f32; batch * c * p], vec![1f32; batch * c * p]);
                    let seen = Mutex::new(vec![None; batch * c]);
                    pool.install(|| {
                        dw.run_planes(&x, &w, bias, &mut want, |_, _| {}).unwrap();
                        run_then(&dw, &x, &w, bias, &mut got, &|i, planes: &mut [f32]| {
                            assert_eq!(planes.len() % p, 0, "{tag}: whole planes");
                            for (i, plane) in (i..).zip(planes.chunks(p)) {
                                let bits: Vec<u32> = plane.iter().map(|v| v.to_bits()).collect();
                                assert!(
                                    seen.lock().unwrap()[i].replace(bits).is_none(),
                                    "{tag}: plane {i} twice"
                                );
                            }
                        })
                        .unwrap();
                    });
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{tag}");
                    let seen: Vec<u32> = seen
                        .into_inner()
                        .unwrap()
                        .into_iter()
                        .flat_map(|s| s.expect("every plane posted"))
                        .collect();
                    assert_eq!(seen, bits(&want), "{tag}: posted planes");
                }
            }
        }
    }
}
