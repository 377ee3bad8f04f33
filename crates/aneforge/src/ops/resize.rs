//! Resizing the last two axes: to a target size by nearest neighbour (source index
//! `floor(i · in / out)`) or bilinear interpolation, or by fp32 scale factors (bilinear). fp16, rank 3+.

use super::io::{expect_fp16, expect_inputs};
use super::layout::index_param;
use super::table::mil_kinds;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape;

mil_kinds! {
    Resize =>
    /// The MIL op of each [`Resize`] variant.
    pub enum ResizeOp {
        Nearest = "resize_nearest_neighbor",
        Bilinear = "resize_bilinear",
        Upsample = "upsample_bilinear",
    }
}

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = ResizeOp::MIL_NAMES;

/// Resize ops; `h`, `w` are target sizes, `sh`, `sw` scale factors of the last two axes.
#[derive(Clone, Debug, PartialEq)]
pub enum Resize {
    /// MIL `resize_nearest_neighbor(target_size_height, target_size_width, x)`: output (i, j) reads
    /// input (floor(i · H / h), floor(j · W / w)).
    Nearest { h: usize, w: usize },
    /// MIL `resize_bilinear(sampling_mode, target_size_height, target_size_width, x)`: source
    /// coordinate per [`SamplingMode`], clamped to [0, in − 1], interpolated between its two neighbours.
    Bilinear {
        h: usize,
        w: usize,
        mode: SamplingMode,
    },
    /// MIL `upsample_bilinear(align_corners, scale_factor_height, scale_factor_width, x)` (fp32
    /// factors): output extent `floor(in · s)`; source as [`SamplingMode::UnalignCorners`]
    /// (half-pixel, with the ratio recomputed as in / out) or [`SamplingMode::StrictAlignCorners`].
    Upsample {
        sh: f32,
        sw: f32,
        align_corners: bool,
    },
}

/// MIL `resize_bilinear` sampling modes: the source coordinate of output index `i` along an axis
/// `n → out`, before clamping to [0, n − 1] (coremltools' op definition).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplingMode {
    /// `i · (n − 1) / (out − 1)`; 0 when out = 1.
    StrictAlignCorners,
    /// As strict, but `(n − 1) / 2` when out = 1.
    AlignCorners,
    /// `i · (n − n / out) / (out − 1)`; 0 when out = 1.
    Default,
    /// `(i + 0.5) · max(1, n − 1) / out`.
    OffsetCorners,
    /// Half-pixel: `(i + 0.5) · n / out − 0.5` (PyTorch/ONNX `align_corners=False`).
    UnalignCorners,
}

impl SamplingMode {
    /// Every mode with its MIL spelling.
    pub const ALL: [(SamplingMode, &'static str); 5] = [
        (SamplingMode::StrictAlignCorners, "STRICT_ALIGN_CORNERS"),
        (SamplingMode::AlignCorners, "ALIGN_CORNERS"),
        (SamplingMode::Default, "DEFAULT"),
        (SamplingMode::OffsetCorners, "OFFSET_CORNERS"),
        (SamplingMode::UnalignCorners, "UNALIGN_CORNERS"),
    ];
    /// The MIL spelling.
    pub fn mil_name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("DEFAULT", |(_, s)| s)
    }
    /// The mode spelled `s` in MIL; a Value error listing the five spellings otherwise.
    pub fn from_mil_name(s: &str) -> Result<SamplingMode> {
        Self::ALL.iter().find(|(_, n)| *n == s).map(|(m, _)| *m).ok_or_else(|| {
            Error::value(ResizeOp::Bilinear.mil_name(), format!("unknown sampling_mode '{s}' (expected one of STRICT_ALIGN_CORNERS, ALIGN_CORNERS, DEFAULT, OFFSET_CORNERS, UNALIGN_CORNERS)"))
        })
    }
    /// Unclamped source coordinate of output index `i` along an axis `n → out`.
    fn source(self, i: usize, n: usize, out: usize) -> f64 {
        let (i, n, o) = (i as f64, n as f64, out as f64);
        match self {
            SamplingMode::StrictAlignCorners | SamplingMode::AlignCorners if out > 1 => {
                i * (n - 1.0) / (o - 1.0)
            }
            SamplingMode::AlignCorners => (n - 1.0) / 2.0,
            SamplingMode::Default if out > 1 => i * (n - n / o) / (o - 1.0),
            SamplingMode::StrictAlignCorners | SamplingMode::Default => 0.0,
            SamplingMode::OffsetCorners => (i + 0.5) * (n - 1.0).max(1.0) / o,
            SamplingMode::UnalignCorners => (i + 0.5) * n / o - 0.5,
        }
    }
}

