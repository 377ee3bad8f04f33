//! Data movement: reshape, transpose, concat, split, slice_by_size, squeeze, expand_dims and
//! nearest-neighbour upsample.

use super::{Buf, Family, Op, TensorType};
use crate::error::Result;
use crate::mil::{MilArgs, MilOp};

/// Data-movement ops. Axes are stored normalised (non-negative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// MIL `reshape(x, shape)`; same element count.
    Reshape { shape: Vec<usize> },
    /// MIL `transpose(x, perm)`.
    Transpose { perm: Vec<usize> },
    /// MIL `concat(values, axis, interleave = false)`; 1+ inputs.
    Concat { axis: usize },
    /// MIL `split(x, split_sizes, axis)`; one output per size.
    Split { axis: usize, sizes: Vec<usize> },
    /// MIL `slice_by_size(x, begin, size)`.
    SliceBySize { begin: Vec<usize>, size: Vec<usize> },
    /// MIL `squeeze(x, axes)`; squeezed axes must have extent 1.
    Squeeze { axes: Vec<usize> },
    /// MIL `expand_dims(x, axes)`; axes index the output.
    ExpandDims { axes: Vec<usize> },
    /// MIL `upsample_nearest_neighbor(x, scale_factor_height, scale_factor_width)` (int32 factors), rank 3+.
    Upsample { scale_h: usize, scale_w: usize },
}

impl Family for Layout {
    fn name(&self) -> &'static str {
        match self {
            Layout::Reshape { .. } => "reshape",
            Layout::Transpose { .. } => "transpose",
            Layout::Concat { .. } => "concat",
            Layout::Split { .. } => "split",
            Layout::SliceBySize { .. } => "slice_by_size",
            Layout::Squeeze { .. } => "squeeze",
            Layout::ExpandDims { .. } => "expand_dims",
            Layout::Upsample { .. } => "upsample_nearest_neighbor",
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

/// Parse layout ops.
pub fn from_mil(_op: &str, _args: &mut MilArgs) -> Option<Result<Op>> {
    None
}
