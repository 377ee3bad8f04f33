//! The cost model: predicted µs per call of a program, per op, with provenance. Host mode
//! costs the reference executor from calibrated (or default) constants; analytic mode costs an
//! ANE target from the reference design's measured anchors ([`anchors`]).

pub mod anchors;
pub mod calibrate;
pub mod cross;
pub mod fused;
pub mod host;
pub mod plan_cost;
pub mod power;
pub mod profile;
pub mod timing;
pub mod work;

use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::ops::Op;
use crate::shape::numel;
pub use anchors::{project_peak, Machine, PeakProjection};
pub use host::{HostConstants, OpOverhead, RateCurve};
pub use work::{graph_work, NodeWork, WorkKind};

/// A program's work at or below this multiple of the per-call floor draws the dispatch-floor warning.
pub const FLOOR_WARNING_RATIO: f64 = 1.5;

/// One compute node's cost.
#[derive(Clone, Debug, PartialEq)]
pub struct OpEstimate {
    pub work: NodeWork,
    /// Predicted µs of this node (the per-call floor is counted once, in [`Estimate::floor_us`]).
    pub micros: f64,
    /// Host mode: the node whose step runs this op: the conv whose output pass runs it (costed
    /// as [`fused::folded_us`]) or the first op of its fused elementwise run (costed as
    /// [`fused::in_run_us`]); `None` for an op that is its own step or heads one.
    pub folded_into: Option<usize>,
}

/// A whole program's predicted cost: one region = one dispatch; a graph with host ops is costed
/// as its segmented plan (one floor per region plus the hand-off of the values crossing cuts).
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// Predicted µs per call: regions × floor + Σ node µs + cut µs + ports µs.
    pub micros: f64,
    pub floor_us: f64,
    /// Dispatches per call (1 for a single program).
    pub regions: usize,
    /// Hand-off µs of the values crossing cuts (0 for a single program).
    pub cut_us: f64,
    /// Host mode: µs converting the program's inputs and outputs at its ports (else 0).
    pub ports_us: f64,
    /// Arch costed (`None` = the host's reference executor).
    pub target: Option<&'static str>,
    /// `measured anchor h14`, `scaled from ...`, `projected from ...`, `calibrated host`
    /// or `uncalibrated defaults`.
    pub provenance: String,
    pub ops: Vec<OpEstimate>,
    /// Dispatch-floor and precision warnings (see [`warnings`]).
    pub warnings: Vec<String>,
}

impl Estimate {
    /// Total bytes and flops over all nodes.
    pub fn totals(&self) -> (u64, u64) {
        self.ops
            .iter()
            .fold((0, 0), |(b, f), o| (b + o.work.bytes, f + o.work.flops))
    }
}

/// Host-mode time of one node: its kind's per-op overhead plus its work over the measured rate
/// of its kind at its size (each rate is measured end to end, memory traffic included, so the
/// cache regime is in the curve): gemm and conv flops at their curve's rate for `w.size`
/// (min(K, N) / min(K, Cout): thin products run slower; a conv at the lower of that and its
/// work curve's rate for its flops: small convs run slower), permutes' elements at the permute
/// curve's rate for their count, elementwise elements at their form's curve (unary, scalar,
/// broadcast or binary, see [`work::ElementwiseForm`]), reduce elements (softmax at its own
/// curve when set) and copies' bytes at
/// their curve's rate for that work, host ops of a plan their elements at the host curve's rate,
/// a moving reshape the data overhead alone.
/// Missing terms (files older than them) fall back: a form's
/// curve to the binary elementwise curve, curves to the kind's scalar rate (permutes to bytes / `bytes_per_us`), the copy rate to `bytes_per_us`,
/// the reduce rate to the elementwise rate.
pub fn host_node_us(w: &NodeWork, c: &HostConstants) -> f64 {
    let o = &c.op_us;
    let flops = w.flops as f64;
    let size = w.size as f64;
    let bytes = w.bytes as f64;
    match w.kind {
        WorkKind::Gemm => o.gemm + flops / c.gemm_curve.rate(size).unwrap_or(c.gemm_flops_per_us),
        WorkKind::Conv => {
            let rate = c.conv_curve.rate(size).unwrap_or(c.conv_flops_per_us);
            o.conv + flops / c.conv_work_curve.rate(flops).map_or(rate, |r| r.min(rate))
        }
        WorkKind::Elementwise => {
            let rate = work::elementwise_form(w)
                .curve(c)
                .rate(flops)
                .or_else(|| c.elementwise_curve.rate(flops))
                .unwrap_or(c.elementwise_per_us);
            o.elementwise + flops / rate
        }
        WorkKind::Reduce => {
            let scalar = positive_or(c.reduce_per_us, c.elementwise_per_us);
            let softmax = (w.op == crate::ops::reduce::SOFTMAX)
                .then(|| c.softmax_curve.rate(flops))
                .flatten();
            let rate = softmax.or_else(|| c.reduce_curve.rate(flops));
            o.reduce + flops / rate.unwrap_or(scalar)
        }
        WorkKind::Data => {
            let scalar = positive_or(c.copy_bytes_per_us, c.bytes_per_us);
            o.data + bytes / c.copy_curve.rate(bytes).unwrap_or(scalar)
        }
        WorkKind::Move => o.data,
        WorkKind::Host => {
            let rate = c.host_curve.rate(flops);
            o.elementwise + flops / rate.unwrap_or(c.elementwise_per_us)
        }
        WorkKind::Permute => match c.permute_curve.rate(size) {
            Some(rate) => o.data + flops / rate,
            None => o.data + bytes / c.bytes_per_us,
        },
    }
}

