//! Builders for the conv ops.

use crate::error::{Error, Result};
use crate::graph::build::io::constant;
use crate::graph::Tensor;
use crate::ops::conv::{Conv, ConvOptions};
use crate::ops::io::HostArray;
use crate::ops::Op;

/// 2-D convolution of `x` [N, Cin, H, W] with a baked weight [Cout, Cin/groups, kH, kW] and optional bias [Cout].
pub fn conv2d(
    x: &Tensor,
    weight: HostArray,
    bias: Option<HostArray>,
    opts: ConvOptions,
) -> Result<Tensor> {
    let mut srcs = vec![x.clone(), constant("conv", weight)?];
    if let Some(b) = bias {
        srcs.push(constant("conv", b)?);
    }
    let conv = Conv {
        strides: opts.stride,
        pad: opts.pad,
        dilations: opts.dilation,
        groups: opts.groups,
    };
    Tensor::apply1(Op::Conv(conv), srcs)
}

/// Convolution whose weight [Cout, Cin/groups, kH, kW] is a graph tensor (MIL `conv` with a non-const weight); batch 1.
pub fn dynamic_conv(x: &Tensor, weight: &Tensor, opts: ConvOptions) -> Result<Tensor> {
    if x.shape().first() != Some(&1) {
        return Err(Error::shape(
            "dynamic_conv",
            format!("x must have batch 1, got {:?}", x.shape()),
        ));
    }
    let conv = Conv {
        strides: opts.stride,
        pad: opts.pad,
        dilations: opts.dilation,
        groups: opts.groups,
    };
    Tensor::apply1(Op::Conv(conv), vec![x.clone(), weight.clone()])
}
