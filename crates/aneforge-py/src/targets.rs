//! `af.preflight(outputs, target)`: the static capability gate as plain Python data.

use aneforge::targets::{self, OpEntry, Oversize};
use aneforge::{Graph, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::IntoPy;
use crate::model::parse_outputs;

/// Classify `outputs`' ops and check their shapes for `target` (arch string or family name):
/// a dict with `family`, `ok` and the lists `native`, `decompose`, `reject`, `oversize` of dicts.
#[pyfunction]
pub fn preflight<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
    target: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let (outs, _) = parse_outputs(outputs)?;
    preflight_dict(py, &outs, target)
}

/// The dict of [`preflight`] for already-parsed outputs (shared with `cross_compile_check`).
pub fn preflight_dict<'py>(
    py: Python<'py>,
    outs: &[(Option<String>, Tensor)],
    target: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let t = targets::parse_target(target).py()?;
    targets::require_mil(t.family, t.arch).py()?;
    let p = targets::preflight(&Graph::from_outputs(outs).py()?, t.family).py()?;
    let d = PyDict::new(py);
    d.set_item("family", t.family.name())?;
    d.set_item("ok", p.ok())?;
    for (key, list) in [
        ("native", &p.native),
        ("decompose", &p.decompose),
        ("reject", &p.reject),
    ] {
        d.set_item(
            key,
            PyList::new(
                py,
                list.iter()
                    .map(|e| op_entry(py, e))
                    .collect::<PyResult<Vec<_>>>()?,
            )?,
        )?;
    }
    d.set_item(
        "oversize",
        PyList::new(
            py,
            p.oversize
                .iter()
                .map(|o| oversize(py, o))
                .collect::<PyResult<Vec<_>>>()?,
        )?,
    )?;
    Ok(d)
}

/// `{node, op, shape, floor}`.
fn op_entry<'py>(py: Python<'py>, e: &OpEntry) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("node", e.node)?;
    d.set_item("op", e.op)?;
    d.set_item("shape", e.shape.clone())?;
    d.set_item("floor", e.floor.name())?;
    Ok(d)
}

/// `{node, op, shape, limit, value, max}`.
fn oversize<'py>(py: Python<'py>, o: &Oversize) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("node", o.node)?;
    d.set_item("op", o.op)?;
    d.set_item("shape", o.shape.clone())?;
    d.set_item("limit", o.limit.name())?;
    d.set_item("value", o.value)?;
    d.set_item("max", o.max)?;
    Ok(d)
}