/// `rate` when it is set (> 0), else `fallback` (a field older calibration files lack).
fn positive_or(rate: f64, fallback: f64) -> f64 {
    if rate > 0.0 {
        rate
    } else {
        fallback
    }
}

/// Host-mode µs of converting the program's input and output elements at its ports: their
/// count at the port curve's rate for it (else `port_elems_per_us`; 0 when neither is set).
fn host_ports_us(graph: &Graph, c: &HostConstants) -> f64 {
    let ins = graph.inputs.iter().map(|id| {
        graph.nodes[*id]
            .outputs
            .iter()
            .map(|t| numel(&t.shape))
            .sum::<usize>()
    });
    let outs = graph
        .outputs
        .iter()
        .map(|(_, v)| numel(&graph.ty(*v).shape));
    let elements = ins.chain(outs).sum::<usize>() as f64;
    match c.port_curve.rate(elements) {
        Some(rate) => elements / rate,
        None if c.port_elems_per_us > 0.0 => elements / c.port_elems_per_us,
        None => 0.0,
    }
}

/// Analytic time of one node on `m`: max(bytes / bandwidth, flops / effective peak) with
/// effective peak = peak · min(1, (flops / 1.8e10)^0.38); elementwise and data nodes cost bytes
/// only, a softmax whose planes reach [`anchors::SOFTMAX_WALL`] its bytes ×
/// [`anchors::SOFTMAX_WALL_FACTOR`] (what attention query tiles avoid).
pub fn analytic_node_us(w: &NodeWork, m: &Machine) -> f64 {
    let memory = w.bytes as f64 / m.bytes_per_us * softmax_wall(w);
    if !matches!(w.kind, WorkKind::Gemm | WorkKind::Conv) || w.flops == 0 {
        return memory;
    }
    let f = w.flops as f64;
    let utilisation = (f / anchors::UTILISATION_FLOPS)
        .powf(anchors::UTILISATION_EXPONENT)
        .min(1.0);
    memory.max(f / (m.peak_flops_per_us * utilisation))
}

/// [`anchors::SOFTMAX_WALL_FACTOR`] for a softmax whose output planes (last two axes) have at
/// least [`anchors::SOFTMAX_WALL`] rows and columns, else 1.
pub fn softmax_wall(w: &NodeWork) -> f64 {
    let (rows, cols) = anchors::SOFTMAX_WALL;
    let walled = w.op == crate::ops::reduce::SOFTMAX
        && w.output_shapes
            .first()
            .is_some_and(|s| s.len() >= 2 && s[s.len() - 2] >= rows && s[s.len() - 1] >= cols);
    if walled {
        anchors::SOFTMAX_WALL_FACTOR
    } else {
        1.0
    }
}

/// Estimate `graph` on the host with explicit constants (`provenance` labels them); ops the
/// executor folds into a conv's step cost [`fused::folded_us`], ops after the first of a fused
/// elementwise run [`fused::in_run_us`] (each only when `c` holds those rates).
pub fn estimate_host(graph: &Graph, c: &HostConstants, provenance: &str) -> Result<Estimate> {
    c.validate()?;
    let machine = (c.floor_us, c.bytes_per_us, c.cut_us);
    let none = || vec![None; graph.nodes.len()];
    let folded = match c.epilogue_per_us > 0.0 {
        true => fused::folded_into(graph),
        false => none(),
    };
    let in_run = match fused::has_run_rates(c) {
        true => fused::run_into(graph),
        false => none(),
    };
    let mut e = finish(graph, machine, None, provenance.into(), |w| {
        match (folded[w.node], in_run[w.node]) {
            (Some(_), _) => fused::folded_us(w, c),
            (None, Some(_)) => fused::in_run_us(w, c),
            (None, None) => host_node_us(w, c),
        }
    })?;
    for o in &mut e.ops {
        o.folded_into = folded[o.work.node].or(in_run[o.work.node]);
    }
    e.ports_us = host_ports_us(graph, c);
    e.micros += e.ports_us;
    Ok(e)
}

