//! `af.estimate`, `af.project_peak`, `af.tune`, `af.tune_precision`: the cost model and the
//! tuner as plain Python data (the wrappers live in `aneforge/cost.py`).

use std::path::Path;

use aneforge::cost::profile::ProfileReport;
use aneforge::cost::{self, Estimate};
use aneforge::tune::{self, TuneOptions, Tuned};
use aneforge::Program;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::IntoPy;
use crate::model::parse_outputs;
use crate::options::compile_options;

/// `{micros, floor_us, regions, cut_us, ports_us, target, provenance, warnings, ops: [{node, op, kind, input_shapes,
/// output_shapes, bytes, flops, micros, folded_into}]}`.
fn estimate_dict<'py>(py: Python<'py>, e: &Estimate) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("micros", e.micros)?;
    d.set_item("floor_us", e.floor_us)?;
    d.set_item("regions", e.regions)?;
    d.set_item("cut_us", e.cut_us)?;
    d.set_item("ports_us", e.ports_us)?;
    d.set_item("target", e.target)?;
    d.set_item("provenance", &e.provenance)?;
    d.set_item("warnings", e.warnings.clone())?;
    let ops = PyList::empty(py);
    for o in &e.ops {
        let r = PyDict::new(py);
        r.set_item("node", o.work.node)?;
        r.set_item("op", o.work.op)?;
        r.set_item("kind", o.work.kind.name())?;
        r.set_item("input_shapes", o.work.input_shapes.clone())?;
        r.set_item("output_shapes", o.work.output_shapes.clone())?;
        r.set_item("bytes", o.work.bytes)?;
        r.set_item("flops", o.work.flops)?;
        r.set_item("micros", o.micros)?;
        r.set_item("folded_into", o.folded_into)?;
        ops.append(r)?;
    }
    d.set_item("ops", ops)?;
    Ok(d)
}

/// Estimate the graph under `outputs` (Tensor, list or dict) for `target` (None = host).
#[pyfunction]
#[pyo3(signature = (outputs, target=None))]
pub fn _estimate<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
    target: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let (outs, _) = parse_outputs(outputs)?;
    estimate_dict(py, &cost::estimate_outputs(&outs, target).py()?)
}

/// Estimate the program in directory `dir` for `target` (None = host).
#[pyfunction]
#[pyo3(signature = (dir, target=None))]
pub fn _estimate_dir<'py>(
    py: Python<'py>,
    dir: &str,
    target: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let p = Program::load_dir(Path::new(dir)).py()?;
    estimate_dict(py, &cost::estimate(&p.graph, target).py()?)
}

/// `{arch, tflops, rel_m1, cores, ghz, clock_recorded}` of an arch or family name.
#[pyfunction]
pub fn project_peak<'py>(py: Python<'py>, arch: &str) -> PyResult<Bound<'py, PyDict>> {
    let p = cost::project_peak(arch).py()?;
    let d = PyDict::new(py);
    d.set_item("arch", p.arch)?;
    d.set_item("tflops", p.tflops)?;
    d.set_item("rel_m1", p.rel_m1)?;
    d.set_item("cores", p.cores)?;
    d.set_item("ghz", p.ghz)?;
    d.set_item("clock_recorded", p.clock_recorded)?;
    Ok(d)
}

/// `{chosen, executor, atol, options: {sum_via_matmul, compress?, route?, attention_tiles?}, table: [{variant, lossy,
/// estimate_us, measured_us, error, accepted, note}]}`.
fn tuned_dict<'py>(py: Python<'py>, t: &Tuned) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("chosen", &t.chosen)?;
    d.set_item("executor", &t.executor)?;
    d.set_item("atol", t.atol)?;
    let v = tune::variant(&t.chosen).py()?;
    let o = PyDict::new(py);
    o.set_item("sum_via_matmul", v.sum_via_matmul)?;
    if let Some(c) = v.compress {
        o.set_item("compress", c)?;
    }
    if let Some(r) = v.route {
        o.set_item("route", r.name())?;
    }
    if let Some(k) = v.tiles {
        o.set_item("attention_tiles", k)?;
    }
    d.set_item("options", o)?;
    let table = PyList::empty(py);
    for r in &t.table {
        let row = PyDict::new(py);
        row.set_item("variant", &r.variant)?;
        row.set_item("lossy", r.lossy)?;
        row.set_item("estimate_us", r.estimate_us)?;
        row.set_item("measured_us", r.measured_us)?;
        row.set_item("error", r.error)?;
        row.set_item("accepted", r.accepted)?;
        row.set_item("note", &r.note)?;
        table.append(row)?;
    }
    d.set_item("table", table)?;
    Ok(d)
}

