//! Per-node work from the graph's types alone: bytes moved and flops, classified by kind.

use super::host::{HostConstants, RateCurve};
use crate::graph::{Graph, Node, Value};
use crate::ops::host::HostOp;
use crate::ops::layout::Layout;
use crate::ops::Op;
use crate::shape::numel;

/// What bounds a node's time on a CPU interpreter (and which host rate costs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkKind {
    /// Matrix products (matmul, einsum): `flops` multiply-adds ×2.
    Gemm,
    /// Convolutions (conv, conv_transpose): `flops` multiply-adds ×2.
    Conv,
    /// Elementwise ops: `flops` = elements touched.
    Elementwise,
    /// Reductions, softmax, pooling, batch/instance norm: `flops` = elements touched.
    Reduce,
    /// Contiguous data movement (reshape, slices, concat, casts, transposes that keep the last
    /// axis): no flops, bytes only.
    Data,
    /// Strided gathers (transposes that move the last axis): `flops` = elements moved, whose
    /// rate depends on the size (in cache or not).
    Permute,
    /// A reshape, squeeze or expand_dims whose input dies at it (read by it alone; not a graph
    /// input, constant or output): the reference executor hands the buffer on, nothing is
    /// copied. `bytes` still counts the copy another executor may make.
    Move,
    /// A host op of a segmented plan (topk, sort, take, scatter, ...; `flatten` is data):
    /// `flops` = elements read or written, whichever is more.
    Host,
}

impl WorkKind {
    /// Lower-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            WorkKind::Gemm => "gemm",
            WorkKind::Conv => "conv",
            WorkKind::Elementwise => "elementwise",
            WorkKind::Reduce => "reduce",
            WorkKind::Data => "data",
            WorkKind::Permute => "permute",
            WorkKind::Move => "move",
            WorkKind::Host => "host",
        }
    }
}

/// One compute node's work: op name, input and output shapes, bytes, flops and kind.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeWork {
    pub node: usize,
    pub op: &'static str,
    pub input_shapes: Vec<Vec<usize>>,
    pub output_shapes: Vec<Vec<usize>>,
    /// Bytes read and written: every input and output at its dtype's width, a compressed weight
    /// at its encoded payload size.
    pub bytes: u64,
    /// 2 × multiply-adds for gemm/conv kinds; elements touched for elementwise/reduce/permute;
    /// 0 for data.
    pub flops: u64,
    pub kind: WorkKind,
    /// The shape measure the kind's rate depends on: min(K, N) of a matrix product, min(K, Cout)
    /// of a convolution (K = multiply-adds per output), elements of a permute; 0 otherwise.
    pub size: u64,
}

/// The work of every compute node (inputs, constants and compressed constants are free: their
/// bytes are counted where they are read), in graph order; reshapes whose input dies at them are
/// [`WorkKind::Move`].
pub fn graph_work(graph: &Graph) -> Vec<NodeWork> {
    let readers = reader_counts(graph);
    graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !is_leaf(&n.op))
        .map(|(i, n)| {
            let mut w = node_work(graph, i, n);
            if moves_input(graph, n, &readers) {
                w.kind = WorkKind::Move;
            }
            w
        })
        .collect()
}

/// Inputs, constants and compressed constants: values that are never computed.
fn is_leaf(op: &Op) -> bool {
    matches!(op, Op::Input(_) | Op::Const(_) | Op::Constexpr(_))
}

/// How many times each value (`[node][port]`) is read: by nodes, and once more per graph output.
fn reader_counts(graph: &Graph) -> Vec<Vec<usize>> {
    let mut counts: Vec<Vec<usize>> = graph
        .nodes
        .iter()
        .map(|n| vec![0; n.outputs.len()])
        .collect();
    let reads = graph.nodes.iter().flat_map(|n| n.inputs.iter());
    for v in reads.chain(graph.outputs.iter().map(|(_, v)| v)) {
        // A value outside the graph (a malformed graph) is left to the checks that report it.
        if let Some(c) = counts.get_mut(v.node).and_then(|c| c.get_mut(v.port)) {
            *c += 1;
        }
    }
    counts
}

/// Whether `node` is a reshape-like op whose one input is computed and read by it alone.
fn moves_input(graph: &Graph, node: &Node, readers: &[Vec<usize>]) -> bool {
    let reshape = matches!(
        node.op,
        Op::Layout(Layout::Reshape { .. } | Layout::Squeeze { .. } | Layout::ExpandDims { .. })
    );
    let read_once = |v: &Value| readers.get(v.node).and_then(|r| r.get(v.port)) == Some(&1);
    reshape && matches!(&node.inputs[..], [v] if read_once(v) && !is_leaf(&graph.nodes[v.node].op))
}