/// Estimate `graph` for `target`: `None` = the host's reference executor with the stored
/// calibration (a corrupt calibration file is reported in `warnings` and ignored), else an arch
/// string or family name costed analytically. Unknown targets, pre-MIL families and graphs
/// without compute nodes are errors.
pub fn estimate(graph: &Graph, target: Option<&str>) -> Result<Estimate> {
    match target {
        Some(t) => {
            let m = anchors::machine(t)?;
            // No hand-off on a device has been measured: each cut costs the reference design's
            // projected CUT plus its bytes, and the provenance says so.
            let machine = (m.floor_us, m.bytes_per_us, anchors::PROJECTED_CUT_US);
            let mut e = finish(graph, machine, Some(m.arch), m.provenance.clone(), |w| {
                analytic_node_us(w, &m)
            })?;
            if e.regions > 1 {
                e.provenance += &format!(
                    "; cuts projected ({} µs per host stage, not measured on a device)",
                    anchors::PROJECTED_CUT_US
                );
            }
            Ok(e)
        }
        None => {
            let (c, provenance, note) = match host::load() {
                Ok(Some(c)) => (c, "calibrated host", None),
                Ok(None) => (HostConstants::DEFAULTS, "uncalibrated defaults", None),
                Err(e) => (
                    HostConstants::DEFAULTS,
                    "uncalibrated defaults",
                    Some(format!("ignoring the host calibration ({e}); run `aneforge calibrate` to rewrite it")),
                ),
            };
            let mut e = estimate_host(graph, &c, provenance)?;
            e.warnings.extend(note);
            Ok(e)
        }
    }
}

/// [`estimate`] of the graph under `outputs`. When every output is an input or a constant the
/// graph has no op (compiling it would add a copy per output, which is not the user's work):
/// the empty-graph error, as for a graph of inputs and constants.
pub fn estimate_outputs(
    outputs: &[(Option<String>, Tensor)],
    target: Option<&str>,
) -> Result<Estimate> {
    let source = |t: &Tensor| matches!(t.op(), Op::Input(_) | Op::Const(_) | Op::Constexpr(_));
    if outputs.iter().all(|(_, t)| source(t)) {
        return Err(no_compute_nodes());
    }
    estimate(&Graph::from_outputs(outputs)?, target)
}

/// The empty-graph error.
fn no_compute_nodes() -> Error {
    Error::value(
        "estimate",
        "the graph has no compute nodes (only inputs and constants)",
    )
}

/// Cost every node, then the call: `(floor µs, bytes per µs, µs per host stage)` of the machine
/// for the floors and the cut hand-offs.
fn finish(
    graph: &Graph,
    (floor_us, bytes_per_us, stage_us): (f64, f64, f64),
    target: Option<&'static str>,
    provenance: String,
    node_us: impl Fn(&NodeWork) -> f64,
) -> Result<Estimate> {
    let work = graph_work(graph);
    if work.is_empty() {
        return Err(no_compute_nodes());
    }
    let ops: Vec<OpEstimate> = work
        .into_iter()
        .map(|w| OpEstimate {
            micros: node_us(&w),
            work: w,
            folded_into: None,
        })
        .collect();
    let (regions, cut_us) = match plan_cost::plan_cost(graph, bytes_per_us, stage_us)? {
        Some(p) => (p.regions, p.cut_us),
        None => (1, 0.0),
    };
    let micros = regions as f64 * floor_us + ops.iter().map(|o| o.micros).sum::<f64>() + cut_us;
    let mut e = Estimate {
        micros,
        floor_us,
        regions,
        cut_us,
        ports_us: 0.0,
        target,
        provenance,
        ops,
        warnings: Vec::new(),
    };
    e.warnings = warnings(graph, &e)?;
    Ok(e)
}

/// The dispatch-floor warning (work ≤ [`FLOOR_WARNING_RATIO`] × floor on an ANE target) and one
/// precision warning per `precision_risk` hotspot.
pub fn warnings(graph: &Graph, e: &Estimate) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if e.target.is_some() && e.micros <= FLOOR_WARNING_RATIO * e.floor_us {
        out.push(format!(
            "dispatch floor: {:.1} µs predicted per call, of which {:.1} µs is the fixed per-call floor on {}; batch inputs or chain work into one program (dispatch is one call in flight at a time)",
            e.micros, e.floor_us, e.target.unwrap_or("the host")
        ));
    }
    out.extend(
        crate::passes::precision::graph_risk(graph)
            .into_iter()
            .map(|h| format!("precision: node {}: {}", h.node, h.reason)),
    );
    Ok(out)
}
