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
    /// Per group, x and g are transposed to [C, N, ·, ·] and correlated (strides and dilations
    /// swapped), in chunks of at most 15 output columns; each chunk's correlation reads only the
    /// input columns (and rows) its kH×kW outputs need and takes the zero padding as its own.
    pub(crate) fn weight_grad(&self, x: &Tensor, ws: &[usize], g: &Tensor) -> Result<Tensor> {
        let groups = self.groups;
        let (cg, cog) = (x.shape()[1] / groups, g.shape()[1] / groups);
        let mut per_group = Vec::with_capacity(groups);
        for gi in 0..groups {
            let xg = channels(x, gi * cg, cg)?.transpose(&[1, 0, 2, 3])?;
            let gg = channels(g, gi * cog, cog)?.transpose(&[1, 0, 2, 3])?;
            let mut acc: Option<Tensor> = None;
            for c0 in (0..gg.shape()[3]).step_by(MAX_KERNEL_WIDTH) {
                let Some(d) = self.weight_grad_chunk(&xg, &gg, c0, [ws[2], ws[3]])? else {
                    continue;
                };
                acc = Some(match acc {
                    None => d,
                    Some(p) => p.add(&d)?,
                });
            }
            per_group.push(match acc {
                Some(d) => d,
                None => crate::autograd::zeros(x, &[cog, cg, ws[2], ws[3]])?,
            });
        }
        if groups == 1 {
            Ok(per_group.remove(0))
        } else {
            crate::graph::build::layout::concat(&per_group, 0)
        }
    }

    /// The [Cout/g, C/g, kH, kW] contribution of g's output columns c0.. (at most 15) from xg
    /// [C/g, N, H, W] and gg [Cout/g, N, H', W']; None when those columns read only padding.
    fn weight_grad_chunk(
        &self,
        xg: &Tensor,
        gg: &Tensor,
        c0: usize,
        [kh, kw]: [usize; 2],
    ) -> Result<Option<Tensor>> {
        let ([pt, _, pl, _], [sh, sw], [dh, dw]) = (self.pad, self.strides, self.dilations);
        let (xs, gs) = (xg.shape(), gg.shape());
        let cw = MAX_KERNEL_WIDTH.min(gs[3] - c0);
        // Padded input rows [0, rows) and columns [off, off + cols) the kH×kW outputs read.
        let (rows, off, cols) = (
            (kh - 1) * dh + (gs[2] - 1) * sh + 1,
            c0 * sw,
            (kw - 1) * dw + (cw - 1) * sw + 1,
        );
        // Those as x rows/columns [lo, hi) with the zeros before and after.
        let span = |lo: usize, n: usize, pad_lo: usize, size: usize| {
            let (start, end) = (
                lo.max(pad_lo) - pad_lo,
                (lo + n).saturating_sub(pad_lo).min(size),
            );
            (
                start,
                end.saturating_sub(start),
                pad_lo.saturating_sub(lo),
                (lo + n).saturating_sub(pad_lo + size),
            )
        };
        let (y0, yn, ptop, pbot) = span(0, rows, pt, xs[2]);
        let (x0, xn, pleft, pright) = span(off, cols, pl, xs[3]);
        if yn == 0 || xn == 0 {
            return Ok(None);
        }
        let xc = crop(xg, &[0, 0, y0, x0], &[xs[0], xs[1], yn, xn])?;
        let gc = crop(gg, &[0, 0, 0, c0], &[gs[0], gs[1], gs[2], cw])?;
        let corr = Conv {
            strides: self.dilations,
            pad: [ptop, pbot, pleft, pright],
            dilations: self.strides,
            groups: 1,
        };
        // Transposed per chunk: chunk sums then never add two conv outputs directly (the
        // reference executor's conv epilogues would each claim that add).
        Tensor::apply1(Op::Conv(corr), vec![xc, gc])?
            .transpose(&[1, 0, 2, 3])
            .map(Some)
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
    crop(t, &[0, start, 0, 0], &[s[0], n, s[2], s[3]])
}

/// `t.slice_by_size(begin, size)`, or `t` itself when that is all of it (no copy step).
pub(crate) fn crop(t: &Tensor, begin: &[usize], size: &[usize]) -> Result<Tensor> {
    if begin.iter().all(|&b| b == 0) && size == t.shape() {
        return Ok(t.clone());
    }
    t.slice_by_size(begin, size)
}
