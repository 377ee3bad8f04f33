//! Rewrites around ANE compiler defects (the reference's §3.10 catalogue), run by `compile`
//! before gating so preflight sees the rewritten ops.
//!
//! Applied on every target, and without one (each is exact unless stated):
//! - `round(x)` → `select(|x| < 1024, round(x), x)`: the ANE round kernel adds 0.5 for
//!   |x| ≥ 1024 (exact: every fp16 value that large is already an integer).
//! - `softplus(x)` → `softplus(min(x, 10)) + relu(x − 10)`: native softplus returns 0 for
//!   x ≥ ~11.09. For x > 10 it computes `x + (softplus(10) − 10)`, off by at most 4.6e-5 — under
//!   half an fp16 ulp at that magnitude, so identical after fp16 rounding.
//! - `mul(r, k)`, k a one-element constant, r from floor/ceil/round → `mul(r, K)` with K a
//!   full-shape constant (the compiler folds a scalar into the rounding op's gain and drops it).
//! - `mul(r, 0)`, r from a reduction → `sub(r, r)` (the compiler rejects the product).
//! - mul/add by a last-axis vector (a norm's affine) feeding a reshape that keeps the last axis →
//!   the reshape first, then the affine on the last axis (the layer_norm form of PR #201).
//! - strided P×P conv (kernel = stride = P ≥ 2, no padding, dilation 1, one group, constant
//!   weight, Cin·P² within the channel extent) → `space_to_depth(P)` + 1×1 conv: the same
//!   products summed in another order (rows and columns past a multiple of P are cropped first).
//!
//! Structural, nothing to rewrite: `Graph::from_outputs` wraps an output that is an input in
//! `* 1.0` (an empty body crashes the compiler), and `square` is built as `mul(x, x)` (the IR
//! has no `square` op).
//!
//! Target-gated: on A13/A14 a slice with a non-zero begin on the last (width) axis — a crop DMA
//! that saturates |v| > 4094 — is moved off that axis (slice, transpose, slice on axis −2,
//! transpose back) when the rank is ≥ 2 and the transpose fits the family's transpose extent,
//! else it is reported in the warnings; on A15 a concat of ≥ 2 width-offset slices (wrong
//! elements) is reported. Without a target no slice is touched or reported.

use std::sync::Arc;

use half::f16;

use crate::error::Result;
use crate::graph::{Graph, Tensor, Value};
use crate::ops::conv::Conv;
use crate::ops::elementwise::{Binary, Compare};
use crate::ops::io::Const;
use crate::ops::layout::Layout;
use crate::ops::unary::Unary;
use crate::ops::Op;
use crate::select;
use crate::shape;
use crate::targets::{limit, Family, Limit};

/// |x| from which the ANE's `round` is wrong.
const ROUND_LIMIT: f32 = 1024.0;
/// Split point of softplus: native below, linear above.
const SOFTPLUS_SPLIT: f32 = 10.0;

/// A rewritten graph and the hazards left in it (one sentence each).
pub struct Rewritten {
    pub graph: Graph,
    pub warnings: Vec<String>,
}

/// Apply every rewrite of the module doc for `family` (`None`: no target) to `graph`; a graph
/// with nothing to rewrite comes back unchanged (same nodes, same ports).
pub fn quirks(graph: &Graph, family: Option<Family>) -> Result<Rewritten> {
    let cx = Context::new(graph, family);
    let mut warnings = Vec::new();
    let mut built: Vec<Vec<Tensor>> = Vec::with_capacity(graph.nodes.len());
    let mut changed = false;
    for (i, n) in graph.nodes.iter().enumerate() {
        let srcs: Vec<Tensor> = n
            .inputs
            .iter()
            .map(|v| built[v.node][v.port].clone())
            .collect();
        let out = match cx.rewrite(i, &srcs, &built, &mut warnings)? {
            Some(t) => {
                changed = true;
                vec![t]
            }
            None => Tensor::apply(n.op.clone(), srcs)?,
        };
        built.push(out);
    }
    if !changed {
        return Ok(Rewritten {
            graph: graph.clone(),
            warnings,
        });
    }
    let outputs: Vec<(Option<String>, Tensor)> = graph
        .outputs
        .iter()
        .map(|(name, v)| (Some(name.clone()), built[v.node][v.port].clone()))
        .collect();
    Ok(Rewritten {
        graph: Graph::from_outputs(&outputs)?,
        warnings,
    })
}

