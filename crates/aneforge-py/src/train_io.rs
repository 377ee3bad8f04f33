//! Checkpoint and dataset bindings: safetensors through the core's `train::checkpoint` (raw
//! bytes + dtype names; numpy conversion in `aneforge/train_io.py`), CIFAR-10 and MNIST CSV
//! through `train::data` (pixels and labels as bytes).

use std::collections::BTreeMap;
use std::path::PathBuf;

use aneforge::train::checkpoint::{self, RawTensor, StDType};
use aneforge::train::data;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::IntoPy;

/// One tensor as (name, dtype name, shape, little-endian bytes).
type Entry = (String, String, Vec<usize>, Vec<u8>);

/// Write tensors (name, dtype F32/F16/F64/I64/I32/U8, shape, bytes) and metadata to `path`.
#[pyfunction]
pub fn _save_safetensors(
    path: PathBuf,
    tensors: Vec<Entry>,
    metadata: BTreeMap<String, String>,
) -> PyResult<()> {
    let raw = tensors
        .into_iter()
        .map(|(name, dtype, shape, data)| {
            Ok(RawTensor {
                name,
                dtype: StDType::parse(&dtype)?,
                shape,
                data,
            })
        })
        .collect::<aneforge::Result<Vec<_>>>()
        .py()?;
    checkpoint::save_tensors(&path, &raw, &metadata).py()
}

/// Read `path`: ([(name, dtype, shape, bytes)] in file order, metadata).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn _load_safetensors(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<(
    Vec<(String, &'static str, Vec<usize>, Bound<'_, PyBytes>)>,
    BTreeMap<String, String>,
)> {
    let (tensors, meta) = checkpoint::load_tensors(&path).py()?;
    let out = tensors
        .into_iter()
        .map(|t| (t.name, t.dtype.name(), t.shape, PyBytes::new(py, &t.data)))
        .collect();
    Ok((out, meta))
}

/// Pixels and labels of a dataset as bytes.
fn images(py: Python<'_>, im: data::Images) -> (Bound<'_, PyBytes>, Bound<'_, PyBytes>) {
    (PyBytes::new(py, &im.pixels), PyBytes::new(py, &im.labels))
}

/// A CIFAR-10 binary batch: (pixels [N*3072] bytes, labels [N] bytes).
#[pyfunction]
pub fn _read_cifar10(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<(Bound<'_, PyBytes>, Bound<'_, PyBytes>)> {
    Ok(images(py, data::read_cifar10(&path).py()?))
}

/// MNIST CSV text (`source` names it in errors): (pixels [N*784] bytes, labels [N] bytes).
#[pyfunction]
pub fn _parse_mnist_csv<'py>(
    py: Python<'py>,
    text: &[u8],
    source: PathBuf,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    Ok(images(py, data::parse_mnist_csv(text, &source).py()?))
}
