//! Private entry points to the host kernels on plain arrays (`_core._kernel_topk`, `_sort`,
//! `_sort_values`, `_take`), for `bench/host_ops.py` to time the kernels the plan's host stages run against
//! NumPy. Not public API.

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::IntoPy;
use aneforge::ops::host::select::Select;

/// The elements of a C-contiguous array, else a ValueError.
fn contiguous<'a>(x: &'a PyReadonlyArray2<'_, f32>) -> PyResult<&'a [f32]> {
    x.as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

type Pair<'py> = (Bound<'py, PyArrayDyn<f32>>, Bound<'py, PyArrayDyn<i32>>);

/// Reshape a flat f32 / i32 result into `shape`.
fn shaped<'py, T: numpy::Element>(
    py: Python<'py>,
    data: Vec<T>,
    shape: [usize; 2],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    PyArray1::from_vec(py, data).reshape(shape.to_vec())
}

/// The ordering kernel the `topk` / `sort` host stages run, along the last axis of `rows × n`.
fn select(rows: usize, n: usize, k: usize, largest: bool) -> Select {
    Select {
        outer: rows,
        n,
        inner: 1,
        k,
        largest,
        sorted: true,
    }
}

/// `topk` along the last axis of a 2-D float32 array: (values, int32 indices), best first.
#[pyfunction]
pub fn _kernel_topk<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    k: usize,
    largest: bool,
) -> PyResult<Pair<'py>> {
    let [rows, n] = [x.shape()[0], x.shape()[1]];
    let plan = select(rows, n, k, largest);
    let (v, i) = plan.collect("topk", contiguous(&x)?).py()?;
    Ok((shaped(py, v, [rows, k])?, shaped(py, i, [rows, k])?))
}

/// Stable sort along the last axis of a 2-D float32 array: (values, int32 permutation).
#[pyfunction]
pub fn _kernel_sort<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    descending: bool,
) -> PyResult<Pair<'py>> {
    let [rows, n] = [x.shape()[0], x.shape()[1]];
    let plan = select(rows, n, n, descending);
    let (v, i) = plan.collect("sort", contiguous(&x)?).py()?;
    Ok((shaped(py, v, [rows, n])?, shaped(py, i, [rows, n])?))
}

/// Sorted values only (no permutation) along the last axis of a 2-D float32 array.
#[pyfunction]
pub fn _kernel_sort_values<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    descending: bool,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let [rows, n] = [x.shape()[0], x.shape()[1]];
    let mut v = vec![0.0f32; rows * n];
    let data = contiguous(&x)?;
    select(rows, n, n, descending)
        .sort_values("sort", data, &mut v)
        .py()?;
    shaped(py, v, [rows, n])
}

/// NumPy `take(x, indices, axis=1)` on a 2-D float32 array with int32 indices.
#[pyfunction]
pub fn _kernel_take<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    indices: numpy::PyReadonlyArray1<'py, i32>,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let [rows, n] = [x.shape()[0], x.shape()[1]];
    let idx = indices
        .as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let out = aneforge::ops::host::take::take(contiguous(&x)?, (rows, n, 1), idx).py()?;
    shaped(py, out, [rows, idx.len()])
}
