//! 2-D convolution (NCHW): stride, explicit padding (t, b, l, r), dilation, groups, optional bias.

use super::{Buf, Family, Op, TensorType};
use crate::error::Result;
use crate::mil::{MilArgs, MilOp};

/// MIL `conv(x, weight, bias?, strides, pad_type = "custom", pad, dilations, groups)`.
/// Inputs: x [N, Cin, H, W], weight [Cout, Cin/groups, kH, kW], optional bias [Cout].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv {
    pub strides: [usize; 2],
    /// Padding (top, bottom, left, right).
    pub pad: [usize; 4],
    pub dilations: [usize; 2],
    pub groups: usize,
}

impl Family for Conv {
    fn name(&self) -> &'static str {
        "conv"
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

/// Parse `conv`.
pub fn from_mil(_op: &str, _args: &mut MilArgs) -> Option<Result<Op>> {
    None
}
