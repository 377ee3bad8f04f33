//! Normalisation: native inference `batch_norm`, and the composites layer_norm, rms_norm,
//! group_norm and l2_norm, which are builder functions emitting MIL primitives.

use super::{Buf, Family, Op, TensorType};
use crate::error::Result;
use crate::mil::{MilArgs, MilOp};

/// MIL `batch_norm(x, mean, variance, gamma, beta, epsilon)`; x rank 3..=5, the four
/// statistics are [C] tensors (C = x.shape[1]); `eps` holds the fp16-rounded value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNorm {
    pub eps: f32,
}

impl Family for BatchNorm {
    fn name(&self) -> &'static str {
        "batch_norm"
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

/// Parse `batch_norm`.
pub fn from_mil(_op: &str, _args: &mut MilArgs) -> Option<Result<Op>> {
    None
}
