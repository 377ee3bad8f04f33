//! Per-op profiling of the reference executor: each step's label (op, output shape, bytes,
//! flops) built at load time, and the span around a step, taken only when a profile is passed.

use crate::cost::work::node_work;
use crate::exec::profile::{OpLabel, Open, Profile, SpanKind};
use crate::graph::Graph;

/// The label of node `index` of `graph` as a profiled step.
pub(super) fn step_label(graph: &Graph, index: usize) -> OpLabel {
    let w = node_work(graph, index, &graph.nodes[index]);
    OpLabel {
        op: w.op,
        shape: w.output_shapes.into_iter().next().unwrap_or_default(),
        bytes: w.bytes,
        flops: w.flops,
    }
}

/// Open a step's span when profiling (`None` otherwise: no clock is read).
pub(super) fn begin(profile: &mut Option<Profile>) -> Option<Open> {
    profile.as_mut().map(Profile::open)
}

/// Close a step's span opened by [`begin`].
pub(super) fn end(profile: &mut Option<Profile>, open: Option<Open>, label: &OpLabel) {
    if let (Some(p), Some(o)) = (profile.as_mut(), open) {
        p.close(o, label.op.to_string(), SpanKind::Op, Some(label.clone()));
    }
}
