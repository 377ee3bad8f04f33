//! Builders for the resize ops.

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::io::HostArray;
use crate::ops::resize::{Resize, SamplingMode};
use crate::ops::Op;
use crate::shape::MAX_EXTENT;

/// `[n, out]` bilinear weights of PyTorch's `scale_factor` mapping: output o samples input
/// (o + 0.5)/s − 0.5, clamped to [0, n − 1], split between its two neighbours.
fn scale_mapped_weights(n: usize, out: usize, s: f64) -> Vec<f32> {
    let mut m = vec![0f32; n * out];
    for o in 0..out {
        let src = ((o as f64 + 0.5) / s - 0.5).clamp(0.0, (n - 1) as f64);
        let lo = src.floor() as usize;
        let hi = (lo + 1).min(n - 1);
        let t = src - lo as f64;
        m[lo * out + o] += (1.0 - t) as f32;
        m[hi * out + o] += t as f32;
    }
    m
}

/// Builders (fp16, rank >= 3; the last two axes are resized).
impl Tensor {
    /// Nearest-neighbour resize of the last two axes to `(h, w)`; output (i, j) reads input (floor(i·H/h), floor(j·W/w)).
    pub fn resize_nearest_neighbor(&self, h: usize, w: usize) -> Result<Tensor> {
        Tensor::apply1(Op::Resize(Resize::Nearest { h, w }), vec![self.clone()])
    }
    /// Bilinear resize of the last two axes to `(h, w)`: half-pixel sampling (UNALIGN_CORNERS), or with
    /// `align_corners` STRICT_ALIGN_CORNERS, PyTorch's and ONNX's rule (a size-1 output samples index 0).
    pub fn resize_bilinear(&self, h: usize, w: usize, align_corners: bool) -> Result<Tensor> {
        self.resize_bilinear_sampled(
            h,
            w,
            if align_corners {
                SamplingMode::StrictAlignCorners
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
    /// Bilinear upsample of the last two axes (x rank ≥ 3) by factors `(sh, sw)` > 0 to
    /// `floor(in · s)` with PyTorch's default `scale_factor` mapping (source (i + 0.5)/s − 0.5,
    /// `recompute_scale_factor=False`), as two matmuls with baked fp16 interpolation weights.
    pub fn upsample_bilinear_scale_mapped(&self, sh: f32, sw: f32) -> Result<Tensor> {
        const OP: &str = "upsample_bilinear";
        let r = self.rank();
        if r < 3 || !(sh.is_finite() && sw.is_finite() && sh > 0.0 && sw > 0.0) {
            return Err(Error::value(
                OP,
                format!(
                    "x must have rank >= 3 and scale factors be finite and > 0, got x {:?}, ({sh}, {sw})",
                    self.shape()
                ),
            ));
        }
        let (h, w) = (self.shape()[r - 2], self.shape()[r - 1]);
        let (oh, ow) = (
            (h as f64 * sh as f64).floor(),
            (w as f64 * sw as f64).floor(),
        );
        if !(1.0..=MAX_EXTENT as f64).contains(&oh) || !(1.0..=MAX_EXTENT as f64).contains(&ow) {
            return Err(Error::shape(
                OP,
                format!("output extents ({oh}, {ow}) of x {:?} scaled by ({sh}, {sw}) must be in 1..={MAX_EXTENT}", self.shape()),
            ));
        }
        let (oh, ow) = (oh as usize, ow as usize);
        let mut swap: Vec<i64> = (0..r as i64).collect();
        swap.swap(r - 2, r - 1);
        let mw = scale_mapped_weights(w, ow, sw as f64);
        let mh = scale_mapped_weights(h, oh, sh as f64);
        self.matmul_weight(HostArray::f32(&[w, ow], &mw))?
            .transpose(&swap)?
            .matmul_weight(HostArray::f32(&[h, oh], &mh))?
            .transpose(&swap)
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
