//! Test hooks: the core's conformance corpus as Tensors, the MIL op names it covers, and the Core ML schema subset the
//! .mlpackage exporter was compiled with (for the schema-drift test).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::IntoPy;
use crate::tensor::PyTensor;

/// The conformance corpus: one (MIL op name, output Tensor) per op kind the printer emits.
#[pyfunction]
#[pyo3(name = "_conformance_corpus")]
pub fn conformance_corpus() -> PyResult<Vec<(&'static str, PyTensor)>> {
    Ok(aneforge::conformance::corpus::conformance()
        .py()?
        .into_iter()
        .map(|(name, t)| (name, PyTensor::from(t)))
        .collect())
}

/// Every MIL op name the printer can emit (each has a corpus case).
#[pyfunction]
#[pyo3(name = "_mil_op_names")]
pub fn mil_op_names() -> Vec<&'static str> {
    aneforge::ops::mil_op_names()
}

/// The encoded FileDescriptorSet of the Core ML .proto subset used by `save_mlpackage`.
#[pyfunction]
#[pyo3(name = "_mlpackage_schema")]
pub fn mlpackage_schema(py: Python<'_>) -> Bound<'_, PyBytes> {
    PyBytes::new(py, aneforge::mlpackage::proto::FILE_DESCRIPTOR_SET)
}

/// A unary row for Python: name, doc, [(parameter, default or None)].
type UnaryRow = (
    &'static str,
    &'static str,
    Vec<(&'static str, Option<String>)>,
);

/// Every unary table row (native ops, then composites) as (name, doc, [(parameter, default
/// or None)]), defaults spelled as Rust prints the f32 (for the generated stubs).
#[pyfunction]
#[pyo3(name = "_unary_ops")]
pub fn unary_ops() -> Vec<UnaryRow> {
    aneforge::graph::build::unary::unary_builders()
        .into_iter()
        .map(|r| {
            let params = r
                .params
                .iter()
                .map(|p| (p.name, p.default.first().map(|d| format!("{d:?}"))))
                .collect();
            (r.name, r.doc.trim(), params)
        })
        .collect()
}
