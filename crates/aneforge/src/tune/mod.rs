//! `tune`: rank compile variants by the cost model, measure up to a budget of them on the
//! available executor with seeded inputs, accept only variants within `atol` of the lossless
//! baseline (NaN/inf rejected; lossy ones only when ≥ 1.10× faster), and cache the choice by a
//! structural graph hash. `tune_precision`: the cheapest variant meeting an error target
//! against the fp32 reference. Variants: sum_via_matmul, global and per-weight (`auto`) weight
//! compression, the routes of selectable host ops (`route="fused"` / `"host"`, when the
//! graph has a routable op) and attention query tiles (`attention_tiles=k`, when the graph has
//! an attention built by `sdpa` / `mha` / `cross_attention` with enough query rows: see
//! [`tiles`]; lossless, since tiles split the query rows of the same per-row math).

pub mod cache;
pub mod gate;
pub mod tiles;

use std::time::Instant;

use crate::compile::{compile, CompileOptions, Compiled, Device};
use crate::compress::Compress;
use crate::error::{Error, Result};
use crate::exec::{PortData, Precision};
use crate::graph::{Graph, Tensor};
use crate::ops::Op;
use crate::options::Route;
pub use cache::{Row, Tuned};
use gate::{judge, relative_error, Verdict};

/// A compile variant: its name, whether it loses information, and the options it sets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Variant {
    pub name: &'static str,
    pub lossy: bool,
    pub sum_via_matmul: bool,
    /// The `compress=` mode name, if any.
    pub compress: Option<&'static str>,
    /// The `route=` mode, if the variant sets one (else the base options' route).
    pub route: Option<Route>,
    /// The `attention_tiles=` count, if the variant sets one (else the base options' count).
    pub tiles: Option<usize>,
}

const fn v(
    name: &'static str,
    lossy: bool,
    sum_via_matmul: bool,
    compress: Option<&'static str>,
) -> Variant {
    Variant {
        name,
        lossy,
        sum_via_matmul,
        compress,
        route: None,
        tiles: None,
    }
}

/// A lossless route variant (the fused decomposition is the same math, rounded between ops).
const fn routed(name: &'static str, route: Route) -> Variant {
    Variant {
        name,
        lossy: false,
        sum_via_matmul: false,
        compress: None,
        route: Some(route),
        tiles: None,
    }
}

/// The lossless variant `attention_tiles=k` (the same per-row math in k query tiles).
pub const fn tiled(k: usize) -> Variant {
    Variant {
        name: TILES,
        lossy: false,
        sum_via_matmul: false,
        compress: None,
        route: None,
        tiles: Some(k),
    }
}

/// The name of the tile variants (labelled `attention_tiles=k`).
pub const TILES: &str = "attention_tiles";

/// Every variant `tune` knows, baseline first (`auto` = per-weight compression: each weight
/// gets the smallest encoding within the compile's error budget, see [`Compress::Auto`];
/// `route_*` = every routable host op fused / kept on the host, see [`crate::plan::route`]).
pub const VARIANTS: [Variant; 9] = [
    v("baseline", false, false, None),
    v("sum_via_matmul", false, true, None),
    routed("route_fused", Route::Fused),
    routed("route_host", Route::Host),
    v("int8", true, false, Some("int8")),
    v("int4", true, false, Some("int4")),
    v("blockwise", true, false, Some("blockwise")),
    v("auto", true, false, Some("auto")),
    v("int8+sum_via_matmul", true, true, Some("int8")),
];

/// The variant called `name` (`attention_tiles=k` for k ≥ 1 included), or a value error
/// listing the names.
pub fn variant(name: &str) -> Result<Variant> {
    if let Some(k) = name.strip_prefix(TILES).and_then(|r| r.strip_prefix('=')) {
        return match k.parse::<usize>() {
            Ok(k) if k >= 1 => Ok(tiled(k)),
            _ => Err(Error::value(
                "tune",
                format!("variant '{name}': the tile count must be an integer >= 1"),
            )),
        };
    }
    VARIANTS
        .into_iter()
        .find(|v| v.name == name)
        .ok_or_else(|| {
            let names: Vec<_> = VARIANTS.iter().map(|v| v.name).collect();
            Error::value(
                "tune",
                format!("unknown variant '{name}'; expected one of {names:?}"),
            )
        })
}

impl Variant {
    /// The name in tables and the cache: `name`, or `attention_tiles=k` for a tile variant.
    pub fn label(&self) -> String {
        match self.tiles {
            Some(k) => format!("{}={k}", self.name),
            None => self.name.to_string(),
        }
    }

    /// `base` with this variant's options set.
    pub fn options(&self, base: &CompileOptions) -> Result<CompileOptions> {
        let mut o = base.clone();
        o.sum_via_matmul = self.sum_via_matmul;
        o.compress = self.compress.map(Compress::parse).transpose()?;
        if let Some(r) = self.route {
            o.route = r;
        }
        if self.tiles.is_some() {
            o.attention_tiles = self.tiles;
        }
        Ok(o)
    }

