//! Bindings of the ONNX importer (`aneforge::onnx`): a model (path or bytes) → its input ports
//! and output tensors, and the importer's schema subset for the drift test.

use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::type_name;
use crate::errors::IntoPy;
use crate::tensor::PyTensor;

/// One port for Python: (ONNX name, program port name, Tensor).
type PyPort = (String, String, PyTensor);

/// Register the ONNX functions on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(onnx_import, m)?)?;
    m.add_function(wrap_pyfunction!(onnx_schema, m)?)
}

/// Import an ONNX model given as bytes or a path; `input_shapes` maps input names to dims;
/// `input_values` binds inputs to constants: (name, dims, values in C order).
/// Returns (inputs, outputs), each a list of (onnx name, port name, Tensor).
#[pyfunction]
#[pyo3(name = "_onnx_import", signature = (model, input_shapes=Vec::new(), input_values=Vec::new()))]
pub fn onnx_import(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    input_shapes: Vec<(String, Vec<usize>)>,
    input_values: Vec<(String, Vec<usize>, Vec<f64>)>,
) -> PyResult<(Vec<PyPort>, Vec<PyPort>)> {
    use aneforge::onnx::{import_bytes_with_values, import_file_with_values, InputValue};
    let values: Vec<InputValue> = input_values
        .into_iter()
        .map(|(name, dims, data)| InputValue {
            name,
            dims: Some(dims),
            data,
        })
        .collect();
    let imported = if let Ok(b) = model.cast::<PyBytes>() {
        let bytes = b.as_bytes().to_vec();
        py.detach(|| import_bytes_with_values(&bytes, None, &input_shapes, &values))
    } else if let Ok(p) = model.extract::<PathBuf>() {
        py.detach(|| import_file_with_values(&p, &input_shapes, &values))
    } else {
        return Err(PyTypeError::new_err(format!(
            "load_onnx: model must be a path or bytes, got {}",
            type_name(model)
        )));
    }
    .py()?;
    let ports = |v: Vec<aneforge::onnx::Port>| -> Vec<PyPort> {
        v.into_iter()
            .map(|p| (p.onnx_name, p.name, PyTensor::from(p.tensor)))
            .collect()
    };
    Ok((ports(imported.inputs), ports(imported.outputs)))
}

/// The encoded FileDescriptorSet of the ONNX .proto subset the importer reads.
#[pyfunction]
#[pyo3(name = "_onnx_schema")]
pub fn onnx_schema(py: Python<'_>) -> Bound<'_, PyBytes> {
    PyBytes::new(py, aneforge::onnx::FILE_DESCRIPTOR_SET)
}
