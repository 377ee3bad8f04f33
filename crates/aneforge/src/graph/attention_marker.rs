//! The attention marker a decomposed `sdpa` / `mha` / `cross_attention` output node carries
//! (built by `graph::build::attention`, re-tiled by `plan::retile`).

use half::f16;

use crate::graph::Tensor;

/// How each query tile is masked.
#[derive(Clone, Debug)]
pub(crate) enum Mask {
    None,
    Causal,
    /// fp16 [Sq, Skv] rows of a user mask.
    Rows(Vec<f16>),
}

/// A decomposed attention as its builder made it: the operands, scale, mask and tile count.
#[derive(Clone, Debug)]
pub struct Attention {
    /// The builder (`sdpa`, `mha` or `cross_attention`), for error messages.
    pub op: &'static str,
    pub q: Tensor,
    pub k: Tensor,
    pub v: Tensor,
    pub scale: f32,
    pub(crate) mask: Mask,
    /// Query tiles of the decomposition on the marked node.
    pub tiles: usize,
}

impl Attention {
    /// Query rows (Sq).
    pub fn rows(&self) -> usize {
        self.q.shape()[2]
    }
}
