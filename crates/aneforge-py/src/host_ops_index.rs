//! Python builders of the indexing and scan host ops: `scatter`, `take_along_axis`, `index_put`,
//! `cumsum`, `one_hot`, `sample`. Thin wrappers over `aneforge::graph::build::indexing`.

use pyo3::prelude::*;

use crate::convert::tensor;
use crate::host_ops::tensors;
use crate::tensor::{wrap, PyTensor};
use aneforge::graph::build::indexing;

type R = PyResult<PyTensor>;

/// Copy of `x` with `updates` written (reduce=None) or added ("add") at int32 `indices` along `axis`.
#[pyfunction]
#[pyo3(signature = (x, indices, updates, axis=0, reduce=None))]
pub fn scatter(
    x: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    updates: &Bound<'_, PyAny>,
    axis: i64,
    reduce: Option<&str>,
) -> R {
    let args = [(x, "x"), (indices, "indices"), (updates, "updates")];
    let [x, idx, upd] = tensors("scatter", args)?;
    wrap(x.scatter(&idx, &upd, axis, reduce))
}

/// NumPy take_along_axis(x, indices, axis) with int32 indices read at run time.
#[pyfunction]
#[pyo3(signature = (x, indices, axis=0))]
pub fn take_along_axis(x: &Bound<'_, PyAny>, indices: &Bound<'_, PyAny>, axis: i64) -> R {
    let [x, idx] = tensors("take_along_axis", [(x, "x"), (indices, "indices")])?;
    wrap(x.take_along_axis(&idx, axis))
}

/// Copy of `x` with rows[.., k, ..] written at int32 row_index[k] along `axis`.
#[pyfunction]
#[pyo3(signature = (x, row_index, rows, axis=0))]
pub fn index_put(
    x: &Bound<'_, PyAny>,
    row_index: &Bound<'_, PyAny>,
    rows: &Bound<'_, PyAny>,
    axis: i64,
) -> R {
    let args = [(x, "x"), (row_index, "row_index"), (rows, "rows")];
    let [x, idx, rows] = tensors("index_put", args)?;
    wrap(x.index_put(&idx, &rows, axis))
}

/// Running sum along any axis (exclusive / reverse), f64 accumulation rounded once.
#[pyfunction]
#[pyo3(signature = (x, axis=-1, exclusive=false, reverse=false))]
pub fn cumsum(x: &Bound<'_, PyAny>, axis: i64, exclusive: bool, reverse: bool) -> R {
    wrap(indexing::cumsum(
        &tensor(x, "cumsum", "x")?,
        axis,
        exclusive,
        reverse,
    ))
}

/// fp16 one-hot rows of int32 `indices`: shape indices.shape + [depth].
#[pyfunction]
pub fn one_hot(indices: &Bound<'_, PyAny>, depth: i64) -> R {
    wrap(tensor(indices, "one_hot", "indices")?.one_hot(depth))
}

/// One int32 token id per row of logits [..., V] -> [..., 1] (greedy at temperature 0).
#[pyfunction]
#[pyo3(signature = (logits, temperature=1.0, top_k=0, top_p=1.0, seed=0))]
pub fn sample(logits: &Bound<'_, PyAny>, temperature: f64, top_k: i64, top_p: f64, seed: u64) -> R {
    wrap(tensor(logits, "sample", "logits")?.sample(temperature, top_k, top_p, seed))
}

/// Add this file's functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(scatter, m)?)?;
    m.add_function(wrap_pyfunction!(take_along_axis, m)?)?;
    m.add_function(wrap_pyfunction!(index_put, m)?)?;
    m.add_function(wrap_pyfunction!(cumsum, m)?)?;
    m.add_function(wrap_pyfunction!(one_hot, m)?)?;
    m.add_function(wrap_pyfunction!(sample, m)?)?;
    Ok(())
}
