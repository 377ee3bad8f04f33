//! 2-D transposed convolution (NCHW), the adjoint of [`Conv`](super::conv::Conv): each input
//! element scatters `x · weight[ci, co]` over its kernel window of the output.

use super::conv::{conv_params, take_conv_params, MAX_KERNEL_WIDTH};
use super::io::{expect_fp16, expect_inputs};
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{MilArgs, MilOp};

mod lanes;

/// The MIL op name of [`ConvTranspose`].
pub const MIL_NAME: &str = "conv_transpose";

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &[MIL_NAME];

/// MIL `conv_transpose(x, weight, strides, pad_type = "custom", pad, dilations, groups)`.
/// Inputs: x [N, Cin, H, W], weight [Cin, Cout/groups, kH, kW]; output extent per axis
/// `(in − 1)·s + d·(k − 1) + 1 − pad_lo − pad_hi`. The builder adds a bias as a separate `add`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvTranspose {
    pub strides: [usize; 2],
    /// Padding (top, bottom, left, right) removed from the full output.
    pub pad: [usize; 4],
    pub dilations: [usize; 2],
    pub groups: usize,
}

impl ConvTranspose {
    /// Output shape [N, Cout, H', W'] for x and weight shapes; errors name both shapes.
    fn out_shape(&self, xs: &[usize], ws: &[usize]) -> Result<[usize; 4]> {
        let err = |msg: String| {
            Err(Error::shape(
                MIL_NAME,
                format!("x {xs:?}, weight {ws:?}: {msg}"),
            ))
        };
        let (&[n, cin, h, w], &[wcin, cog, kh, kw]) = (xs, ws) else {
            return err(
                "x must be rank 4 [N, Cin, H, W] and weight rank 4 [Cin, Cout/groups, kH, kW]"
                    .into(),
            );
        };
        let g = self.groups;
        if g == 0 || cin != wcin || cin % g != 0 {
            return err(format!(
                "weight dim 0 must equal Cin = {cin}, divisible by groups = {g} (>= 1)"
            ));
        }
        if [kh, kw, cog].contains(&0) || self.strides.contains(&0) || self.dilations.contains(&0) {
            return err(format!(
                "kernel, Cout/groups, strides {:?} and dilations {:?} must all be >= 1",
                self.strides, self.dilations
            ));
        }
        if kw > MAX_KERNEL_WIDTH {
            return err(format!(
                "kernel width {kw} exceeds the ANE limit of {MAX_KERNEL_WIDTH}"
            ));
        }
        crate::ops::conv::check_int32(
            MIL_NAME,
            &[
                ("strides", &self.strides),
                ("dilations", &self.dilations),
                ("pad", &self.pad),
            ],
        )?;
        let mut out = [0; 2];
        for (a, (size, k)) in [(h, kh), (w, kw)].into_iter().enumerate() {
            let full = (size - 1)
                .saturating_mul(self.strides[a])
                .saturating_add(self.dilations[a].saturating_mul(k - 1))
                .saturating_add(1);
            let crop = self.pad[2 * a].saturating_add(self.pad[2 * a + 1]);
            if crop >= full {
                return err(format!(
                    "pad {:?} removes the whole {full}-wide output along {}",
                    self.pad,
                    ["H", "W"][a]
                ));
            }
            out[a] = full - crop;
        }
        Ok([n, cog * g, out[0], out[1]])
    }
}

impl Family for ConvTranspose {
    fn name(&self) -> &'static str {
        MIL_NAME
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(MIL_NAME, inputs, 2)?;
        expect_fp16(MIL_NAME, inputs)?;
        let s = self.out_shape(&inputs[0].shape, &inputs[1].shape)?;
        crate::shape::check(MIL_NAME, &s)?;
        Ok(vec![TensorType::fp16(s.to_vec())])
    }
    fn mil(&self) -> MilOp {
        conv_params(
            MilOp::new(MIL_NAME, &["x", "weight"]),
            self.strides,
            self.pad,
            self.dilations,
            self.groups,
        )
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, w) = (ins[0], ins[1]);
        let [n, cout, oh, ow] = self.out_shape(&x.shape, &w.shape)?;
        let ([_, cin, h, wd], [_, cog, kh, kw]) = (
            <[usize; 4]>::try_from(x.shape.as_slice()).unwrap_or_default(),
            <[usize; 4]>::try_from(w.shape.as_slice()).unwrap_or_default(),
        );
        let cig = cin / self.groups;
        let y = &mut out[0].data;
        if lanes::suits(cog) {
            let geometry = lanes::Geometry {
                x: [n, cin, h, wd],
                out: [cout, oh, ow],
                kernel: [kh, kw],
                strides: self.strides,
                dilations: self.dilations,
                pad: [self.pad[0], self.pad[2]],
                groups: self.groups,
            };
            lanes::run(&geometry, &x.data, &w.data, y);
        } else {
            self.planes(
                &x.data,
                &w.data,
                [n, cin, h, wd],
                [cout, cig, cog],
                [oh, ow, kh, kw],
                y,
            );
        }
        Ok(())
    }
}

