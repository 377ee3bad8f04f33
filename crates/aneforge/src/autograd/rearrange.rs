//! Gradient rules for the rearrange ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::rearrange::{Rearrange, Shuffle};
use crate::ops::Op;

/// Gradient rules.
impl Differentiable for Rearrange {
    /// Vector-Jacobian product: the inverse data movement of G (reverse again, sum the tiles,
    /// reshape back, slice each stacked input, zero padding around a crop, the inverse shuffle).
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{pad_axis, reshape_to};
        let (x, g) = (&a.x[0], a.g0());
        let d = match self {
            Rearrange::Reverse { .. } => {
                Tensor::apply1(Op::Rearrange(self.clone()), vec![g.clone()])?
            }
            Rearrange::Flatten2d { .. } => reshape_to(g, x.shape())?,
            Rearrange::Tile { reps } => {
                let mut d = g.clone();
                for (ax, &r) in reps.iter().enumerate().filter(|(_, &r)| r > 1) {
                    let (mut begin, mut size) = (vec![0; d.rank()], d.shape().to_vec());
                    size[ax] = x.shape()[ax];
                    let mut acc = d.slice_by_size(&begin, &size)?;
                    for k in 1..r {
                        begin[ax] = k * size[ax];
                        acc = acc.add(&d.slice_by_size(&begin, &size)?)?;
                    }
                    d = acc;
                }
                d
            }
            Rearrange::Stack { axis } => {
                let mut out = Vec::with_capacity(a.x.len());
                let mut size = g.shape().to_vec();
                size[*axis] = 1;
                for (i, (src, need)) in a.x.iter().zip(a.needs).enumerate() {
                    let mut begin = vec![0; g.rank()];
                    begin[*axis] = i;
                    out.push(
                        need.then(|| reshape_to(&g.slice_by_size(&begin, &size)?, src.shape()))
                            .transpose()?,
                    );
                }
                return Ok(out);
            }
            Rearrange::Crop {
                top,
                bottom,
                left,
                right,
            } => {
                let r = x.rank();
                pad_axis(&pad_axis(g, r - 2, *top, *bottom)?, r - 1, *left, *right)?
            }
            Rearrange::Shuffle { kind, r } => {
                let inverse = match kind {
                    Shuffle::SpaceToDepth => Shuffle::DepthToSpace,
                    Shuffle::DepthToSpace => Shuffle::SpaceToDepth,
                    Shuffle::PixelShuffle => Shuffle::PixelUnshuffle,
                    Shuffle::PixelUnshuffle => Shuffle::PixelShuffle,
                };
                Tensor::apply1(
                    Op::Rearrange(Rearrange::Shuffle {
                        kind: inverse,
                        r: *r,
                    }),
                    vec![g.clone()],
                )?
            }
        };
        Ok(vec![Some(d)])
    }
}
