//! Routing: host ops that have a lossless fused decomposition run as fused ops when that removes
//! a cut (`route="auto"`), always (`"fused"`) or never (`"host"`). Routable: `minmax_norm`
//! (reduce_min/max, sub, div), `flatten` (reshape), `sdpa` (matmul, softmax, matmul),
//! `gather`/`take` whose indices are a constant cast to int32 (static slices joined by concat)
//! and `argmax`/`argmin` along an axis of at most [`ARG_FUSED_MAX`] elements (the first index
//! equal to the lane's extreme, or the first NaN, by `reduce_min` over fp16 index numbers,
//! which are exact integers only up to 2048; longer axes stay on the host). `lrn` is always
//! fused already (`local_response_norm`).
//! "Lossless" means the same math; the fused form rounds between ops under the fp16 contract
//! where the host kernel rounds once.

use std::collections::HashSet;
use std::fmt;

use crate::dtype::DType;
use crate::error::Result;
use crate::graph::build::bridge::sdpa_fused;
use crate::graph::build::elementwise::select;
use crate::graph::build::io::constant;
use crate::graph::{Graph, Tensor};
use crate::ops::elementwise::Compare;
use crate::ops::host::argreduce::ArgReduce;
use crate::ops::host::HostOp;
use crate::ops::io::HostArray;
use crate::ops::Op;
use crate::options::Route;

/// Program outputs with their optional port names (what `compile` takes).
pub type NamedOutputs = Vec<(Option<String>, Tensor)>;

/// The routing decision for one routable host op, as reported by `net.routes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteChoice {
    /// The op name (`minmax_norm`, `flatten`, `sdpa`, `gather`, `argmax`, ...).
    pub op: String,
    /// Whether it was replaced by its fused decomposition.
    pub fused: bool,
    /// Cuts removed by that (0 when kept on the host).
    pub cuts_removed: usize,
    /// The route mode that decided.
    pub mode: Route,
    /// Why it stays on the host although it has a fused form for other shapes (empty when
    /// `fused`, `mode` and `cuts_removed` say it all).
    pub reason: String,
}

impl fmt::Display for RouteChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.cuts_removed == 1 { "" } else { "s" };
        match (self.fused, self.mode) {
            (true, _) => write!(
                f,
                "routed fused: {} (removes {} cut{plural})",
                self.op, self.cuts_removed
            ),
            (false, _) if !self.reason.is_empty() => {
                write!(f, "kept on host: {} ({})", self.op, self.reason)
            }
            (false, Route::Host) => write!(f, "kept on host: {} (route=\"host\")", self.op),
            (false, _) => write!(f, "kept on host: {} (removes no cut)", self.op),
        }
    }
}

/// The static indices of a `take` (node `i` of `g`) whose indices are `cast(const, int32)`,
/// when every index is in range (an out-of-range index stays on the host, where it is a
/// run-time error naming it).
fn const_indices(g: &Graph, i: usize, axis: usize) -> Option<Vec<i64>> {
    let n = &g.nodes[i];
    let cast = &g.nodes[n.inputs.get(1)?.node];
    let Op::Cast(_) = cast.op else {
        return None;
    };
    let Op::Const(c) = &g.nodes[cast.inputs.first()?.node].op else {
        return None;
    };
    let extent = g.nodes[n.inputs[0].node].outputs[n.inputs[0].port].shape[axis] as i64;
    c.values
        .iter()
        .map(|v| {
            let k = f32::from(*v).trunc() as i64;
            let k = if k < 0 { k + extent } else { k };
            (0..extent).contains(&k).then_some(k)
        })
        .collect()
}

/// The longest axis whose `argmax`/`argmin` routes fused: fp16 holds every integer up to 2048.
pub const ARG_FUSED_MAX: usize = 2048;

/// `argmax`/`argmin` by reductions: the first index whose value is NaN (NaN counts as the
/// extreme, NumPy's rule), else the first equal to the lane's max (min), cast to int32.
fn arg_reduce_fused(x: &Tensor, op: &ArgReduce) -> Result<Tensor> {
    let n = x.shape()[op.axis];
    let mut lane = vec![1; x.rank()];
    lane[op.axis] = n;
    let positions: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let name = crate::ops::host::HostKernel::name(op);
    let index = constant(name, HostArray::f32(&lane, &positions))?;
    let none = constant(name, HostArray::f32(&[1], &[n as f32]))?;
    let ax = [op.axis as i64];
    let first = |hit: &Tensor| select(hit, &index, &none)?.amin(&ax, op.keepdims);
    let extreme = if op.max {
        x.amax(&ax, true)?
    } else {
        x.amin(&ax, true)?
    };
    let at_nan = first(&x.compare(Compare::NotEqual, x)?)?;
    let at_extreme = first(&x.compare(Compare::Equal, &extreme)?)?;
    let has_nan = at_nan.compare_scalar(Compare::Less, n as f32)?;
    select(&has_nan, &at_nan, &at_extreme)?.cast(DType::Int32)
}