/// The graph being rewritten, its use counts and the target family.
struct Context<'a> {
    g: &'a Graph,
    family: Option<Family>,
    /// Readers of each node (consumer nodes, one entry per input slot); outputs count as `usize::MAX`.
    readers: Vec<Vec<usize>>,
}

impl<'a> Context<'a> {
    /// Index `g`'s readers for rewriting on `family`.
    fn new(g: &'a Graph, family: Option<Family>) -> Self {
        let mut readers = vec![Vec::new(); g.nodes.len()];
        for (j, n) in g.nodes.iter().enumerate() {
            n.inputs.iter().for_each(|v| readers[v.node].push(j));
        }
        g.outputs
            .iter()
            .for_each(|(_, v)| readers[v.node].push(usize::MAX));
        Context { g, family, readers }
    }

    /// The op producing `v`.
    fn op(&self, v: Value) -> &Op {
        &self.g.nodes[v.node].op
    }

    /// The shape of `v`.
    fn shape(&self, v: Value) -> &[usize] {
        &self.g.ty(v).shape
    }

    /// The value of a one-element constant.
    fn scalar(&self, v: Value) -> Option<f32> {
        match self.op(v) {
            Op::Const(c) if c.values.len() == 1 => Some(c.values[0].to_f32()),
            _ => None,
        }
    }

    /// The replacement of node `i` (inputs already rebuilt as `srcs`), or `None` to copy it.
    fn rewrite(
        &self,
        i: usize,
        srcs: &[Tensor],
        built: &[Vec<Tensor>],
        warnings: &mut Vec<String>,
    ) -> Result<Option<Tensor>> {
        let n = &self.g.nodes[i];
        match &n.op {
            Op::Unary(Unary::Round) if !self.round_guarded(i) => {
                let x = &srcs[0];
                let small = x.abs()?.compare_scalar(Compare::Less, ROUND_LIMIT)?;
                select(&small, &x.round()?, x).map(Some)
            }
            Op::Unary(Unary::Softplus)
                if self.scalar_operand(n.inputs[0], Binary::Minimum) != Some(SOFTPLUS_SPLIT) =>
            {
                let x = &srcs[0];
                x.minimum_scalar(SOFTPLUS_SPLIT)?
                    .softplus()?
                    .add(&x.sub_scalar(SOFTPLUS_SPLIT)?.relu()?)
                    .map(Some)
            }
            Op::Binary(Binary::Mul) => self.mul(i, srcs),
            Op::Layout(Layout::Reshape { shape }) => self.affine_after_reshape(i, shape, built),
            Op::Layout(Layout::SliceBySize { begin, size }) => {
                self.width_slice(i, begin, size, &srcs[0], warnings)
            }
            Op::Layout(Layout::Concat { .. }) => {
                self.concat_of_width_slices(i, warnings);
                Ok(None)
            }
            Op::Conv(c) => self.patch_conv(i, c, srcs),
            _ => Ok(None),
        }
    }

    /// A one-element constant operand of `v` when `v` is a binary op of kind `b`.
    fn scalar_operand(&self, v: Value, b: Binary) -> Option<f32> {
        match self.op(v) {
            Op::Binary(k) if *k == b => self.g.nodes[v.node]
                .inputs
                .iter()
                .find_map(|&u| self.scalar(u)),
            _ => None,
        }
    }

    /// Whether every reader of round node `i` is already `select(|x| < 1024, round(x), x)`.
    fn round_guarded(&self, i: usize) -> bool {
        let x = self.g.nodes[i].inputs[0];
        let guard = |&j: &usize| {
            let Some(s) = self.g.nodes.get(j) else {
                return false;
            };
            let [c, a, b] = s.inputs[..] else {
                return false;
            };
            let cond = &self.g.nodes[c.node];
            matches!(s.op, Op::Select(_))
                && a.node == i
                && b == x
                && matches!(cond.op, Op::Compare(Compare::Less))
                && matches!(self.op(cond.inputs[0]), Op::Unary(Unary::Abs))
                && self.g.nodes[cond.inputs[0].node].inputs[0] == x
                && self.scalar(cond.inputs[1]) == Some(ROUND_LIMIT)
        };
        !self.readers[i].is_empty() && self.readers[i].iter().all(guard)
    }

