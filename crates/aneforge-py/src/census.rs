//! `af.capabilities(target=None, report=None)`: the op census as plain Python data.

use std::path::PathBuf;

use aneforge::conformance::census;
use aneforge::conformance::selfcheck;
use aneforge::targets;
use pyo3::prelude::*;

use crate::errors::IntoPy;

/// Every registered MIL op as a dict (name, family, mil, opsets, status per family, reference
/// check, hardware status; with `target` also `target_status`), from `report` (a hardware
/// selfcheck JSON) when given.
#[pyfunction]
#[pyo3(signature = (target=None, report=None))]
pub fn capabilities<'py>(
    py: Python<'py>,
    target: Option<&str>,
    report: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let target = target.map(targets::parse_target).transpose().py()?;
    let report = report
        .map(|p| selfcheck::read_hardware_report(&p))
        .transpose()
        .py()?;
    let caps = py.detach(|| census::census(report.as_ref(), target)).py()?;
    py.import("json")?
        .call_method1("loads", (census::json(&caps),))
}
