//! Max and average pooling over the last two axes of NCHW tensors.

use super::{Buf, Family, Op, TensorType};
use crate::error::Result;
use crate::mil::{MilArgs, MilOp};

/// Which pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// Average; `exclude_padding` = MIL `exclude_padding_from_average`.
    Avg { exclude_padding: bool },
}

/// MIL `max_pool` / `avg_pool` with `pad_type = "custom"`, `ceil_mode = false`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub kind: PoolKind,
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    /// Padding (top, bottom, left, right).
    pub pad: [usize; 4],
}

impl Family for Pool {
    fn name(&self) -> &'static str {
        match self.kind {
            PoolKind::Max => "max_pool",
            PoolKind::Avg { .. } => "avg_pool",
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

/// Parse `max_pool` / `avg_pool`.
pub fn from_mil(_op: &str, _args: &mut MilArgs) -> Option<Result<Op>> {
    None
}
