//! Builders for the resize ops.

use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::resize::{Resize, SamplingMode};
use crate::ops::Op;

/// Builders (fp16, rank >= 3; the last two axes are resized).
impl Tensor {
    /// Nearest-neighbour resize of the last two axes to `(h, w)`; output (i, j) reads input (floor(i·H/h), floor(j·W/w)).
    pub fn resize_nearest_neighbor(&self, h: usize, w: usize) -> Result<Tensor> {
        Tensor::apply1(Op::Resize(Resize::Nearest { h, w }), vec![self.clone()])
    }
    /// Bilinear resize of the last two axes to `(h, w)`, half-pixel sampling (UNALIGN_CORNERS) unless `align_corners`.
    pub fn resize_bilinear(&self, h: usize, w: usize, align_corners: bool) -> Result<Tensor> {
        self.resize_bilinear_sampled(
            h,
            w,
            if align_corners {
                SamplingMode::AlignCorners
            } else {
                SamplingMode::UnalignCorners
            },
        )
    }
    /// Bilinear resize of the last two axes to `(h, w)` with an explicit MIL sampling mode.
    pub fn resize_bilinear_sampled(
        &self,
        h: usize,
        w: usize,
        mode: SamplingMode,
    ) -> Result<Tensor> {
        Tensor::apply1(
            Op::Resize(Resize::Bilinear { h, w, mode }),
            vec![self.clone()],
        )
    }
    /// Bilinear upsample of the last two axes by factors `(sh, sw)` > 0 to `floor(in · s)`, half-pixel unless `align_corners`.
    pub fn upsample_bilinear(&self, sh: f32, sw: f32, align_corners: bool) -> Result<Tensor> {
        Tensor::apply1(
            Op::Resize(Resize::Upsample {
                sh,
                sw,
                align_corners,
            }),
            vec![self.clone()],
        )
    }
}
