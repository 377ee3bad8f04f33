//! Bindings of the GGUF reader (`aneforge.gguf`): open a file, read its metadata and tensor
//! table, dequantize a tensor to a float32 array. The reader itself is `aneforge-gguf`.

use std::path::PathBuf;

use aneforge_gguf::{Array, GgufError, GgufFile as CoreGgufFile, Value};
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods};
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyError, PyMemoryError, PyNotImplementedError, PyOSError, PyTypeError,
    PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt;

/// Register the GGUF class and `gguf_open` on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GgufFile>()?;
    m.add_function(wrap_pyfunction!(gguf_open, m)?)
}

/// Reader error → Python exception: OSError (FileNotFoundError) for the file itself,
/// KeyError for a missing key/tensor, TypeError for a wrong value type,
/// NotImplementedError for an unsupported quant type, ValueError for malformed files.
fn to_py(e: GgufError) -> PyErr {
    let msg = e.to_string();
    match e {
        GgufError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(msg)
        }
        GgufError::Io { .. } | GgufError::NotRegularFile { .. } => PyOSError::new_err(msg),
        GgufError::MissingKey { .. } | GgufError::MissingTensor { .. } => PyKeyError::new_err(msg),
        GgufError::WrongType { .. } => PyTypeError::new_err(msg),
        GgufError::UnsupportedQuantType { .. } => PyNotImplementedError::new_err(msg),
        GgufError::OutOfMemory { .. } => PyMemoryError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

/// A metadata value as a Python object: int, float, bool, str, or a list for arrays.
fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    match value {
        Value::U8(v) => v.into_bound_py_any(py),
        Value::I8(v) => v.into_bound_py_any(py),
        Value::U16(v) => v.into_bound_py_any(py),
        Value::I16(v) => v.into_bound_py_any(py),
        Value::U32(v) => v.into_bound_py_any(py),
        Value::I32(v) => v.into_bound_py_any(py),
        Value::U64(v) => v.into_bound_py_any(py),
        Value::I64(v) => v.into_bound_py_any(py),
        Value::F32(v) => v.into_bound_py_any(py),
        Value::F64(v) => v.into_bound_py_any(py),
        Value::Bool(v) => v.into_bound_py_any(py),
        Value::String(v) => v.into_bound_py_any(py),
        Value::Array(a) => Ok(array_to_py(py, a)?.into_any()),
    }
}

/// An array as a Python list (nested arrays as nested lists).
fn array_to_py<'py>(py: Python<'py>, array: &Array) -> PyResult<Bound<'py, PyList>> {
    match array {
        Array::U8(v) => PyList::new(py, v),
        Array::I8(v) => PyList::new(py, v),
        Array::U16(v) => PyList::new(py, v),
        Array::I16(v) => PyList::new(py, v),
        Array::U32(v) => PyList::new(py, v),
        Array::I32(v) => PyList::new(py, v),
        Array::U64(v) => PyList::new(py, v),
        Array::I64(v) => PyList::new(py, v),
        Array::F32(v) => PyList::new(py, v),
        Array::F64(v) => PyList::new(py, v),
        Array::Bool(v) => PyList::new(py, v),
        Array::String(v) => PyList::new(py, v),
        Array::Array(v) => {
            let items = v
                .iter()
                .map(|a| array_to_py(py, a))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)
        }
    }
}

/// An open GGUF file (memory-mapped; tensor bytes are read only when dequantized).
#[pyclass(frozen, name = "GgufFile", module = "aneforge.gguf")]
pub struct GgufFile {
    inner: CoreGgufFile,
}

#[pymethods]
impl GgufFile {
    /// The path the file was opened with.
    #[getter]
    fn path(&self) -> &str {
        self.inner.path()
    }

    /// Format version (2 or 3).
    #[getter]
    fn version(&self) -> u32 {
        self.inner.version()
    }

    /// Data-section alignment in bytes.
    #[getter]
    fn alignment(&self) -> u64 {
        self.inner.alignment()
    }

    /// Every metadata key → value (int, float, bool, str or list), in file order.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (key, value) in self.inner.metadata().entries() {
            dict.set_item(key, value_to_py(py, value)?)?;
        }
        Ok(dict)
    }

    /// Tensor name → (row-major shape, ggml type name), in file order.
    #[getter]
    fn tensors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for info in self.inner.tensor_infos() {
            let shape = PyTuple::new(py, info.shape())?;
            dict.set_item(&info.name, (shape, info.ggml_type.name()))?;
        }
        Ok(dict)
    }

    /// `general.architecture`, checked against the known families (ValueError otherwise).
    fn architecture(&self) -> PyResult<&'static str> {
        self.inner.architecture().map(|a| a.name()).map_err(to_py)
    }

    /// Tensor `name` dequantized to a float32 array of its row-major shape.
    fn dequantize<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let tensor = self.inner.tensor(name).map_err(to_py)?;
        let shape: Vec<usize> = tensor.info().shape().iter().map(|&d| d as usize).collect();
        let values = py.detach(|| tensor.dequantize()).map_err(to_py)?;
        PyArray1::from_vec(py, values).reshape(shape)
    }

    fn __repr__(&self) -> String {
        format!(
            "GgufFile({:?}, version={}, tensors={}, metadata={})",
            self.inner.path(),
            self.inner.version(),
            self.inner.tensor_infos().len(),
            self.inner.metadata().entries().len()
        )
    }
}

/// Open and validate the GGUF file at `path`.
#[pyfunction]
pub fn gguf_open(py: Python<'_>, path: PathBuf) -> PyResult<GgufFile> {
    let inner = py.detach(|| CoreGgufFile::open(&path)).map_err(to_py)?;
    Ok(GgufFile { inner })
}
