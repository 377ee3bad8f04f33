//! Convs of one group whose fp16 constant weight is held as column blocks of Wᵀ [K, Cout]
//! (`weight_blocks`, made once at load by `exec::reference::shared_weight`). Per batch element
//! the output is computed transposed, Cᵀ [H'·W', Cout] = colsᵀ · Wᵀ, so the `gemm` crate's
//! 16-lane kernel runs over output channels and reads the weight in place, then Cᵀ is
//! transposed into the [Cout, H'·W'] planes. The dense call instead runs its lanes over the
//! pixels and packs the whole weight on every call; on ResNet's 49- and 196-pixel planes most
//! of a lane tile is then wasted. Tiles of output rows keep their im2col columns and their
//! Cᵀ block in cache until transposed. Every element is the dense call's chain (`weight_blocks`:
//! blocks of ≥ 128 columns keep the crate's depth block and blocked path), so the same bits.

use std::cell::RefCell;
use std::ops::Range;

use rayon::prelude::*;

use super::conv_gemm::{with_scratch, Product, SyncPtr, COLS};
use super::gemm::PAR_MIN_MACS;
use super::gemm_avx2;
use super::weight_blocks::{self, block_product, BLOCK};
use crate::error::Result;

/// Least depth K at which the blocks were measured faster (K = 64 was slower).
const MIN_DEPTH: usize = 256;

/// Most output pixels per batch element of a 1×1 conv: in ResNet-50 the blocks took 4–12 %
/// off every product on 7×7 and 14×14 planes, and the 1×1 ones on 28×28 and 56×56 planes
/// took 0–5 % longer.
const MAX_PIXELS_1X1: usize = 196;

/// Most output pixels per batch element of other convs (ResNet-50's 3×3 convs on 28×28 planes:
/// 6 % faster).
const MAX_PIXELS: usize = 784;

/// im2col elements per tile aimed at (a tile's columns stay in L2; 2¹⁷ measured slower).
const TILE_ELEMS: usize = 1 << 18;

/// Fewest pixels of a tile: a block call has at least 3 rows (the crate's blocked path).
const MIN_TILE_PIXELS: usize = 3;

