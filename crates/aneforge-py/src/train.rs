//! Autograd and loss bindings: `_backward(loss, params, loss_scale, stop)` returns one gradient
//! Tensor per parameter (the Python `af.backward` wraps them in a dict); `_mse` and
//! `_softmax_cross_entropy` build the loss graphs (wrapped by `af.mse` / `af.softmax_cross_entropy`).

use pyo3::prelude::*;

use crate::convert::tensor;
use crate::errors::IntoPy;
use crate::tensor::{wrap, PyTensor};

/// Gradients of `loss` w.r.t. each of `params` (graph inputs), seeded with `loss_scale`, not
/// flowing through any tensor in `stop`; a list of Tensors in the order of `params`.
#[pyfunction]
#[pyo3(signature = (loss, params, loss_scale=1.0, stop=None))]
pub fn _backward(
    loss: &Bound<'_, PyAny>,
    params: Vec<Bound<'_, PyAny>>,
    loss_scale: f32,
    stop: Option<Vec<Bound<'_, PyAny>>>,
) -> PyResult<Vec<PyTensor>> {
    let loss = tensor(loss, "backward", "loss")?;
    let params = params
        .iter()
        .map(|p| tensor(p, "backward", "every parameter"))
        .collect::<PyResult<Vec<_>>>()?;
    let stop = stop
        .unwrap_or_default()
        .iter()
        .map(|s| tensor(s, "backward", "every stop tensor"))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(aneforge::backward(&loss, &params, loss_scale, &stop)
        .py()?
        .into_iter()
        .map(PyTensor::from)
        .collect())
}

/// Mean squared error graph, `[1; rank]`.
#[pyfunction]
pub fn _mse(prediction: &Bound<'_, PyAny>, target: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    wrap(aneforge::train::mse(
        &tensor(prediction, "mse", "prediction")?,
        &tensor(target, "mse", "target")?,
    ))
}

/// Stable softmax cross-entropy graph, `[1, 1]`; target one-hot or class indices.
#[pyfunction]
pub fn _softmax_cross_entropy(
    logits: &Bound<'_, PyAny>,
    target: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let op = "softmax_cross_entropy";
    wrap(aneforge::train::softmax_cross_entropy(
        &tensor(logits, op, "logits")?,
        &tensor(target, op, "target")?,
    ))
}
