//! Autograd binding: `_backward(loss, params, loss_scale, stop)` returns one gradient Tensor per
//! parameter (the Python `af.backward` wraps them in a dict).

use pyo3::prelude::*;

use crate::convert::tensor;
use crate::errors::IntoPy;
use crate::tensor::PyTensor;

/// Gradients of `loss` w.r.t. each of `params` (graph inputs), seeded with `loss_scale`, not
/// flowing through any tensor in `stop`; a list of Tensors in the order of `params`.
#[pyfunction]
#[pyo3(signature = (loss, params, loss_scale=1.0, stop=None))]
pub fn _backward(loss: &Bound<'_, PyAny>, params: Vec<Bound<'_, PyAny>>, loss_scale: f32, stop: Option<Vec<Bound<'_, PyAny>>>) -> PyResult<Vec<PyTensor>> {
    let loss = tensor(loss, "backward", "loss")?;
    let params = params.iter().map(|p| tensor(p, "backward", "every parameter")).collect::<PyResult<Vec<_>>>()?;
    let stop = stop.unwrap_or_default().iter().map(|s| tensor(s, "backward", "every stop tensor")).collect::<PyResult<Vec<_>>>()?;
    Ok(aneforge::backward(&loss, &params, loss_scale, &stop).py()?.into_iter().map(PyTensor::from).collect())
}
