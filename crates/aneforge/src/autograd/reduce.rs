//! Gradient rules for the reduce ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::ops::reduce::{Reduce, ReduceKind, Softmax};
use crate::shape;

/// Gradient rules.
impl Differentiable for Reduce {
    /// Vector-Jacobian product: G reshaped to the kept-dims shape and spread back over the
    /// reduced axes, times each kind's derivative; max and min share G equally among ties.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{broadcast_to, reshape_to};
        use crate::graph::build::elementwise::select;
        use crate::ops::elementwise::Compare;
        let x = &a.x[0];
        let kept = self.kept_shape(x.shape());
        let (g, y) = (reshape_to(a.g0(), &kept)?, reshape_to(&a.y[0], &kept)?);
        let d = match self.kind {
            ReduceKind::Sum => broadcast_to(&g, x.shape())?,
            ReduceKind::Mean => broadcast_to(&g, x.shape())?
                .div_scalar((shape::numel(x.shape()) / shape::numel(&kept)) as f32)?,
            ReduceKind::Max | ReduceKind::Min => {
                let hit = select(
                    &x.compare(Compare::Equal, &y)?,
                    &crate::graph::build::io::scalar("select", 1.0)?,
                    &crate::graph::build::io::scalar("select", 0.0)?,
                )?;
                let ties = hit.sum(
                    &self.axes.iter().map(|&i| i as i64).collect::<Vec<_>>(),
                    true,
                )?;
                hit.mul(&g.div(&ties)?)?
            }
            ReduceKind::L2Norm => x.mul(&g.div(&y)?)?,
            ReduceKind::L1Norm => x.sign()?.mul(&g)?,
            ReduceKind::LogSum => broadcast_to(&g.div(&y.exp()?)?, x.shape())?,
            ReduceKind::SumSquare => x.mul(&g)?.mul_scalar(2.0)?,
            ReduceKind::LogSumExp => x.sub(&y)?.exp()?.mul(&g)?,
        };
        Ok(vec![Some(d)])
    }
}

impl Differentiable for Softmax {
    /// Vector-Jacobian product: y·(G − Σ(G·y)) along the axis.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        let (y, g) = (&a.y[0], a.g0());
        let dot = g.mul(y)?.sum(&[self.axis as i64], true)?;
        Ok(vec![Some(y.mul(&g.sub(&dot)?)?)])
    }
}