impl ConvTranspose {
    /// The plane kernel: y [N, Cout, H', W'] from x [N, Cin, H, W] and w [Cin, Cout/g, kH, kW],
    /// output plane by output plane (kept in L1 while its terms accumulate); each element sums
    /// its terms in the order (ci, iy, ky, kx) of the input-major loop.
    fn planes(
        &self,
        x: &[f32],
        w: &[f32],
        [n, cin, h, wd]: [usize; 4],
        [cout, cig, cog]: [usize; 3],
        [oh, ow, kh, kw]: [usize; 4],
        y: &mut [f32],
    ) {
        let ([sh, sw], [dh, dw], [pt, _, pl, _]) = (self.strides, self.dilations, self.pad);
        y.fill(0.0);
        // Output index along one axis for input index i and tap k, if inside the cropped output.
        let pos = |i: usize, k: usize, s: usize, d: usize, lo: usize, size: usize| {
            (i * s + k * d).checked_sub(lo).filter(|&o| o < size)
        };
        let spans: Vec<_> = (0..kw)
            .map(|kx| row_span(kx * dw, sw, pl, wd, ow))
            .collect();
        for b in 0..n {
            for co in 0..cout {
                let (grp, col) = (co / cog, co % cog);
                let oplane = &mut y[(b * cout + co) * oh * ow..][..oh * ow];
                for ci in grp * cig..(grp + 1) * cig {
                    let plane = &x[(b * cin + ci) * h * wd..][..h * wd];
                    let taps = &w[(ci * cog + col) * kh * kw..][..kh * kw];
                    for (iy, row) in plane.chunks_exact(wd).enumerate() {
                        for ky in 0..kh {
                            let Some(oy) = pos(iy, ky, sh, dh, pt, oh) else {
                                continue;
                            };
                            let orow = &mut oplane[oy * ow..][..ow];
                            for (&t, (ix, ox0)) in taps[ky * kw..][..kw].iter().zip(&spans) {
                                axpy(orow, *ox0, sw, &row[ix.clone()], t);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// orow[ox0 + k·s] += src[k]·t for every k (a product then a sum, as the plain loop); each
/// output element gets at most one term, so no element's sum order changes.
fn axpy(orow: &mut [f32], ox0: usize, s: usize, src: &[f32], t: f32) {
    if src.is_empty() {
        return;
    }
    if s == 1 {
        let dst = &mut orow[ox0..ox0 + src.len()];
        dst.iter_mut().zip(src).for_each(|(o, &v)| *o += v * t);
    } else {
        let dst = orow[ox0..].iter_mut().step_by(s);
        dst.zip(src).for_each(|(o, &v)| *o += v * t);
    }
}

/// For one tap at offset `off` (kx·dilation) along a row of `wd` inputs with stride `s`, crop
/// `lo` and `ow` outputs: the input indices that land inside the output, and the output index of
/// the first (outputs then follow every `s`).
fn row_span(
    off: usize,
    s: usize,
    lo: usize,
    wd: usize,
    ow: usize,
) -> (std::ops::Range<usize>, usize) {
    let first = lo.saturating_sub(off).div_ceil(s);
    let end = (ow + lo).saturating_sub(off).div_ceil(s).min(wd);
    let first = first.min(end);
    (first..end, (first * s + off).saturating_sub(lo))
}

/// Parse `conv_transpose`.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    if op != MIL_NAME {
        return None;
    }
    Some(take_conv_params(args).map(|o| {
        Op::ConvTranspose(ConvTranspose {
            strides: o.stride,
            pad: o.pad,
            dilations: o.dilation,
            groups: o.groups,
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::build::conv_transpose::*;
    use crate::ops::conv::tests::mil_roundtrip;
    use crate::ops::conv::ConvOptions;
    use crate::ops::gemm::tests::rand_vec;
    use crate::ops::io::HostArray;
    use crate::ops::layout::tests::run;

    /// Direct gather-form f64 loop: out[co, oy, ox] = Σ x[ci, iy, ix] · w[ci, co % cog, ky, kx] over
    /// iy·s + ky·d − pad = oy (same along W) within the group.
    fn naive(c: &ConvTranspose, x: &Buf, w: &Buf, out: [usize; 4]) -> Vec<f64> {
        let ([n, cin, h, wd], [_, cog, kh, kw], [_, cout, oh, ow]) = (
            x.shape[..].try_into().unwrap(),
            w.shape[..].try_into().unwrap(),
            out,
        );
        let cig = cin / c.groups;
        let mut y = vec![0.0; n * cout * oh * ow];
        for (o, v) in y.iter_mut().enumerate() {
            let (b, co, oy, ox) = (
                o / (cout * oh * ow),
                o / (oh * ow) % cout,
                o / ow % oh,
                o % ow,
            );
            for ci in (co / cog * cig)..(co / cog + 1) * cig {
                for (iy, ky, ix, kx) in (0..h).flat_map(|iy| {
                    (0..kh).flat_map(move |ky| {
                        (0..wd).flat_map(move |ix| (0..kw).map(move |kx| (iy, ky, ix, kx)))
                    })
                }) {
                    if iy * c.strides[0] + ky * c.dilations[0] == oy + c.pad[0]
                        && ix * c.strides[1] + kx * c.dilations[1] == ox + c.pad[2]
                    {
                        *v += x.data[((b * cin + ci) * h + iy) * wd + ix] as f64
                            * w.data[((ci * cog + co % cog) * kh + ky) * kw + kx] as f64;
                    }
                }
            }
        }
        y
    }

    #[test]
    fn kernel_matches_naive() {
        let cases = [
            (
                [1, 2, 3, 4],
                [2, 3, 3, 3],
                ConvTranspose {
                    strides: [1, 1],
                    pad: [0; 4],
                    dilations: [1, 1],
                    groups: 1,
                },
            ),
            (
                [2, 4, 5, 3],
                [4, 1, 2, 3],
                ConvTranspose {
                    strides: [2, 3],
                    pad: [1, 0, 0, 2],
                    dilations: [1, 1],
                    groups: 2,
                },
            ),
            (
                [1, 3, 4, 7],
                [3, 2, 3, 2],
                ConvTranspose {
                    strides: [2, 1],
                    pad: [1, 1, 1, 1],
                    dilations: [2, 3],
                    groups: 1,
                },
            ),
            (
                [1, 6, 1, 1],
                [6, 1, 1, 15],
                ConvTranspose {
                    strides: [1, 1],
                    pad: [0; 4],
                    dilations: [1, 1],
                    groups: 6,
                },
            ),
        ];
        for (i, (xs, ws, c)) in cases.into_iter().enumerate() {
            let x = Buf {
                shape: xs.to_vec(),
                data: rand_vec(xs.iter().product(), i as u64),
            };
            let w = Buf {
                shape: ws.to_vec(),
                data: rand_vec(ws.iter().product(), 50 + i as u64),
            };
            let y = run(&Op::ConvTranspose(c.clone()), &[&x, &w]).remove(0);
            let want = naive(&c, &x, &w, c.out_shape(&xs, &ws).unwrap());
            assert_eq!(y.data.len(), want.len());
            for (k, (&g, &r)) in y.data.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - r).abs() < 1e-4,
                    "case {i} element {k}: {g} vs {r}"
                );
            }
        }
    }

    /// The channel-lane kernel gives the plane kernel's bits (and matches the f64 oracle) on
    /// shapes with 8 to 40 output channels per group: strides, dilations, crops, groups, and
    /// widths with and without whole pixel blocks.
    #[test]
    fn lane_kernel_matches_plane_kernel_bit_for_bit() {
        let cases = [
            (
                [1, 8, 9, 10],
                [8, 16, 3, 3],
                [1, 1],
                [1, 1, 1, 1],
                [1, 1],
                1,
            ),
            (
                [1, 6, 9, 11],
                [6, 20, 3, 2],
                [2, 1],
                [1, 0, 0, 1],
                [1, 2],
                2,
            ),
            (
                [1, 5, 7, 13],
                [5, 40, 2, 3],
                [1, 2],
                [0, 1, 2, 0],
                [2, 1],
                1,
            ),
            ([3, 4, 5, 5], [4, 8, 5, 5], [1, 1], [2, 2, 2, 2], [1, 1], 1),
            // The CNN step's input gradient (6- and 4-pixel spans, single edge columns), at
            // batch 3, and odd widths and channel counts around it.
            (
                [3, 32, 14, 14],
                [32, 16, 3, 3],
                [1, 1],
                [1, 1, 1, 1],
                [1, 1],
                1,
            ),
            (
                [1, 5, 7, 17],
                [5, 17, 3, 3],
                [1, 1],
                [1, 1, 1, 1],
                [1, 1],
                1,
            ),
            ([3, 1, 3, 11], [1, 9, 3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
            (
                [1, 3, 5, 23],
                [3, 16, 3, 3],
                [1, 1],
                [0, 0, 0, 0],
                [1, 1],
                1,
            ),
            ([1, 2, 4, 15], [2, 8, 3, 3], [2, 2], [1, 0, 1, 0], [1, 1], 1),
        ];
        for (i, (xs, ws, strides, pad, dilations, groups)) in cases.into_iter().enumerate() {
            let c = ConvTranspose {
                strides,
                pad,
                dilations,
                groups,
            };
            let x = rand_vec(xs.iter().product(), 70 + i as u64);
            let w = rand_vec(ws.iter().product(), 80 + i as u64);
            let [n, cout, oh, ow] = c.out_shape(&xs, &ws).unwrap();
            let mut plane = vec![f32::NAN; n * cout * oh * ow];
            let (cig, cog) = (xs[1] / groups, ws[1]);
            c.planes(
                &x,
                &w,
                xs,
                [cout, cig, cog],
                [oh, ow, ws[2], ws[3]],
                &mut plane,
            );
            let geometry = lanes::Geometry {
                x: xs,
                out: [cout, oh, ow],
                kernel: [ws[2], ws[3]],
                strides,
                dilations,
                pad: [pad[0], pad[2]],
                groups,
            };
            assert!(lanes::suits(cog));
            let mut lane = vec![f32::NAN; plane.len()];
            lanes::run(&geometry, &x, &w, &mut lane);
            let bx = Buf {
                shape: xs.to_vec(),
                data: x,
            };
            let bw = Buf {
                shape: ws.to_vec(),
                data: w,
            };
            let want = naive(&c, &bx, &bw, [n, cout, oh, ow]);
            for (k, ((&a, &b), &r)) in lane.iter().zip(&plane).zip(&want).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "case {i} element {k}: {a} vs {b}");
                assert!(
                    (a as f64 - r).abs() < 1e-4,
                    "case {i} element {k}: {a} vs {r}"
                );
            }
        }
    }

    #[test]
    fn shapes_errors_and_mil() {
        let x = crate::input(&[1, 4, 5, 6]).unwrap();
        let w = rand_vec(4 * 3 * 3 * 3, 9);
        let opts = ConvOptions {
            stride: [2, 2],
            pad: [1, 1, 1, 1],
            ..ConvOptions::default()
        };
        let y = conv_transpose2d(
            &x,
            HostArray::f32(&[4, 3, 3, 3], &w),
            Some(HostArray::f32(&[3], &w[..3])),
            opts,
        )
        .unwrap();
        assert_eq!(
            (y.shape(), y.op().family().name()),
            (&[1usize, 3, 9, 11][..], "add")
        );
        let grouped = ConvOptions {
            groups: 2,
            ..ConvOptions::default()
        };
        assert_eq!(
            conv_transpose2d(&x, HostArray::f32(&[4, 3, 3, 3], &w), None, grouped)
                .unwrap()
                .shape(),
            [1, 6, 7, 8]
        );
        let bad = [
            conv_transpose2d(
                &x,
                HostArray::f32(&[3, 4, 3, 3], &w),
                None,
                ConvOptions::default(),
            ),
            conv_transpose2d(
                &x,
                HostArray::f32(&[4, 3, 3, 3], &w),
                None,
                ConvOptions {
                    groups: 3,
                    ..ConvOptions::default()
                },
            ),
            conv_transpose2d(
                &x,
                HostArray::f32(&[4, 3, 3, 3], &w),
                None,
                ConvOptions {
                    stride: [0, 1],
                    ..ConvOptions::default()
                },
            ),
            conv_transpose2d(
                &x,
                HostArray::f32(&[4, 3, 3, 3], &w),
                None,
                ConvOptions {
                    pad: [4, 3, 0, 0],
                    ..ConvOptions::default()
                },
            ),
            conv_transpose2d(
                &x,
                HostArray::f32(&[4, 3, 3, 3], &w),
                Some(HostArray::f32(&[4], &w[..4])),
                ConvOptions::default(),
            ),
            conv_transpose2d(
                &x,
                HostArray::f32(&[1, 1, 1, 16], &w[..16]),
                None,
                ConvOptions::default(),
            ),
            conv_transpose2d(
                &x,
                HostArray::f32(&[4, 27], &w),
                None,
                ConvOptions::default(),
            ),
        ];
        for (i, e) in bad.iter().enumerate() {
            assert!(e.is_err(), "case {i} should fail");
        }
        mil_roundtrip(
            Op::ConvTranspose(ConvTranspose {
                strides: [2, 1],
                pad: [1, 0, 2, 3],
                dilations: [1, 2],
                groups: 2,
            }),
            from_mil,
        );
        assert!(from_mil("conv", &mut MilArgs::new("m", "s", Default::default())).is_none());
    }
}
