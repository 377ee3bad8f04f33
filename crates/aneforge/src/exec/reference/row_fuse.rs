//! Steps that run a chain of graph ops as one row kernel: layer and RMS norms (`norm_fuse`) and
//! a last-axis softmax with the add before it (`softmax_fuse`). Each keeps the bits of its ops
//! one by one; a chain is taken only when its intermediate values are read inside it alone
//! (never a graph output) and no other fusion runs its ops.

use super::norm_fuse::RowNorm;
use super::softmax_fuse::AddSoftmax;
use crate::dtype::DType;
use crate::graph::{Graph, Value};
use crate::ops::elementwise::Binary;
use crate::ops::reduce::ReduceKind;
use crate::ops::{Buf, Op};

/// One row-kernel step.
#[derive(Debug)]
pub(super) enum RowStep {
    Norm(RowNorm),
    AddSoftmax(AddSoftmax),
}

impl RowStep {
    /// The values the step reads, in its input order.
    pub fn inputs(&self) -> &[Value] {
        match self {
            RowStep::Norm(r) => &r.inputs,
            RowStep::AddSoftmax(a) => &a.inputs,
        }
    }

    /// Every node the step runs, in graph order; the last one's value is its output.
    pub fn nodes(&self) -> &[usize] {
        match self {
            RowStep::Norm(r) => &r.nodes,
            RowStep::AddSoftmax(a) => &a.nodes,
        }
    }

    /// What a profile calls the step.
    pub fn name(&self) -> &'static str {
        match self {
            RowStep::Norm(r) => r.name(),
            RowStep::AddSoftmax(_) => "add+softmax",
        }
    }

    /// Run on the step's input buffers into `y` (the output's values).
    pub fn run(&self, ins: &[&Buf], y: &mut [f32]) {
        match self {
            RowStep::Norm(r) => r.run(ins, y),
            RowStep::AddSoftmax(a) => a.run(ins, y),
        }
    }
}

/// The row steps of `g` keyed by their last node, and `absorbed[i]` for the other nodes they
/// run; `taken[i]` marks nodes another fusion already runs (they never join a step).
pub(super) fn find(g: &Graph, taken: &[bool]) -> (Vec<Option<RowStep>>, Vec<bool>) {
    let n = g.nodes.len();
    let m = Matcher {
        g,
        readers: super::conv_epilogue::port0_readers(g),
    };
    let mut steps: Vec<Option<RowStep>> = (0..n).map(|_| None).collect();
    let mut absorbed = vec![false; n];
    for i in 0..n {
        let found = m.at_rsqrt(i).map(RowStep::Norm);
        let Some(step) = found.or_else(|| m.at_softmax(i).map(RowStep::AddSoftmax)) else {
            continue;
        };
        let free = |&j: &usize| !taken[j] && !absorbed[j] && steps[j].is_none();
        if !step.nodes().iter().all(free) {
            continue;
        }
        let (&last, rest) = step.nodes().split_last().expect("a step runs nodes");
        rest.iter().for_each(|&j| absorbed[j] = true);
        steps[last] = Some(step);
    }
    (steps, absorbed)
}

/// Pattern matching on one graph: its nodes and who reads each node's port 0.
pub(super) struct Matcher<'g> {
    pub g: &'g Graph,
    pub readers: Vec<Vec<usize>>,
}

impl Matcher<'_> {
    /// Node i's only reader (not a graph output).
    pub(super) fn sole_reader(&self, i: usize) -> Option<usize> {
        match self.readers[i][..] {
            [r] if r != usize::MAX => Some(r),
            _ => None,
        }
    }

    /// The node of input `k` of node `i`, when it is a port-0 value.
    pub(super) fn input(&self, i: usize, k: usize) -> Option<usize> {
        let v = self.g.nodes[i].inputs.get(k)?;
        (v.port == 0).then_some(v.node)
    }

    /// The two operand values of binary node i of `kind`.
    pub(super) fn binary_values(&self, i: usize, kind: Binary) -> Option<[Value; 2]> {
        let node = &self.g.nodes[i];
        (node.op == Op::Binary(kind)).then_some(())?;
        node.inputs[..].try_into().ok()
    }

    /// The operand nodes of binary node i of `kind` (port-0 values).
    pub(super) fn binary(&self, i: usize, kind: Binary) -> Option<(usize, usize)> {
        let [a, b] = self.binary_values(i, kind)?;
        (a.port == 0 && b.port == 0).then_some((a.node, b.node))
    }

    /// The input node of node i when i is a `reduce_<kind>` over the last axis keeping dims.
    pub(super) fn reduce(&self, i: usize, kind: ReduceKind) -> Option<usize> {
        let Op::Reduce(r) = &self.g.nodes[i].op else {
            return None;
        };
        let rank = self.shape(i)?.len();
        (r.kind == kind && r.keep_dims && r.axes == [rank - 1]).then_some(())?;
        self.input(i, 0)
    }

    /// The value of a single-element fp16 constant node.
    pub(super) fn scalar(&self, i: usize) -> Option<f32> {
        match &self.g.nodes[i].op {
            Op::Const(c) if c.values.len() == 1 => Some(c.values[0].to_f32()),
            _ => None,
        }
    }

    /// Node i's one output shape.
    pub(super) fn shape(&self, i: usize) -> Option<&[usize]> {
        match &self.g.nodes[i].outputs[..] {
            [t] => Some(&t.shape),
            _ => None,
        }
    }

    /// Node i has one fp16 output.
    pub(super) fn fp16(&self, i: usize) -> bool {
        matches!(&self.g.nodes[i].outputs[..], [t] if t.dtype == DType::Fp16)
    }
}

/// The pair, swapped if needed so that `test(first, second)` holds.
pub(super) fn either(
    (a, b): (usize, usize),
    test: impl Fn(usize, usize) -> bool,
) -> Option<(usize, usize)> {
    if test(a, b) {
        Some((a, b))
    } else {
        test(b, a).then_some((b, a))
    }
}
