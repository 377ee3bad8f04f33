//! Bilinear affine warp of NCHW images: MIL `affine` (the texture-engine op, A14 and newer) in
//! the one mode set coremltools defines for it: bilinear sampling, constant zero padding and
//! coordinates normalised to [−1, 1].

use super::io::{expect_fp16, expect_inputs};
use super::layout::index_param;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape;

/// The MIL op name of [`Affine`].
pub const MIL_NAME: &str = "affine";

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &[MIL_NAME];

/// The only `sampling_mode`, `padding_mode` and `coordinates_mode` MIL's affine defines.
const MODES: [(&str, &str); 3] = [
    ("sampling_mode", "bilinear"),
    ("padding_mode", "constant"),
    ("coordinates_mode", "normalized_minus_one_to_one"),
];

/// MIL `affine(x, transform_matrix, output_height, output_width, sampling_mode = "bilinear",
/// padding_mode = "constant", padding_value = 0, coordinates_mode = "normalized_minus_one_to_one",
/// align_corners)`. x is `[B, C, H, W]`, transform_matrix `[B or 1, 6]` = `[a0, a1, a2, b0, b1, b2]`;
/// output `[B, C, h, w]`. Output pixel (i, j) has normalised coordinates (u, v) (u along the width;
/// `2j/(w−1) − 1` with align_corners, else `(2j+1)/w − 1`; 0 for an extent of 1) and samples the
/// input at `x' = a0·u + a1·v + a2`, `y' = b0·u + b1·v + b2`, mapped back to pixels the same way;
/// taps outside the image read 0 (the PyTorch `affine_grid` + `grid_sample` convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Affine {
    pub h: usize,
    pub w: usize,
    pub align_corners: bool,
}

impl Affine {
    /// Normalised coordinate of output index `i` of `n`.
    fn norm(&self, i: usize, n: usize) -> f64 {
        match (self.align_corners, n) {
            (_, 1) => 0.0,
            (true, _) => 2.0 * i as f64 / (n - 1) as f64 - 1.0,
            (false, _) => (2 * i + 1) as f64 / n as f64 - 1.0,
        }
    }
    /// Pixel coordinate of normalised coordinate `t` on an axis of `n` input pixels.
    fn pixel(&self, t: f64, n: usize) -> f64 {
        if self.align_corners {
            (t + 1.0) / 2.0 * (n - 1) as f64
        } else {
            ((t + 1.0) * n as f64 - 1.0) / 2.0
        }
    }
}

/// Bilinear sample of `plane` ([h, w]) at pixel (py, px); taps outside read 0.
fn sample(plane: &[f32], h: usize, w: usize, py: f64, px: f64) -> f32 {
    let (y0, x0) = (py.floor(), px.floor());
    let (fy, fx) = (py - y0, px - x0);
    let tap = |y: f64, x: f64| -> f64 {
        if y < 0.0 || x < 0.0 || y >= h as f64 || x >= w as f64 {
            0.0
        } else {
            plane[y as usize * w + x as usize] as f64
        }
    };
    let top = tap(y0, x0) * (1.0 - fx) + tap(y0, x0 + 1.0) * fx;
    let bottom = tap(y0 + 1.0, x0) * (1.0 - fx) + tap(y0 + 1.0, x0 + 1.0) * fx;
    (top * (1.0 - fy) + bottom * fy) as f32
}

