//! Gradient rules for the layout ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::build::layout::concat;
use crate::graph::Tensor;
use crate::ops::layout::Layout;
use crate::ops::Op;
use crate::shape::{self};

/// Gradient rules.
impl Differentiable for Layout {
    /// Vector-Jacobian product: the inverse data movement of G (reshape back, inverse
    /// permutation, slices of a concat, concat of split gradients, zero padding around a slice,
    /// block sums for nearest upsampling).
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{pad_axis, reshape_to};
        let (x, g) = (&a.x[0], a.g0());
        let d = match self {
            Layout::Reshape { .. } | Layout::Squeeze { .. } | Layout::ExpandDims { .. } => {
                reshape_to(g, x.shape())?
            }
            Layout::Transpose { perm } => {
                let mut inv = vec![0i64; perm.len()];
                perm.iter()
                    .enumerate()
                    .for_each(|(i, &p)| inv[p] = i as i64);
                g.transpose(&inv)?
            }
            Layout::Concat { axis } => {
                let mut begin = vec![0; g.rank()];
                let mut out = Vec::with_capacity(a.x.len());
                for (src, need) in a.x.iter().zip(a.needs) {
                    out.push(
                        need.then(|| g.slice_by_size(&begin, src.shape()))
                            .transpose()?,
                    );
                    begin[*axis] += src.shape()[*axis];
                }
                return Ok(out);
            }
            Layout::Split { axis, .. } => concat(a.g, *axis as i64)?,
            Layout::SliceBySize { begin, size } => {
                let mut d = g.clone();
                for (ax, (&b, &s)) in begin.iter().zip(size).enumerate() {
                    d = pad_axis(&d, ax, b, x.shape()[ax] - b - s)?;
                }
                d
            }
            Layout::Upsample { scale_h, scale_w } => {
                let s = x.shape();
                let r = s.len();
                let as4 = [
                    shape::numel(&s[..r - 3]),
                    s[r - 3],
                    s[r - 2] * scale_h,
                    s[r - 1] * scale_w,
                ];
                let k = [*scale_h, *scale_w];
                let pool = crate::ops::pool::Pool {
                    kind: crate::ops::pool::PoolKind::Avg {
                        exclude_padding: false,
                    },
                    kernel: k,
                    strides: k,
                    pad: [0; 4],
                };
                let summed = Tensor::apply1(Op::Pool(pool), vec![reshape_to(g, &as4)?])?
                    .mul_scalar((scale_h * scale_w) as f32)?;
                reshape_to(&summed, s)?
            }
        };
        Ok(vec![Some(d)])
    }
}
