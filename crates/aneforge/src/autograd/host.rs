//! Gradient rules of the host ops: `take` scatters its gradient back with `take_add`, `topk`
//! and `sort` values with `along_add`; index outputs and `argmax`/`argmin` carry no gradient.

use super::{not_differentiable, Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::build::host::host;
use crate::ops::host::HostOp;
use crate::ops::host_take as take;
use crate::ops::Family;

impl Differentiable for HostOp {
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        let x = &a.x[0];
        match self {
            HostOp::TopK(op) => along_add(a, op.axis, x.shape()[op.axis]),
            HostOp::Sort(op) => along_add(a, op.axis, x.shape()[op.axis]),
            HostOp::Take(op) => {
                let add = HostOp::TakeAdd(take::TakeAdd {
                    axis: op.axis,
                    dim: x.shape()[op.axis],
                });
                let dx = host(add, vec![a.g0().clone(), a.x[1].clone()])?.remove(0);
                Ok(vec![Some(dx), None])
            }
            HostOp::TakeAdd(op) => {
                let back = HostOp::Take(take::Take { axis: op.axis });
                let dg = host(back, vec![a.g0().clone(), a.x[1].clone()])?.remove(0);
                Ok(vec![Some(dg), None])
            }
            HostOp::ArgReduce(_) | HostOp::AlongAdd(_) => Err(not_differentiable(self.name())),
        }
    }
}

/// `dx = along_add(g_values, indices)`: the values' gradient put back where they came from.
fn along_add(a: &Vjp, axis: usize, dim: usize) -> Result<Grads> {
    let op = HostOp::AlongAdd(take::AlongAdd { axis, dim });
    let dx = host(op, vec![a.g[0].clone(), a.y[1].clone()])?.remove(0);
    Ok(vec![Some(dx)])
}
