//! Builders for the reduce ops.

use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::reduce::{Reduce, ReduceKind, Softmax};
use crate::ops::Op;
use crate::shape;

/// Builders. Axes may be negative; reduced axes stay as extent 1 when `keep_dims`.
impl Tensor {
    fn reduce(&self, kind: ReduceKind, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        let axes = shape::axes(kind.mil_name(), axes, self.rank())?;
        Tensor::apply1(
            Op::Reduce(Reduce {
                kind,
                axes,
                keep_dims,
            }),
            vec![self.clone()],
        )
    }

    /// Mean over `axes`.
    pub fn mean(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::Mean, axes, keep_dims)
    }
    /// Sum over `axes` (the ANE accumulates in fp16: sums above 2048 lose integer exactness there).
    pub fn sum(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::Sum, axes, keep_dims)
    }
    /// Maximum over `axes`.
    pub fn amax(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::Max, axes, keep_dims)
    }
    /// Minimum over `axes`.
    pub fn amin(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::Min, axes, keep_dims)
    }
    /// sqrt(Σx²) over `axes` (the building block of l2_norm and rms_norm).
    pub fn reduce_l2_norm(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::L2Norm, axes, keep_dims)
    }
    /// Σ|x| over `axes`.
    pub fn l1_norm(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::L1Norm, axes, keep_dims)
    }
    /// ln(Σx) over `axes` (NaN where the sum is negative, as ln is).
    pub fn log_sum(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::LogSum, axes, keep_dims)
    }
    /// Σx² over `axes`.
    pub fn sum_square(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::SumSquare, axes, keep_dims)
    }
    /// ln(Σe^x) over `axes`, computed stably (max subtracted before exponentiating).
    pub fn log_sum_exp(&self, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceKind::LogSumExp, axes, keep_dims)
    }
    /// Numerically stable softmax along `axis` (negative allowed).
    pub fn softmax(&self, axis: i64) -> Result<Tensor> {
        let axis = shape::axis("softmax", axis, self.rank())?;
        Tensor::apply1(Op::Softmax(Softmax { axis }), vec![self.clone()])
    }
}
