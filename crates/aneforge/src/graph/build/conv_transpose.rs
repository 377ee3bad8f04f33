//! Builders for the conv_transpose ops.

use crate::error::{Error, Result};
use crate::graph::build::io::constant;
use crate::graph::Tensor;
use crate::ops::conv::ConvOptions;
use crate::ops::conv_transpose::ConvTranspose;
use crate::ops::io::HostArray;
use crate::ops::Op;

/// Transposed convolution of `x` [N, Cin, H, W] with a baked weight [Cin, Cout/groups, kH, kW]
/// (PyTorch layout) and optional bias [Cout] (added after the op); `opts.pad` crops the output.
pub fn conv_transpose2d(
    x: &Tensor,
    weight: HostArray,
    bias: Option<HostArray>,
    opts: ConvOptions,
) -> Result<Tensor> {
    let op = ConvTranspose {
        strides: opts.stride,
        pad: opts.pad,
        dilations: opts.dilation,
        groups: opts.groups,
    };
    let y = Tensor::apply1(
        Op::ConvTranspose(op),
        vec![x.clone(), constant("conv_transpose", weight)?],
    )?;
    match bias {
        None => Ok(y),
        Some(b) if b.shape == [y.shape()[1]] => y.add(&constant(
            "conv_transpose",
            HostArray {
                shape: &[y.shape()[1], 1, 1],
                data: b.data,
            },
        )?),
        Some(b) => Err(Error::shape(
            "conv_transpose",
            format!(
                "bias must have shape [{}] (Cout), got {:?}",
                y.shape()[1],
                b.shape
            ),
        )),
    }
}