impl Resize {
    /// Output extents of the last two axes for input extents `(h, w)`.
    fn target(&self, h: usize, w: usize) -> (usize, usize) {
        match *self {
            Resize::Nearest { h, w } | Resize::Bilinear { h, w, .. } => (h, w),
            Resize::Upsample { sh, sw, .. } => (
                (h as f64 * sh as f64).floor() as usize,
                (w as f64 * sw as f64).floor() as usize,
            ),
        }
    }
    /// Per output index along one axis of extent `n → out`: (lower source, upper source, weight of upper).
    fn taps(&self, n: usize, out: usize) -> Vec<(usize, usize, f32)> {
        let mode = match *self {
            Resize::Nearest { .. } => None,
            Resize::Bilinear { mode, .. } => Some(mode),
            Resize::Upsample {
                align_corners: true,
                ..
            } => Some(SamplingMode::StrictAlignCorners),
            Resize::Upsample {
                align_corners: false,
                ..
            } => Some(SamplingMode::UnalignCorners),
        };
        (0..out)
            .map(|i| match mode {
                None => (i * n / out, 0, 0.0),
                Some(mode) => {
                    let src = mode.source(i, n, out).clamp(0.0, (n - 1) as f64);
                    let lo = src.floor() as usize;
                    (lo, (lo + 1).min(n - 1), (src - lo as f64) as f32)
                }
            })
            .collect()
    }
}

impl Family for Resize {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.name();
        expect_inputs(op, inputs, 1)?;
        expect_fp16(op, inputs)?;
        let mut s = inputs[0].shape.clone();
        let r = s.len();
        if let Resize::Upsample { sh, sw, .. } = *self {
            if !(sh.is_finite() && sw.is_finite() && sh > 0.0 && sw > 0.0) {
                return Err(Error::value(
                    op,
                    format!("scale factors must be finite and > 0, got ({sh}, {sw})"),
                ));
            }
        }
        let (h, w) = if r >= 3 {
            self.target(s[r - 2], s[r - 1])
        } else {
            (0, 0)
        };
        if r < 3 || h == 0 || w == 0 || s[r - 2] == 0 || s[r - 1] == 0 {
            return Err(Error::shape(
                op,
                format!(
                    "needs rank >= 3 and output sizes >= 1, got shape {s:?} with output ({h}, {w})"
                ),
            ));
        }
        (s[r - 2], s[r - 1]) = (h, w);
        shape::check(op, &s)?;
        Ok(vec![TensorType::fp16(s)])
    }
    fn mil(&self) -> MilOp {
        let x = MilOp::new(self.name(), &["x"]);
        let size = |x: MilOp, h: usize, w: usize| {
            x.param("target_size_height", Literal::Int32(h as i32))
                .param("target_size_width", Literal::Int32(w as i32))
        };
        match *self {
            Resize::Nearest { h, w } => size(x, h, w),
            Resize::Bilinear { h, w, mode } => size(
                x.param("sampling_mode", Literal::Str(mode.mil_name().into())),
                h,
                w,
            ),
            Resize::Upsample {
                sh,
                sw,
                align_corners,
            } => x
                .param("align_corners", Literal::Bool(align_corners))
                .param("scale_factor_height", Literal::Fp32(sh))
                .param("scale_factor_width", Literal::Fp32(sw)),
        }
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, y) = (ins[0], &mut out[0]);
        let r = x.shape.len();
        let (ih, iw, oh, ow) = (
            x.shape[r - 2],
            x.shape[r - 1],
            y.shape[r - 2],
            y.shape[r - 1],
        );
        let (rows, cols) = (self.taps(ih, oh), self.taps(iw, ow));
        for (plane, o) in x
            .data
            .chunks_exact(ih * iw)
            .zip(y.data.chunks_exact_mut(oh * ow))
        {
            for (orow, &(r0, r1, fr)) in o.chunks_exact_mut(ow).zip(&rows) {
                let (a, b) = (
                    &plane[r0 * iw..(r0 + 1) * iw],
                    &plane[r1 * iw..(r1 + 1) * iw],
                );
                for (v, &(c0, c1, fc)) in orow.iter_mut().zip(&cols) {
                    *v = match self {
                        Resize::Nearest { .. } => a[c0],
                        Resize::Bilinear { .. } | Resize::Upsample { .. } => {
                            let top = a[c0] + (a[c1] - a[c0]) * fc;
                            let bottom = b[c0] + (b[c1] - b[c0]) * fc;
                            top + (bottom - top) * fr
                        }
                    };
                }
            }
        }
        Ok(())
    }
}

