//! The reference design's bridge layers (its §2.3 semantics and semantic guards, not its
//! hardware envelope), as host kernels: geometry (cross_product, fps, radius_search),
//! correlation (cross_correlation, cost_volume), rearranges (space/batch/channel, flatten),
//! views (input_view, dynamic_slice), normalisation and scaled elementwise, and sdpa.

pub mod correlate;
pub mod geometry;
pub mod layers;
pub mod normalize;
pub mod rearrange;
pub mod sdpa;
pub mod view;
