//! Gradient rules for the linear ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::linear::MatMul;
use crate::ops::Op;

/// Gradient rules.
impl Differentiable for MatMul {
    /// Vector-Jacobian product for both operands (any transposes, rank-1 promotion, broadcast
    /// batch axes summed back): dX = G·op(Y)ᵀ, dY = op(X)ᵀ·G, transposed back where the op transposed.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{reshape_to, unbroadcast};
        let (x, y) = (&a.x[0], &a.x[1]);
        let mm = |p: &Tensor, q: &Tensor, transpose_x: bool, transpose_y: bool| {
            Tensor::apply1(
                Op::MatMul(MatMul {
                    transpose_x,
                    transpose_y,
                }),
                vec![p.clone(), q.clone()],
            )
        };
        // Promote rank-1 operands to matrices (transposes are ignored for them, as in MIL).
        let xp = if x.rank() == 1 {
            x.reshape(&[1, -1])?
        } else {
            x.clone()
        };
        let yp = if y.rank() == 1 {
            y.reshape(&[-1, 1])?
        } else {
            y.clone()
        };
        let (tx, ty) = (
            self.transpose_x && x.rank() > 1,
            self.transpose_y && y.rank() > 1,
        );
        let mut gs = a.g0().shape().to_vec();
        if x.rank() == 1 {
            gs.insert(gs.len() - 1, 1);
        }
        if y.rank() == 1 {
            gs.push(1);
        }
        let g = reshape_to(a.g0(), &gs)?;
        let dx = a.needs[0].then(|| -> Result<Tensor> {
            let d = if tx {
                mm(&yp, &g, ty, true)?
            } else {
                mm(&g, &yp, false, !ty)?
            };
            reshape_to(&unbroadcast(&d, xp.shape())?, x.shape())
        });
        let dy = a.needs[1].then(|| -> Result<Tensor> {
            let d = if ty {
                mm(&g, &xp, true, tx)?
            } else {
                mm(&xp, &g, !tx, false)?
            };
            reshape_to(&unbroadcast(&d, yp.shape())?, y.shape())
        });
        Ok(vec![dx.transpose()?, dy.transpose()?])
    }
}