thread_local! {
    /// Cᵀ [pixels, block] of the tile and block in progress.
    static TRANSPOSED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl Product {
    /// Whether this product runs on [`Product::run_blocks`] (its weight then held as blocks):
    /// AVX-512 CPUs, where blocks reproduce the crate and the packed AVX2 kernels are off, at
    /// least [`BLOCK`] output channels, depth ≥ [`MIN_DEPTH`], at most [`MAX_PIXELS_1X1`] or
    /// [`MAX_PIXELS`] pixels, and not a product the lane kernel (`conv_lanes`) takes.
    pub(crate) fn prefers_blocks(&self) -> bool {
        let p = self.output[0] * self.output[1];
        let most = if self.kernel == [1, 1] {
            MAX_PIXELS_1X1
        } else {
            MAX_PIXELS
        };
        weight_blocks::usable()
            && !gemm_avx2::available()
            && self.cog >= BLOCK
            && self.depth() >= MIN_DEPTH
            && (MIN_TILE_PIXELS..=most).contains(&p)
            && !self.prefers_lanes()
    }

    /// Output rows of each tile of [`Product::run_blocks`]: about [`TILE_ELEMS`] im2col
    /// elements each, at least `least` tiles (one per thread that runs them), every tile at
    /// least [`MIN_TILE_PIXELS`] pixels; balanced.
    fn block_tiles(&self, least: usize) -> Vec<Range<usize>> {
        let ([oh, ow], k) = (self.output, self.depth());
        let n = (oh * ow * k).div_ceil(TILE_ELEMS).max(least);
        let mut n = n.min(oh).max(1);
        while n > 1 && (oh / n) * ow < MIN_TILE_PIXELS {
            n -= 1;
        }
        (0..n).map(|t| oh * t / n..oh * (t + 1) / n).collect()
    }

    /// out [Cout, H'·W'] = bias + W · cols(xs) for one batch element xs [Cin, H, W], with Wᵀ in
    /// `blocks` (`weight_blocks::index` with n = Cout, k = K) and `bias` [Cout] or none; the
    /// bits of [`Product::run`] with the bias in `out` and `accumulate`. Per tile of output
    /// rows (on the rayon pool when large): its im2col columns, then per block Cᵀ of the tile,
    /// transposed into the planes while in cache. Errors only when scratch cannot be
    /// allocated; panics if a slice is shorter than its shape.
    pub(crate) fn run_blocks(
        &self,
        xs: &[f32],
        blocks: &[f32],
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        let (m, k, [oh, ow]) = (self.cog, self.depth(), self.output);
        let p = oh * ow;
        assert!(out.len() >= m * p && blocks.len() >= m * k && bias.is_none_or(|b| b.len() >= m));
        let planes = SyncPtr(out.as_mut_ptr());
        let threads = rayon::current_num_threads();
        let spans: Vec<(usize, usize)> = weight_blocks::spans(m).collect();
        // On threads: the blocks of each tile side by side when there are enough of them (each
        // block of the weight read once), else the tiles side by side.
        let par = threads > 1 && m * k * p >= PAR_MIN_MACS;
        let by_blocks = par && spans.len() >= threads;
        let tile = |rows: &Range<usize>| -> Result<()> {
            let (n, start) = (rows.len() * ow, rows.start * ow);
            // Cᵀ of the tile for one block, transposed into its planes at pixels start...
            let block = |cols: &[f32], x_cs: usize, &(j0, w): &(usize, usize)| {
                with_scratch(&TRANSPOSED, n * w, "the transposed conv tile", |t| {
                    if let Some(b) = bias {
                        t.chunks_exact_mut(w)
                            .for_each(|r| r.copy_from_slice(&b[j0..j0 + w]));
                    }
                    // SAFETY: `t` is this thread's scratch, borrowed mutably here.
                    unsafe {
                        let y = (t.as_mut_ptr(), t.len());
                        let acc = bias.is_some();
                        block_product(blocks, (j0, w, k), (cols, n, 1, x_cs), y, w, acc);
                    }
                    // SAFETY: planes j0..j0 + w (≤ m) at pixels start..start + n (≤ p) lie in
                    // `out` (len ≥ m·p, asserted above), which this call borrows mutably; no
                    // other (tile, block) writes them.
                    unsafe { to_planes(t, w, (planes.get().add(j0 * p + start), p)) };
                })
            };
            let product = |cols: &[f32], x_cs: usize| -> Result<()> {
                if by_blocks {
                    spans.par_iter().try_for_each(|s| block(cols, x_cs, s))
                } else {
                    spans.iter().try_for_each(|s| block(cols, x_cs, s))
                }
            };
            if self.direct() {
                return product(&xs[start..], p);
            }
            with_scratch(&COLS, k * n, "the im2col scratch", |cols| {
                self.im2col(xs, rows.clone(), 0, cols, n, by_blocks);
                product(cols, n)
            })?
        };
        let by_tiles = par && !by_blocks;
        let tiles = self.block_tiles(if by_tiles { threads } else { 1 });
        if by_tiles && tiles.len() > 1 {
            tiles.par_iter().try_for_each(tile)
        } else {
            tiles.iter().try_for_each(tile)
        }
    }
}

/// planes[c·stride + i] = rows[i·w + c] for the rows.len() / w pixels i and the w channels
/// c (rows [n, w] transposed into w planes `stride` apart): 8×8 tiles in AVX registers where
/// available, the rest element by element. Values move only.
///
/// # Safety
/// `planes` = (pointer, stride) is valid for writes at every c·stride + i, which nothing else
/// accesses during the call, and stride ≥ n.
unsafe fn to_planes(rows: &[f32], w: usize, (planes, stride): (*mut f32, usize)) {
    let n = rows.len() / w;
    debug_assert!(stride >= n);
    // SAFETY: the caller's contract.
    let [w8, n8] = unsafe { tiles(rows, w, (planes, stride)) };
    for c in 0..w {
        let from = if c < w8 { n8 } else { 0 };
        for i in from..n {
            // SAFETY: the caller's contract (c < w, i < n).
            unsafe { *planes.add(c * stride + i) = rows[i * w + c] };
        }
    }
}

/// The 8×8 tiles of [`to_planes`] on AVX: channels c < w8 at pixels i < n8 (the multiples of
/// 8 below w and n), which it returns; [0, 0] without AVX.
///
/// # Safety
/// As [`to_planes`].
unsafe fn tiles(rows: &[f32], w: usize, planes: (*mut f32, usize)) -> [usize; 2] {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        let n = rows.len() / w;
        let (w8, n8) = (w / 8 * 8, n / 8 * 8);
        // SAFETY: AVX is available; rows holds n·w values; the caller's contract on planes.
        unsafe { x86::tiles(rows, w, [w8, n8], planes) };
        return [w8, n8];
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (rows, w, planes);
    [0, 0]
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_storeu_ps};

    use super::super::simd_transpose::transpose8;

    /// planes[c·stride + i] = rows[i·w + c] for c < w8, i < n8 (multiples of 8, at most w and
    /// n = rows.len() / w).
    ///
    /// # Safety
    /// AVX is available; `planes` is valid for writes at every c·stride + i (c < w8, i < n8).
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn tiles(
        rows: &[f32],
        w: usize,
        [w8, n8]: [usize; 2],
        (planes, stride): (*mut f32, usize),
    ) {
        assert!(rows.len() >= n8 * w && w8 <= w);
        let src = rows.as_ptr();
        for c in (0..w8).step_by(8) {
            for i in (0..n8).step_by(8) {
                // SAFETY: rows i..i + 8 (≤ n8) at columns c..c + 8 (≤ w) lie in `rows`
                // (asserted); planes c..c + 8 at pixels i..i + 8: the caller's contract.
                unsafe {
                    let at = |t: usize| src.add((i + t) * w + c);
                    let r = [
                        _mm256_loadu_ps(at(0)),
                        _mm256_loadu_ps(at(1)),
                        _mm256_loadu_ps(at(2)),
                        _mm256_loadu_ps(at(3)),
                        _mm256_loadu_ps(at(4)),
                        _mm256_loadu_ps(at(5)),
                        _mm256_loadu_ps(at(6)),
                        _mm256_loadu_ps(at(7)),
                    ];
                    for (t, v) in transpose8(r).into_iter().enumerate() {
                        _mm256_storeu_ps(planes.add((c + t) * stride + i), v);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::conv::Conv;
    use crate::ops::gemm::tests::{on_threads, rand_vec};
    use crate::ops::{Buf, Family};

    /// Every bit of the dense conv (`Conv::eval`, bias in or not): ResNet's 7×7 and 14×14
    /// shapes, 1×1 at strides 1 and 2, 3×3 with padding, one block and blocks with a
    /// remainder (Cout 128, 257, 300, 512), K past a depth block, 3 to 288 pixels in one tile
    /// or several, batch 2, at 1, 2 and 3 threads; an f64 sum agrees to f32 accuracy.
    #[test]
    fn blocks_give_the_dense_conv_bits() {
        if !weight_blocks::usable() {
            return;
        }
        // (batch, Cin, H, W, kernel, stride, pad, Cout)
        for (b, cin, h, w, kk, s, pad, cout) in [
            (1, 256, 7, 7, 3, 1, 1, 128),
            (1, 512, 7, 7, 1, 1, 0, 300),
            (2, 64, 14, 14, 3, 2, 1, 257),
            (1, 300, 10, 20, 1, 1, 0, 130),
            (1, 96, 9, 9, 1, 2, 0, 512),
            (1, 1030, 3, 1, 1, 1, 0, 128),
            (1, 40, 8, 5, 3, 1, 0, 200),
            (1, 128, 16, 18, 3, 1, 1, 136),
        ] {
            let conv = Conv {
                strides: [s, s],
                pad: [pad; 4],
                dilations: [1, 1],
                groups: 1,
            };
            let k = cin * kk * kk;
            let buf = |shape: &[usize], seed| Buf {
                shape: shape.to_vec(),
                data: rand_vec(shape.iter().product(), seed),
            };
            let (x, wt, bias) = (
                buf(&[b, cin, h, w], 1 + cin as u64),
                buf(&[cout, cin, kk, kk], 2 + cout as u64),
                buf(&[cout], 3),
            );
            let product = conv.single_product(&x.shape, &wt.shape).unwrap();
            let mut blocks = vec![f32::NAN; cout * k];
            for j in 0..cout {
                for p in 0..k {
                    blocks[weight_blocks::index(cout, k, p, j)] = wt.data[j * k + p];
                }
            }
            let [oh, ow] = product.output;
            let plane = cout * oh * ow;
            for with_bias in [false, true] {
                let ins: Vec<&Buf> = [&x, &wt, &bias][..2 + with_bias as usize].to_vec();
                let mut dense = [Buf::zeros(&[b, cout, oh, ow])];
                conv.eval(&ins, &mut dense).unwrap();
                for threads in [1, 2, 3] {
                    let mut got = vec![f32::NAN; b * plane];
                    on_threads(threads, || {
                        for (xs, ys) in x.data.chunks(cin * h * w).zip(got.chunks_mut(plane)) {
                            let bias = with_bias.then_some(&bias.data[..]);
                            product.run_blocks(xs, &blocks, bias, ys).unwrap();
                        }
                    });
                    let what = format!("{b}×{cin}×{h}×{w} k{kk} s{s} → {cout}, bias {with_bias}");
                    for (i, (g, d)) in got.iter().zip(&dense[0].data).enumerate() {
                        assert_eq!(g.to_bits(), d.to_bits(), "{what}, {threads} threads, {i}");
                    }
                }
                // The centre pixel of channel 1 of the first element, in f64.
                let (oy, ox, co) = (oh / 2, ow / 2, 1);
                let mut want = if with_bias { bias.data[co] as f64 } else { 0.0 };
                for (c, ky, kx) in (0..cin)
                    .flat_map(|c| (0..kk).flat_map(move |ky| (0..kk).map(move |kx| (c, ky, kx))))
                {
                    let (iy, ix) = (
                        (oy * s + ky) as isize - pad as isize,
                        (ox * s + kx) as isize - pad as isize,
                    );
                    if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                        let xv = x.data[(c * h + iy as usize) * w + ix as usize] as f64;
                        want += xv * wt.data[((co * cin + c) * kk + ky) * kk + kx] as f64;
                    }
                }
                let got = dense[0].data[(co * oh + oy) * ow + ox] as f64;
                assert!(
                    (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                    "{got} vs {want}"
                );
            }
        }
    }
}
