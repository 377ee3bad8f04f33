//! Gradient rules for the conv_transpose ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::conv_transpose::ConvTranspose;
use crate::ops::Op;

/// Gradient rules.
impl Differentiable for ConvTranspose {
    /// Vector-Jacobian product for x and weight. With C the convolution of the same parameters,
    /// ⟨G, convT(x, w)⟩ = ⟨C(G, w), x⟩, so dx = C(G, w) and dw is C's weight gradient for
    /// input G and upstream gradient x.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        let conv = crate::ops::conv::Conv {
            strides: self.strides,
            pad: self.pad,
            dilations: self.dilations,
            groups: self.groups,
        };
        let (x, w, g) = (&a.x[0], &a.x[1], a.g0());
        let dx = a.needs[0]
            .then(|| Tensor::apply1(Op::Conv(conv.clone()), vec![g.clone(), w.clone()]))
            .transpose()?;
        let dw = a.needs[1]
            .then(|| conv.weight_grad(g, w.shape(), x))
            .transpose()?;
        Ok(vec![dx, dw])
    }
}
