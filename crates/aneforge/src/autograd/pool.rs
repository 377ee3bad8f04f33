//! Gradient rules for the pool ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::pool::{Pool, PoolKind};
use crate::ops::{Family, Op};

/// Gradient rules.
impl Differentiable for Pool {
    /// Vector-Jacobian product for any kernel, stride and padding. Average: G (divided by each
    /// window's element count, which excludes padding when the op does) scattered back over its
    /// window by a depthwise transposed convolution with a ones kernel. Max: G goes to every
    /// element equal to its window's max (ties each get it); stride = kernel without padding
    /// upsamples, otherwise each kernel tap k gathers x with a one-hot depthwise conv and
    /// scatters the masked G back with the matching transposed conv.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{fill_like, mask, pad_axis};
        use crate::ops::elementwise::Compare;
        let (x, y, g) = (&a.x[0], &a.y[0], a.g0());
        let (xs, [kh, kw]) = (x.shape(), self.kernel);
        let d = match self.kind {
            PoolKind::Avg { exclude_padding } => {
                let ones = self.taps(xs[1], None)?;
                let g = if exclude_padding && self.pad != [0; 4] {
                    g.div(&self.depthwise(&fill_like(x, 1.0)?, &ones, None)?)?
                } else {
                    g.div_scalar((kh * kw) as f32)?
                };
                self.depthwise(&g, &ones, Some(xs))?
            }
            PoolKind::Max if self.strides == self.kernel && self.pad == [0; 4] => {
                let (oh, ow) = (y.shape()[2], y.shape()[3]);
                let xc = super::conv::crop(x, &[0; 4], &[xs[0], xs[1], oh * kh, ow * kw])?;
                mask(
                    &xc.compare(Compare::Equal, &y.upsample(kh, kw)?)?,
                    &g.upsample(kh, kw)?,
                )?
            }
            PoolKind::Max => {
                let mut acc: Option<Tensor> = None;
                for k in 0..kh * kw {
                    let tap = self.taps(xs[1], Some(k))?;
                    let hit = self.depthwise(x, &tap, None)?.compare(Compare::Equal, y)?;
                    let back = self.depthwise(&mask(&hit, g)?, &tap, Some(xs))?;
                    let back = pad_axis(
                        &pad_axis(&back, 2, 0, xs[2] - back.shape()[2])?,
                        3,
                        0,
                        xs[3] - back.shape()[3],
                    )?;
                    acc = Some(match acc {
                        None => back,
                        Some(prev) => prev.add(&back)?,
                    });
                }
                return Ok(vec![acc]);
            }
        };
        let d = pad_axis(&d, 2, 0, xs[2] - d.shape()[2])?;
        Ok(vec![Some(pad_axis(&d, 3, 0, xs[3] - d.shape()[3])?)])
    }
}

/// Pooling gradients as depthwise convolutions.
trait PoolGrad {
    fn taps(&self, c: usize, tap: Option<usize>) -> Result<Tensor>;
    fn depthwise(&self, t: &Tensor, w: &Tensor, onto: Option<&[usize]>) -> Result<Tensor>;
}

impl PoolGrad for Pool {
    /// A depthwise [C, 1, kH, kW] kernel of ones (`tap` None) or one-hot at flat tap index `tap`.
    fn taps(&self, c: usize, tap: Option<usize>) -> Result<Tensor> {
        let n = self.kernel[0] * self.kernel[1];
        let w: Vec<f32> = (0..c * n)
            .map(|i| f32::from(u8::from(tap.is_none_or(|t| i % n == t))))
            .collect();
        crate::graph::build::io::constant(
            self.name(),
            crate::ops::io::HostArray::f32(&[c, 1, self.kernel[0], self.kernel[1]], &w),
        )
    }

    /// Depthwise conv with this pool's window geometry (gather per window), or with `onto` =
    /// the input shape, the transposed conv that scatters an output-shaped `t` back onto it.
    fn depthwise(&self, t: &Tensor, w: &Tensor, onto: Option<&[usize]>) -> Result<Tensor> {
        let (strides, dilations, groups) = (self.strides, [1, 1], w.shape()[0]);
        let op = match onto {
            Some(xs) => {
                let pad = super::conv::adjoint_pad(
                    [xs[2], xs[3]],
                    [t.shape()[2], t.shape()[3]],
                    self.kernel,
                    strides,
                    dilations,
                    self.pad,
                );
                Op::ConvTranspose(crate::ops::conv_transpose::ConvTranspose {
                    strides,
                    pad,
                    dilations,
                    groups,
                })
            }
            None => Op::Conv(crate::ops::conv::Conv {
                strides,
                pad: self.pad,
                dilations,
                groups,
            }),
        };
        Tensor::apply1(op, vec![t.clone(), w.clone()])
    }
}
