//! Builders of the reference design's bridge layers (`ops/host_bridge.rs`): host ops with its
//! §2.3 semantics. Shape and parameter errors are raised here, at build time, by the op's own
//! shape rule; a graph holding one compiles to a segmented plan (or, under `route="auto"` /
//! `"fused"`, to its fused decomposition where one exists: see `plan/route.rs`).

use super::host::host;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::host::bridge::{
    BlockRearrange, CostVolume, CrossCorrelation, CrossProduct, DynamicSlice, Flatten, Fps,
    InputView, MinmaxNorm, RadiusSearch, ScaledElementwise, Sdpa,
};
use crate::ops::host::normalize::{minmax_norm_axis, ScaledOp};
use crate::ops::host::rearrange::{BlockAxis, Direction};
use crate::ops::host::HostOp;

/// The single output of a host op.
fn one(op: HostOp, srcs: &[&Tensor]) -> Result<Tensor> {
    Ok(host(op, srcs.iter().map(|t| (*t).clone()).collect())?.remove(0))
}

/// A non-negative count as `usize`, else a value error naming `op` and `what`.
fn count(op: &str, what: &str, v: i64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::value(op, format!("{what} must be >= 0, got {v}")))
}

/// `a × b` per 3-vector on the last axis; `a`, `b` fp16 of the same shape `[..., 3]`.
pub fn cross_product(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    one(HostOp::CrossProduct(CrossProduct {}), &[a, b])
}

/// Valid, unflipped 2-D correlation of `x [H, W]` with `template [Th, Tw]` (Th <= H, Tw <= W):
/// `[H - Th + 1, W - Tw + 1]`.
pub fn cross_correlation(x: &Tensor, template: &Tensor) -> Result<Tensor> {
    one(
        HostOp::CrossCorrelation(CrossCorrelation {}),
        &[x, template],
    )
}

/// `out[d, x] = |aux[x] - reference[x + d]|` for `d` in `0..=disparity_range`: `aux [Wa]`,
/// `reference [Wr]` with `Wr >= Wa + disparity_range`; output `[R + 1, Wa]`.
pub fn cost_volume(aux: &Tensor, reference: &Tensor, disparity_range: i64) -> Result<Tensor> {
    let r = count("cost_volume", "disparity_range", disparity_range)?;
    one(
        HostOp::CostVolume(CostVolume { disparity_range: r }),
        &[aux, reference],
    )
}

/// Greedy farthest point sampling of `points [N, 3]` from point 0: `[k, 3]`, `1 <= k <= N`.
pub fn fps(points: &Tensor, k: i64) -> Result<Tensor> {
    let k = count("fps", "k", k)?;
    one(HostOp::Fps(Fps { k }), &[points])
}

/// 0/1 membership `[N, M]`: point `i` of `points [N, 3]` within `radius` (inclusive, finite,
/// >= 0) of centroid `j` of `centroids [M, 3]`.
pub fn radius_search(points: &Tensor, centroids: &Tensor, radius: f64) -> Result<Tensor> {
    one(
        HostOp::RadiusSearch(RadiusSearch { radius }),
        &[points, centroids],
    )
}

/// `scale · (x OP z)` for same-shaped fp16 `x`, `z`; `op` is add, sub, mul (mult), min or max;
/// `scale` finite.
pub fn scaled_elementwise(x: &Tensor, z: &Tensor, op: &str, scale: f32) -> Result<Tensor> {
    let op = ScaledOp::parse(op)?;
    one(
        HostOp::ScaledElementwise(ScaledElementwise { op, scale }),
        &[x, z],
    )
}

/// Attention `softmax(q kᵀ · scale + mask) v` over the last two axes, computed in f32 on the
/// host: `q [..., Sq, D]`, `k [..., Skv, D]`, `v [..., Skv, Dv]` (equal leading axes), an
/// optional additive `mask` broadcasting to `[..., Sq, Skv]` (a runtime tensor); `scale`
/// defaults to 1/√D. A row with no finite score is a run-time error. Output `[..., Sq, Dv]`.
pub fn sdpa_host(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: Option<f32>,
) -> Result<Tensor> {
    let d = *q.shape().last().unwrap_or(&1);
    let scale = scale.unwrap_or(1.0 / (d.max(1) as f32).sqrt());
    let op = HostOp::Sdpa(Sdpa {
        scale,
        masked: mask.is_some(),
    });
    match mask {
        Some(m) => one(op, &[q, k, v, m]),
        None => one(op, &[q, k, v]),
    }
}

