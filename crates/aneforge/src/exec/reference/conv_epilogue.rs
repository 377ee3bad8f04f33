//! Conv epilogues of the reference executor: the elementwise ops that directly follow a `conv`
//! (batch_norm, a same-shape add such as a residual, an add of a per-channel value such as a
//! bias parameter, unary activations) run inside the conv's step as one pass over its output
//! instead of one pass (plus one rounding pass) per op.
//!
//! The fp16 contract is kept bit for bit: the pass applies the same scalar formulas in graph
//! order and rounds to fp16 after each op exactly where the unfused ops would, so only the
//! number of passes over memory changes. An op joins a chain only when it is the sole reader
//! of the chain's value, which is not a graph output, and has the conv's output shape; the one
//! exception is a gate `x · u(x)` (hardswish is `x · sigmoid_hard(x)`), whose unary op and mul
//! are the only readers of x and the mul the only reader of u(x).

use std::sync::Arc;

use rayon::prelude::*;

use super::epilogue_lanes::{self, Lane, MAX_STEPS};
use super::fp16_table::Fp16Table;
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::{Graph, Value};
use crate::ops::conv::Conv;
use crate::ops::elementwise::Binary;
use crate::ops::kernel::PAR_MIN_ELEMS;
use crate::ops::simd_fp16::round_in_place;
use crate::ops::unary::Unary;
use crate::ops::{Buf, Op};

/// One op folded into a conv's output pass.
enum Stage {
    /// `batch_norm` with this eps; reads 4 extra inputs (mean, variance, gamma, beta).
    BatchNorm(f32),
    /// `add` of a same-shape value; reads 1 extra input.
    Add,
    /// `add` of a per-channel value ([C, 1, 1] or [1, C, 1, 1]); reads 1 extra input.
    ChannelAdd,
    /// A unary op, with its fp16 table when it is a costly one (see `fp16_table`).
    Unary(Unary, Option<Arc<Fp16Table>>),
    /// `mul(x, u(x))`: the unary op (table, whether u(x) is rounded), then the product.
    Gate(Unary, Option<Arc<Fp16Table>>, bool),
}

/// The ops after a conv run in its output pass: each with whether its output is rounded to fp16.
pub(super) struct Epilogue {
    /// Inputs of the conv itself (2 or 3); the stages' extra inputs follow them in step order.
    conv_inputs: usize,
    conv_round: bool,
    stages: Vec<(Stage, bool)>,
}

/// A conv node and the ops folded into its step, in graph order (the last one's value is the
/// step's output).
#[derive(Debug)]
pub(crate) struct Chain {
    pub conv: usize,
    links: Vec<Link>,
}

/// One folded op of a [`Chain`]: the node(s) and the value (node) it reads from the chain.
#[derive(Clone, Copy, Debug)]
enum Link {
    /// batch_norm, add or a unary op (node), reading node `from`.
    Op { node: usize, from: usize },
    /// The gate `mul(x, u(x))` on the chain's value: the unary node (op `op`) and the mul node.
    Gate { unary: usize, op: Unary, mul: usize },
}

impl Link {
    /// The node whose value the link produces.
    fn last(&self) -> usize {
        match *self {
            Link::Op { node, .. } | Link::Gate { mul: node, .. } => node,
        }
    }
}

/// The fused chains of `g`, keyed by the node whose position the fused step takes (the chain's
/// last node, so every extra input is computed before it), and `absorbed[i]` for every node
/// that runs inside another node's step. A conv with nothing to fold gets no chain.
pub(crate) fn find_chains(g: &Graph) -> (Vec<Option<Chain>>, Vec<bool>) {
    find_chains_after(g, &[])
}

/// [`find_chains`], also folding ops into the output pass of each node `i` with `linear[i]` (a
/// matmul the executor runs with a weight prepared at load, fp16 [M, N] output; per-channel
/// operands are then per column: [N] or [1, N]).
pub(crate) fn find_chains_after(g: &Graph, linear: &[bool]) -> (Vec<Option<Chain>>, Vec<bool>) {
    let n = g.nodes.len();
    let readers = port0_readers(g);
    let mut chains: Vec<Option<Chain>> = (0..n).map(|_| None).collect();
    let mut absorbed = vec![false; n];
    let head = |i: usize| match g.nodes[i].op {
        Op::Conv(_) => Some(4),
        _ => linear.get(i).is_some_and(|&l| l).then_some(2),
    };
    for (c, rank) in (0..n).filter_map(|i| Some((i, head(i)?))) {
        let out = &g.nodes[c].outputs;
        if out.len() != 1 || out[0].dtype != DType::Fp16 || out[0].shape.len() != rank {
            continue;
        }
        let mut links = Vec::new();
        let mut cur = c;
        // A node another conv already took (inside its chain, or as the end of it: an add of
        // two conv outputs is taken by the first conv only, the second runs as its own step).
        let free = |l: &Link| !absorbed[l.last()] && chains[l.last()].is_none();
        while let Some(link) = next_link(g, &readers, cur, c).filter(free) {
            cur = link.last();
            links.push(link);
        }
        let Some(last) = links.last().map(Link::last) else {
            continue;
        };
        absorbed[c] = true;
        for l in &links {
            if let Link::Gate { unary, .. } = *l {
                absorbed[unary] = true;
            }
            absorbed[l.last()] = l.last() != last;
        }
        chains[last] = Some(Chain { conv: c, links });
    }
    (chains, absorbed)
}

/// The reading nodes of each node's port 0 in `g`, one entry per read; a graph output reads
/// twice with no node (`usize::MAX`), so an output is never a sole reader's value.
pub(super) fn port0_readers(g: &Graph) -> Vec<Vec<usize>> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); g.nodes.len()];
    for (j, node) in g.nodes.iter().enumerate() {
        for v in node.inputs.iter().filter(|v| v.port == 0) {
            readers[v.node].push(j);
        }
    }
    for (_, v) in &g.outputs {
        readers[v.node].extend([usize::MAX, usize::MAX]);
    }
    readers
}

