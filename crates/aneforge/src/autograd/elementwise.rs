//! Gradient rules for the elementwise ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::elementwise::{Binary, Compare, Select};

/// Gradient rules.
impl Differentiable for Binary {
    /// Vector-Jacobian product for both operands, summed back over broadcast axes; maximum and
    /// minimum route ties to the first operand; pow's exponent gradient needs a positive base.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{mask, unbroadcast};
        let (x, y, g, out) = (&a.x[0], &a.x[1], a.g0(), &a.y[0]);
        let routed = |c: Compare| -> Result<(Tensor, Tensor)> {
            let m = x.compare(c, y)?;
            Ok((mask(&m, g)?, mask(&m.logical_not()?, g)?))
        };
        let (dx, dy) = match self {
            Binary::Add => (g.clone(), g.clone()),
            Binary::Sub => (g.clone(), g.neg()?),
            Binary::Mul => (g.mul(y)?, g.mul(x)?),
            Binary::RealDiv => (g.div(y)?, g.mul(out)?.div(y)?.neg()?),
            Binary::Maximum => routed(Compare::GreaterEqual)?,
            Binary::Minimum => routed(Compare::LessEqual)?,
            Binary::Pow => (
                g.mul(&y.mul(&x.pow(&y.sub_scalar(1.0)?)?)?)?,
                g.mul(&out.mul(&x.log(0.0)?)?)?,
            ),
        };
        let take = |need: bool, d: Tensor, src: &Tensor| {
            need.then(|| unbroadcast(&d, src.shape())).transpose()
        };
        Ok(vec![take(a.needs[0], dx, x)?, take(a.needs[1], dy, y)?])
    }
}

impl Differentiable for Select {
    /// Vector-Jacobian product: the gradient goes to `a` where `cond`, else to `b` (none to `cond`).
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{mask, unbroadcast};
        let (c, g) = (&a.x[0], a.g0());
        let da = a.needs[1]
            .then(|| unbroadcast(&mask(c, g)?, a.x[1].shape()))
            .transpose()?;
        let db = a.needs[2]
            .then(|| unbroadcast(&mask(&c.logical_not()?, g)?, a.x[2].shape()))
            .transpose()?;
        Ok(vec![None, da, db])
    }
}
