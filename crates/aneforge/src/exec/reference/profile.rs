//! Per-op profiling of the reference executor: each step's label (op, output shape, bytes,
//! flops) built at load time, and the span around a step, taken only when a profile is passed.
//! A conv step with folded ops (see `conv_epilogue`) is one row named after all of them.

use super::conv_epilogue::Chain;
use crate::cost::work::node_work;
use crate::exec::profile::{OpLabel, Open, Profile, SpanKind};
use crate::graph::{Graph, Value};
use crate::shape::numel;

/// The label of the step of node `index` of `graph`: the node alone, or, when `chain` folds
/// ops into a conv, `conv+op+...` with the flops of every node and the bytes the step moves
/// (its inputs and its one output: the folded intermediates are never stored).
pub(super) fn step_label(graph: &Graph, index: usize, chain: Option<&Chain>) -> OpLabel {
    let Some(chain) = chain else {
        let w = node_work(graph, index, &graph.nodes[index]);
        return OpLabel {
            op: w.op.to_string(),
            shape: w.output_shapes.into_iter().next().unwrap_or_default(),
            bytes: w.bytes,
            flops: w.flops,
        };
    };
    let nodes: Vec<usize> = std::iter::once(chain.conv).chain(chain.folded()).collect();
    let names: Vec<&str> = nodes
        .iter()
        .map(|&n| node_work(graph, n, &graph.nodes[n]).op)
        .collect();
    group_label(graph, index, &names.join("+"), &nodes, chain.inputs(graph))
}

/// The label of a step running `nodes` of `graph` as one (its output: node `index`'s value),
/// named `op`, reading `inputs`: the flops of every node and the bytes the step moves (its
/// inputs and its one output; the intermediates are never stored).
pub(super) fn group_label<'a>(
    graph: &Graph,
    index: usize,
    op: &str,
    nodes: &[usize],
    inputs: impl IntoIterator<Item = &'a Value>,
) -> OpLabel {
    let value_bytes = |t: &crate::ops::TensorType| (numel(&t.shape) * t.dtype.size()) as u64;
    let out = &graph.nodes[index].outputs[0];
    let ins: u64 = inputs.into_iter().map(|v| value_bytes(graph.ty(*v))).sum();
    let flops = nodes
        .iter()
        .map(|&n| node_work(graph, n, &graph.nodes[n]).flops);
    OpLabel {
        op: op.to_string(),
        shape: out.shape.clone(),
        bytes: ins + value_bytes(out),
        flops: flops.sum(),
    }
}

/// Open a step's span when profiling (`None` otherwise: no clock is read).
pub(super) fn begin(profile: &mut Option<Profile>) -> Option<Open> {
    profile.as_mut().map(Profile::open)
}

/// Close a step's span opened by [`begin`].
pub(super) fn end(profile: &mut Option<Profile>, open: Option<Open>, label: &OpLabel) {
    if let (Some(p), Some(o)) = (profile.as_mut(), open) {
        p.close(o, label.op.clone(), SpanKind::Op, Some(label.clone()));
    }
}
