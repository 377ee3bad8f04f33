//! Matrix multiply: `x @ W` with a baked weight (stored transposed, `transpose_y = true`),
//! `linear(W, b)` (PyTorch convention) and `bmm` (tensor @ tensor), NumPy `matmul` semantics.

use super::{Buf, Family, Op, TensorType};
use crate::error::Result;
use crate::mil::{MilArgs, MilOp};

/// MIL `matmul(x, y, transpose_x, transpose_y)`; transposes swap the last two axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatMul {
    pub transpose_x: bool,
    pub transpose_y: bool,
}

impl Family for MatMul {
    fn name(&self) -> &'static str {
        "matmul"
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

/// Parse `matmul`.
pub fn from_mil(_op: &str, _args: &mut MilArgs) -> Option<Result<Op>> {
    None
}