    /// Whether it changes anything for `g` (a sum rewrite needs a reduction, compression a
    /// weight, a route a routable host op: `routable` says whether `g` has one).
    fn applies(&self, g: &Graph, routable: bool) -> bool {
        let has = |f: fn(&Op) -> bool| g.nodes.iter().any(|n| f(&n.op));
        (!self.sum_via_matmul || has(|o| matches!(o, Op::Reduce(_))))
            && (self.compress.is_none() || has(|o| matches!(o, Op::Const(c) if c.shape.len() >= 2)))
            && (self.route.is_none() || routable)
    }
}

/// Tuning parameters (defaults: budget 8, atol 5e-3, 1.10× for lossy, 20 repetitions).
#[derive(Clone, Debug)]
pub struct TuneOptions {
    pub budget: usize,
    pub atol: f64,
    pub min_lossy_speedup: f64,
    pub reps: usize,
    /// Lossy variants estimated above this multiple of the best estimate are not measured.
    pub prune_factor: f64,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            budget: 8,
            atol: 5e-3,
            min_lossy_speedup: 1.10,
            reps: 20,
            prune_factor: 1.5,
        }
    }
}

/// Seeded N(0, 1) inputs for every port of `net` (values within 0.5 of zero pushed out by 0.5).
pub fn seeded_inputs(net: &Compiled, seed: u64) -> Vec<Vec<f32>> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    net.inputs()
        .iter()
        .map(|p| {
            (0..p.numel())
                .map(|_| {
                    let z =
                        (-2.0 * uniform().ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos();
                    let z = if z.abs() < 0.5 {
                        z + 0.5f64.copysign(z)
                    } else {
                        z
                    };
                    z as f32
                })
                .collect()
        })
        .collect()
}

/// Outputs and median µs of `reps` calls (after two warm-ups).
fn measure(net: &mut Compiled, inputs: &[Vec<f32>], reps: usize) -> Result<(Vec<Vec<f32>>, f64)> {
    let ports: Vec<PortData> = inputs.iter().map(|d| PortData::F32(d)).collect();
    let out = net.run(&ports)?;
    net.run(&ports)?;
    let mut ts = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        net.run(&ports)?;
        ts.push(t.elapsed().as_secs_f64() * 1e6);
    }
    ts.sort_by(f64::total_cmp);
    Ok((out, ts[ts.len() / 2]))
}

/// A compiled variant and its estimate, or why it could not be compiled.
fn build(
    outs: &[(Option<String>, Tensor)],
    v: &Variant,
    base: &CompileOptions,
) -> Result<(Compiled, f64)> {
    let net = compile(outs, &v.options(base)?)?;
    let target = (net.device() != "reference")
        .then_some(base.target.as_deref())
        .flatten();
    let e = crate::cost::estimate(&net.program.graph, target)?;
    Ok((net, e.micros))
}

/// Whether `outs` holds a host op with a fused decomposition (one `route` can move).
fn has_routable_op(outs: &[(Option<String>, Tensor)]) -> Result<bool> {
    Ok(!crate::plan::route::route(outs, Route::Host)?.1.is_empty())
}