/// The work of node `index` (`node` = `graph.nodes[index]`).
pub fn node_work(graph: &Graph, index: usize, node: &Node) -> NodeWork {
    let inputs: Vec<_> = node.inputs.iter().map(|v| graph.ty(*v)).collect();
    let input_shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape.clone()).collect();
    let output_shapes: Vec<Vec<usize>> = node.outputs.iter().map(|t| t.shape.clone()).collect();
    let size = |t: &crate::ops::TensorType| (numel(&t.shape) * t.dtype.size()) as u64;
    // A compressed weight is read as its encoded payload (int8/int4/sparse/blockwise bytes).
    let read: u64 = node
        .inputs
        .iter()
        .zip(&inputs)
        .map(|(v, t)| match &graph.nodes[v.node].op {
            Op::Constexpr(c) => c.payload_bytes() as u64,
            _ => size(t),
        })
        .sum();
    let bytes = read + node.outputs.iter().map(size).sum::<u64>();
    let out = output_shapes.first().map_or(0, |s| numel(s)) as u64;
    let first = input_shapes.first().map_or(0, |s| numel(s)) as u64;
    let dim = |i: usize, from_end: usize| -> u64 {
        input_shapes
            .get(i)
            .and_then(|s| s.len().checked_sub(from_end).map(|k| s[k]))
            .unwrap_or(1) as u64
    };
    let out_last = output_shapes
        .first()
        .and_then(|s| s.last())
        .copied()
        .unwrap_or(1) as u64;
    let (kind, flops, size) = match &node.op {
        Op::MatMul(m) => {
            let k = if m.transpose_x { dim(0, 2) } else { dim(0, 1) };
            (WorkKind::Gemm, 2 * out * k, k.min(out_last))
        }
        // x [.., W] contracted with y [.., W, .., U]: the last axis of x.
        Op::Einsum(_) => (WorkKind::Gemm, 2 * out * dim(0, 1), dim(0, 1).min(out_last)),
        // weight [Cout, Cin/groups, kh, kw]: each output element is numel(w)/Cout multiply-adds.
        Op::Conv(_) => {
            let w = input_shapes.get(1).map_or(0, |s| numel(s)) as u64;
            let (cout, k) = (dim(1, 4).max(1), w / dim(1, 4).max(1));
            (WorkKind::Conv, 2 * out * k, k.min(cout))
        }
        // weight [Cin, Cout/groups, kh, kw]: each input element scatters numel(w)/Cin multiply-adds.
        Op::ConvTranspose(_) => {
            let w = input_shapes.get(1).map_or(0, |s| numel(s)) as u64;
            let k = w / dim(1, 4).max(1);
            (WorkKind::Conv, 2 * first * k, k)
        }
        Op::Layout(Layout::Transpose { perm })
            if perm.last().is_some_and(|&l| l + 1 != perm.len()) =>
        {
            (WorkKind::Permute, out, out)
        }
        Op::Layout(_) | Op::Rearrange(_) | Op::Cast(_) | Op::Host(HostOp::Flatten(_)) => {
            (WorkKind::Data, 0, 0)
        }
        Op::Host(_) => (WorkKind::Host, first.max(out), 0),
        Op::Reduce(_) | Op::Softmax(_) | Op::Pool(_) | Op::BatchNorm(_) | Op::InstanceNorm(_) => {
            (WorkKind::Reduce, first.max(out), 0)
        }
        _ => (WorkKind::Elementwise, first.max(out), 0),
    };
    NodeWork {
        node: index,
        op: node.op.family().name(),
        input_shapes,
        output_shapes,
        bytes,
        flops,
        kind,
        size,
    }
}

/// How an elementwise op reads its inputs, which sets its per-element rate on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementwiseForm {
    /// One input.
    Unary,
    /// Inputs of the output's size (and ops of three or more inputs).
    Binary,
    /// Two inputs, one of them a single element (`x · k`).
    Scalar,
    /// Two inputs, the smaller repeating over the output (a bias row, a per-row statistic).
    Broadcast,
}

impl ElementwiseForm {
    /// This form's rate curve in `c` (the binary form's is the elementwise curve).
    pub fn curve(self, c: &HostConstants) -> &RateCurve {
        match self {
            ElementwiseForm::Unary => &c.unary_curve,
            ElementwiseForm::Binary => &c.elementwise_curve,
            ElementwiseForm::Scalar => &c.scalar_curve,
            ElementwiseForm::Broadcast => &c.broadcast_curve,
        }
    }
}

/// The form of an elementwise node from its input shapes.
pub fn elementwise_form(w: &NodeWork) -> ElementwiseForm {
    let sizes: Vec<usize> = w.input_shapes.iter().map(|s| numel(s)).collect();
    match sizes[..] {
        [_] => ElementwiseForm::Unary,
        [a, b] if a == 1 || b == 1 => match a.max(b) {
            1 => ElementwiseForm::Binary,
            _ => ElementwiseForm::Scalar,
        },
        [a, b] if a != b => ElementwiseForm::Broadcast,
        _ => ElementwiseForm::Binary,
    }
}
