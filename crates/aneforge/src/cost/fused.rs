//! Fused steps as the reference executor runs them: a conv and the elementwise ops folded into
//! its output pass (batch_norm, a residual add, activations; see
//! `exec::reference::conv_epilogue`) are one step. The conv costs what a conv costs; each folded
//! op costs its elements at the calibrated epilogue rate, with no per-op overhead and no
//! rounding pass of its own (the step rounds once, inside the pass).

use super::host::HostConstants;
use super::work::NodeWork;
use crate::exec::reference::conv_epilogue::find_chains;
use crate::graph::Graph;

/// For every node of `graph`, the conv node whose step runs it (`None` for a node that runs as
/// its own step, the conv of a chain included).
pub fn folded_into(graph: &Graph) -> Vec<Option<usize>> {
    let mut into = vec![None; graph.nodes.len()];
    for chain in find_chains(graph).0.into_iter().flatten() {
        for n in chain.folded() {
            into[n] = Some(chain.conv);
        }
    }
    into
}

/// µs of a folded op: its elements over `c.epilogue_per_us` (callers fold only when that rate
/// is set; calibration files older than it cost every op as its own step).
pub fn folded_us(w: &NodeWork, c: &HostConstants) -> f64 {
    w.flops as f64 / c.epilogue_per_us
}
