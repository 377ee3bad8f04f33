//! Gradient rules for the einsum ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::build::einsum::einsum;
use crate::ops::einsum::Einsum;

/// Gradient rules.
impl Differentiable for Einsum {
    /// Vector-Jacobian product of `nchw,nwhu->nchu` (and its rank-3 form): dx = G·yᵀ over u,
    /// dy = xᵀ·G over c, computed on the broadcast operands with the general [`einsum`] and
    /// summed back over broadcast axes.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{broadcast_to, unbroadcast};
        let (x, y, g) = (&a.x[0], &a.x[1], a.g0());
        let gs = g.shape();
        // Broadcast shapes: x → [.., C, H, W] and y → [.., W, H, U] with the batch and H of G.
        let lead = &gs[..self.rank - 3];
        let (h, w) = (gs[self.rank - 2], x.shape()[self.rank - 1]);
        let xs: Vec<usize> = lead
            .iter()
            .copied()
            .chain([gs[self.rank - 3], h, w])
            .collect();
        let ys: Vec<usize> = lead
            .iter()
            .copied()
            .chain([w, h, gs[self.rank - 1]])
            .collect();
        let (xf, yf) = (broadcast_to(x, &xs)?, broadcast_to(y, &ys)?);
        let b = if self.rank == 4 { "n" } else { "" };
        let dx = a.needs[0].then(|| {
            unbroadcast(
                &einsum(&format!("{b}chu,{b}whu->{b}chw"), g, &yf)?,
                x.shape(),
            )
        });
        let dy = a.needs[1].then(|| {
            unbroadcast(
                &einsum(&format!("{b}chw,{b}chu->{b}whu"), &xf, g)?,
                y.shape(),
            )
        });
        [dx, dy].into_iter().map(Option::transpose).collect()
    }
}
