//! Max and average pooling over the last two axes of NCHW tensors.

use super::conv::{ints, take_custom_pad, take_sizes, tap, window_output, window_row};
use super::io::{expect_fp16, expect_inputs};
use super::kernel::for_chunks;
use super::table::mil_kinds;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};

mil_kinds! {
    PoolKind =>
    /// The MIL op of each [`PoolKind`].
    pub enum PoolOp {
        Max = "max_pool",
        Avg = "avg_pool",
    }
}

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = PoolOp::MIL_NAMES;

/// Which pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// Average; `exclude_padding` = MIL `exclude_padding_from_average`.
    Avg {
        exclude_padding: bool,
    },
}

/// MIL `max_pool` / `avg_pool` with `pad_type = "custom"`, `ceil_mode = false`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub kind: PoolKind,
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    /// Padding (top, bottom, left, right).
    pub pad: [usize; 4],
}

impl Pool {
    /// Output [H', W'] for input shape `xs`, or a shape error naming the op and the shape.
    fn output(&self, xs: &[usize]) -> Result<[usize; 2]> {
        let &[_, _, h, w] = xs else {
            return Err(Error::shape(
                self.name(),
                format!("x must be rank 4 [N, C, H, W], got {xs:?}"),
            ));
        };
        let out = window_output(
            self.name(),
            [h, w],
            self.kernel,
            self.strides,
            [1, 1],
            self.pad,
        )?;
        let [kh, kw] = self.kernel;
        let [pt, pb, pl, pr] = self.pad;
        if pt.max(pb) >= kh || pl.max(pr) >= kw {
            return Err(Error::shape(
                self.name(),
                format!(
                    "pad {:?} must be smaller than the kernel {:?} (x {xs:?})",
                    self.pad, self.kernel
                ),
            ));
        }
        Ok(out)
    }

    /// Max-pool one [H, W] plane into `out` [H', W'], one output row at a time over the taps in
    /// (ky, kx) order: the same max chain per element as [`Pool::plane`], since a tap in the
    /// padding reads −inf and max(a, −inf) = a.
    fn max_plane(&self, x: &[f32], [h, w]: [usize; 2], out: &mut [f32], ow: usize) {
        let ([kh, kw], [sh, sw], [pt, _, pl, _]) = (self.kernel, self.strides, self.pad);
        let mut row = vec![0f32; ow];
        for (oy, acc) in out.chunks_mut(ow).enumerate() {
            acc.fill(f32::NEG_INFINITY);
            for iy in (0..kh).filter_map(|ky| tap(oy, ky, sh, 1, pt, h)) {
                for kx in 0..kw {
                    window_row(
                        &x[iy * w..(iy + 1) * w],
                        [kx, sw, pl],
                        f32::NEG_INFINITY,
                        &mut row,
                    );
                    acc.iter_mut().zip(&row).for_each(|(a, &e)| *a = a.max(e));
                }
            }
        }
    }

    /// Pool one [H, W] plane into `out` [H', W'].
    fn plane(&self, x: &[f32], [h, w]: [usize; 2], out: &mut [f32], ow: usize) {
        if self.kind == PoolKind::Max && ow > 0 {
            return self.max_plane(x, [h, w], out, ow);
        }
        let ([kh, kw], [sh, sw], [pt, _, pl, _]) = (self.kernel, self.strides, self.pad);
        for (o, v) in out.iter_mut().enumerate() {
            let (oy, ox) = (o / ow, o % ow);
            let (mut max, mut sum, mut count) = (f32::NEG_INFINITY, 0.0f32, 0usize);
            for iy in (0..kh).filter_map(|ky| tap(oy, ky, sh, 1, pt, h)) {
                for ix in (0..kw).filter_map(|kx| tap(ox, kx, sw, 1, pl, w)) {
                    let e = x[iy * w + ix];
                    max = max.max(e);
                    sum += e;
                    count += 1;
                }
            }
            *v = match self.kind {
                PoolKind::Max => max,
                PoolKind::Avg {
                    exclude_padding: true,
                } => sum / count as f32,
                PoolKind::Avg {
                    exclude_padding: false,
                } => sum / (kh * kw) as f32,
            };
        }
    }
}

