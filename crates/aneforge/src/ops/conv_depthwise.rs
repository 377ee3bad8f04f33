//! Direct depthwise convolution (one filter per channel: groups = Cin = Cout), vectorised over
//! the output width, with no im2col buffer.
//!
//! It reproduces the GEMM path bit for bit. There each channel is one `sgemm` with m = 1,
//! n = H'·W' (≥ 2) and k = kH·kW (≥ 3), which the `gemm` crate runs as a column-major GEMV:
//! acc = bias (or, without bias, the first tap's product x·w), then acc = fma(x, w, acc) for
//! each later tap in (ky, kx) order, a tap in the padding reading x = 0. This kernel performs
//! the same operations in the same order (padding taps included, since fma(0, w, −0) is +0).

use rayon::prelude::*;

use super::conv::{tap, window_row};
use super::kernel::PAR_MIN_ELEMS;

/// Geometry of one depthwise conv: input planes [H, W], kernel [kH, kW], output planes [H', W'].
#[derive(Clone, Copy, Debug)]
pub struct Depthwise {
    pub input: [usize; 2],
    pub kernel: [usize; 2],
    pub output: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Padding (top, bottom, left, right).
    pub pad: [usize; 4],
}

impl Depthwise {
    /// Whether the GEMM path would take the GEMV this kernel reproduces (k ≥ 3 taps, ≥ 2 outputs).
    pub fn matches_gemv(&self) -> bool {
        self.kernel[0] * self.kernel[1] >= 3 && self.output[0] * self.output[1] >= 2
    }

    /// Run every plane: `x` [planes, H, W], `w` [C, kH, kW], optional `bias` [C], `out`
    /// [planes, H', W'] fully written; plane i uses filter i mod C. Panics on mismatched lengths.
    pub fn run(&self, x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]) {
        let (hw, taps, p) = (
            self.input[0] * self.input[1],
            self.kernel[0] * self.kernel[1],
            self.output[0] * self.output[1],
        );
        let c = w.len() / taps;
        assert!(
            x.len() / hw == out.len() / p && c > 0 && (x.len() / hw) % c == 0,
            "depthwise: input, filter and output plane counts disagree"
        );
        let plane = |(i, o): (usize, &mut [f32])| {
            let k = i % c;
            let b = bias.map(|b| b[k]);
            self.plane(&x[i * hw..(i + 1) * hw], &w[k * taps..(k + 1) * taps], b, o);
        };
        if out.len() >= PAR_MIN_ELEMS {
            out.par_chunks_mut(p).enumerate().for_each(plane);
        } else {
            out.chunks_mut(p).enumerate().for_each(plane);
        }
    }

    /// One channel: `xs` [H, W] through filter `f` [kH, kW] into `o` [H', W'].
    fn plane(&self, xs: &[f32], f: &[f32], bias: Option<f32>, o: &mut [f32]) {
        let ([h, wd], [kh, kw], [_, ow]) = (self.input, self.kernel, self.output);
        let ([sh, sw], [dh, dw], [pt, _, pl, _]) = (self.strides, self.dilations, self.pad);
        let mut row = vec![0f32; ow];
        if let Some(b) = bias {
            o.fill(b);
        }
        for ky in 0..kh {
            for kx in 0..kw {
                let wv = f[ky * kw + kx];
                let first = bias.is_none() && ky == 0 && kx == 0;
                for (oy, acc) in o.chunks_mut(ow).enumerate() {
                    match tap(oy, ky, sh, dh, pt, h) {
                        Some(iy) => window_row(
                            &xs[iy * wd..(iy + 1) * wd],
                            [kx * dw, sw, pl],
                            0.0,
                            &mut row,
                        ),
                        None => row.fill(0.0),
                    }
                    if first {
                        acc.iter_mut().zip(&row).for_each(|(a, &v)| *a = v * wv);
                    } else {
                        fma_row(acc, &row, wv);
                    }
                }
            }
        }
    }
}

/// acc[i] = fma(x[i], w, acc[i]) (one rounding), with FMA instructions when the CPU has them.
fn fma_row(acc: &mut [f32], x: &[f32], w: f32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the features the function is compiled for were just detected.
        unsafe { fma_row_x86(acc, x, w) };
        return;
    }
    acc.iter_mut()
        .zip(x)
        .for_each(|(a, &v)| *a = v.mul_add(w, *a));
}

/// [`fma_row`] compiled for AVX2 + FMA (the loop vectorises to `vfmadd`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_row_x86(acc: &mut [f32], x: &[f32], w: f32) {
    acc.iter_mut()
        .zip(x)
        .for_each(|(a, &v)| *a = v.mul_add(w, *a));
}

#[cfg(test)]
mod tests {
    use crate::ops::conv::Conv;
    use crate::ops::gemm::tests::rand_vec;
    use crate::ops::{Buf, Family};

    /// The direct kernel against the im2col + GEMM path, bit for bit, on awkward geometries
    /// (padding wider than the kernel, strides, dilation, 1-wide outputs, no bias), with
    /// zeros and signed zeros in the input so the sign of zero sums is exercised.
    #[test]
    fn direct_depthwise_is_bit_identical_to_the_gemm_path() {
        // (x shape, kernel, strides, pad, dilations, bias)
        type Case = (
            [usize; 4],
            [usize; 2],
            [usize; 2],
            [usize; 4],
            [usize; 2],
            bool,
        );
        let cases: [Case; 7] = [
            ([1, 8, 9, 9], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], true),
            ([2, 5, 12, 7], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], false),
            ([1, 6, 15, 15], [5, 5], [2, 2], [2, 2, 2, 2], [1, 1], true),
            ([1, 3, 9, 11], [3, 5], [1, 2], [0, 3, 4, 1], [2, 1], false),
            ([1, 4, 7, 1], [3, 1], [1, 1], [1, 1, 0, 0], [1, 1], true),
            ([1, 4, 2, 2], [3, 3], [1, 1], [3, 3, 3, 3], [1, 1], false),
            ([1, 64, 40, 40], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], false),
        ];
        for (xs, k, strides, pad, dilations, with_bias) in cases {
            let c = xs[1];
            let mut xd = rand_vec(xs.iter().product(), 31);
            // Every 5th input a zero, of alternating sign.
            for (i, v) in xd.iter_mut().enumerate() {
                if i % 5 == 0 {
                    *v = if i % 2 == 0 { 0.0 } else { -0.0 };
                }
            }
            let x = Buf {
                shape: xs.to_vec(),
                data: xd,
            };
            let w = Buf {
                shape: vec![c, 1, k[0], k[1]],
                data: rand_vec(c * k[0] * k[1], 32),
            };
            let b = Buf {
                shape: vec![c],
                data: rand_vec(c, 33),
            };
            let conv = Conv {
                strides,
                pad,
                dilations,
                groups: c,
            };
            let mut ins = vec![&x, &w];
            if with_bias {
                ins.push(&b);
            }
            let types: Vec<_> = ins
                .iter()
                .map(|b| crate::ops::TensorType::fp16(b.shape.clone()))
                .collect();
            let shape = conv.infer(&types).unwrap().remove(0).shape;
            let mut via_gemm = [Buf::zeros(&shape)];
            conv.eval_im2col(&ins, &mut via_gemm).unwrap();
            let mut direct = [Buf::zeros(&shape)];
            conv.eval(&ins, &mut direct).unwrap();
            let bits = |b: &Buf| b.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&direct[0]),
                bits(&via_gemm[0]),
                "{xs:?} k {k:?} s {strides:?} pad {pad:?} d {dilations:?}"
            );
        }
    }
}