/// The op that can run next in the output pass of conv `c`, reading node `cur`, if any.
fn next_link(g: &Graph, readers: &[Vec<usize>], cur: usize, c: usize) -> Option<Link> {
    let kept =
        |j: usize| g.nodes[j].outputs.len() == 1 && g.nodes[j].outputs[0] == g.nodes[c].outputs[0];
    let reads = |j: usize, k: usize| {
        g.nodes[j]
            .inputs
            .get(k)
            .is_some_and(|v| v.node == cur && v.port == 0)
    };
    match readers[cur][..] {
        [j] if kept(j) => {
            let node = &g.nodes[j];
            let ok = match &node.op {
                Op::BatchNorm(_) => reads(j, 0) && node.outputs[0].shape.len() == 4,
                Op::Unary(_) => reads(j, 0),
                Op::Binary(Binary::Add) => {
                    let same =
                        |v: &Value| v.port == 0 && g.nodes[v.node].outputs[0] == node.outputs[0];
                    let chained_and = |other: &Value| {
                        (0..2).any(|k| reads(j, k)) && (same(other) || per_channel(g, other, c))
                    };
                    node.inputs.len() == 2 && chained_and(other_input(g, j, cur))
                }
                _ => false,
            };
            ok.then_some(Link::Op { node: j, from: cur })
        }
        [a, b] if a != b && kept(a) && kept(b) => {
            let (u, m) = if matches!(g.nodes[a].op, Op::Unary(_)) {
                (a, b)
            } else {
                (b, a)
            };
            let Op::Unary(op) = g.nodes[u].op else {
                return None;
            };
            let gate = reads(u, 0)
                && matches!(g.nodes[m].op, Op::Binary(Binary::Mul))
                && readers[u][..] == [m]
                && g.nodes[m]
                    .inputs
                    .iter()
                    .all(|v| v.port == 0 && (v.node == cur || v.node == u));
            gate.then_some(Link::Gate {
                unary: u,
                op,
                mul: m,
            })
        }
        _ => None,
    }
}

/// The input of binary node `node` (two inputs) that is not the chain's value `from`.
fn other_input(g: &Graph, node: usize, from: usize) -> &Value {
    let ins = &g.nodes[node].inputs;
    if ins[0].node == from {
        &ins[1]
    } else {
        &ins[0]
    }
}

/// Whether `v` is a per-channel operand of conv `c`'s [N, C, H, W] output: an fp16 value of
/// shape [C, 1, 1] or [1, C, 1, 1] (broadcast over batch and plane); of a linear head's [M, N]
/// output, [N] or [1, N].
fn per_channel(g: &Graph, v: &Value, c: usize) -> bool {
    let t = &g.nodes[v.node].outputs[v.port];
    let out = &g.nodes[c].outputs[0].shape;
    let mut want = vec![1; out.len()];
    want[1] = out[1];
    t.dtype == DType::Fp16 && t.shape.len() + 1 >= out.len() && want.ends_with(&t.shape)
}

impl Chain {
    /// The nodes folded after the conv, in graph order (a gate's unary node before its mul);
    /// the last one's value is the step's output.
    pub(crate) fn folded(&self) -> Vec<usize> {
        self.links
            .iter()
            .flat_map(|l| match *l {
                Link::Op { node, .. } => vec![node],
                Link::Gate { unary, mul, .. } => vec![unary, mul],
            })
            .collect()
    }

    /// The step's input values: the conv's, then each folded op's inputs other than the chain.
    pub fn inputs<'a>(&self, g: &'a Graph) -> Vec<&'a Value> {
        let mut ins: Vec<&Value> = g.nodes[self.conv].inputs.iter().collect();
        for l in &self.links {
            if let Link::Op { node, from } = *l {
                ins.extend(g.nodes[node].inputs.iter().filter(|v| v.node != from));
            }
        }
        ins
    }

    /// The epilogue of this chain; `round(node)` says whether a node's output is rounded to
    /// fp16, `table(op)` gives a costly unary op's table.
    pub(super) fn epilogue(
        &self,
        g: &Graph,
        round: impl Fn(usize) -> bool,
        mut table: impl FnMut(&Op) -> Option<Arc<Fp16Table>>,
    ) -> Epilogue {
        let stages = self
            .links
            .iter()
            .map(|l| {
                let stage = match (*l, &g.nodes[l.last()].op) {
                    (Link::Gate { unary, op, .. }, _) => {
                        Stage::Gate(op, table(&g.nodes[unary].op), round(unary))
                    }
                    (_, Op::BatchNorm(b)) => Stage::BatchNorm(b.eps),
                    (_, op @ Op::Unary(u)) => Stage::Unary(*u, table(op)),
                    (Link::Op { node, from }, _) => {
                        let other = other_input(g, node, from);
                        if g.ty(*other) == &g.nodes[node].outputs[0] {
                            Stage::Add
                        } else {
                            Stage::ChannelAdd
                        }
                    }
                };
                (stage, round(l.last()))
            })
            .collect();
        Epilogue {
            conv_inputs: g.nodes[self.conv].inputs.len(),
            conv_round: round(self.conv),
            stages,
        }
    }
}