impl Family for Pool {
    fn name(&self) -> &'static str {
        self.kind.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 1)?;
        expect_fp16(self.name(), inputs)?;
        let xs = &inputs[0].shape;
        let [oh, ow] = self.output(xs)?;
        Ok(vec![TensorType::fp16(vec![xs[0], xs[1], oh, ow])])
    }
    fn mil(&self) -> MilOp {
        let m = MilOp::new(self.name(), &["x"]).param("ceil_mode", Literal::Bool(false));
        let m = match self.kind {
            PoolKind::Max => m,
            PoolKind::Avg { exclude_padding } => m.param(
                "exclude_padding_from_average",
                Literal::Bool(exclude_padding),
            ),
        };
        m.param("kernel_sizes", ints(&self.kernel))
            .param("pad", ints(&self.pad))
            .param("pad_type", Literal::Str("custom".into()))
            .param("strides", ints(&self.strides))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let x = ins[0];
        let [oh, ow] = self.output(&x.shape)?;
        let hw = [x.shape[2], x.shape[3]];
        for_chunks(
            &mut out[0].data,
            oh * ow,
            &x.data,
            hw[0] * hw[1],
            |o, xp| self.plane(xp, hw, o, ow),
        );
        Ok(())
    }
}

/// Parse `max_pool` / `avg_pool`.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    let pool = PoolOp::from_mil_name(op)?;
    Some((|| {
        if args.bool("ceil_mode")? {
            return Err(args.error("ceil_mode = true is not supported"));
        }
        take_custom_pad(args)?;
        let kind = match pool {
            PoolOp::Max => PoolKind::Max,
            PoolOp::Avg => PoolKind::Avg {
                exclude_padding: args.bool("exclude_padding_from_average")?,
            },
        };
        Ok(Op::Pool(Pool {
            kind,
            kernel: take_sizes(args, "kernel_sizes")?,
            strides: take_sizes(args, "strides")?,
            pad: take_sizes(args, "pad")?,
        }))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ops::conv::tests::mil_roundtrip;
    use crate::ops::gemm::tests::{assert_close, rand_vec};

    fn pool(kind: PoolKind, kernel: [usize; 2], strides: [usize; 2], pad: [usize; 4]) -> Pool {
        Pool {
            kind,
            kernel,
            strides,
            pad,
        }
    }

    /// Direct-loop pooling in f64.
    fn naive(p: &Pool, [n, c, h, w]: [usize; 4], x: &[f32]) -> Vec<f64> {
        let ([kh, kw], [sh, sw], [pt, pb, pl, pr]) = (p.kernel, p.strides, p.pad);
        let (oh, ow) = ((h + pt + pb - kh) / sh + 1, (w + pl + pr - kw) / sw + 1);
        let mut out = Vec::new();
        for plane in 0..n * c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut vals = Vec::new();
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let (iy, ix) = (
                                (oy * sh + ky) as isize - pt as isize,
                                (ox * sw + kx) as isize - pl as isize,
                            );
                            if iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize {
                                vals.push(x[(plane * h + iy as usize) * w + ix as usize] as f64);
                            }
                        }
                    }
                    out.push(match p.kind {
                        PoolKind::Max => vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                        PoolKind::Avg {
                            exclude_padding: true,
                        } => vals.iter().sum::<f64>() / vals.len() as f64,
                        PoolKind::Avg {
                            exclude_padding: false,
                        } => vals.iter().sum::<f64>() / (kh * kw) as f64,
                    });
                }
            }
        }
        out
    }

    #[test]
    fn kernel_matches_naive_on_awkward_shapes() {
        let kinds = [
            PoolKind::Max,
            PoolKind::Avg {
                exclude_padding: true,
            },
            PoolKind::Avg {
                exclude_padding: false,
            },
        ];
        let cases = [
            ([2, 3, 7, 5], [3, 2], [2, 1], [1, 0, 0, 1]),
            ([1, 5, 7, 7], [3, 3], [2, 2], [1, 1, 1, 1]),
            ([2, 1, 1, 7], [1, 3], [1, 2], [0, 0, 2, 1]),
            ([1, 3, 6, 9], [6, 9], [1, 1], [0; 4]),
            ([2, 8, 64, 64], [2, 2], [2, 2], [0, 1, 1, 0]),
        ];
        for kind in kinds {
            for (xs, k, s, pad) in cases {
                let p = pool(kind, k, s, pad);
                let x = Buf {
                    shape: xs.to_vec(),
                    data: rand_vec(xs.iter().product(), 31),
                };
                let shape = p
                    .infer(&[TensorType::fp16(xs.to_vec())])
                    .unwrap()
                    .remove(0)
                    .shape;
                let mut out = [Buf::zeros(&shape)];
                p.eval(&[&x], &mut out).unwrap();
                assert_close(&out[0].data, &naive(&p, xs, &x.data), 1e-6);
            }
        }
    }

    #[test]
    fn infer_rejects_bad_shapes_without_panicking() {
        let t = |s: &[usize]| vec![TensorType::fp16(s.to_vec())];
        let bad = |p: Pool, xs: &[usize], needle: &str| {
            let e = p.infer(&t(xs)).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        };
        bad(
            pool(PoolKind::Max, [2, 2], [1, 1], [0; 4]),
            &[3, 8, 8],
            "rank 4",
        );
        bad(
            pool(PoolKind::Max, [0, 2], [1, 1], [0; 4]),
            &[1, 3, 8, 8],
            ">= 1",
        );
        bad(
            pool(PoolKind::Max, [2, 2], [1, 0], [0; 4]),
            &[1, 3, 8, 8],
            ">= 1",
        );
        bad(
            pool(PoolKind::Max, [5, 2], [1, 1], [1, 1, 0, 0]),
            &[1, 3, 2, 8],
            "spans 5 along H",
        );
        bad(
            pool(
                PoolKind::Avg {
                    exclude_padding: true,
                },
                [2, 2],
                [1, 1],
                [0, 0, 2, 0],
            ),
            &[1, 3, 8, 8],
            "smaller than the kernel",
        );
        assert!(pool(PoolKind::Max, [2, 2], [1, 1], [0; 4])
            .infer(&[])
            .is_err());
    }

    #[test]
    fn builders_and_mil_round_trip() {
        let x = crate::input(&[1, 2, 9, 9]).unwrap();
        assert_eq!(
            x.max_pool([3, 3], [2, 2], [1, 1, 1, 1]).unwrap().shape(),
            [1, 2, 5, 5]
        );
        let a = x.avg_pool([2, 2], [2, 2], [0; 4], true).unwrap();
        assert_eq!(a.shape(), [1, 2, 4, 4]);
        assert_eq!(a.op().family().name(), "avg_pool");
        assert_eq!(
            *a.op(),
            Op::Pool(pool(
                PoolKind::Avg {
                    exclude_padding: false
                },
                [2, 2],
                [2, 2],
                [0; 4]
            ))
        );
        assert!(x.max_pool([10, 1], [1, 1], [0; 4]).is_err());
        for kind in [
            PoolKind::Max,
            PoolKind::Avg {
                exclude_padding: true,
            },
            PoolKind::Avg {
                exclude_padding: false,
            },
        ] {
            mil_roundtrip(Op::Pool(pool(kind, [3, 2], [2, 1], [1, 0, 0, 1])), from_mil);
        }
        let params = [("ceil_mode".to_string(), Literal::Bool(true))]
            .into_iter()
            .collect();
        let mut args = MilArgs::new("model.mil", "p", params);
        assert!(from_mil("max_pool", &mut args)
            .unwrap()
            .unwrap_err()
            .to_string()
            .contains("ceil_mode"));
    }
}