/// Parse resize ops.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    let size = |args: &mut MilArgs| {
        Ok((
            index_param(args, "target_size_height")?,
            index_param(args, "target_size_width")?,
        ))
    };
    let parsed = match ResizeOp::from_mil_name(op)? {
        ResizeOp::Nearest => size(args).map(|(h, w)| Resize::Nearest { h, w }),
        ResizeOp::Bilinear => (|| {
            let (h, w) = size(args)?;
            let mode = args.string("sampling_mode")?;
            let mode = SamplingMode::from_mil_name(&mode).map_err(|e| args.error(e.to_string()))?;
            Ok(Resize::Bilinear { h, w, mode })
        })(),
        ResizeOp::Upsample => (|| {
            Ok(Resize::Upsample {
                sh: args.fp32("scale_factor_height")?,
                sw: args.fp32("scale_factor_width")?,
                align_corners: args.bool("align_corners")?,
            })
        })(),
    };
    Some(parsed.map(Op::Resize))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::input;
    use crate::ops::layout::tests::{buf, mil_args, ravel, round_trip, run, unravel};

    /// Naive f64 source coordinate along one axis `n → out` (coremltools' formulas, written out again).
    fn coord(i: usize, n: usize, out: usize, mode: SamplingMode) -> f64 {
        let (i, nf, o) = (i as f64, n as f64, out as f64);
        let s = match mode {
            SamplingMode::UnalignCorners => (i + 0.5) * (nf / o) - 0.5,
            SamplingMode::OffsetCorners => {
                0.5 * ((nf - 1.0).max(1.0) / o) + i * ((nf - 1.0).max(1.0) / o)
            }
            _ if out == 1 => {
                if mode == SamplingMode::AlignCorners {
                    (nf - 1.0) / 2.0
                } else {
                    0.0
                }
            }
            SamplingMode::Default => i * ((nf - nf / o) / (o - 1.0)),
            _ => i * ((nf - 1.0) / (o - 1.0)),
        };
        s.clamp(0.0, nf - 1.0)
    }

    #[test]
    fn sampling_grids_match_the_documented_examples() {
        // coremltools' resize_bilinear documentation: Xin = 2, grid points for Xout = 5 and 6.
        let documented: [(SamplingMode, [f64; 5], [f64; 6]); 4] = [
            (
                SamplingMode::UnalignCorners,
                [0., 0.1, 0.5, 0.9, 1.],
                [0., 0., 0.33, 0.67, 1., 1.],
            ),
            (
                SamplingMode::AlignCorners,
                [0., 0.25, 0.5, 0.75, 1.],
                [0., 0.2, 0.4, 0.6, 0.8, 1.],
            ),
            (
                SamplingMode::Default,
                [0., 0.4, 0.8, 1., 1.],
                [0., 0.33, 0.67, 1., 1., 1.],
            ),
            (
                SamplingMode::OffsetCorners,
                [0.1, 0.3, 0.5, 0.7, 0.9],
                [0.08, 0.25, 0.42, 0.58, 0.75, 0.92],
            ),
        ];
        for (mode, five, six) in documented {
            for (out, want) in [(5, &five[..]), (6, &six[..])] {
                let op = Resize::Bilinear { h: 1, w: out, mode };
                for (i, ((lo, hi, f), w)) in op.taps(2, out).into_iter().zip(want).enumerate() {
                    let got = lo as f64 + f as f64 * (hi - lo) as f64;
                    assert!(
                        (got - w).abs() < 0.006,
                        "{mode:?} out {out} point {i}: {got} vs documented {w}"
                    );
                }
            }
        }
    }

    /// Check a bilinear op's output on `x` [2, 3, 5, 7] against naive f64 interpolation.
    fn check_bilinear(op: Resize, x: &Buf) {
        let mode = match op {
            Resize::Bilinear { mode, .. } => mode,
            Resize::Upsample {
                align_corners: true,
                ..
            } => SamplingMode::StrictAlignCorners,
            _ => SamplingMode::UnalignCorners,
        };
        let y = run(&Op::Resize(op.clone()), &[x]).remove(0);
        let (h, w) = (y.shape[2], y.shape[3]);
        for (o, &v) in y.data.iter().enumerate() {
            let [n, c, i, j] = <[usize; 4]>::try_from(unravel(o, &y.shape)).unwrap();
            let (si, sj) = (coord(i, 5, h, mode), coord(j, 7, w, mode));
            let mut want = 0.0;
            for (ii, wi) in [
                (si.floor(), 1.0 - si.fract()),
                ((si.floor() + 1.0).min(4.0), si.fract()),
            ] {
                for (jj, wj) in [
                    (sj.floor(), 1.0 - sj.fract()),
                    ((sj.floor() + 1.0).min(6.0), sj.fract()),
                ] {
                    want +=
                        wi * wj * x.data[ravel(&[n, c, ii as usize, jj as usize], &x.shape)] as f64;
                }
            }
            assert!(
                (v as f64 - want).abs() < 1e-5,
                "{op:?} element {o}: {v} vs {want}"
            );
        }
    }

    #[test]
    fn kernels_match_naive() {
        let x = buf(&[2, 3, 5, 7], 1);
        for (h, w) in [(5, 7), (11, 3), (1, 1), (2, 15)] {
            let y = run(&Op::Resize(Resize::Nearest { h, w }), &[&x]).remove(0);
            for (o, &v) in y.data.iter().enumerate() {
                let [n, c, i, j] = <[usize; 4]>::try_from(unravel(o, &y.shape)).unwrap();
                assert_eq!(
                    v,
                    x.data[ravel(&[n, c, i * 5 / h, j * 7 / w], &x.shape)],
                    "nearest ({h}, {w}) element {o}"
                );
            }
            for (mode, _) in SamplingMode::ALL {
                check_bilinear(Resize::Bilinear { h, w, mode }, &x);
            }
        }
        for (sh, sw) in [(2.0, 2.0), (1.5, 3.0), (0.5, 1.0), (2.5, 0.75)] {
            for align_corners in [false, true] {
                check_bilinear(
                    Resize::Upsample {
                        sh,
                        sw,
                        align_corners,
                    },
                    &x,
                );
            }
        }
        let same = run(
            &Op::Resize(Resize::Bilinear {
                h: 5,
                w: 7,
                mode: SamplingMode::UnalignCorners,
            }),
            &[&x],
        )
        .remove(0);
        assert_eq!(same, x, "resizing to the input size is the identity");
    }

    #[test]
    fn builders_errors_and_mil() {
        let x = input(&[1, 2, 3, 4]).unwrap();
        assert_eq!(
            x.resize_nearest_neighbor(7, 1).unwrap().shape(),
            [1, 2, 7, 1]
        );
        assert_eq!(x.resize_bilinear(2, 9, true).unwrap().shape(), [1, 2, 2, 9]);
        assert_eq!(
            x.upsample_bilinear(2.0, 1.5, false).unwrap().shape(),
            [1, 2, 6, 6]
        );
        let b = x
            .compare_scalar(crate::ops::elementwise::Compare::Less, 0.0)
            .unwrap();
        let errs = [
            x.resize_nearest_neighbor(0, 2),
            x.resize_bilinear(2, 0, false),
            input(&[3, 4]).unwrap().resize_bilinear(2, 2, false),
            x.resize_nearest_neighbor(1 << 20, 1 << 20),
            b.resize_nearest_neighbor(2, 2),
            x.upsample_bilinear(0.0, 2.0, false),
            x.upsample_bilinear(2.0, f32::NAN, true),
            x.upsample_bilinear(0.25, 1.0, false),
            input(&[3, 4]).unwrap().upsample_bilinear(2.0, 2.0, false),
        ];
        for (i, e) in errs.iter().enumerate() {
            assert!(e.is_err(), "case {i} should fail");
        }
        let ops = [
            Resize::Nearest { h: 3, w: 8 },
            Resize::Bilinear {
                h: 1,
                w: 2,
                mode: SamplingMode::UnalignCorners,
            },
            Resize::Bilinear {
                h: 4,
                w: 5,
                mode: SamplingMode::AlignCorners,
            },
            Resize::Bilinear {
                h: 3,
                w: 3,
                mode: SamplingMode::Default,
            },
            Resize::Bilinear {
                h: 2,
                w: 6,
                mode: SamplingMode::OffsetCorners,
            },
            Resize::Bilinear {
                h: 1,
                w: 1,
                mode: SamplingMode::StrictAlignCorners,
            },
            Resize::Upsample {
                sh: 2.0,
                sw: 0.3,
                align_corners: false,
            },
        ];
        for r in ops {
            round_trip(&Op::Resize(r), from_mil);
        }
        let bad = vec![
            ("sampling_mode", Literal::Str("HALF_PIXEL".into())),
            ("target_size_height", Literal::Int32(2)),
            ("target_size_width", Literal::Int32(2)),
        ];
        assert!(from_mil("resize_bilinear", &mut mil_args(bad))
            .unwrap()
            .is_err());
        let int_scale = vec![
            ("align_corners", Literal::Bool(false)),
            ("scale_factor_height", Literal::Int32(2)),
            ("scale_factor_width", Literal::Fp32(2.0)),
        ];
        assert!(from_mil("upsample_bilinear", &mut mil_args(int_scale))
            .unwrap()
            .is_err());
        assert!(from_mil("crop", &mut mil_args(vec![])).is_none());
    }
}
