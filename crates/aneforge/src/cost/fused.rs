//! Fused steps as the reference executor runs them. A conv and the elementwise ops folded into
//! its output pass (batch_norm, a residual add, activations; see
//! `exec::reference::conv_epilogue`) are one step: the conv costs what a conv costs; each folded
//! op costs its elements at the calibrated epilogue rate, with no per-op overhead and no
//! rounding pass of its own (the step rounds once, inside the pass). A run of consecutive
//! elementwise steps over one element count (see `exec::reference::train_fuse`) is one step
//! too: its first op costs what the op costs as its own step (reading its operands, writing its
//! result), every later op its elements at its form's calibrated in-run rate.

use super::host::{HostConstants, RateCurve};
use super::work::{elementwise_form, ElementwiseForm, NodeWork};
use crate::exec::reference::conv_epilogue::find_chains;
use crate::graph::Graph;
use crate::ops::Op;
use crate::shape::numel;

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

/// The fused elementwise runs of `graph` (node lists in step order), as the executor forms them:
/// the steps are the nodes in index order that are neither inputs, constants nor folded into a
/// conv's step; a run is two or more consecutive plain elementwise steps (unary, binary,
/// comparison, select; one output; not a conv's step) whose operands all have the output's
/// element count (> 0) or one element, every step of the run with the same count.
pub fn elementwise_runs(graph: &Graph) -> Vec<Vec<usize>> {
    let (chains, absorbed) = find_chains(graph);
    let len = |i: usize| -> Option<usize> {
        let node = &graph.nodes[i];
        let plain = matches!(
            node.op,
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select(_)
        );
        if !plain || chains[i].is_some() || node.outputs.len() != 1 {
            return None;
        }
        let n = numel(&node.outputs[0].shape);
        let operand =
            |v: &crate::graph::Value| matches!(numel(&graph.ty(*v).shape), k if k == n || k == 1);
        (n > 0 && node.inputs.iter().all(operand)).then_some(n)
    };
    let steps = (0..graph.nodes.len()).filter(|&i| {
        !absorbed[i]
            && !matches!(
                graph.nodes[i].op,
                Op::Input(_) | Op::Const(_) | Op::Constexpr(_)
            )
    });
    let mut runs: Vec<Vec<usize>> = Vec::new();
    let mut run: Vec<(usize, usize)> = Vec::new();
    for i in steps.map(Some).chain([None]) {
        let n = i.and_then(len);
        if run.first().is_some_and(|&(_, m)| n != Some(m)) {
            if run.len() >= 2 {
                runs.push(run.iter().map(|&(j, _)| j).collect());
            }
            run.clear();
        }
        if let (Some(i), Some(n)) = (i, n) {
            run.push((i, n));
        }
    }
    runs
}

/// For every node of `graph`, the first node of the fused elementwise run that runs it (`None`
/// for a node outside a run, and for a run's first node).
pub fn run_into(graph: &Graph) -> Vec<Option<usize>> {
    let mut into = vec![None; graph.nodes.len()];
    for run in elementwise_runs(graph) {
        for &n in &run[1..] {
            into[n] = Some(run[0]);
        }
    }
    into
}

/// Whether `c` holds the in-run rates (calibration files older than them cost every op of a
/// run as its own step).
pub fn has_run_rates(c: &HostConstants) -> bool {
    [
        &c.fused_binary_curve,
        &c.fused_unary_curve,
        &c.fused_scalar_curve,
    ]
    .iter()
    .any(|k| k.rate(1.0).is_some())
}

/// µs of an op inside a fused run after its first: its elements at its form's in-run rate
/// (a form without an in-run curve: the binary one's).
pub fn in_run_us(w: &NodeWork, c: &HostConstants) -> f64 {
    let curve: &RateCurve = match elementwise_form(w) {
        ElementwiseForm::Unary => &c.fused_unary_curve,
        ElementwiseForm::Scalar => &c.fused_scalar_curve,
        ElementwiseForm::Binary | ElementwiseForm::Broadcast => &c.fused_binary_curve,
    };
    let flops = w.flops as f64;
    let rate = curve
        .rate(flops)
        .or_else(|| c.fused_binary_curve.rate(flops))
        .unwrap_or(c.elementwise_per_us);
    flops / rate
}