impl Family for Affine {
    fn name(&self) -> &'static str {
        MIL_NAME
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(MIL_NAME, inputs, 2)?;
        expect_fp16(MIL_NAME, inputs)?;
        let (x, t) = (&inputs[0].shape, &inputs[1].shape);
        let &[b, c, _, _] = x.as_slice() else {
            return Err(Error::shape(
                MIL_NAME,
                format!("x must be [B, C, H, W], got {x:?}"),
            ));
        };
        if !(t.len() == 2 && t[1] == 6 && (t[0] == b || t[0] == 1)) {
            return Err(Error::shape(
                MIL_NAME,
                format!("transform_matrix must be [B, 6] or [1, 6] for x {x:?}, got {t:?}"),
            ));
        }
        let out = vec![b, c, self.h, self.w];
        shape::check(MIL_NAME, &out)?;
        Ok(vec![TensorType::fp16(out)])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(MIL_NAME, &["x", "transform_matrix"])
            .param("align_corners", Literal::Bool(self.align_corners))
            .param("coordinates_mode", Literal::Str(MODES[2].1.into()))
            .param("output_height", Literal::Int32(self.h as i32))
            .param("output_width", Literal::Int32(self.w as i32))
            .param("padding_mode", Literal::Str(MODES[1].1.into()))
            .param("padding_value", Literal::Fp16(0.0))
            .param("sampling_mode", Literal::Str(MODES[0].1.into()))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, t) = (ins[0], &ins[1].data);
        let [_, c, ih, iw] = <[usize; 4]>::try_from(x.shape.as_slice()).unwrap_or_default();
        let (oh, ow) = (self.h, self.w);
        let per_batch = ins[1].shape[0] > 1;
        for (p, (yp, xp)) in out[0]
            .data
            .chunks_mut(oh * ow)
            .zip(x.data.chunks(ih * iw))
            .enumerate()
        {
            let m = &t[if per_batch { (p / c) * 6 } else { 0 }..][..6];
            let m: Vec<f64> = m.iter().map(|&v| v as f64).collect();
            for i in 0..oh {
                let v = self.norm(i, oh);
                for j in 0..ow {
                    let u = self.norm(j, ow);
                    let (sx, sy) = (m[0] * u + m[1] * v + m[2], m[3] * u + m[4] * v + m[5]);
                    yp[i * ow + j] = sample(xp, ih, iw, self.pixel(sy, ih), self.pixel(sx, iw));
                }
            }
        }
        Ok(())
    }
}

