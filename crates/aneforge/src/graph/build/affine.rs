//! Builders for the affine ops.

use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::affine::Affine;
use crate::ops::Op;

/// Warp `x` [B, C, H, W] by `transform` ([B, 6] or [1, 6], a graph tensor or constant) into [B, C, h, w]
/// (see [`Affine`] for the coordinate convention). The op runs natively from A14; A13 rejects it.
pub fn affine(
    x: &Tensor,
    transform: &Tensor,
    h: usize,
    w: usize,
    align_corners: bool,
) -> Result<Tensor> {
    Tensor::apply1(
        Op::Affine(Affine {
            h,
            w,
            align_corners,
        }),
        vec![x.clone(), transform.clone()],
    )
}
