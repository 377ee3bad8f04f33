//! Gradient rules for the conv ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::conv::{Conv, MAX_KERNEL_WIDTH};
use crate::ops::Op;

/// Gradient rules.
impl Differentiable for Conv {
    /// Vector-Jacobian product for x, weight and bias, any stride, padding, dilation and groups:
    /// dx is the transposed convolution of G with the same weight (zero rows/columns the window
    /// never read are appended); dweight correlates the padded x with G per group, N acting as
    /// the channel axis, in chunks of at most 15 output columns (the kernel-width limit); dbias sums G.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{pad_axis, reshape_to};
        use crate::ops::conv_transpose::ConvTranspose;
        let (x, w, g) = (&a.x[0], &a.x[1], a.g0());
        let (xs, ws) = (x.shape(), w.shape());
        let dx = a.needs[0].then(|| -> Result<Tensor> {
            let [kh, kw] = [ws[2], ws[3]];
            let pad = adjoint_pad(
                [xs[2], xs[3]],
                [g.shape()[2], g.shape()[3]],
                [kh, kw],
                self.strides,
                self.dilations,
                self.pad,
            );
            let ct = ConvTranspose {
                strides: self.strides,
                pad,
                dilations: self.dilations,
                groups: self.groups,
            };
            let d = Tensor::apply1(Op::ConvTranspose(ct), vec![g.clone(), w.clone()])?;
            let d = pad_axis(&d, 2, 0, xs[2] - d.shape()[2])?;
            pad_axis(&d, 3, 0, xs[3] - d.shape()[3])
        });
        let dw = a.needs[1].then(|| self.weight_grad(x, ws, g));
        let db = a
            .needs
            .get(2)
            .copied()
            .unwrap_or(false)
            .then(|| reshape_to(&g.sum(&[0, 2, 3], true)?, &[ws[0]]));
        [dx, dw, db]
            .into_iter()
            .take(a.x.len())
            .map(Option::transpose)
            .collect()
    }
}

impl Conv {
    /// dweight [Cout, Cin/groups, kH, kW] from x [N, Cin, H, W] and the upstream gradient g [N, Cout, H', W'].
    pub(crate) fn weight_grad(&self, x: &Tensor, ws: &[usize], g: &Tensor) -> Result<Tensor> {
        use crate::autograd::pad_axis;
        let ([pt, pb, pl, pr], groups) = (self.pad, self.groups);
        let xp = pad_axis(&pad_axis(x, 2, pt, pb)?, 3, pl, pr)?;
        let (cg, cog, ow) = (x.shape()[1] / groups, g.shape()[1] / groups, g.shape()[3]);
        let mut per_group = Vec::with_capacity(groups);
        for gi in 0..groups {
            let xg = channels(&xp, gi * cg, cg)?.transpose(&[1, 0, 2, 3])?;
            let gg = channels(g, gi * cog, cog)?.transpose(&[1, 0, 2, 3])?;
            let mut acc: Option<Tensor> = None;
            for c0 in (0..ow).step_by(MAX_KERNEL_WIDTH) {
                let cw = MAX_KERNEL_WIDTH.min(ow - c0);
                let s = xg.shape().to_vec();
                let off = c0 * self.strides[1];
                let xc = xg.slice_by_size(&[0, 0, 0, off], &[s[0], s[1], s[2], s[3] - off])?;
                let gc = gg.slice_by_size(&[0, 0, 0, c0], &[cog, s[1], gg.shape()[2], cw])?;
                let corr = Conv {
                    strides: self.dilations,
                    pad: [0; 4],
                    dilations: self.strides,
                    groups: 1,
                };
                let d = Tensor::apply1(Op::Conv(corr), vec![xc, gc])?
                    .slice_by_size(&[0; 4], &[cg, cog, ws[2], ws[3]])?;
                acc = Some(match acc {
                    None => d,
                    Some(p) => p.add(&d)?,
                });
            }
            per_group.push(acc.expect("ow >= 1").transpose(&[1, 0, 2, 3])?);
        }
        if groups == 1 {
            Ok(per_group.remove(0))
        } else {
            crate::graph::build::layout::concat(&per_group, 0)
        }
    }
}

/// Padding for the transposed convolution that carries a window op's output gradient [H', W']
/// back onto its input [H, W]: the op's padding, less at the bottom/right by the padded rows and
/// columns no window reached (they would otherwise crop real input positions); the result is at
/// most [H, W], short only by input rows/columns no window read.
pub(crate) fn adjoint_pad(
    input: [usize; 2],
    output: [usize; 2],
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    pad: [usize; 4],
) -> [usize; 4] {
    let mut p = pad;
    for ax in 0..2 {
        let reached = (output[ax] - 1) * strides[ax] + dilations[ax] * (kernel[ax] - 1) + 1;
        let unreached = input[ax] + pad[2 * ax] + pad[2 * ax + 1] - reached;
        p[2 * ax + 1] = pad[2 * ax + 1].saturating_sub(unreached);
    }
    p
}

/// Channels `[start, start + n)` of an NCHW tensor (the whole tensor when that is all of them).
fn channels(t: &Tensor, start: usize, n: usize) -> Result<Tensor> {
    let s = t.shape();
    if start == 0 && n == s[1] {
        return Ok(t.clone());
    }
    t.slice_by_size(&[0, start, 0, 0], &[s[0], n, s[2], s[3]])
}