impl Tensor {
    /// `(x − min) / (max − min + eps)` along `dimension` ("width" = axis 3, "height" = axis 2)
    /// of an fp16 `[N, C, H, W]` tensor; `eps` finite and > 0.
    pub fn minmax_norm(&self, dimension: &str, eps: f32) -> Result<Tensor> {
        let axis = minmax_norm_axis(self.shape(), dimension, eps as f64)?;
        one(HostOp::MinmaxNorm(MinmaxNorm { axis, eps }), &[self])
    }

    fn block(&self, axis: BlockAxis, direction: Direction, bh: i64, bw: i64) -> Result<Tensor> {
        let name = crate::ops::host::rearrange::op_name(axis, direction);
        let op = BlockRearrange {
            axis,
            direction,
            bh: count(name, "bh", bh)?,
            bw: count(name, "bw", bw)?,
        };
        one(HostOp::BlockRearrange(op), &[self])
    }

    /// `[N, C, H, W]` → `[N·bh·bw, C, H/bh, W/bw]`, TensorFlow order (blocks outermost).
    pub fn space_to_batch(&self, bh: i64, bw: i64) -> Result<Tensor> {
        self.block(BlockAxis::Batch, Direction::FromSpace, bh, bw)
    }

    /// Inverse of [`Tensor::space_to_batch`]: `[N·bh·bw, C, H, W]` → `[N, C, H·bh, W·bw]`.
    pub fn batch_to_space(&self, bh: i64, bw: i64) -> Result<Tensor> {
        self.block(BlockAxis::Batch, Direction::ToSpace, bh, bw)
    }

    /// `[N, C, H, W]` → `[N, bh·bw·C, H/bh, W/bw]` (blocks outside channels).
    pub fn space_to_channel(&self, bh: i64, bw: i64) -> Result<Tensor> {
        self.block(BlockAxis::Channel, Direction::FromSpace, bh, bw)
    }

    /// Inverse of [`Tensor::space_to_channel`]: `[N, bh·bw·C, H, W]` → `[N, C, H·bh, W·bw]`.
    pub fn channel_to_space(&self, bh: i64, bw: i64) -> Result<Tensor> {
        self.block(BlockAxis::Channel, Direction::ToSpace, bh, bw)
    }

    /// The row-major elements as `[numel]` (host op; a reshape under fused routing).
    pub fn flatten(&self) -> Result<Tensor> {
        one(HostOp::Flatten(Flatten {}), &[self])
    }

    /// Elements `offset..offset + size` of the flattened tensor: `[size]`; `offset >= 0`,
    /// `size >= 1`, `offset + size <= numel`.
    pub fn input_view(&self, offset: i64, size: i64) -> Result<Tensor> {
        let op = InputView {
            offset: count("input_view", "offset", offset)?,
            size: count("input_view", "size", size)?,
        };
        one(HostOp::InputView(op), &[self])
    }

    /// The box `start[d] .. start[d] + sizes[d]` with an int32 `start [rank]` read at run time
    /// (never clamped: a box leaving the tensor is a run-time error naming axis and value).
    pub fn dynamic_slice(&self, start: &Tensor, sizes: &[i64]) -> Result<Tensor> {
        let sizes = sizes
            .iter()
            .map(|&s| count("dynamic_slice", "sizes", s))
            .collect::<Result<Vec<_>>>()?;
        one(HostOp::DynamicSlice(DynamicSlice { sizes }), &[self, start])
    }
}

/// `x` with its last two axes swapped (rank >= 2).
pub fn transpose_last(x: &Tensor) -> Result<Tensor> {
    let r = x.rank();
    if r < 2 {
        return Err(Error::shape(
            "transpose_last",
            format!("needs rank >= 2, got {:?}", x.shape()),
        ));
    }
    let mut perm: Vec<i64> = (0..r as i64).collect();
    perm.swap(r - 2, r - 1);
    x.transpose(&perm)
}

/// The attention probabilities `softmax(q kᵀ · scale + mask)` in fused ops (shapes as
/// [`sdpa_host`]).
pub fn sdpa_probs(q: &Tensor, k: &Tensor, mask: Option<&Tensor>, scale: f32) -> Result<Tensor> {
    let scores = q.matmul(&transpose_last(k)?)?.mul_scalar(scale)?;
    match mask {
        Some(m) => scores.add(m)?.softmax(-1),
        None => scores.softmax(-1),
    }
}

/// The fused decomposition of the host `sdpa`: `sdpa_probs(q, k, mask, scale) @ v`.
pub fn sdpa_fused(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f32,
) -> Result<Tensor> {
    sdpa_probs(q, k, mask, scale)?.matmul(v)
}
