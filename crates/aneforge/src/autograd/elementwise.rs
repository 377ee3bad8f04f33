//! Gradient rules for the elementwise ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::elementwise::{Binary, Compare, Select};
use crate::ops::Op;

/// Gradient rules.
impl Differentiable for Binary {
    /// Vector-Jacobian product for both operands, summed back over broadcast axes; maximum and
    /// minimum route ties to the first operand; pow's exponent gradient needs a positive base.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::mask;
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
            Binary::Pow => return pow_vjp(a),
        };
        Ok(vec![
            reduced(a.needs[0], || Ok(dx), x)?,
            reduced(a.needs[1], || Ok(dy), y)?,
        ])
    }
}

/// The gradient `d()` summed back to `src`'s shape, when `need`.
fn reduced(need: bool, d: impl FnOnce() -> Result<Tensor>, src: &Tensor) -> Result<Option<Tensor>> {
    need.then(|| crate::autograd::unbroadcast(&d()?, src.shape()))
        .transpose()
}

/// The value of a rank-0 constant (a Python-scalar operand), else None.
fn scalar_value(t: &Tensor) -> Option<f32> {
    match t.op() {
        Op::Const(c) if c.shape.is_empty() => c.values.first().map(|v| v.to_f32()),
        _ => None,
    }
}

/// pow's vector-Jacobian product: d/dx = y·x^(y−1), d/dy = x^y·ln x (needs a positive base); a
/// scalar-constant operand (`p ** 1.5`, `2.0 ** p`) enters as a scalar, so no rank-0 tensor is built.
fn pow_vjp(a: &Vjp) -> Result<Grads> {
    let (x, y, g, out) = (&a.x[0], &a.x[1], a.g0(), &a.y[0]);
    let dx = || match scalar_value(y) {
        Some(k) => g.mul(&x.pow_scalar(k - 1.0)?.mul_scalar(k)?),
        None => g.mul(&y.mul(&x.pow(&y.sub_scalar(1.0)?)?)?),
    };
    let dy = || match scalar_value(x) {
        Some(k) => g.mul(&out.mul_scalar(k.ln())?),
        None => g.mul(&out.mul(&x.log(0.0)?)?),
    };
    Ok(vec![
        reduced(a.needs[0], dx, x)?,
        reduced(a.needs[1], dy, y)?,
    ])
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