/// Parse `affine`; modes other than MIL's single defined set are an error naming the mode.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    if op != MIL_NAME {
        return None;
    }
    Some((|| {
        for (name, only) in MODES {
            let got = args.string(name)?;
            if !got.eq_ignore_ascii_case(only) {
                return Err(args.error(format!(
                    "affine {name} '{got}' is not supported (only '{only}')"
                )));
            }
        }
        let pad = match args.take("padding_value")? {
            Literal::Fp16(v) | Literal::Fp32(v) => v,
            other => {
                return Err(args.error(format!(
                    "affine padding_value must be a float, got {}",
                    other.mil_value()
                )))
            }
        };
        if pad != 0.0 {
            return Err(args.error(format!(
                "affine padding_value {pad} is not supported (only 0)"
            )));
        }
        let (h, w) = (
            index_param(args, "output_height")?,
            index_param(args, "output_width")?,
        );
        Ok(Op::Affine(Affine {
            h,
            w,
            align_corners: args.bool("align_corners")?,
        }))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::build::affine::*;
    use crate::input;
    use crate::ops::layout::tests::{buf, mil_args, round_trip, run};

    /// Independent f64 grid sample: bilinear weights over the four neighbours, zero outside.
    fn naive(x: &Buf, t: &[f64; 6], h: usize, w: usize, align: bool) -> Vec<f64> {
        let [b, c, ih, iw] = <[usize; 4]>::try_from(x.shape.as_slice()).unwrap();
        let lin = |i: usize, n: usize| {
            if n == 1 {
                0.0
            } else if align {
                -1.0 + 2.0 * i as f64 / (n - 1) as f64
            } else {
                -1.0 + (2 * i + 1) as f64 / n as f64
            }
        };
        let back = |s: f64, n: usize| {
            if align {
                (s + 1.0) * (n - 1) as f64 / 2.0
            } else {
                ((s + 1.0) * n as f64 - 1.0) / 2.0
            }
        };
        let mut out = Vec::new();
        for p in 0..b * c {
            for i in 0..h {
                for j in 0..w {
                    let (u, v) = (lin(j, w), lin(i, h));
                    let (px, py) = (
                        back(t[0] * u + t[1] * v + t[2], iw),
                        back(t[3] * u + t[4] * v + t[5], ih),
                    );
                    let mut acc = 0.0;
                    for yy in [py.floor() as i64, py.floor() as i64 + 1] {
                        for xx in [px.floor() as i64, px.floor() as i64 + 1] {
                            let wgt =
                                (1.0 - (py - yy as f64).abs()) * (1.0 - (px - xx as f64).abs());
                            if (0..ih as i64).contains(&yy) && (0..iw as i64).contains(&xx) {
                                acc += wgt
                                    * x.data[p * ih * iw + yy as usize * iw + xx as usize] as f64;
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
        out
    }

    #[test]
    fn kernel_matches_naive_grid_sample() {
        let x = buf(&[1, 2, 5, 7], 1);
        let transforms = [
            [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            [0.8, -0.3, 0.1, 0.25, 0.9, -0.2],
            [1.5, 0.0, 0.5, 0.0, -1.25, 0.0],
        ];
        for t in transforms {
            for (h, w) in [(5, 7), (3, 9), (1, 1)] {
                for align in [false, true] {
                    let tb = Buf {
                        shape: vec![1, 6],
                        data: t.iter().map(|&v| v as f32).collect(),
                    };
                    let y = run(
                        &Op::Affine(Affine {
                            h,
                            w,
                            align_corners: align,
                        }),
                        &[&x, &tb],
                    )
                    .remove(0);
                    let want = naive(&x, &t, h, w, align);
                    for (k, (g, w)) in y.data.iter().zip(&want).enumerate() {
                        assert!(
                            (*g as f64 - w).abs() < 1e-5,
                            "{t:?} ({h}, {w}) align {align} element {k}: {g} vs {w}"
                        );
                    }
                }
            }
        }
        let identity = Buf {
            shape: vec![1, 6],
            data: vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        };
        for align in [false, true] {
            let y = run(
                &Op::Affine(Affine {
                    h: 5,
                    w: 7,
                    align_corners: align,
                }),
                &[&x, &identity],
            )
            .remove(0);
            assert!(
                y.data
                    .iter()
                    .zip(&x.data)
                    .all(|(a, b)| (a - b).abs() < 1e-5),
                "identity warp, align {align}"
            );
        }
    }

    #[test]
    fn per_batch_transforms() {
        let x = buf(&[2, 1, 4, 4], 2);
        let t = Buf {
            shape: vec![2, 6],
            data: vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        };
        let y = run(
            &Op::Affine(Affine {
                h: 4,
                w: 4,
                align_corners: true,
            }),
            &[&x, &t],
        )
        .remove(0);
        for r in 0..4 {
            for col in 0..4 {
                assert!(
                    (y.data[r * 4 + col] - x.data[r * 4 + col]).abs() < 1e-5,
                    "batch 0: identity"
                );
                assert!(
                    (y.data[16 + r * 4 + col] - x.data[16 + r * 4 + 3 - col]).abs() < 1e-5,
                    "batch 1: mirrored"
                );
            }
        }
    }

    #[test]
    fn builder_errors_and_mil() {
        let x = input(&[2, 3, 5, 7]).unwrap();
        assert_eq!(
            affine(&x, &input(&[1, 6]).unwrap(), 4, 9, false)
                .unwrap()
                .shape(),
            [2, 3, 4, 9]
        );
        assert!(
            affine(&x, &input(&[3, 6]).unwrap(), 4, 9, false).is_err(),
            "batch mismatch"
        );
        assert!(
            affine(&x, &input(&[2, 5]).unwrap(), 4, 9, false).is_err(),
            "6 coefficients"
        );
        assert!(
            affine(
                &input(&[3, 5, 7]).unwrap(),
                &input(&[1, 6]).unwrap(),
                4,
                9,
                false
            )
            .is_err(),
            "rank 3"
        );
        assert!(
            affine(&x, &input(&[1, 6]).unwrap(), 0, 9, false).is_err(),
            "empty output"
        );
        round_trip(
            &Op::Affine(Affine {
                h: 4,
                w: 9,
                align_corners: true,
            }),
            from_mil,
        );
        round_trip(
            &Op::Affine(Affine {
                h: 1,
                w: 2,
                align_corners: false,
            }),
            from_mil,
        );
        let mut params: Vec<(&str, Literal)> = Affine {
            h: 2,
            w: 2,
            align_corners: false,
        }
        .mil()
        .params;
        params
            .iter_mut()
            .find(|p| p.0 == "sampling_mode")
            .unwrap()
            .1 = Literal::Str("nearest".into());
        let e = from_mil("affine", &mut mil_args(params))
            .unwrap()
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("sampling_mode 'nearest' is not supported"),
            "{e}"
        );
        let mut params: Vec<(&str, Literal)> = Affine {
            h: 2,
            w: 2,
            align_corners: false,
        }
        .mil()
        .params;
        params
            .iter_mut()
            .find(|p| p.0 == "padding_value")
            .unwrap()
            .1 = Literal::Fp16(1.0);
        assert!(from_mil("affine", &mut mil_args(params)).unwrap().is_err());
        assert!(from_mil("resample", &mut mil_args(vec![])).is_none());
    }
}
