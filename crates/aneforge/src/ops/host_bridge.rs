//! The reference design's bridge layers (its §2.3 semantics, not its hardware envelope) as host
//! ops: one struct per layer (its plan-file fields), each checking its
//! inputs with the kernel's shape rule and running the kernel of its sibling module.

use super::host::correlate::{self, COST_VOLUME, CROSS_CORRELATION};
use super::host::geometry::{self, CROSS_PRODUCT, FPS, RADIUS_SEARCH};
use super::host::normalize::{self, ScaledOp, MINMAX_NORM, SCALED_ELEMENTWISE};
use super::host::rearrange::{self, BlockAxis, Direction};
use super::host::sdpa::{self, SDPA};
use super::host::view::{self, DYNAMIC_SLICE, INPUT_VIEW};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::host::{expect_dtypes, HostKernel, HostRef, HostTensor};
use crate::ops::TensorType;

/// Write `data` into fp16 output 0.
fn put(op: &str, outputs: &mut [HostTensor], data: &[f32]) -> Result<()> {
    outputs[0].f32s_mut(op)?.copy_from_slice(data);
    Ok(())
}

/// Shapes of `inputs`, after checking they are all fp16.
fn fp16_shapes<'a>(op: &str, inputs: &'a [TensorType], n: usize) -> Result<Vec<&'a [usize]>> {
    expect_dtypes(op, inputs, &vec![DType::Fp16; n])?;
    Ok(inputs.iter().map(|t| &t.shape[..]).collect())
}

/// `cross_product(a, b)`: 3-vectors on the last axis, same shapes.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CrossProduct {}