    /// `mul` after floor/ceil/round by a one-element constant, or by zero after a reduction.
    fn mul(&self, i: usize, srcs: &[Tensor]) -> Result<Option<Tensor>> {
        let n = &self.g.nodes[i];
        let out = &n.outputs[0].shape;
        for (k, o) in [(1, 0), (0, 1)] {
            let (kv, ov) = (n.inputs[k], n.inputs[o]);
            let Op::Const(c) = self.op(kv) else { continue };
            let other = self.op(ov);
            if matches!(other, Op::Unary(Unary::Floor | Unary::Ceil | Unary::Round))
                && c.values.len() == 1
                && shape::numel(out) > 1
            {
                let full = Const {
                    shape: out.clone(),
                    values: Arc::new(vec![c.values[0]; shape::numel(out)]),
                };
                let full = Tensor::apply1(Op::Const(full), vec![])?;
                let pair = if k == 1 {
                    vec![srcs[o].clone(), full]
                } else {
                    vec![full, srcs[o].clone()]
                };
                return Tensor::apply1(Op::Binary(Binary::Mul), pair).map(Some);
            }
            if matches!(other, Op::Reduce(_))
                && c.values.iter().all(|v| v.to_f32() == 0.0)
                && self.shape(ov) == out.as_slice()
            {
                return srcs[o].sub(&srcs[o]).map(Some);
            }
        }
        Ok(None)
    }

    /// Reshape node `i` (to `s_out`) reading a chain of single-use mul/add by last-axis vectors:
    /// reshape first, then the same chain on the last axis.
    fn affine_after_reshape(
        &self,
        i: usize,
        s_out: &[usize],
        built: &[Vec<Tensor>],
    ) -> Result<Option<Tensor>> {
        let d = s_out[s_out.len() - 1];
        let mut chain = Vec::new();
        let mut v = self.g.nodes[i].inputs[0];
        while let Op::Binary(b @ (Binary::Mul | Binary::Add)) = self.op(v) {
            if self.readers[v.node].len() != 1 {
                break;
            }
            let node = &self.g.nodes[v.node];
            let here = self.shape(v);
            let side = (0..2).find(|&k| {
                let s = self.shape(node.inputs[k]);
                s.last() == Some(&d)
                    && shape::numel(s) == d
                    && s.len() <= here.len()
                    && self.shape(node.inputs[1 - k]) == here
            });
            let Some(k) = side else { break };
            chain.push((*b, k, node.inputs[k]));
            v = node.inputs[1 - k];
        }
        if chain.is_empty() || self.shape(v).last() != Some(&d) {
            return Ok(None);
        }
        let dims: Vec<i64> = s_out.iter().map(|&e| e as i64).collect();
        let mut t = built[v.node][v.port].reshape(&dims)?;
        for &(b, k, operand) in chain.iter().rev() {
            let vector = match self.op(operand) {
                Op::Const(c) => Tensor::apply1(
                    Op::Const(Const {
                        shape: vec![d],
                        values: c.values.clone(),
                    }),
                    vec![],
                )?,
                _ if self.shape(operand) == [d] => built[operand.node][operand.port].clone(),
                _ => built[operand.node][operand.port].reshape(&[d as i64])?,
            };
            let pair = if k == 1 {
                vec![t, vector]
            } else {
                vec![vector, t]
            };
            t = Tensor::apply1(Op::Binary(b), pair)?;
        }
        Ok(Some(t))
    }

    /// Whether `v` is a slice with a non-zero begin on its last axis.
    fn is_width_slice(&self, v: Value) -> bool {
        matches!(self.op(v), Op::Layout(Layout::SliceBySize { begin, .. }) if begin.last().is_some_and(|&b| b != 0))
    }

