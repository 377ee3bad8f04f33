//! The attention query-tile variants of `tune`: `attention_tiles=k` for k in {1, h, 2h}, h the
//! builders' heuristic for the longest attention (see
//! [`crate::graph::build::attention::attention_tiles`]), when the graph has an attention of at
//! least [`MIN_ROWS`] query rows.

use crate::compile::CompileOptions;
use crate::graph::attention_marker::Attention;
use crate::graph::build::attention::attention_tiles;
use crate::graph::Tensor;
use crate::plan::retile::attentions;

/// Fewest query rows (of the longest attention) for which tile counts are tuned: below it the
/// heuristic keeps one tile and a split leaves tiles under 256 rows.
pub const MIN_ROWS: usize = 512;

/// The tile counts worth a variant for `outs` compiled with `base`: 1, h and 2h, each at most
/// the fewest query rows of any attention, without the tiling `base` already builds.
pub fn tile_counts(outs: &[(Option<String>, Tensor)], base: &CompileOptions) -> Vec<usize> {
    let atts = attentions(outs);
    let rows = |f: fn(usize, usize) -> usize| atts.iter().map(Attention::rows).reduce(f);
    let (Some(longest), Some(shortest)) = (rows(usize::max), rows(usize::min)) else {
        return Vec::new();
    };
    if longest < MIN_ROWS {
        return Vec::new();
    }
    let built = |k: usize| match base.attention_tiles {
        Some(b) => b == k,
        None => atts.iter().all(|a| a.tiles == k),
    };
    let h = attention_tiles(longest);
    let mut ks = vec![1, h, 2 * h];
    ks.dedup();
    ks.retain(|&k| k <= shortest && !built(k));
    ks
}

/// The tune-cache key's suffix for `outs` compiled with `base`: `/attention_tiles=<auto|k>`
/// when `outs` holds an attention the builders marked, else empty.
pub fn key_suffix(outs: &[(Option<String>, Tensor)], base: &CompileOptions) -> String {
    if attentions(outs).is_empty() {
        return String::new();
    }
    match base.attention_tiles {
        Some(k) => format!("/attention_tiles={k}"),
        None => "/attention_tiles=auto".into(),
    }
}