impl HostKernel for CrossProduct {
    fn name(&self) -> &'static str {
        CROSS_PRODUCT
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(CROSS_PRODUCT, inputs, 2)?;
        Ok(vec![TensorType::fp16(geometry::cross_product_shape(
            s[0], s[1],
        )?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let out = geometry::cross_product(
            inputs[0].f32s(CROSS_PRODUCT)?,
            inputs[1].f32s(CROSS_PRODUCT)?,
        )?;
        put(CROSS_PRODUCT, outputs, &out)
    }
}

/// `cross_correlation(x [H, W], template [Th, Tw])`: valid, unflipped.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CrossCorrelation {}

impl HostKernel for CrossCorrelation {
    fn name(&self) -> &'static str {
        CROSS_CORRELATION
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(CROSS_CORRELATION, inputs, 2)?;
        Ok(vec![TensorType::fp16(correlate::cross_correlation_shape(
            s[0], s[1],
        )?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let (x, t) = (inputs[0], inputs[1]);
        let out = correlate::cross_correlation(
            x.f32s(CROSS_CORRELATION)?,
            x.shape,
            t.f32s(CROSS_CORRELATION)?,
            t.shape,
        )?;
        put(CROSS_CORRELATION, outputs, &out)
    }
}

/// `cost_volume(aux [Wa], reference [Wr], disparity_range)`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CostVolume {
    pub disparity_range: usize,
}

impl HostKernel for CostVolume {
    fn name(&self) -> &'static str {
        COST_VOLUME
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(COST_VOLUME, inputs, 2)?;
        let r = i64::try_from(self.disparity_range).unwrap_or(i64::MAX);
        Ok(vec![TensorType::fp16(correlate::cost_volume_shape(
            s[0], s[1], r,
        )?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let out = correlate::cost_volume(
            inputs[0].f32s(COST_VOLUME)?,
            inputs[1].f32s(COST_VOLUME)?,
            self.disparity_range,
        )?;
        put(COST_VOLUME, outputs, &out)
    }
}

/// `fps(points [N, 3], k)`: greedy farthest point sampling from point 0.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fps {
    pub k: usize,
}

impl HostKernel for Fps {
    fn name(&self) -> &'static str {
        FPS
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(FPS, inputs, 1)?;
        let k = i64::try_from(self.k).unwrap_or(i64::MAX);
        Ok(vec![TensorType::fp16(geometry::fps_shape(s[0], k)?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let p = inputs[0];
        let out = geometry::fps(p.f32s(FPS)?, p.shape[0], self.k)?;
        put(FPS, outputs, &out)
    }
}

/// `radius_search(points [N, 3], centroids [M, 3], radius)`: 0/1 membership `[N, M]`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RadiusSearch {
    pub radius: f64,
}

impl HostKernel for RadiusSearch {
    fn name(&self) -> &'static str {
        RADIUS_SEARCH
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(RADIUS_SEARCH, inputs, 2)?;
        Ok(vec![TensorType::fp16(geometry::radius_search_shape(
            s[0],
            s[1],
            self.radius,
        )?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let out = geometry::radius_search(
            inputs[0].f32s(RADIUS_SEARCH)?,
            inputs[1].f32s(RADIUS_SEARCH)?,
            self.radius,
        )?;
        put(RADIUS_SEARCH, outputs, &out)
    }
}

/// `minmax_norm(x [N, C, H, W])` along `axis` (2 = height, 3 = width) with `eps > 0`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MinmaxNorm {
    pub axis: usize,
    pub eps: f32,
}

impl HostKernel for MinmaxNorm {
    fn name(&self) -> &'static str {
        MINMAX_NORM
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(MINMAX_NORM, inputs, 1)?;
        let dimension = match self.axis {
            2 => "height",
            3 => "width",
            a => {
                return Err(Error::value(
                    MINMAX_NORM,
                    format!("axis must be 2 (height) or 3 (width), got {a}"),
                ))
            }
        };
        normalize::minmax_norm_axis(s[0], dimension, self.eps as f64)?;
        Ok(vec![inputs[0].clone()])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0];
        let out = normalize::minmax_norm(x.f32s(MINMAX_NORM)?, x.shape, self.axis, self.eps)?;
        put(MINMAX_NORM, outputs, &out)
    }
}

/// `scaled_elementwise(x, z, op, scale)`: `scale · (x OP z)` on same-shaped tensors.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScaledElementwise {
    pub op: ScaledOp,
    pub scale: f32,
}

impl HostKernel for ScaledElementwise {
    fn name(&self) -> &'static str {
        SCALED_ELEMENTWISE
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(SCALED_ELEMENTWISE, inputs, 2)?;
        Ok(vec![TensorType::fp16(normalize::scaled_elementwise_shape(
            s[0],
            s[1],
            self.scale as f64,
        )?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let (x, z) = (
            inputs[0].f32s(SCALED_ELEMENTWISE)?,
            inputs[1].f32s(SCALED_ELEMENTWISE)?,
        );
        let out = normalize::scaled_elementwise(x, z, self.op, self.scale)?;
        put(SCALED_ELEMENTWISE, outputs, &out)
    }
}

/// `space_to_batch` / `batch_to_space` / `space_to_channel` / `channel_to_space` on
/// `[N, C, H, W]` with blocks `bh × bw`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BlockRearrange {
    pub axis: BlockAxis,
    pub direction: Direction,
    pub bh: usize,
    pub bw: usize,
}

impl HostKernel for BlockRearrange {
    fn name(&self) -> &'static str {
        rearrange::op_name(self.axis, self.direction)
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(self.name(), inputs, 1)?;
        let b = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let shape =
            rearrange::block_shape(s[0], b(self.bh), b(self.bw), self.axis, self.direction)?;
        crate::shape::check(self.name(), &shape)?;
        Ok(vec![TensorType::fp16(shape)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0];
        let out = rearrange::block_rearrange(
            x.f32s(self.name())?,
            x.shape,
            self.bh,
            self.bw,
            self.axis,
            self.direction,
        )?;
        put(self.name(), outputs, &out)
    }
}

/// `flatten(x)`: the row-major elements as `[numel]`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Flatten {}

impl HostKernel for Flatten {
    fn name(&self) -> &'static str {
        rearrange::FLATTEN
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(rearrange::FLATTEN, inputs, 1)?;
        let shape = rearrange::flatten_shape(s[0]);
        crate::shape::check(rearrange::FLATTEN, &shape)?;
        Ok(vec![TensorType::fp16(shape)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        put(
            rearrange::FLATTEN,
            outputs,
            inputs[0].f32s(rearrange::FLATTEN)?,
        )
    }
}

/// `input_view(x, offset, size)`: elements `offset..offset + size` of the flattened `x`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InputView {
    pub offset: usize,
    pub size: usize,
}

impl HostKernel for InputView {
    fn name(&self) -> &'static str {
        INPUT_VIEW
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(INPUT_VIEW, inputs, 1)?;
        let i = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        Ok(vec![TensorType::fp16(view::input_view_shape(
            s[0],
            i(self.offset),
            i(self.size),
        )?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let out = view::input_view(inputs[0].f32s(INPUT_VIEW)?, self.offset, self.size)?;
        put(INPUT_VIEW, outputs, &out)
    }
}

/// `dynamic_slice(x, start, sizes)`: fp16 `x`, int32 `start [rank]` → fp16 `sizes`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DynamicSlice {
    pub sizes: Vec<usize>,
}

impl HostKernel for DynamicSlice {
    fn name(&self) -> &'static str {
        DYNAMIC_SLICE
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(DYNAMIC_SLICE, inputs, &[DType::Fp16, DType::Int32])?;
        let sizes: Vec<i64> = self
            .sizes
            .iter()
            .map(|&s| i64::try_from(s).unwrap_or(i64::MAX))
            .collect();
        Ok(vec![TensorType::fp16(view::dynamic_slice_shape(
            &inputs[0].shape,
            &inputs[1].shape,
            &sizes,
        )?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0];
        let out = view::dynamic_slice(
            x.f32s(DYNAMIC_SLICE)?,
            x.shape,
            inputs[1].i32s(DYNAMIC_SLICE)?,
            &self.sizes,
        )?;
        put(DYNAMIC_SLICE, outputs, &out)
    }
}

/// The gradient of `dynamic_slice`: fp16 `g` (shape `sizes`), int32 `start [rank]` → fp16
/// zeros of `shape` holding `g` in the box at `start`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DynamicSliceAdd {
    pub shape: Vec<usize>,
}

/// Op name of the `dynamic_slice` gradient.
pub const DYNAMIC_SLICE_ADD: &str = "dynamic_slice_add";

impl HostKernel for DynamicSliceAdd {
    fn name(&self) -> &'static str {
        DYNAMIC_SLICE_ADD
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(DYNAMIC_SLICE_ADD, inputs, &[DType::Fp16, DType::Int32])?;
        crate::shape::check(DYNAMIC_SLICE_ADD, &self.shape)?;
        let sizes: Vec<i64> = inputs[0].shape.iter().map(|&s| s as i64).collect();
        view::dynamic_slice_shape(&self.shape, &inputs[1].shape, &sizes)?;
        Ok(vec![TensorType::fp16(self.shape.clone())])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let g = inputs[0];
        view::dynamic_slice_add(
            g.f32s(DYNAMIC_SLICE_ADD)?,
            g.shape,
            inputs[1].i32s(DYNAMIC_SLICE_ADD)?,
            &self.shape,
            outputs[0].f32s_mut(DYNAMIC_SLICE_ADD)?,
        )
    }
}

/// `sdpa(q, k, v[, mask], scale)`: `softmax(q kᵀ · scale + mask) v` over the last two axes;
/// `masked` says whether a fourth (additive mask) input is present.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sdpa {
    pub scale: f32,
    pub masked: bool,
}

impl HostKernel for Sdpa {
    fn name(&self) -> &'static str {
        SDPA
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let s = fp16_shapes(SDPA, inputs, 3 + self.masked as usize)?;
        if !self.scale.is_finite() {
            return Err(Error::value(
                SDPA,
                format!("scale must be finite, got {}", self.scale),
            ));
        }
        Ok(vec![TensorType::fp16(sdpa::sdpa_shape(
            s[0],
            s[1],
            s[2],
            s.get(3).copied(),
        )?)])
    }
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        let mask = match inputs.get(3) {
            Some(m) => Some((m.f32s(SDPA)?, m.shape)),
            None => None,
        };
        let out = sdpa::sdpa(
            (q.f32s(SDPA)?, q.shape),
            (k.f32s(SDPA)?, k.shape),
            (v.f32s(SDPA)?, v.shape),
            mask,
            self.scale,
        )?;
        put(SDPA, outputs, &out)
    }
}
