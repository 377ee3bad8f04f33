//! Builders of the host ops (`ops/host`) and of `cast`: index tensors (argmax, topk, sort) and
//! runtime-indexed gathers. A graph holding one compiles to a segmented plan.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::host::HostOp;
use crate::ops::host_argreduce::ArgReduce;
use crate::ops::io::Cast;
use crate::ops::Op;
use crate::ops::{host_sort as sort, host_take as take};
use crate::shape;

/// Add a host-op node.
pub fn host(op: HostOp, srcs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    Tensor::apply(Op::Host(op), srcs)
}

impl Tensor {
    /// Convert to `dtype`: uint8/int32 → fp16 (rounded; beyond ±65504 → ±inf) or fp16 → int32
    /// (truncated toward zero). Other pairs are a dtype error naming both.
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        Tensor::apply1(Op::Cast(Cast { dtype }), vec![self.clone()])
    }

    fn arg_reduce(&self, max: bool, axis: i64, keepdims: bool) -> Result<Tensor> {
        let name = if max { "argmax" } else { "argmin" };
        let axis = shape::axis(name, axis, self.rank())?;
        let op = HostOp::ArgReduce(ArgReduce {
            max,
            axis,
            keepdims,
        });
        Ok(host(op, vec![self.clone()])?.remove(0))
    }

    /// int32 index of the first largest element along `axis` (NaN counts as largest), NumPy
    /// `argmax`; `keepdims` keeps the axis as extent 1. Host op.
    pub fn argmax(&self, axis: i64, keepdims: bool) -> Result<Tensor> {
        self.arg_reduce(true, axis, keepdims)
    }

    /// int32 index of the first smallest element along `axis` (NaN counts as smallest), NumPy
    /// `argmin`; `keepdims` keeps the axis as extent 1. Host op.
    pub fn argmin(&self, axis: i64, keepdims: bool) -> Result<Tensor> {
        self.arg_reduce(false, axis, keepdims)
    }

    /// The `k` largest (smallest unless `largest`) elements along `axis` and their int32
    /// indices, best first when `sorted` (ties: lower index first), else in index order.
    /// Errors: k outside 1..=extent. Values are differentiable. Host op.
    pub fn topk(
        &self,
        k: usize,
        axis: i64,
        largest: bool,
        sorted: bool,
    ) -> Result<(Tensor, Tensor)> {
        let axis = shape::axis("topk", axis, self.rank())?;
        let op = sort::TopK {
            k,
            axis,
            largest,
            sorted,
        };
        let mut out = host(HostOp::TopK(op), vec![self.clone()])?;
        let indices = out.remove(1);
        Ok((out.remove(0), indices))
    }

    /// Stable sort along `axis` (descending keeps ties in index order): (values, int32 indices).
    /// Values are differentiable. Host op.
    pub fn sort_with_indices(&self, axis: i64, descending: bool) -> Result<(Tensor, Tensor)> {
        let axis = shape::axis("sort", axis, self.rank())?;
        let op = sort::Sort { axis, descending };
        let mut out = host(HostOp::Sort(op), vec![self.clone()])?;
        let indices = out.remove(1);
        Ok((out.remove(0), indices))
    }

    /// Sorted values along `axis` (see [`Tensor::sort_with_indices`]).
    pub fn sort(&self, axis: i64, descending: bool) -> Result<Tensor> {
        Ok(self.sort_with_indices(axis, descending)?.0)
    }

    /// int32 permutation that stably sorts `axis` (NumPy `argsort(kind="stable")`; descending
    /// keeps ties in index order).
    pub fn argsort(&self, axis: i64, descending: bool) -> Result<Tensor> {
        Ok(self.sort_with_indices(axis, descending)?.1)
    }

    /// NumPy `take(x, indices, axis)` with a runtime int32 index tensor: output shape
    /// `x[:axis] + indices.shape + x[axis+1:]`; an index outside `-n..n` is a run-time error
    /// naming the op, the index and the bound. Gradient: scatter-add into `x`. Host op.
    pub fn take(&self, indices: &Tensor, axis: i64) -> Result<Tensor> {
        let axis = shape::axis("gather", axis, self.rank())?;
        let op = HostOp::Take(take::Take { axis });
        Ok(host(op, vec![self.clone(), indices.clone()])?.remove(0))
    }
}

/// Rows of `table` [V, D] at int32 `ids` (any shape): output `ids.shape + [D]`; ids outside
/// `-V..V` are a run-time error. Gradient: scatter-add into the table rows. Host op.
pub fn embedding(ids: &Tensor, table: &Tensor) -> Result<Tensor> {
    if table.rank() != 2 {
        return Err(Error::shape(
            "embedding",
            format!("table must be [vocab, dim], got {:?}", table.shape()),
        ));
    }
    table.take(ids, 0)
}
