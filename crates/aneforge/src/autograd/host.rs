//! Gradient rules of the host ops: `take` scatters its gradient back with `take_add`, `topk`
//! and `sort` values with `along_add`; the indexing ops' rules are in `host_index.rs`, the
//! bridge layers' in `host_bridge.rs`. Index outputs, `argmax`/`argmin`, `one_hot`, `sample`,
//! `fps` and `radius_search` carry no gradient (NotImplemented naming the op).

use super::host_bridge as bridge;
use super::host_index as index;
use super::{not_differentiable, Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::build::host::host;
use crate::graph::Tensor;
use crate::ops::host::{bridge as layers, rearrange};
use crate::ops::host::{scan, take, HostOp};
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
            HostOp::Cumsum(op) => {
                let back = HostOp::Cumsum(scan::Cumsum {
                    reverse: !op.reverse,
                    ..op.clone()
                });
                Ok(vec![Some(host(back, vec![a.g0().clone()])?.remove(0))])
            }
            HostOp::CrossProduct(_) => {
                let (x0, x1, g) = (&a.x[0], &a.x[1], a.g0());
                let cross = |p: &Tensor, q: &Tensor| -> Result<Tensor> {
                    let op = HostOp::CrossProduct(layers::CrossProduct {});
                    Ok(host(op, vec![p.clone(), q.clone()])?.remove(0))
                };
                Ok(vec![Some(cross(x1, g)?), Some(cross(g, x0)?)])
            }
            HostOp::Flatten(_) => {
                let dims: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
                Ok(vec![Some(a.g0().reshape(&dims)?)])
            }
            HostOp::BlockRearrange(op) => {
                let direction = match op.direction {
                    rearrange::Direction::FromSpace => rearrange::Direction::ToSpace,
                    rearrange::Direction::ToSpace => rearrange::Direction::FromSpace,
                };
                let back = HostOp::BlockRearrange(layers::BlockRearrange {
                    direction,
                    ..op.clone()
                });
                Ok(vec![Some(host(back, vec![a.g0().clone()])?.remove(0))])
            }
            HostOp::Scatter(op) => index::scatter(op, a),
            HostOp::TakeAlong(op) => index::take_along(op, a),
            HostOp::IndexPut(op) => index::index_put(op, a),
            HostOp::MinmaxNorm(op) => bridge::minmax_norm(op, a),
            HostOp::Sdpa(op) => bridge::sdpa(op, a),
            HostOp::CrossCorrelation(_) => bridge::cross_correlation(a),
            HostOp::CostVolume(op) => bridge::cost_volume(op, a),
            HostOp::InputView(op) => bridge::input_view(op, a),
            HostOp::ScaledElementwise(op) => bridge::scaled_elementwise(op, a),
            HostOp::DynamicSlice(_) => bridge::dynamic_slice(a),
            HostOp::DynamicSliceAdd(_) => bridge::dynamic_slice_add(a),
            HostOp::ArgReduce(_)
            | HostOp::AlongAdd(_)
            | HostOp::OneHot(_)
            | HostOp::Sample(_)
            | HostOp::Fps(_)
            | HostOp::RadiusSearch(_)
            | HostOp::IntElementwise(_)
            | HostOp::IntReshape(_)
            | HostOp::IntRemap(_)
            | HostOp::SortValues(_) => Err(not_differentiable(self.name())),
        }
    }
}

/// `dx = along_add(g_values, indices)`: the values' gradient put back where they came from.
fn along_add(a: &Vjp, axis: usize, dim: usize) -> Result<Grads> {
    let op = HostOp::AlongAdd(take::AlongAdd { axis, dim });
    let dx = host(op, vec![a.g[0].clone(), a.y[1].clone()])?.remove(0);
    Ok(vec![Some(dx)])
}
