//! Convs of one group whose fp16 constant weight is held as column blocks of Wᵀ [K, Cout]
//! (`weight_blocks`, made once at load by `exec::reference::shared_weight`). Per batch element
//! the output is computed transposed, Cᵀ [H'·W', Cout] = colsᵀ · Wᵀ, so the `gemm` crate's
//! 16-lane kernel runs over output channels and reads the weight in place, then Cᵀ is
//! transposed into the [Cout, H'·W'] planes. The dense call instead runs its lanes over the
//! pixels and packs the whole weight on every call; on ResNet's 49- and 196-pixel planes most
//! of a lane tile is then wasted. Every element is the dense call's chain (`weight_blocks`:
//! blocks of ≥ 128 columns keep the crate's depth block and blocked path), so the same bits.

use std::cell::RefCell;

use super::conv_gemm::{with_scratch, Product, COLS};
use super::gemm::PAR_MIN_MACS;
use super::gemm_avx2;
use super::weight_blocks::{self, BLOCK};
use crate::error::Result;

/// Least depth K at which the blocks were measured faster (K = 64 was slower).
const MIN_DEPTH: usize = 256;

/// Most output pixels per batch element: in ResNet-50 the blocks took 3–13 % off every
/// product on 7×7 and 14×14 planes, and nothing on 28×28 and 56×56 ones (a 1×1 stride-2 conv
/// to 28×28 took 14 % longer).
const MAX_PIXELS: usize = 196;

thread_local! {
    /// Cᵀ [H'·W', Cout] of the element in progress.
    static TRANSPOSED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl Product {
    /// Whether this product runs on [`Product::run_blocks`] (its weight then held as blocks):
    /// AVX-512 CPUs, where blocks reproduce the crate and the packed AVX2 kernels are off, at
    /// least [`BLOCK`] output channels, depth ≥ [`MIN_DEPTH`], at most [`MAX_PIXELS`] pixels,
    /// and not a product the lane kernel (`conv_lanes`) takes.
    pub(crate) fn prefers_blocks(&self) -> bool {
        let p = self.output[0] * self.output[1];
        weight_blocks::usable()
            && !gemm_avx2::available()
            && self.cog >= BLOCK
            && self.depth() >= MIN_DEPTH
            && (3..=MAX_PIXELS).contains(&p)
            && !self.prefers_lanes()
    }

    /// out [Cout, H'·W'] = bias + W · cols(xs) for one batch element xs [Cin, H, W], with Wᵀ in
    /// `blocks` (`weight_blocks::index` with n = Cout, k = K) and `bias` [Cout] or none; the
    /// bits of [`Product::run`] with the bias in `out` and `accumulate`. Errors only when the
    /// scratch cannot be allocated; panics if a slice is shorter than its shape.
    pub(crate) fn run_blocks(
        &self,
        xs: &[f32],
        blocks: &[f32],
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) -> Result<()> {
        let (m, k, p) = (self.cog, self.depth(), self.output[0] * self.output[1]);
        let par = rayon::current_num_threads() > 1 && m * k * p >= PAR_MIN_MACS;
        with_scratch(&TRANSPOSED, p * m, "the transposed conv output", |ct| {
            if let Some(b) = bias {
                ct.chunks_exact_mut(m)
                    .for_each(|row| row.copy_from_slice(&b[..m]));
            }
            let product = |cols: &[f32], ct: &mut [f32]| {
                weight_blocks::matmul_strided(blocks, (p, m, k), (cols, 1, p), ct, bias.is_some())
            };
            if self.direct() {
                product(xs, ct);
            } else {
                with_scratch(&COLS, k * p, "the im2col scratch", |cols| {
                    self.im2col(xs, 0..self.output[0], 0, cols, p, par);
                    product(cols, ct);
                })?;
            }
            to_planes(ct, m, &mut out[..m * p]);
            Ok(())
        })?
    }
}

/// planes [m, p] = rows [p, m] transposed (p = planes.len() / m): 8×8 tiles in AVX registers
/// where available, the rest element by element. Values move only.
fn to_planes(rows: &[f32], m: usize, planes: &mut [f32]) {
    let p = planes.len() / m;
    assert!(rows.len() >= p * m);
    let [m8, p8] = tiles(rows, m, planes);
    // The pixels p8.. of every plane, then the first p8 pixels of the planes m8...
    for (co, plane) in planes.chunks_exact_mut(p).enumerate() {
        let from = if co < m8 { p8 } else { 0 };
        for (j, v) in plane.iter_mut().enumerate().skip(from) {
            *v = rows[j * m + co];
        }
    }
}

/// The 8×8 tiles of [`to_planes`] on AVX: planes [co, j] for co < m8, j < p8 (the multiples of
/// 8 below m and p), which it returns; [0, 0] without AVX.
fn tiles(rows: &[f32], m: usize, planes: &mut [f32]) -> [usize; 2] {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        let p = planes.len() / m;
        let (m8, p8) = (m / 8 * 8, p / 8 * 8);
        // SAFETY: AVX is available; rows holds p·m values (the caller's assert), planes m·p.
        unsafe { x86::tiles(rows, [m, p], [m8, p8], planes) };
        return [m8, p8];
    }
    [0, 0]
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_storeu_ps};

    use super::super::simd_transpose::transpose8;

    /// planes[co·p + j] = rows[j·m + co] for co < m8, j < p8 (multiples of 8, at most m, p).
    ///
    /// # Safety
    /// AVX is available; rows holds p·m values and planes m·p.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn tiles(
        rows: &[f32],
        [m, p]: [usize; 2],
        [m8, p8]: [usize; 2],
        planes: &mut [f32],
    ) {
        debug_assert!(rows.len() >= p * m && planes.len() >= m * p && m8 <= m && p8 <= p);
        let (src, dst) = (rows.as_ptr(), planes.as_mut_ptr());
        for co in (0..m8).step_by(8) {
            for j in (0..p8).step_by(8) {
                // SAFETY: rows j..j + 8 (≤ p) at columns co..co + 8 (≤ m), and planes
                // co..co + 8 at pixels j..j + 8, lie inside the slices (the caller's contract).
                unsafe {
                    let at = |t: usize| src.add((j + t) * m + co);
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
                        _mm256_storeu_ps(dst.add((co + t) * p + j), v);
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
    /// remainder (Cout 128, 257, 300, 512), K past a depth block, 3 to 200 pixels, batch 2, at
    /// 1, 2 and 3 threads; an f64 sum agrees to f32 accuracy.
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
