//! Builders of the host ops (argmax/argmin, topk, sort/argsort, runtime-indexed take and
//! embedding) and of `cast`; a graph holding a host op compiles to a segmented plan.

use pyo3::prelude::*;

use crate::convert::tensor;
use crate::errors::IntoPy;
use crate::tensor::{wrap, PyTensor};

type R = PyResult<PyTensor>;

/// The Tensors of a host-op builder's named arguments (`(object, argument name)`), in order; a
/// TypeError naming `op` and the argument when one is not a Tensor.
pub fn tensors<const N: usize>(
    op: &str,
    args: [(&Bound<'_, PyAny>, &str); N],
) -> PyResult<[aneforge::Tensor; N]> {
    let mut out = Vec::with_capacity(N);
    for (obj, what) in args {
        out.push(tensor(obj, op, what)?);
    }
    Ok(out
        .try_into()
        .unwrap_or_else(|_| unreachable!("N tensors collected")))
}

/// int32 index of the first largest element along `axis` (NumPy argmax; NaN counts as largest).
#[pyfunction]
#[pyo3(signature = (x, axis=-1, keepdims=false))]
pub fn argmax(x: &Bound<'_, PyAny>, axis: i64, keepdims: bool) -> R {
    wrap(tensor(x, "argmax", "x")?.argmax(axis, keepdims))
}

/// int32 index of the first smallest element along `axis` (NumPy argmin; NaN counts as smallest).
#[pyfunction]
#[pyo3(signature = (x, axis=-1, keepdims=false))]
pub fn argmin(x: &Bound<'_, PyAny>, axis: i64, keepdims: bool) -> R {
    wrap(tensor(x, "argmin", "x")?.argmin(axis, keepdims))
}

/// (values, int32 indices) of the k largest (smallest unless `largest`) elements along `axis`,
/// best first when `sorted` (ties: lower index first), else in index order.
#[pyfunction]
#[pyo3(signature = (x, k, axis=-1, largest=true, sorted=true))]
pub fn topk(
    x: &Bound<'_, PyAny>,
    k: usize,
    axis: i64,
    largest: bool,
    sorted: bool,
) -> PyResult<(PyTensor, PyTensor)> {
    let (v, i) = tensor(x, "topk", "x")?
        .topk(k, axis, largest, sorted)
        .py()?;
    Ok((wrap(Ok(v))?, wrap(Ok(i))?))
}

/// Stably sorted values along `axis` (descending keeps ties in index order).
#[pyfunction]
#[pyo3(signature = (x, axis=-1, descending=false))]
pub fn sort(x: &Bound<'_, PyAny>, axis: i64, descending: bool) -> R {
    wrap(tensor(x, "sort", "x")?.sort(axis, descending))
}

/// int32 permutation that stably sorts `axis` (NumPy argsort(kind="stable")).
#[pyfunction]
#[pyo3(signature = (x, axis=-1, descending=false))]
pub fn argsort(x: &Bound<'_, PyAny>, axis: i64, descending: bool) -> R {
    wrap(tensor(x, "argsort", "x")?.argsort(axis, descending))
}

/// NumPy take(x, indices, axis) with an int32 index Tensor read at run time (out-of-range → ValueError).
#[pyfunction]
#[pyo3(signature = (x, indices, axis=0))]
pub fn take(x: &Bound<'_, PyAny>, indices: &Bound<'_, PyAny>, axis: i64) -> R {
    let idx = tensor(indices, "take", "indices")?;
    wrap(tensor(x, "take", "x")?.take(&idx, axis))
}

/// Rows of `table` [V, D] at int32 `ids`: shape ids.shape + [D] (out-of-range ids → ValueError at run time).
#[pyfunction]
pub fn embedding(ids: &Bound<'_, PyAny>, table: &Bound<'_, PyAny>) -> R {
    let ids = tensor(ids, "embedding", "ids")?;
    wrap(aneforge::embedding(
        &ids,
        &tensor(table, "embedding", "table")?,
    ))
}

/// Convert to `dtype`: uint8/int32 → "fp16" (rounded) or fp16 → "int32" (truncated toward zero).
#[pyfunction]
pub fn cast(x: &Bound<'_, PyAny>, dtype: &str) -> R {
    let dt = aneforge::DType::parse("cast", dtype).py()?;
    wrap(tensor(x, "cast", "x")?.cast(dt))
}
