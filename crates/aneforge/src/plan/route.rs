//! Routing: host ops that have a lossless fused decomposition run as fused ops when that removes
//! a cut (`route="auto"`), always (`"fused"`) or never (`"host"`). Routable: `minmax_norm`
//! (reduce_min/max, sub, div), `flatten` (reshape), `sdpa` (matmul, softmax, matmul) and
//! `gather`/`take` whose indices are a constant cast to int32 (static slices joined by concat).
//! `lrn` is always fused already (`local_response_norm`); `argmax` stays on the host (a fused
//! form would compute indices in fp16, exact only below 2048, and ties need the first index).
//! "Lossless" means the same math; the fused form rounds between ops under the fp16 contract
//! where the host kernel rounds once.

use std::collections::HashSet;
use std::fmt;

use crate::error::Result;
use crate::graph::build::bridge::sdpa_fused;
use crate::graph::{Graph, Tensor};
use crate::ops::host::HostOp;
use crate::ops::Op;
use crate::options::Route;

/// Program outputs with their optional port names (what `compile` takes).
pub type NamedOutputs = Vec<(Option<String>, Tensor)>;

/// The routing decision for one routable host op, as reported by `net.routes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteChoice {
    /// The op name (`minmax_norm`, `flatten`, `sdpa`, `gather`).
    pub op: String,
    /// Whether it was replaced by its fused decomposition.
    pub fused: bool,
    /// Cuts removed by that (0 when kept on the host).
    pub cuts_removed: usize,
    /// The route mode that decided.
    pub mode: Route,
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

/// Whether node `i` of `g` is a host op with a fused decomposition.
fn routable(g: &Graph, i: usize) -> bool {
    match &g.nodes[i].op {
        Op::Host(HostOp::MinmaxNorm(_) | HostOp::Flatten(_) | HostOp::Sdpa(_)) => true,
        Op::Host(HostOp::Take(op)) => const_indices(g, i, op.axis).is_some(),
        _ => false,
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
/// [`RouteChoice`] per routable op (none when the graph has no routable op).
pub fn route(
    outputs: &[(Option<String>, Tensor)],
    mode: Route,
) -> Result<(NamedOutputs, Vec<RouteChoice>)> {
    let g = Graph::from_outputs(outputs)?;
    let candidates: Vec<usize> = (0..g.nodes.len()).filter(|&i| routable(&g, i)).collect();
    if candidates.is_empty() {
        return Ok((outputs.to_vec(), Vec::new()));
    }
    let mut fused = HashSet::new();
    let mut choices = Vec::with_capacity(candidates.len());
    for &i in &candidates {
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
            op: g.nodes[i].op.family().name().to_string(),
            fused: take,
            cuts_removed: if take { removed } else { 0 },
            mode,
        });
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
