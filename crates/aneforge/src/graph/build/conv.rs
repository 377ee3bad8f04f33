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
    let weight = constant("conv", weight)?;
    let bias = bias.map(|b| constant("conv", b)).transpose()?;
    conv2d_const(x, weight, bias, opts)
}

/// [`conv2d`] with the weight [Cout, Cin/groups, kH, kW] and bias [Cout] already built as
/// fp16 constants (importers that convert weights themselves); shapes are checked as in `conv2d`.
pub fn conv2d_const(
    x: &Tensor,
    weight: Tensor,
    bias: Option<Tensor>,
    opts: ConvOptions,
) -> Result<Tensor> {
    let mut srcs = vec![x.clone(), weight];
    srcs.extend(bias);
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
