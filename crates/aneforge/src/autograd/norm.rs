//! Gradient rules for the norm ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::norm::{BatchNorm, InstanceNorm};

/// Gradient rules.
impl Differentiable for BatchNorm {
    /// Vector-Jacobian product for x and all four statistics (mean, variance, gamma, beta).
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::reshape_to;
        let (x, g) = (&a.x[0], a.g0());
        let mut bs = vec![1; x.rank()];
        bs[1] = x.shape()[1];
        let [mean, var, gamma] = [1, 2, 3].map(|i| reshape_to(&a.x[i], &bs));
        let (mean, var, gamma) = (mean?, var?, gamma?);
        let rstd = var.rsqrt(self.eps)?;
        let centred = x.sub(&mean)?;
        let others: Vec<i64> = (0..x.rank() as i64).filter(|&i| i != 1).collect();
        let per_channel =
            |t: Tensor| -> Result<Tensor> { reshape_to(&t.sum(&others, true)?, &[bs[1]]) };
        let gs = g.mul(&gamma.mul(&rstd)?)?;
        let grads = [
            a.needs[0].then(|| Ok(gs.clone())),
            a.needs[1].then(|| per_channel(gs.neg()?)),
            a.needs[2]
                .then(|| per_channel(gs.mul(&centred)?.mul(&rstd.square()?)?.mul_scalar(-0.5)?)),
            a.needs[3].then(|| per_channel(g.mul(&centred)?.mul(&rstd)?)),
            a.needs[4].then(|| per_channel(g.clone())),
        ];
        grads.into_iter().map(Option::transpose).collect()
    }
}

impl Differentiable for InstanceNorm {
    /// Vector-Jacobian product for x, gamma and beta: with x̂ = (x − μ)·rstd per plane and
    /// ĝ = G·gamma, dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)).
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::reshape_to;
        let (x, g) = (&a.x[0], a.g0());
        let c = x.shape()[1];
        let mut bs = vec![1; x.rank()];
        bs[1] = c;
        let plane: Vec<i64> = (2..x.rank() as i64).collect();
        let centred = x.sub(&x.mean(&plane, true)?)?;
        let rstd = centred.square()?.mean(&plane, true)?.rsqrt(self.eps)?;
        let xhat = centred.mul(&rstd)?;
        let per_channel = |t: Tensor| -> Result<Tensor> {
            reshape_to(&t.sum(&[0], true)?.sum(&plane, true)?, &[c])
        };
        let dx = a.needs[0].then(|| -> Result<Tensor> {
            let gh = g.mul(&reshape_to(&a.x[1], &bs)?)?;
            let inner = gh
                .sub(&gh.mean(&plane, true)?)?
                .sub(&xhat.mul(&gh.mul(&xhat)?.mean(&plane, true)?)?)?;
            inner.mul(&rstd)
        });
        let dgamma = a.needs[1].then(|| per_channel(g.mul(&xhat)?));
        let dbeta = a.needs[2].then(|| per_channel(g.clone()));
        [dx, dgamma, dbeta]
            .into_iter()
            .map(Option::transpose)
            .collect()
    }
}
