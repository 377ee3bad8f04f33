//! Gradient rules of the indexing host ops, each another host op over the same int32 indices:
//! `scatter` (x: the gradient with the written positions zeroed, or all of it for `add`;
//! updates: `take_along_axis` of the gradient — every duplicate gets it, as in PyTorch),
//! `take_along_axis` (scatter-add into zeros) and `index_put` (x: the gradient with the written
//! rows zeroed; rows: `take` of the gradient rows).

use super::{fill_like, zeros, Grads, Vjp};
use crate::error::Result;
use crate::graph::build::host::host;
use crate::graph::Tensor;
use crate::ops::host::scatter::{IndexPut, Scatter, ScatterReduce, TakeAlong};
use crate::ops::host::take::Take;
use crate::ops::host::HostOp;

/// The single output of a host op.
fn one(op: HostOp, srcs: &[&Tensor]) -> Result<Tensor> {
    Ok(host(op, srcs.iter().map(|t| (*t).clone()).collect())?.remove(0))
}

/// `scatter(x, indices, updates)`: (dx, None, dupdates).
pub fn scatter(op: &Scatter, a: &Vjp) -> Result<Grads> {
    let (g, idx, upd) = (a.g0(), &a.x[1], &a.x[2]);
    let dx = match op.reduce {
        ScatterReduce::Add => g.clone(),
        ScatterReduce::Replace => {
            let cleared = Scatter {
                axis: op.axis,
                reduce: ScatterReduce::Replace,
            };
            one(HostOp::Scatter(cleared), &[g, idx, &fill_like(upd, 0.0)?])?
        }
    };
    let dupd = one(HostOp::TakeAlong(TakeAlong { axis: op.axis }), &[g, idx])?;
    Ok(vec![Some(dx), None, Some(dupd)])
}

/// `take_along_axis(x, indices)`: dx = scatter-add of the gradient into zeros.
pub fn take_along(op: &TakeAlong, a: &Vjp) -> Result<Grads> {
    let (x, idx, g) = (&a.x[0], &a.x[1], a.g0());
    let add = Scatter {
        axis: op.axis,
        reduce: ScatterReduce::Add,
    };
    let dx = one(HostOp::Scatter(add), &[&zeros(g, x.shape())?, idx, g])?;
    Ok(vec![Some(dx), None])
}

/// `index_put(x, row_index, rows)`: (dx, None, drows).
pub fn index_put(op: &IndexPut, a: &Vjp) -> Result<Grads> {
    let (g, idx, rows) = (a.g0(), &a.x[1], &a.x[2]);
    let dx = one(
        HostOp::IndexPut(op.clone()),
        &[g, idx, &fill_like(rows, 0.0)?],
    )?;
    let drows = one(HostOp::Take(Take { axis: op.axis }), &[g, idx])?;
    Ok(vec![Some(dx), None, Some(drows)])
}