/// Whether node `i` of `g` is a host op with a fused decomposition: `Ok(())`, or `Err(reason)`
/// when it has one for other shapes only (reported in the routes), or `Err("")` when none.
fn routable(g: &Graph, i: usize) -> std::result::Result<(), String> {
    match &g.nodes[i].op {
        Op::Host(HostOp::MinmaxNorm(_) | HostOp::Flatten(_) | HostOp::Sdpa(_)) => Ok(()),
        Op::Host(HostOp::Take(op)) if const_indices(g, i, op.axis).is_some() => Ok(()),
        Op::Host(HostOp::ArgReduce(op)) => {
            let n = g.ty(g.nodes[i].inputs[0]).shape[op.axis];
            if n <= ARG_FUSED_MAX {
                return Ok(());
            }
            Err(format!(
                "axis of {n} > {ARG_FUSED_MAX}: fp16 index numbers are exact only up to {ARG_FUSED_MAX}"
            ))
        }
        _ => Err(String::new()),
    }
}

/// The fused decomposition of routable node `i` of `g` over its rebuilt inputs `srcs`.
fn decompose(g: &Graph, i: usize, srcs: &[Tensor]) -> Result<Tensor> {
    let Op::Host(op) = &g.nodes[i].op else {
        return Err(not_routable(&g.nodes[i].op));
    };
    match op {
        HostOp::Flatten(_) => srcs[0].reshape(&[-1]),
        HostOp::MinmaxNorm(m) => {
            let ax = [m.axis as i64];
            let lo = srcs[0].amin(&ax, true)?;
            let d = srcs[0].amax(&ax, true)?.sub(&lo)?.add_scalar(m.eps)?;
            srcs[0].sub(&lo)?.div(&d)
        }
        HostOp::ArgReduce(a) => arg_reduce_fused(&srcs[0], a),
        HostOp::Sdpa(s) => sdpa_fused(&srcs[0], &srcs[1], &srcs[2], srcs.get(3), s.scale),
        HostOp::Take(t) => {
            let idx = const_indices(g, i, t.axis).ok_or_else(|| not_routable(&g.nodes[i].op))?;
            let dims: Vec<i64> = g.nodes[i].outputs[0]
                .shape
                .iter()
                .map(|&d| d as i64)
                .collect();
            srcs[0].gather(&idx, t.axis as i64)?.reshape(&dims)
        }
        _ => Err(not_routable(&g.nodes[i].op)),
    }
}

/// The error for decomposing an op that has no fused form (never reached: `routable` guards it).
fn not_routable(op: &Op) -> crate::Error {
    crate::Error::NotImplemented(format!(
        "route: {} has no fused decomposition",
        op.family().name()
    ))
}

/// Number of cuts of `g` when the nodes in `fused` run as fused ops: the count of distinct
/// levels (host ops on the longest path) among the remaining host ops.
fn cuts(g: &Graph, fused: &HashSet<usize>) -> usize {
    let is_host = |j: usize| matches!(g.nodes[j].op, Op::Host(_)) && !fused.contains(&j);
    let level = super::segment::levels(g, is_host);
    let host_levels: HashSet<usize> = (0..g.nodes.len())
        .filter(|&i| is_host(i))
        .map(|i| level[i])
        .collect();
    host_levels.len()
}

/// Route the routable host ops of `outputs` under `mode`: the rewritten outputs and one
/// [`RouteChoice`] per routable op, and per op kept on the host only for its shape (an
/// `argmax` over more than [`ARG_FUSED_MAX`]); none when the graph has neither.
pub fn route(
    outputs: &[(Option<String>, Tensor)],
    mode: Route,
) -> Result<(NamedOutputs, Vec<RouteChoice>)> {
    let g = Graph::from_outputs(outputs)?;
    let mut fused = HashSet::new();
    let mut choices = Vec::new();
    for i in 0..g.nodes.len() {
        let op = g.nodes[i].op.family().name().to_string();
        match routable(&g, i) {
            Err(reason) if reason.is_empty() => continue,
            Err(reason) => choices.push(RouteChoice {
                op,
                fused: false,
                cuts_removed: 0,
                mode,
                reason,
            }),
            Ok(()) => {
                let before = cuts(&g, &fused);
                let mut trial = fused.clone();
                trial.insert(i);
                let removed = before - cuts(&g, &trial);
                let take = match mode {
                    Route::Fused => true,
                    Route::Auto => removed > 0,
                    Route::Host => false,
                };
                if take {
                    fused = trial;
                }
                choices.push(RouteChoice {
                    op,
                    fused: take,
                    cuts_removed: if take { removed } else { 0 },
                    mode,
                    reason: String::new(),
                });
            }
        }
    }
    if fused.is_empty() {
        return Ok((outputs.to_vec(), choices));
    }
    let mut rebuilt: Vec<Vec<Tensor>> = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.iter().enumerate() {
        let srcs: Vec<Tensor> = n
            .inputs
            .iter()
            .map(|v| rebuilt[v.node][v.port].clone())
            .collect();
        let outs = match &n.op {
            _ if fused.contains(&i) => vec![decompose(&g, i, &srcs)?],
            op => Tensor::apply(op.clone(), srcs)?,
        };
        rebuilt.push(outs);
    }
    let outs = g
        .outputs
        .iter()
        .map(|(name, v)| (Some(name.clone()), rebuilt[v.node][v.port].clone()))
        .collect();
    Ok((outs, choices))
}