/// Tune `outputs` on the executor `options` selects; the dict of [`tuned_dict`] plus `from_cache`.
#[pyfunction]
#[pyo3(signature = (outputs, budget=8, atol=5e-3, min_lossy_speedup=1.10, reps=20, prune_factor=1.5, **options))]
#[allow(clippy::too_many_arguments)]
pub fn _tune<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
    budget: usize,
    atol: f64,
    min_lossy_speedup: f64,
    reps: usize,
    prune_factor: f64,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let base = compile_options(options)?;
    let (outs, _) = parse_outputs(outputs)?;
    let t = TuneOptions {
        budget,
        atol,
        min_lossy_speedup,
        reps,
        prune_factor,
    };
    let (tuned, hit) = py.detach(|| tune::tune(&outs, &base, &t)).py()?;
    let d = tuned_dict(py, &tuned)?;
    d.set_item("from_cache", hit)?;
    Ok(d)
}

/// `tune_precision`: the dict of [`tuned_dict`] (atol = the target error).
#[pyfunction]
pub fn _tune_precision<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
    target_error: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let (outs, _) = parse_outputs(outputs)?;
    let tuned = py
        .detach(|| tune::tune_precision(&outs, target_error))
        .py()?;
    tuned_dict(py, &tuned)
}

/// `{device, runs, call_us, table, rows: [{kind, name, stage, depth, leaf, shape, bytes,
/// flops, micros, share}]}` of a profile.
pub fn profile_dict<'py>(py: Python<'py>, r: &ProfileReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("device", r.device)?;
    d.set_item("runs", r.runs)?;
    d.set_item("call_us", r.call_us)?;
    d.set_item("clock", r.clock.name())?;
    d.set_item("table", r.table())?;
    let rows = PyList::empty(py);
    for row in &r.rows {
        let x = PyDict::new(py);
        x.set_item("kind", row.kind.name())?;
        x.set_item("name", &row.name)?;
        x.set_item("stage", row.stage)?;
        x.set_item("depth", row.depth)?;
        x.set_item("leaf", row.leaf)?;
        x.set_item("shape", row.shape.clone())?;
        x.set_item("bytes", row.bytes)?;
        x.set_item("flops", row.flops)?;
        x.set_item("micros", row.micros)?;
        x.set_item("share", row.share)?;
        rows.append(x)?;
    }
    d.set_item("rows", rows)?;
    Ok(d)
}

/// `cross_compile_check`: the static preflight dict of [`crate::targets::preflight`] plus the
/// compile step's `{target, arch, compiled (True / False / None = not run), caches, compile_note}`.
#[pyfunction]
pub fn _cross_compile_check<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
    target: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let (outs, _) = parse_outputs(outputs)?;
    let d = crate::targets::preflight_dict(py, &outs, target)?;
    let c = py
        .detach(|| aneforge::cost::cross::cross_compile(&outs, target))
        .py()?;
    d.set_item("target", target)?;
    d.set_item("arch", c.arch)?;
    d.set_item("compiled", c.compiled)?;
    let caches: Vec<String> = c.caches.iter().map(|p| p.display().to_string()).collect();
    d.set_item("caches", caches)?;
    d.set_item("compile_note", c.note)?;
    Ok(d)
}

/// Issue the cost warnings of a freshly compiled program through `aneforge.cost._issue` (which
/// honours ANEFORGE_QUIET / ANEFORGE_NO_COST_WARNINGS): precision risks always, the dispatch
/// floor when it runs on the ANE for a known target. A graph the cost model cannot estimate
/// (no compute ops) draws no warning.
pub fn warn_at_compile(
    py: Python<'_>,
    c: &aneforge::Compiled,
    opts: &aneforge::CompileOptions,
) -> PyResult<()> {
    let target = match c.device() {
        "ane" => aneforge::targets::compile_target(opts.target.as_deref())
            .py()?
            .map(|t| t.arch.unwrap_or(t.family.name()).to_string()),
        _ => None,
    };
    let Ok(e) = cost::estimate(&c.program.graph, target.as_deref()) else {
        return Ok(());
    };
    let found: Vec<&String> = e
        .warnings
        .iter()
        .filter(|w| w.starts_with("dispatch floor") || w.starts_with("precision"))
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    py.import("aneforge.cost")?
        .call_method1("_issue", (found,))?;
    Ok(())
}