/// Per-call parameters of one stage: batch_norm's per-channel (mean, scale, beta), the added
/// value, or a unary op (with its table, and for a gate whether u(x) is rounded).
enum Params<'a> {
    BatchNorm {
        mean: &'a [f32],
        scale: Vec<f32>,
        beta: &'a [f32],
    },
    Add(&'a [f32]),
    ChannelAdd(&'a [f32]),
    /// A per-channel add on rows [M, N] (a linear head): channel = column.
    ColumnAdd(&'a [f32]),
    Unary(Unary, Option<&'a Fp16Table>),
    Gate(Unary, Option<&'a Fp16Table>, bool),
}

/// Elements processed by all stages before the next piece (stays in L1).
const PIECE: usize = 256;

/// One vector step of a pass before a plane's constants are read (see [`Pass::steps`]).
#[derive(Clone, Copy)]
enum Planned {
    /// A step with no per-plane constant.
    Step(Lane<'static>),
    /// The conv's bias, added in the pass.
    Bias,
    /// The stage of this index in `Pass::params` (batch_norm, an add, or a unary op through
    /// its table).
    Param(usize),
}

impl Epilogue {
    /// The output pass of a conv with nothing folded after it (rounding, and the bias when the
    /// conv leaves it for later), for node `i` of `g` when it is a conv step of its own with a
    /// bias and an fp16 [N, C, H, W] output (a conv with folded ops is no step of its own).
    pub(super) fn bare(g: &Graph, i: usize, round: bool) -> Option<Self> {
        let node = &g.nodes[i];
        let out = &node.outputs;
        let conv = matches!(node.op, Op::Conv(_)) && node.inputs.len() == 3 && out.len() == 1;
        (conv && out[0].dtype == DType::Fp16 && out[0].shape.len() == 4).then(|| Epilogue {
            conv_inputs: 3,
            conv_round: round,
            stages: Vec::new(),
        })
    }

    /// Run conv `c` on the step's inputs `ins` (its own, then the stages' extra ones) and the
    /// folded ops on its output `out[0]`: inside a direct depthwise conv's plane loop, on the
    /// planes it has just written while they are in cache; else as one more pass, adding the bias there when the conv
    /// leaves it out (when that keeps the bits).
    pub fn run_conv(&self, c: &Conv, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (own, extra) = ins.split_at(self.conv_inputs);
        let channels = ins[1].shape[0];
        let pass = self.pass(extra, None, Some(channels));
        let plane: usize = out[0].shape[2..].iter().product();
        let post = |i: usize, p: &mut [f32]| {
            if let Some(pass) = pass.as_ref().filter(|_| plane > 0) {
                pass.planes(i, plane, p);
            }
        };
        if c.eval_depthwise_then(own, out, post)? {
            return Ok(());
        }
        let pass = match c.eval_bias_later(own, out)? {
            true => self.pass(extra, Some(&own[2].data), Some(channels)),
            false => pass,
        };
        if let Some(pass) = pass {
            pass.run(&mut out[0]);
        }
        Ok(())
    }

    /// Run the folded ops of a step whose head computed `out` elsewhere (not yet rounded) in
    /// place: a linear's rows [M, N], each row as one plane, or a conv's [N, C, H, W]
    /// (its bias in); `ins` are the step's inputs (the head's own, then the stages' extra ones).
    pub fn run_rows(&self, ins: &[&Buf], out: &mut Buf) {
        let channels = (out.shape.len() == 4).then(|| out.shape[1]);
        if let Some(pass) = self.pass(&ins[self.conv_inputs..], None, channels) {
            pass.run(out);
        }
    }

    /// The folded ops of one call as a per-plane pass over the conv's output ([N, C, H, W] with
    /// C = `channels`; None for the rows [M, N] of a linear, whose per-channel operands are per
    /// column), not yet rounded, first adding `bias` [C] when the conv left it out; `extra` are
    /// the step's inputs after the conv's own. None when there is nothing to do.
    fn pass<'a>(
        &'a self,
        extra: &[&'a Buf],
        bias: Option<&'a [f32]>,
        channels: Option<usize>,
    ) -> Option<Pass<'a>> {
        if self.stages.is_empty() && !self.conv_round && bias.is_none() {
            return None;
        }
        let mut rest = extra;
        let rows = channels.is_none();
        let params: Vec<(Params, bool)> = self
            .stages
            .iter()
            .map(|(s, round)| {
                let p = match s {
                    Stage::BatchNorm(eps) => {
                        let [mean, var, gamma, beta] = [0, 1, 2, 3].map(|i| &rest[i].data[..]);
                        rest = &rest[4..];
                        // The same expression as `BatchNorm::eval`, so the same bits.
                        let scale = gamma
                            .iter()
                            .zip(var)
                            .map(|(g, v)| g / (v + eps).sqrt())
                            .collect();
                        Params::BatchNorm { mean, scale, beta }
                    }
                    Stage::Add | Stage::ChannelAdd => {
                        let other = &rest[0].data[..];
                        rest = &rest[1..];
                        match s {
                            Stage::Add => Params::Add(other),
                            _ if rows => Params::ColumnAdd(other),
                            _ => Params::ChannelAdd(other),
                        }
                    }
                    Stage::Unary(u, t) => Params::Unary(*u, t.as_deref()),
                    Stage::Gate(u, t, r) => Params::Gate(*u, t.as_deref(), *r),
                };
                (p, *round)
            })
            .collect();
        Some(Pass::new(
            self.conv_round,
            params,
            bias,
            channels.unwrap_or(1),
        ))
    }
}

/// The folded ops of one call, ready to run plane by plane (see [`Epilogue::pass`]).
struct Pass<'a> {
    conv_round: bool,
    params: Vec<(Params<'a>, bool)>,
    bias: Option<&'a [f32]>,
    channels: usize,
    /// The stages as vector steps when they all have a [`Lane`] form and the CPU runs them.
    lanes: Option<Vec<Planned>>,
}

impl<'a> Pass<'a> {
    /// The pass of these stages, on vector lanes when they all have a lane form on this CPU.
    fn new(
        conv_round: bool,
        params: Vec<(Params<'a>, bool)>,
        bias: Option<&'a [f32]>,
        channels: usize,
    ) -> Self {
        let mut pass = Pass {
            conv_round,
            params,
            bias,
            channels,
            lanes: None,
        };
        if epilogue_lanes::available() {
            pass.lanes = pass.plan();
        }
        pass
    }

    /// Run every stage over the whole output [N, C, H, W], one plane at a time, or pieces of
    /// several whole planes when planes are shorter than [`PIECE`] (7×7, 14×14: fewer calls and
    /// scalar tails per element, the same operations on every element).
    fn run(&self, out: &mut Buf) {
        let plane = match out.shape[..] {
            [_, n] => n,
            _ => out.shape[2] * out.shape[3],
        };
        if plane == 0 {
            return;
        }
        let span = (PIECE / plane).max(1) * plane;
        let run = |(g, p): (usize, &mut [f32])| self.planes(g * span / plane, plane, p);
        if out.data.len() >= PAR_MIN_ELEMS {
            out.data.par_chunks_mut(span).enumerate().for_each(run);
        } else {
            out.data.chunks_mut(span).enumerate().for_each(run);
        }
    }

    /// Run every stage over whole planes `p` (planes `first`.. of the output's flat [N·C]
    /// planes, each of `len` elements, not yet rounded): on the vector lanes from a [`PIECE`]
    /// a plane (on smaller planes the per-plane steps cost more than the passes: 7×7 and 14×14
    /// in `ns_per_vector_in_l1`), else pieces of several planes.
    fn planes(&self, first: usize, len: usize, p: &mut [f32]) {
        if let Some(plan) = self.lanes.as_deref().filter(|_| len >= PIECE) {
            let mut steps = [Lane::Round; MAX_STEPS];
            let fill = |q: usize, steps: &mut [Lane<'a>]| {
                let i = first + q;
                let filled = self.steps(plan, i % self.channels, 0, i * len, len, steps);
                filled.expect("epilogue lanes: an operand shorter than the output")
            };
            let steps = &mut steps[..plan.len()];
            // SAFETY: `lanes` is only set when the CPU runs them.
            return unsafe { epilogue_lanes::run_planes(len, p, steps, fill) };
        }
        let span = (PIECE / len).max(1) * len;
        for (g, p) in p.chunks_mut(span).enumerate() {
            match span > len {
                true => self.piece(len, first * len + g * span, p),
                false => self.plane(first + g, p),
            }
        }
    }

    /// Run every stage over plane `i` ([H, W] of the output's flat [N·C] planes, not yet
    /// rounded) on the scalar stages, first adding its channel's bias when the conv left it
    /// out, one piece at a time.
    fn plane(&self, i: usize, p: &mut [f32]) {
        let len = p.len();
        for (ci, chunk) in p.chunks_mut(PIECE).enumerate() {
            self.piece(len, i * len + ci * PIECE, chunk);
        }
    }

    /// Call `f(channel, column, part)` on each plane's part of `chunk`, the flat output's
    /// elements `at`.. (planes of `len` elements; column = the part's first index in its plane).
    fn each_plane(
        &self,
        len: usize,
        at: usize,
        chunk: &mut [f32],
        mut f: impl FnMut(usize, usize, &mut [f32]),
    ) {
        let (mut e, mut rest) = (at, chunk);
        while !rest.is_empty() {
            let column = e % len;
            let (part, tail) = rest.split_at_mut((len - column).min(rest.len()));
            f(e / len % self.channels, column, part);
            e += part.len();
            rest = tail;
        }
    }

    /// The stages as vector steps, in the order and with the roundings of [`Pass::piece`]; None
    /// when a stage has no vector form or there are more than [`MAX_STEPS`] steps.
    fn plan(&self) -> Option<Vec<Planned>> {
        let mut plan = Vec::new();
        if self.bias.is_some() {
            plan.push(Planned::Bias);
        }
        if self.conv_round {
            plan.push(Planned::Step(Lane::Round));
        }
        let mut fp16 = self.conv_round;
        for (i, (param, round)) in self.params.iter().enumerate() {
            let was_fp16 = std::mem::replace(&mut fp16, *round);
            match *param {
                Params::Unary(u, None) => {
                    plan.push(Planned::Step(match u {
                        Unary::Relu => Lane::Relu,
                        Unary::Relu6 => Lane::Relu6,
                        _ => return None,
                    }));
                    // A select of fp16 values is fp16: its rounding is skipped as in `piece`.
                    if was_fp16 {
                        fp16 = true;
                    } else if *round {
                        plan.push(Planned::Step(Lane::Round));
                    }
                    continue;
                }
                Params::Gate(Unary::SigmoidHard { alpha, beta }, None, true) if *round => {
                    plan.push(Planned::Step(Lane::HardswishRounded { alpha, beta }));
                    continue;
                }
                Params::Unary(_, Some(_)) if *round => {
                    plan.push(Planned::Param(i));
                    continue; // rounded by the table
                }
                Params::Unary(..) | Params::Gate(..) => return None,
                _ => plan.push(Planned::Param(i)),
            }
            if *round {
                plan.push(Planned::Step(Lane::Round));
            }
        }
        (plan.len() <= MAX_STEPS).then_some(plan)
    }

    /// Write into `steps` (as long as `plan`) the planned steps on one plane part (channel `k`,
    /// first column `column`, first flat index `e`, `len` elements) with that plane's
    /// constants; None when an operand is shorter than the part needs.
    fn steps(
        &self,
        plan: &[Planned],
        k: usize,
        column: usize,
        e: usize,
        len: usize,
        steps: &mut [Lane<'a>],
    ) -> Option<()> {
        for (slot, planned) in steps.iter_mut().zip(plan) {
            *slot = match *planned {
                Planned::Step(lane) => lane,
                Planned::Bias => Lane::AddConst(*self.bias?.get(k)?),
                Planned::Param(i) => match self.params[i].0 {
                    Params::BatchNorm {
                        mean,
                        ref scale,
                        beta,
                    } => Lane::BatchNorm {
                        mean: *mean.get(k)?,
                        scale: *scale.get(k)?,
                        beta: *beta.get(k)?,
                    },
                    Params::Add(other) => Lane::AddFrom(other.get(e..e + len)?),
                    Params::ChannelAdd(per_channel) => Lane::AddConst(*per_channel.get(k)?),
                    Params::ColumnAdd(per_column) => {
                        Lane::AddFrom(per_column.get(column..column + len)?)
                    }
                    Params::Unary(_, Some(t)) => Lane::Table(t),
                    Params::Unary(..) | Params::Gate(..) => return None,
                },
            };
        }
        Some(())
    }

    /// Run every stage over `chunk` (≤ [`PIECE`] elements, not yet rounded), the flat output's
    /// elements `at`.. in planes of `len` elements (part of one plane or several), first adding
    /// each plane's channel bias when the conv left it out.
    fn piece(&self, len: usize, at: usize, chunk: &mut [f32]) {
        let mut scratch = [0.0f32; PIECE];
        let values = &mut scratch[..chunk.len()];
        if let Some(bias) = self.bias {
            self.each_plane(len, at, chunk, |k, _, part| {
                part.iter_mut().for_each(|v| *v += bias[k])
            });
        }
        if self.conv_round {
            round_in_place(chunk);
        }
        // Whether the chunk holds fp16 values (rounded by the conv or the last stage).
        let mut fp16 = self.conv_round;
        for (param, round) in &self.params {
            let was_fp16 = std::mem::replace(&mut fp16, *round);
            match *param {
                Params::BatchNorm {
                    mean,
                    ref scale,
                    beta,
                } => self.each_plane(len, at, chunk, |k, _, part| {
                    let (m, s, b) = (mean[k], scale[k], beta[k]);
                    part.iter_mut().for_each(|v| *v = (*v - m) * s + b);
                }),
                Params::Add(other) => {
                    let o = &other[at..at + chunk.len()];
                    chunk.iter_mut().zip(o).for_each(|(v, &w)| *v += w);
                }
                Params::ChannelAdd(per_channel) => self.each_plane(len, at, chunk, |k, _, part| {
                    let w = per_channel[k];
                    part.iter_mut().for_each(|v| *v += w);
                }),
                Params::ColumnAdd(per_column) => self.each_plane(len, at, chunk, |_, c, part| {
                    let w = &per_column[c..];
                    part.iter_mut().zip(w).for_each(|(v, &w)| *v += w);
                }),
                Params::Unary(u, None) if was_fp16 && selects(u) => {
                    // Its outputs are inputs or fp16 constants: rounding them is a no-op.
                    values.copy_from_slice(chunk);
                    u.map(values, chunk);
                    fp16 = true;
                    continue;
                }
                Params::Unary(u, t) => {
                    values.copy_from_slice(chunk);
                    unary(u, t, *round, values, chunk);
                    continue; // rounded (or not) by `unary`
                }
                Params::Gate(Unary::SigmoidHard { alpha, beta }, None, true) if *round => {
                    hardswish_rounded(alpha, beta, chunk, values);
                    continue; // rounded by `hardswish_rounded`
                }
                Params::Gate(u, t, r) => {
                    unary(u, t, r, chunk, values);
                    chunk.iter_mut().zip(&*values).for_each(|(v, &g)| *v *= g);
                }
            }
            if *round {
                round_in_place(chunk);
            }
        }
    }
}

/// Whether `u` maps every value to itself or to one of its fp16 parameters (0, 6, lo, hi;
/// NaN to 0 or NaN), so its output on fp16 values is fp16.
fn selects(u: Unary) -> bool {
    matches!(
        u,
        Unary::Relu | Unary::Relu6 | Unary::Abs | Unary::Clip { .. }
    )
}

/// y = u(x), rounded to fp16 when `round` (through the op's table when it has one), as the
/// unary op's step computes it.
fn unary(u: Unary, table: Option<&Fp16Table>, round: bool, x: &[f32], y: &mut [f32]) {
    match table {
        Some(t) if round => return t.eval(x, y),
        _ => u.map(x, y),
    }
    if round {
        round_in_place(y);
    }
}

/// The gate x · hard_sigmoid(x) with both outputs rounded to fp16, in place on `x`, with the
/// bits of the unfused ops (u = round(clamp(alpha·x + beta, 0, 1)), x = round(x · u));
/// `scratch` is as long as `x`. AVX2 + F16C, 8 lanes at a time, when the CPU has them.
fn hardswish_rounded(alpha: f32, beta: f32, x: &mut [f32], scratch: &mut [f32]) {
    if epilogue_lanes::available() {
        // SAFETY: the CPU runs the lanes (just checked); the step reads no other operand.
        unsafe { epilogue_lanes::run(&[Lane::HardswishRounded { alpha, beta }], x) };
        return;
    }
    unary(Unary::SigmoidHard { alpha, beta }, None, true, x, scratch);
    x.iter_mut().zip(&*scratch).for_each(|(v, &g)| *v *= g);
    round_in_place(x);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::reference::round_to_fp16;
    use crate::exec::{PortData, Precision};
    use crate::graph::build::conv::conv2d;
    use crate::graph::build::io::input;
    use crate::graph::build::norm::batch_norm;
    use crate::graph::Tensor;
    use crate::ops::conv::ConvOptions;
    use crate::ops::gemm::tests::rand_vec;
    use crate::ops::io::HostArray;

    /// The executor before fusion: every node's kernel, then fp16 rounding of its output (in
    /// fp16 precision), one node at a time.
    fn node_by_node(g: &Graph, x: &[f32], precision: Precision) -> Vec<f32> {
        let mut vals: Vec<Vec<Buf>> = Vec::new();
        for node in &g.nodes {
            let mut outs: Vec<Buf> = node.outputs.iter().map(|t| Buf::zeros(&t.shape)).collect();
            if let Op::Input(_) = node.op {
                outs[0].data.copy_from_slice(x);
            } else {
                let ins: Vec<&Buf> = node.inputs.iter().map(|v| &vals[v.node][v.port]).collect();
                node.op.family().eval(&ins, &mut outs).unwrap();
            }
            if precision == Precision::Fp16 {
                outs.iter_mut().for_each(|b| round_to_fp16(&mut b.data));
            }
            vals.push(outs);
        }
        let (_, v) = &g.outputs[0];
        vals[v.node][v.port].data.clone()
    }

    /// Weights [cout, cin, k, k] and bias [cout] of the test conv with this seed.
    fn conv_params(cout: usize, cin: usize, k: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
        let w = rand_vec(cout * cin * k * k, seed)
            .into_iter()
            .map(|v| v * 0.5);
        (w.collect(), rand_vec(cout, seed + 1))
    }

    fn conv(x: &Tensor, cout: usize, k: usize, groups: usize, seed: u64) -> Tensor {
        let cin = x.shape()[1] / groups;
        let (w, b) = conv_params(cout, cin, k, seed);
        let opts = ConvOptions {
            pad: [k / 2; 4],
            groups,
            ..Default::default()
        };
        let (bs, ws) = ([cout], [cout, cin, k, k]);
        let bias = HostArray::f32(&bs, &b);
        conv2d(x, HostArray::f32(&ws, &w), Some(bias), opts).unwrap()
    }

    fn bn(x: &Tensor, seed: u64) -> Tensor {
        let c = x.shape()[1];
        let r = rand_vec(4 * c, seed);
        let s: Vec<Vec<f32>> = (0..4).map(|j| r[j * c..(j + 1) * c].to_vec()).collect();
        let var: Vec<f32> = s[1].iter().map(|v| 1.0 + 0.5 * v).collect();
        let cs = [c];
        let [m, g, b] = [0, 2, 3].map(|j| HostArray::f32(&cs, &s[j]));
        batch_norm(x, m, HostArray::f32(&cs, &var), Some(g), Some(b), 1e-3).unwrap()
    }

    /// Every node runs in at most one step: a chain's conv and folded nodes belong to no other
    /// chain, the absorbed nodes are exactly the chains' convs and non-final folded nodes, and
    /// every chain is keyed by its last node.
    fn assert_claimed_once(g: &Graph, chains: &[Option<Chain>], absorbed: &[bool]) {
        let mut owner: Vec<Option<usize>> = vec![None; g.nodes.len()];
        for (end, chain) in chains.iter().enumerate() {
            let Some(chain) = chain else { continue };
            let folded = chain.folded();
            assert_eq!(folded.last(), Some(&end), "{chain:?}");
            for &n in std::iter::once(&chain.conv).chain(&folded) {
                assert_eq!(
                    owner[n], None,
                    "node {n} claimed by chains at {owner:?} and {end}"
                );
                owner[n] = Some(end);
                assert_eq!(absorbed[n], n != end, "node {n} of the chain at {end}");
            }
        }
        for (n, _) in absorbed.iter().enumerate().filter(|(_, &a)| a) {
            assert!(owner[n].is_some(), "node {n} absorbed by no chain");
        }
    }

    /// Compile `y` (one input, random values) for the reference executor in fp16 and fp32
    /// precision, check its chains (`chains` of them, `absorbed` nodes run inside another
    /// node's step, no node claimed twice) and that two runs give every bit of node-by-node
    /// evaluation; returns the fp32-precision output.
    fn check_fused(y: &Tensor, tag: &str, chains: usize, absorbed: usize) -> Vec<f32> {
        let mut fp32 = Vec::new();
        for precision in [Precision::Fp16, Precision::Fp32] {
            let (mut c, dir) =
                super::super::test_support::compile_reference_for_test(y, precision, tag);
            let g = &c.program.graph;
            let shared = super::super::shared_weight::shared_weights(g);
            let linear: Vec<bool> = shared.iter().map(Option::is_some).collect();
            let (found, taken) = find_chains_after(g, &linear);
            assert_claimed_once(&c.program.graph, &found, &taken);
            assert_eq!(found.iter().flatten().count(), chains, "{tag}: {found:?}");
            assert_eq!(taken.iter().filter(|&&a| a).count(), absorbed, "{tag}");
            let g = &c.program.graph;
            let numel = g.nodes[g.inputs[0]].outputs[0].shape.iter().product();
            let xs: Vec<f32> = rand_vec(numel, 9).iter().map(|v| v * 3.0).collect();
            let mut fed = xs.clone();
            if precision == Precision::Fp16 {
                round_to_fp16(&mut fed);
            }
            let want = node_by_node(&c.program.graph, &fed, precision);
            for _ in 0..2 {
                let got = c.run(&[PortData::F32(&xs)]).unwrap().remove(0);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{tag} {precision:?}");
                fp32 = got;
            }
            std::fs::remove_dir_all(dir).unwrap();
        }
        fp32
    }

    /// Residual, batch_norm, relu, hardswish (a gate), relu6 and a depthwise conv, fused and
    /// run by the executor, against node-by-node evaluation: every bit equal, in fp16 and fp32
    /// precision, with a value read twice (not folded) and the add's other input computed
    /// after the conv it follows.
    #[test]
    fn fused_epilogues_keep_every_bit() {
        let x = input(&[1, 8, 12, 12]).unwrap();
        let a = bn(&conv(&x, 16, 3, 1, 1), 2).hardswish().unwrap();
        let d = conv(&a, 16, 3, 16, 3).relu6().unwrap();
        let h = bn(&conv(&d, 16, 1, 1, 4), 5);
        let skip = conv(&a, 16, 1, 1, 6);
        let y = h.add(&skip).unwrap().relu().unwrap().add(&a).unwrap();
        // conv→bn→gate; depthwise→relu6; conv→bn→add→relu→add (the skip conv's add is
        // taken): 3 chains, 8 nodes run inside another node's step.
        check_fused(&y, "conv-epilogue", 3, 8);
    }

    /// Depthwise convs run their folded ops inside the kernel's plane loop: strides 1 and 2,
    /// kernels 3 and 5, odd and even sizes, an output large enough to split planes across
    /// threads; a gate, then relu and a residual add. Every bit equals node-by-node evaluation.
    #[test]
    fn depthwise_epilogues_in_the_plane_loop_keep_every_bit() {
        let dw = |x: &Tensor, k: usize, stride: usize, seed: u64| {
            let c = x.shape()[1];
            let (w, b) = conv_params(c, 1, k, seed);
            let opts = ConvOptions {
                stride: [stride; 2],
                pad: [k / 2; 4],
                groups: c,
                ..Default::default()
            };
            let (ws, bs) = ([c, 1, k, k], [c]);
            let bias = HostArray::f32(&bs, &b);
            conv2d(x, HostArray::f32(&ws, &w), Some(bias), opts).unwrap()
        };
        // (input, first kernel, its stride); the second conv has the other kernel, stride 1.
        let cases = [
            ([1, 8, 13, 11], 3, 2),
            ([1, 6, 15, 15], 5, 2),
            ([1, 8, 13, 11], 5, 1),
            ([1, 3, 7, 7], 3, 1),
            ([1, 16, 48, 48], 3, 1),
        ];
        for (xs, k, stride) in cases {
            let x = input(&xs).unwrap();
            let d = dw(&x, k, stride, 61).hardswish().unwrap();
            let y = dw(&d, 8 - k, 1, 63).relu().unwrap().add(&d).unwrap();
            // dw→gate (conv and hardsigmoid inside the mul's step); dw→relu→add.
            check_fused(&y, &format!("dw-{xs:?}-{k}-{stride}"), 2, 4);
        }
    }

    /// Image-stem convs (few input channels, on `conv_direct` where wide enough) with their
    /// folded ops: strides 1 and 2, 3×3 and 5×5 kernels, output widths of whole and partial
    /// 16-column blocks, a batch of 2, an output large enough to split across threads;
    /// batch_norm and a gate, then an add and relu. Every bit equals node-by-node evaluation.
    #[test]
    fn stem_conv_epilogues_keep_every_bit() {
        let stem = |x: &Tensor, k: usize, stride: usize, seed: u64| {
            let (w, b) = conv_params(16, x.shape()[1], k, seed);
            let opts = ConvOptions {
                stride: [stride; 2],
                pad: [k / 2; 4],
                ..Default::default()
            };
            let (ws, bs) = ([16, x.shape()[1], k, k], [16]);
            let bias = HostArray::f32(&bs, &b);
            conv2d(x, HostArray::f32(&ws, &w), Some(bias), opts).unwrap()
        };
        let cases = [
            ([1, 3, 40, 40], 3, 2),
            ([2, 3, 21, 37], 3, 1),
            ([1, 1, 64, 50], 5, 2),
            ([1, 3, 112, 112], 3, 2),
        ];
        for (xs, k, stride) in cases {
            let x = input(&xs).unwrap();
            let a = bn(&stem(&x, k, stride, 71), 72).hardswish().unwrap();
            let y = stem(&x, k, stride, 73).add(&a).unwrap().relu().unwrap();
            // conv→bn→gate; conv→add→relu.
            check_fused(&y, &format!("stem-{xs:?}-{k}-{stride}"), 2, 5);
        }
    }

    /// Adds of a per-channel value ([C, 1, 1] after the conv, [1, C, 1, 1] before it) fold
    /// into bias-less convs (the training graphs' `conv2d(x, w) + b`); an add broadcast along
    /// the width ([1, 1, 1, W]) does not. Every bit equals node-by-node evaluation.
    #[test]
    fn per_channel_adds_fold_into_the_conv() {
        use crate::graph::build::io::constant;
        let x = input(&[1, 8, 12, 12]).unwrap();
        let bare = |x: &Tensor, seed: u64| {
            let (w, _) = conv_params(16, x.shape()[1], 3, seed);
            let opts = ConvOptions {
                pad: [1; 4],
                ..Default::default()
            };
            conv2d(x, HostArray::f32(&[16, x.shape()[1], 3, 3], &w), None, opts).unwrap()
        };
        let values = |shape: &[usize], seed: u64| {
            let n = shape.iter().product::<usize>();
            constant("test", HostArray::f32(shape, &rand_vec(n, seed))).unwrap()
        };
        let h = bare(&x, 21)
            .add(&values(&[16, 1, 1], 22))
            .unwrap()
            .relu()
            .unwrap();
        let y = values(&[1, 16, 1, 1], 23).add(&bare(&h, 24)).unwrap();
        let y = y.add(&values(&[1, 1, 1, 12], 25)).unwrap();
        // conv1→add→relu; conv2→add; the width-broadcast add alone.
        check_fused(&y, "per-channel-add", 2, 3);
    }

    /// An add of two conv outputs is taken by one conv only (it once was by both, so the first
    /// conv never ran and its output slot was read out of bounds), with and without an
    /// activation, batch_norm on both sides, and the sum feeding another conv's residual add;
    /// the plain sum also against an f64 oracle.
    #[test]
    fn add_of_two_convs_is_taken_once() {
        let x = input(&[1, 8, 12, 12]).unwrap();
        let (c1, c2) = (conv(&x, 16, 3, 1, 11), conv(&x, 16, 3, 1, 13));
        let sum = c1.add(&c2).unwrap();
        // conv1→add; conv2 alone.
        let got = check_fused(&sum, "two-convs", 1, 1);
        // conv1→add→relu; conv2 alone.
        check_fused(&sum.relu().unwrap(), "two-convs-relu", 1, 2);
        // conv1→bn→add→relu6; conv2→bn.
        let bns = bn(&c1, 15).add(&bn(&c2, 17)).unwrap().relu6().unwrap();
        check_fused(&bns, "two-convs-bn", 2, 4);
        // conv1→add (read twice: ends there); conv2 alone; conv3→add.
        let res = conv(&sum, 16, 3, 1, 19).add(&sum).unwrap();
        check_fused(&res, "two-convs-residual", 2, 2);

        let xs: Vec<f64> = rand_vec(8 * 144, 9)
            .iter()
            .map(|&v| v as f64 * 3.0)
            .collect();
        // Both convs summed in f64; the tolerance covers constants stored in fp16 (a dropped
        // or doubled conv is off by its whole size).
        let params = [conv_params(16, 8, 3, 11), conv_params(16, 8, 3, 13)];
        for (o, &g) in got.iter().enumerate() {
            let (co, oy, ox) = (o / 144, o / 12 % 12, o % 12);
            let (mut want, mut scale) = (0.0f64, 0.0f64);
            for (w, b) in &params {
                want += b[co] as f64;
                scale += (b[co] as f64).abs();
                for (ci, ky, kx) in (0..8).flat_map(|c| (0..9).map(move |k| (c, k / 3, k % 3))) {
                    let (iy, ix) = ((oy + ky).wrapping_sub(1), (ox + kx).wrapping_sub(1));
                    if iy < 12 && ix < 12 {
                        let t = w[((co * 8 + ci) * 3 + ky) * 3 + kx] as f64
                            * xs[ci * 144 + iy * 12 + ix];
                        want += t;
                        scale += t.abs();
                    }
                }
            }
            assert!(
                (g as f64 - want).abs() <= 1e-3 * scale + 1e-6,
                "{o}: {g} vs {want}"
            );
        }
    }

    /// Linears (shared fp16 weight, x [8, 144]) with a bias add, GELU and a residual add in
    /// their output pass, at an odd width (37) and rows of 300 (vector lanes), run by the
    /// executor: every bit equal to
    /// node-by-node evaluation in fp16 and fp32 precision; a value read by two ops (the GELU
    /// output, the last linear's output) ends its chain. The GELU chain alone also against an
    /// f64 oracle.
    #[test]
    fn linear_epilogues_keep_every_bit() {
        let x = input(&[8, 144]).unwrap();
        let lin = |x: &Tensor, n: usize, seed: u64| {
            let k = x.shape()[1];
            let w: Vec<f32> = rand_vec(n * k, seed).iter().map(|v| v * 0.2).collect();
            let b = rand_vec(n, seed + 1);
            let (ws, bs) = ([n, k], [n]);
            let bias = HostArray::f32(&bs, &b);
            x.linear(HostArray::f32(&ws, &w), Some(bias)).unwrap()
        };
        let a = lin(&x, 37, 31).gelu().unwrap();
        let r = lin(&a, 37, 33).add(&a).unwrap();
        let b = lin(&r, 37, 35);
        let y = b.add(&b.relu().unwrap()).unwrap();
        // matmul→add→gelu; matmul→add→add (residual); matmul→add (read twice).
        check_fused(&y, "linear-epilogue", 3, 5);

        // Rows of at least a piece run on the vector lanes, the GELU through its table there.
        check_fused(&lin(&x, 300, 41).gelu().unwrap(), "linear-gelu-rows", 1, 2);
        let got = check_fused(&lin(&x, 37, 31).gelu().unwrap(), "linear-gelu", 1, 2);
        let xs: Vec<f64> = rand_vec(8 * 144, 9)
            .iter()
            .map(|&v| v as f64 * 3.0)
            .collect();
        let half = |v: &[f32]| -> Vec<f64> {
            v.iter().map(|&v| half::f16::from_f32(v).to_f64()).collect()
        };
        let w = half(
            &rand_vec(37 * 144, 31)
                .iter()
                .map(|v| v * 0.2)
                .collect::<Vec<_>>(),
        );
        let bias = half(&rand_vec(37, 32));
        for (o, &g) in got.iter().enumerate() {
            let (r, j) = (o / 37, o % 37);
            let t: f64 = bias[j]
                + (0..144)
                    .map(|p| xs[r * 144 + p] * w[j * 144 + p])
                    .sum::<f64>();
            // Exact GELU: 0.5 t (1 + erf(t / √2)).
            let want = 0.5 * t * (1.0 + erf64(t / std::f64::consts::SQRT_2));
            assert!(
                (g as f64 - want).abs() <= 1e-3 * (1.0 + t.abs()),
                "{o}: {g} vs {want}"
            );
        }
    }

    /// erf by its Maclaurin series for |t| < 3 (converged to ~1e-12 in 60 terms), else ±1
    /// (|erf(t) ∓ 1| < 2.3e-5 there).
    fn erf64(t: f64) -> f64 {
        if t.abs() >= 3.0 {
            return t.signum();
        }
        let (mut term, mut sum) = (t, t);
        for n in 1..60 {
            term *= -t * t / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    /// The vector hardswish gate against the unfused scalar ops (kernel, round, product,
    /// round) bit for bit, on ±0, NaN, ±inf, clamp edges, overflow and every tail length, and
    /// against an f64 oracle within fp16 rounding.
    #[test]
    fn hardswish_gate_matches_the_unfused_ops() {
        let (alpha, beta) = (half::f16::from_f32(1.0 / 6.0).to_f32(), 0.5);
        let mut x: Vec<f32> = rand_vec(300, 51).iter().map(|v| v * 8.0).collect();
        x[..10].copy_from_slice(&[
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            -3.0,
            3.0,
            -2.9,
            70000.0,
            -70000.0,
            1e-8,
        ]);
        for n in [0, 1, 7, 8, 9, 17, 256, 300] {
            let mut got = x[..n].to_vec();
            hardswish_rounded(alpha, beta, &mut got, &mut vec![0.0; n]);
            let u = Unary::SigmoidHard { alpha, beta };
            let want: Vec<f32> = x[..n]
                .iter()
                .map(|&v| {
                    half::f16::from_f32(v * half::f16::from_f32(u.apply(v)).to_f32()).to_f32()
                })
                .collect();
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "n {n}");
            for (&g, &v) in got.iter().zip(&x[..n]).filter(|(_, v)| v.abs() < 1e4) {
                let exact = v as f64 * (alpha as f64 * v as f64 + 0.5).clamp(0.0, 1.0);
                assert!(
                    (g as f64 - exact).abs() <= 2e-3 * exact.abs() + 1e-6,
                    "{v}: {g} vs {exact}"
                );
            }
        }
    }

    /// A selecting op (relu, relu6, abs, clip) after a rounded conv output skips its own
    /// rounding with the unfused ops' bits: signed zeros, NaN, infinities, values past fp16's
    /// range and below its subnormals, one piece and several.
    #[test]
    fn selecting_ops_skip_a_no_op_rounding() {
        let mut x: Vec<f32> = rand_vec(600, 52).iter().map(|v| v * 9.0).collect();
        x[..9].copy_from_slice(&[
            0.0,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            -6.1,
            6.01,
            7e4,
            1e-9,
        ]);
        let ops = [
            Unary::Relu,
            Unary::Relu6,
            Unary::Abs,
            Unary::Clip { lo: -1.5, hi: 2.25 },
        ];
        for u in ops {
            assert!(selects(u));
            let pass = Pass::new(true, vec![(Params::Unary(u, None), true)], None, 1);
            let on_lanes = matches!(u, Unary::Relu | Unary::Relu6);
            assert_eq!(
                pass.lanes.is_some(),
                on_lanes && epilogue_lanes::available(),
                "{u:?}"
            );
            let mut got = x.clone();
            pass.plane(0, &mut got);
            // The unfused steps: the conv's rounding, the op, its rounding.
            let mut want = x.clone();
            round_in_place(&mut want);
            want.iter_mut().for_each(|v| *v = u.apply(*v));
            round_in_place(&mut want);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{u:?}");
        }
    }

    /// The pass of ResNet-50's conv epilogues (round, batch_norm, round, add, round, relu) on
    /// vector lanes against the scalar stages, µs per call at 1 thread (process CPU time). A
    /// benchmark, not a test: run with `--ignored --nocapture` in release.
    #[test]
    #[ignore]
    fn throughput_lanes_against_stages() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        for shape in [
            [1, 256, 56, 56],
            [1, 512, 28, 28],
            [1, 1024, 14, 14],
            [1, 2048, 7, 7],
        ] {
            let (c, n) = (shape[1], shape.iter().product::<usize>());
            let (x, residual) = (rand_vec(n, 1), rand_vec(n, 2));
            let (mean, beta, scale) = (rand_vec(c, 3), rand_vec(c, 4), rand_vec(c, 5));
            let params = vec![
                (
                    Params::BatchNorm {
                        mean: &mean,
                        scale,
                        beta: &beta,
                    },
                    true,
                ),
                (Params::Add(&residual), true),
                (Params::Unary(Unary::Relu, None), true),
            ];
            let mut pass = Pass::new(true, params, None, c);
            let mut out = Buf::zeros(&shape);
            let clock = || crate::exec::clock::process_cpu_us().unwrap();
            let plan = pass.lanes.take().expect("this test needs AVX2 and F16C");
            let mut time = |lanes: Option<Vec<Planned>>| {
                pass.lanes = lanes;
                let mut t: Vec<f64> = (0..31)
                    .map(|_| {
                        out.data.copy_from_slice(&x);
                        let t0 = clock();
                        pool.install(|| pass.run(&mut out));
                        clock() - t0
                    })
                    .collect();
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            };
            let (stages, lanes) = (time(None), time(Some(plan)));
            println!("{shape:?}: stages {stages:.0} µs, lanes {lanes:.0} µs");
        }
    }

    /// ns per 8-lane vector in L1 at 1 thread (process CPU time, best of 15 runs of 2000
    /// passes): a bare rounding stream, the ResNet chain (round, batch_norm, round, add, round,
    /// relu) and the MobileNetV3 gate chain (bias, round, hardswish) on planes of 32×32, 14×14
    /// and 7×7 (~2 K elements), on the lanes where the pass takes them and on the scalar
    /// stages. A benchmark, not a test: run with `--ignored --nocapture` in release.
    #[test]
    #[ignore]
    fn ns_per_vector_in_l1() {
        let best = |f: &mut dyn FnMut(), vectors: usize| {
            let clock = || crate::exec::clock::process_cpu_us().unwrap();
            let mut t = f64::MAX;
            for _ in 0..15 {
                let t0 = clock();
                (0..2000).for_each(|_| f());
                t = t.min((clock() - t0) * 1e3 / 2000.0 / vectors as f64);
            }
            t
        };
        let mut x = rand_vec(2048, 1);
        let round = best(&mut || round_in_place(std::hint::black_box(&mut x)), 256);
        println!("bare round: {round:.2} ns/vector");
        for (c, h) in [(2, 32), (10, 14), (40, 7)] {
            let shape = [1, c, h, h];
            let n = c * h * h;
            let (x, residual) = (rand_vec(n, 1), rand_vec(n, 2));
            let (mean, beta, scale) = (rand_vec(c, 3), rand_vec(c, 4), rand_vec(c, 5));
            let hardswish = Unary::SigmoidHard {
                alpha: 1.0 / 6.0,
                beta: 0.5,
            };
            let bn = || Params::BatchNorm {
                mean: &mean,
                scale: scale.clone(),
                beta: &beta,
            };
            let chains = [
                (
                    "resnet",
                    vec![
                        (bn(), true),
                        (Params::Add(&residual), true),
                        (Params::Unary(Unary::Relu, None), true),
                    ],
                    None,
                ),
                (
                    "hardswish",
                    vec![(Params::Gate(hardswish, None, true), true)],
                    Some(&beta[..]),
                ),
            ];
            for (name, params, bias) in chains {
                let mut pass = Pass::new(true, params, bias, c);
                let mut out = Buf::zeros(&shape);
                let mut time = |pass: &Pass| {
                    best(
                        &mut || {
                            out.data.copy_from_slice(&x);
                            pass.run(&mut out)
                        },
                        n.div_ceil(8),
                    )
                };
                let default = time(&pass);
                pass.lanes = None;
                let stages = time(&pass);
                println!("{name} {h}x{h}: default {default:.2}, stages {stages:.2} ns/vector");
            }
        }
    }

    /// A pass over small planes (7×7, 2×3, rows of 10) runs pieces of several whole planes, and
    /// over planes from a piece up (19×19, rows of 300) vector lanes, with the bits of running
    /// each plane alone on the scalar stages: each plane's channel bias, batch_norm and
    /// per-channel add, the residual at its own offset, a per-column add on rows, the rounding
    /// and a hardswish gate, across batch and channel boundaries and a last short piece.
    #[test]
    fn pieces_of_several_planes_keep_each_planes_bits() {
        for (si, shape) in [
            vec![2, 3, 7, 7],
            vec![1, 40, 2, 3],
            vec![1, 5, 14, 14],
            vec![3, 10],
            vec![2, 3, 19, 19],
            vec![2, 300],
        ]
        .into_iter()
        .enumerate()
        {
            let rows = shape.len() == 2;
            let (channels, plane) = match rows {
                true => (1, shape[1]),
                false => (shape[1], shape[2] * shape[3]),
            };
            let seed = 60 + 10 * si as u64;
            let x: Vec<f32> = rand_vec(shape.iter().product(), seed)
                .iter()
                .map(|v| v * 4.0)
                .collect();
            let (residual, bias) = (rand_vec(x.len(), seed + 1), rand_vec(channels, seed + 2));
            let (mean, beta) = (rand_vec(channels, seed + 3), rand_vec(channels, seed + 4));
            let (scale, per) = (
                rand_vec(channels, seed + 5),
                rand_vec(plane.max(channels), seed + 6),
            );
            let hardswish = Unary::SigmoidHard {
                alpha: 1.0 / 6.0,
                beta: 0.5,
            };
            let per_channel = match rows {
                true => Params::ColumnAdd(&per),
                false => Params::ChannelAdd(&per),
            };
            let params = vec![
                (
                    Params::BatchNorm {
                        mean: &mean,
                        scale,
                        beta: &beta,
                    },
                    false,
                ),
                (per_channel, true),
                (Params::Add(&residual), true),
                (Params::Gate(hardswish, None, true), true),
            ];
            let mut pass = Pass::new(true, params, Some(&bias), channels);
            assert_eq!(pass.lanes.is_some(), epilogue_lanes::available());
            let mut got = Buf::zeros(&shape);
            got.data.copy_from_slice(&x);
            pass.run(&mut got);
            // Each plane alone, on the scalar stages (the vector lanes must give their bits).
            pass.lanes = None;
            let mut want = x.clone();
            want.chunks_mut(plane)
                .enumerate()
                .for_each(|(i, p)| pass.plane(i, p));
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got.data), bits(&want), "{shape:?}");
            assert_ne!(bits(&got.data), bits(&x));
        }
    }
}