    /// On A13/A14, move a width-offset slice off the last axis (or report it).
    fn width_slice(
        &self,
        i: usize,
        begin: &[usize],
        size: &[usize],
        x: &Tensor,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Tensor>> {
        let Some(family) = self
            .family
            .filter(|f| matches!(f, Family::A13 | Family::A14))
        else {
            return Ok(None);
        };
        if !self.is_width_slice(Value { node: i, port: 0 }) {
            return Ok(None);
        }
        let r = begin.len();
        let mut rows_size = size.to_vec();
        rows_size[r - 1] = x.shape()[r - 1];
        if r < 2 || shape::numel(&rows_size) > limit(Limit::TransposeExtent, family) {
            warnings.push(format!(
                "slice_by_size of {:?} at begin {begin:?}: on {family} a slice starting inside the last (width) axis saturates |v| > 4094 and cannot be moved off that axis here",
                x.shape()
            ));
            return Ok(None);
        }
        let mut rows_begin = begin.to_vec();
        rows_begin[r - 1] = 0;
        let rows = if rows_size == x.shape() {
            x.clone()
        } else {
            x.slice_by_size(&rows_begin, &rows_size)?
        };
        let mut swap: Vec<i64> = (0..r as i64).collect();
        swap.swap(r - 2, r - 1);
        let t = rows.transpose(&swap)?;
        let (mut b2, mut s2) = (vec![0; r], t.shape().to_vec());
        b2[r - 2] = begin[r - 1];
        s2[r - 2] = size[r - 1];
        t.slice_by_size(&b2, &s2)?.transpose(&swap).map(Some)
    }

    /// On A15, report a concat of two or more width-offset slices.
    fn concat_of_width_slices(&self, i: usize, warnings: &mut Vec<String>) {
        let n = &self.g.nodes[i];
        let k = n.inputs.iter().filter(|&&v| self.is_width_slice(v)).count();
        if self.family == Some(Family::A15) && k >= 2 {
            warnings.push(format!("concat into {:?} joins {k} slices that start inside the last (width) axis: on A15 (pre-A16) this returns wrong elements", n.outputs[0].shape));
        }
    }

    /// Strided P×P conv → space_to_depth(P) + 1×1 conv (see the module doc).
    fn patch_conv(&self, i: usize, c: &Conv, srcs: &[Tensor]) -> Result<Option<Tensor>> {
        let n = &self.g.nodes[i];
        let p = c.strides[0];
        let Op::Const(w) = self.op(n.inputs[1]) else {
            return Ok(None);
        };
        let &[co, ci, kh, kw] = w.shape.as_slice() else {
            return Ok(None);
        };
        if !(p >= 2
            && c.strides == [p, p]
            && [kh, kw] == [p, p]
            && c.pad == [0; 4]
            && c.dilations == [1, 1]
            && c.groups == 1)
        {
            return Ok(None);
        }
        let x = &srcs[0];
        let &[b, _, h, wd] = x.shape() else {
            return Ok(None);
        };
        let max_channels = self
            .family
            .map_or(shape::MAX_EXTENT, |f| limit(Limit::ChannelExtent, f));
        if ci * p * p > max_channels {
            return Ok(None); // space_to_depth would exceed the channel extent
        }
        let (h2, w2) = (h / p * p, wd / p * p);
        let x = if (h2, w2) == (h, wd) {
            x.clone()
        } else {
            x.slice_by_size(&[0; 4], &[b, ci, h2, w2])?
        };
        // Depth channel (i·P + j)·Cin + c of space_to_depth pairs with weight tap (c, i, j).
        let mut values = vec![f16::ZERO; w.values.len()];
        for o in 0..co {
            for ch in 0..ci {
                for (t, v) in w.values[(o * ci + ch) * p * p..][..p * p]
                    .iter()
                    .enumerate()
                {
                    values[o * ci * p * p + t * ci + ch] = *v;
                }
            }
        }
        let weight = Tensor::apply1(
            Op::Const(Const {
                shape: vec![co, ci * p * p, 1, 1],
                values: Arc::new(values),
            }),
            vec![],
        )?;
        let mut inputs = vec![x.space_to_depth(p)?, weight];
        inputs.extend(srcs.get(2).cloned());
        let one = Conv {
            strides: [1, 1],
            pad: [0; 4],
            dilations: [1, 1],
            groups: 1,
        };
        Tensor::apply1(Op::Conv(one), inputs).map(Some)
    }
}