/// Tune `outs` compiled with `base` (its device is the executor measured). Returns the result
/// and whether it came from the cache. A corrupt cache is reported on stderr, ignored and rewritten.
pub fn tune(
    outs: &[(Option<String>, Tensor)],
    base: &CompileOptions,
    t: &TuneOptions,
) -> Result<(Tuned, bool)> {
    if t.budget == 0 || !(t.atol.is_finite() && t.atol >= 0.0) {
        return Err(Error::value(
            "tune",
            format!(
                "budget must be ≥ 1 and atol finite and ≥ 0, got budget {} atol {}",
                t.budget, t.atol
            ),
        ));
    }
    let g = Graph::from_outputs(outs)?;
    let (baseline, base_est) = build(outs, &VARIANTS[0], base)?;
    let executor = baseline.device().to_string();
    // Graphs with attention have tile variants: their key names the base tile count (entries
    // written before tiles were tuned are not reused for them; every other key is unchanged).
    let key = format!(
        "{}/{executor}/{:e}/{}{}",
        cache::structural_hash(&g),
        t.atol,
        t.min_lossy_speedup,
        tiles::key_suffix(outs, base)
    );
    let all = match cache::load_all() {
        Ok(all) => all,
        Err(e) => {
            if std::env::var_os("ANEFORGE_QUIET").is_none() {
                eprintln!("aneforge: warning: ignoring the tune cache ({e}); it is rewritten");
            }
            Default::default()
        }
    };
    if let Some(hit) = all.get(&key) {
        return Ok((hit.clone(), true));
    }
    let mut candidates: Vec<(Variant, Result<(Compiled, f64)>)> =
        vec![(VARIANTS[0], Ok((baseline, base_est)))];
    let routable = has_routable_op(outs)?;
    let tile_variants = tiles::tile_counts(outs, base).into_iter().map(tiled);
    let applicable = VARIANTS[1..].iter().filter(|v| v.applies(&g, routable));
    for v in applicable.copied().chain(tile_variants) {
        candidates.push((v, build(outs, &v, base)));
    }
    let best_est = candidates
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|(_, e)| *e))
        .fold(f64::INFINITY, f64::min);
    // Lossless first, then by estimate; the baseline always leads (it is the reference).
    candidates[1..].sort_by(|(a, ra), (b, rb)| {
        let est = |r: &Result<(Compiled, f64)>| r.as_ref().map_or(f64::INFINITY, |(_, e)| *e);
        (a.lossy, est(ra))
            .partial_cmp(&(b.lossy, est(rb)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut table = Vec::new();
    let mut reference: Option<(Vec<Vec<f32>>, f64)> = None;
    let mut measured = 0;
    let mut inputs = None;
    for (v, built) in candidates {
        let mut row = Row {
            variant: v.label(),
            lossy: v.lossy,
            estimate_us: f64::NAN,
            measured_us: None,
            error: None,
            accepted: false,
            note: String::new(),
        };
        match built {
            Err(e) => row.note = format!("not compiled: {e}"),
            Ok((mut net, est)) => {
                row.estimate_us = est;
                if v.lossy && est > t.prune_factor * best_est {
                    row.note = format!("pruned: estimate > {}x the best", t.prune_factor);
                } else if measured >= t.budget {
                    row.note = "over budget: not measured".into();
                } else {
                    let xs = inputs.get_or_insert_with(|| seeded_inputs(&net, 0));
                    measured += 1;
                    let (out, us) = measure(&mut net, xs, t.reps)?;
                    row.measured_us = Some(us);
                    let (ref_out, ref_us) = reference.get_or_insert_with(|| (out.clone(), us));
                    row.error = relative_error(ref_out, &out);
                    match judge(
                        row.error,
                        t.atol,
                        v.lossy,
                        *ref_us / us,
                        t.min_lossy_speedup,
                    ) {
                        Verdict::Accepted => row.accepted = true,
                        Verdict::Rejected(why) => row.note = why,
                    }
                }
            }
        }
        table.push(row);
    }
    let chosen = table
        .iter()
        .filter(|r| r.accepted)
        .min_by(|a, b| {
            a.measured_us
                .partial_cmp(&b.measured_us)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .map_or("baseline", |r| r.variant.as_str())
        .to_string();
    let tuned = Tuned {
        chosen,
        executor,
        atol: t.atol,
        table,
    };
    cache::store(&key, &tuned, all)?;
    Ok((tuned, false))
}

/// The cheapest (by estimate) of baseline, sum_via_matmul and int8+sum_via_matmul whose
/// relative error against the fp32 reference executor is ≤ `target_error`, on the fp16
/// reference executor; the table lists every candidate. None meets it: a value error with the best.
pub fn tune_precision(outs: &[(Option<String>, Tensor)], target_error: f64) -> Result<Tuned> {
    if !(target_error.is_finite() && target_error > 0.0) {
        return Err(Error::value(
            "tune_precision",
            format!("target_error must be finite and > 0, got {target_error}"),
        ));
    }
    let mut fp32 = CompileOptions {
        device: Device::Reference,
        precision: Precision::Fp32,
        ..CompileOptions::default()
    };
    let mut exact = compile(outs, &fp32)?;
    let xs = seeded_inputs(&exact, 0);
    let (reference, _) = measure(&mut exact, &xs, 1)?;
    fp32.precision = Precision::Fp16;
    let g = Graph::from_outputs(outs)?;
    let mut table = Vec::new();
    for name in ["baseline", "sum_via_matmul", "int8+sum_via_matmul"] {
        let v = variant(name)?;
        if name != "baseline" && !v.applies(&g, false) {
            continue;
        }
        let (mut net, est) = build(outs, &v, &fp32)?;
        let (out, us) = measure(&mut net, &xs, 1)?;
        let error = relative_error(&reference, &out);
        let accepted = error.is_some_and(|e| e <= target_error);
        let note = match error {
            None => "non-finite output (NaN or inf): fail-closed".into(),
            Some(e) if !accepted => format!("error {e:.3e} > target {target_error:.1e}"),
            Some(_) => String::new(),
        };
        table.push(Row {
            variant: name.into(),
            lossy: v.lossy,
            estimate_us: est,
            measured_us: Some(us),
            error,
            accepted,
            note,
        });
    }
    let chosen = table
        .iter()
        .filter(|r| r.accepted)
        .min_by(|a, b| a.estimate_us.total_cmp(&b.estimate_us))
        .map(|r| r.variant.clone());
    match chosen {
        Some(chosen) => Ok(Tuned {
            chosen,
            executor: "reference".into(),
            atol: target_error,
            table,
        }),
        None => {
            let best = table
                .iter()
                .filter_map(|r| r.error)
                .fold(f64::INFINITY, f64::min);
            Err(Error::value("tune_precision", format!("no variant meets target_error {target_error:.1e}; the best error is {best:.3e}")))
        }
    }
}
