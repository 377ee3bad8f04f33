//! Reductions over axes (mean, sum, max, min, l2 norm) and softmax along one axis.

use super::{Buf, Family, Op, TensorType};
use crate::error::Result;
use crate::mil::{MilArgs, MilOp};

/// Which reduction (MIL `reduce_<kind>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Mean,
    Sum,
    Max,
    Min,
    /// sqrt(sum(x²)); used by l2_norm and rms_norm.
    L2Norm,
}

/// MIL `reduce_*(x, axes, keep_dims)`; `axes` are normalised (non-negative, sorted, unique).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reduce {
    pub kind: ReduceKind,
    pub axes: Vec<usize>,
    pub keep_dims: bool,
}

/// MIL `softmax(x, axis)`; `axis` normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Softmax {
    pub axis: usize,
}

impl Family for Reduce {
    fn name(&self) -> &'static str {
        match self.kind {
            ReduceKind::Mean => "reduce_mean",
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Max => "reduce_max",
            ReduceKind::Min => "reduce_min",
            ReduceKind::L2Norm => "reduce_l2_norm",
        }
    }
    fn infer(&self, _inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        todo!()
    }
    fn mil(&self) -> MilOp {
        todo!()
    }
    fn eval(&self, _ins: &[&Buf], _out: &mut [Buf]) -> Result<()> {
        todo!()
    }
}

impl Family for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn infer(&self, _inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        todo!()
    }
    fn mil(&self) -> MilOp {
        todo!()
    }
    fn eval(&self, _ins: &[&Buf], _out: &mut [Buf]) -> Result<()> {
        todo!()
    }
}

/// Parse reductions and softmax.
pub fn from_mil(_op: &str, _args: &mut MilArgs) -> Option<Result<Op>> {
    None
}
