//! Autograd, loss and parameter bindings: `_backward` returns one gradient Tensor per
//! parameter (wrapped in a dict by `af.backward`); `Parameter` and `Loss` are Tensor subclasses
//! holding the core's [`aneforge::train::Parameter`] / [`aneforge::train::Loss`], so they work in
//! graph arithmetic and free their master weights with the object; `_Optimizer` is the host
//! optimizer behind `af.SGD` / `af.Adam` / `af.AdamW`.

use std::sync::Mutex;

use aneforge::train::{Loss, OptimConfig, Optimizer, Parameter, Rule, StepOutcome};
use numpy::{PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::convert::{tensor, type_name};
use crate::errors::IntoPy;
use crate::tensor::{wrap, PyTensor};

/// A trainable parameter: a Tensor (the fp16 graph input) whose fp32 master weights live in the core.
#[pyclass(extends = PyTensor, frozen, name = "Parameter", module = "aneforge")]
pub struct PyParameter {
    pub p: Parameter,
}

/// A loss Tensor that remembers its kind and logits (what `af.Trainer` needs to report and evaluate).
#[pyclass(extends = PyTensor, frozen, name = "Loss", module = "aneforge")]
pub struct PyLoss {
    pub loss: Loss,
}

/// A float32 array of `shape` holding `data`.
pub fn f32_array<'py>(
    py: Python<'py>,
    data: Vec<f32>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    numpy::PyArray1::from_vec(py, data).reshape(shape.to_vec())
}

/// A C-contiguous float32 array's values.
pub fn f32_values(a: &PyReadonlyArrayDyn<'_, f32>) -> PyResult<Vec<f32>> {
    Ok(a.as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))?
        .to_vec())
}

/// Wrap a core parameter as a Python `Parameter`.
fn new_parameter(
    py: Python<'_>,
    p: aneforge::Result<Parameter>,
) -> PyResult<Bound<'_, PyParameter>> {
    let p = p.py()?;
    let init = PyClassInitializer::from(PyTensor::from(p.tensor().clone()))
        .add_subclass(PyParameter { p });
    Bound::new(py, init)
}

/// Wrap a core loss as a Python `Loss`.
fn new_loss(py: Python<'_>, l: aneforge::Result<Loss>) -> PyResult<Bound<'_, PyLoss>> {
    let loss = l.py()?;
    let init =
        PyClassInitializer::from(PyTensor::from(loss.value.clone())).add_subclass(PyLoss { loss });
    Bound::new(py, init)
}

/// The core parameter behind `obj`; TypeError when it is not a `Parameter`.
pub fn parameter(obj: &Bound<'_, PyAny>, op: &str) -> PyResult<Parameter> {
    obj.cast::<PyParameter>()
        .map(|p| p.get().p.clone())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{op}: {} is not a parameter (create it with af.parameter(init))",
                type_name(obj)
            ))
        })
}

/// The core loss behind `obj`: a `Loss`, or any Tensor as a custom loss with `logits`.
pub fn loss(obj: &Bound<'_, PyAny>, logits: Option<&Bound<'_, PyAny>>) -> PyResult<Loss> {
    let logits = logits
        .filter(|l| !l.is_none())
        .map(|l| tensor(l, "Trainer", "logits"))
        .transpose()?;
    Ok(match obj.cast::<PyLoss>() {
        Ok(l) => {
            let mut loss = l.get().loss.clone();
            if logits.is_some() {
                loss.logits = logits;
            }
            loss
        }
        Err(_) => Loss::custom(tensor(obj, "Trainer", "loss")?, logits),
    })
}

#[pymethods]
impl PyParameter {
    /// The parameter's name (its program input's name).
    #[getter]
    fn name(&self) -> &str {
        self.p.name()
    }

    /// A float32 copy of the master weights.
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        f32_array(py, self.p.value(), self.p.shape())
    }

    /// Overwrite the master weights (same element count, finite).
    fn set_value(&self, v: PyReadonlyArrayDyn<'_, f32>) -> PyResult<()> {
        self.p.set_value(&f32_values(&v)?).py()
    }
}

#[pymethods]
impl PyLoss {
    /// "mse", "cross_entropy" or "custom".
    #[getter]
    fn kind(&self) -> &'static str {
        match self.loss.kind {
            aneforge::train::LossKind::Mse => "mse",
            aneforge::train::LossKind::CrossEntropy => "cross_entropy",
            aneforge::train::LossKind::Custom => "custom",
        }
    }
}

/// A trainable fp16 graph input of `init`'s shape (float32, C order) named `name` or `param<k>`.
#[pyfunction]
#[pyo3(signature = (init, name=None))]
pub fn _parameter<'py>(
    py: Python<'py>,
    init: PyReadonlyArrayDyn<'py, f32>,
    name: Option<&str>,
) -> PyResult<Bound<'py, PyParameter>> {
    let shape = init.shape().to_vec();
    new_parameter(py, Parameter::new(&f32_values(&init)?, &shape, name))
}

/// A conv2d weight parameter from W [Cout, Cin, kH, kW], stored as [Cin*kH*kW, Cout].
#[pyfunction]
#[pyo3(signature = (w, name=None))]
pub fn _conv_param<'py>(
    py: Python<'py>,
    w: PyReadonlyArrayDyn<'py, f32>,
    name: Option<&str>,
) -> PyResult<Bound<'py, PyParameter>> {
    let shape = w.shape().to_vec();
    new_parameter(
        py,
        aneforge::train::conv_param(&f32_values(&w)?, &shape, name),
    )
}

/// The core conv op of x [N, Cin, H, W] with a conv_param weight [Cin*k*k, Cout].
#[pyfunction]
#[pyo3(signature = (x, weight, stride=1, pad=0))]
pub fn _conv2d(
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    stride: usize,
    pad: usize,
) -> PyResult<PyTensor> {
    wrap(aneforge::train::conv2d(
        &tensor(x, "conv2d", "x")?,
        &tensor(weight, "conv2d", "weight")?,
        stride,
        pad,
    ))
}

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

/// Mean squared error as a `Loss`, `[1; rank]`.
#[pyfunction]
pub fn _mse<'py>(
    prediction: &Bound<'py, PyAny>,
    target: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyLoss>> {
    new_loss(
        prediction.py(),
        Loss::mse(
            &tensor(prediction, "mse", "prediction")?,
            &tensor(target, "mse", "target")?,
        ),
    )
}

/// Stable softmax cross-entropy as a `Loss` carrying its logits, `[1, 1]`; target one-hot or class indices.
#[pyfunction]
pub fn _softmax_cross_entropy<'py>(
    logits: &Bound<'py, PyAny>,
    target: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyLoss>> {
    let op = "softmax_cross_entropy";
    new_loss(
        logits.py(),
        Loss::cross_entropy(
            &tensor(logits, op, "logits")?,
            &tensor(target, op, "target")?,
        ),
    )
}

/// The optimizer rule named `kind` ("sgd", "adam" or "adamw") with its hyper-parameters.
pub fn rule(op: &str, kind: &str, momentum: f32, betas: (f32, f32), eps: f32) -> PyResult<Rule> {
    match kind {
        "sgd" => Ok(Rule::Sgd { momentum }),
        "adam" => Ok(Rule::Adam { betas, eps }),
        "adamw" => Ok(Rule::AdamW { betas, eps }),
        _ => Err(PyValueError::new_err(format!(
            "{op}: optimizer must be 'sgd', 'adam' or 'adamw', got '{kind}'"
        ))),
    }
}

/// A host optimizer over parameters' master weights (behind `af.SGD`, `af.Adam`, `af.AdamW`).
#[pyclass(frozen, name = "_Optimizer", module = "aneforge")]
pub struct PyOptimizer {
    params: Vec<Parameter>,
    opt: Mutex<Optimizer>,
}

#[pymethods]
impl PyOptimizer {
    #[new]
    #[pyo3(signature = (kind, params, lr, momentum=0.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, loss_scale=1.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: &str,
        params: Vec<Bound<'_, PyAny>>,
        lr: f32,
        momentum: f32,
        betas: (f32, f32),
        eps: f32,
        weight_decay: f32,
        loss_scale: f32,
    ) -> PyResult<Self> {
        let params = params
            .iter()
            .map(|p| parameter(p, kind))
            .collect::<PyResult<Vec<_>>>()?;
        let config = OptimConfig {
            rule: rule(kind, kind, momentum, betas, eps)?,
            lr,
            weight_decay,
            loss_scale,
        };
        let sizes: Vec<usize> = params.iter().map(|p| p.value().len()).collect();
        Ok(PyOptimizer {
            opt: Mutex::new(Optimizer::new(config, &sizes).py()?),
            params,
        })
    }

    /// One update from `grads` (float32, one per parameter): (applied, steps skipped so far).
    fn step(&self, grads: Vec<PyReadonlyArrayDyn<'_, f32>>) -> PyResult<(bool, u64)> {
        let grads = grads.iter().map(f32_values).collect::<PyResult<Vec<_>>>()?;
        let grads: Vec<&[f32]> = grads.iter().map(Vec::as_slice).collect();
        let mut opt = self.opt.lock().unwrap_or_else(|e| e.into_inner());
        let mut guards: Vec<_> = self.params.iter().map(Parameter::master).collect();
        let mut ws: Vec<&mut [f32]> = guards.iter_mut().map(|g| g.as_mut_slice()).collect();
        Ok(match opt.step(&mut ws, &grads).py()? {
            StepOutcome::Applied { .. } => (true, opt.skipped()),
            StepOutcome::Skipped { skipped } => (false, skipped),
        })
    }

    /// Steps applied so far.
    #[getter]
    fn t(&self) -> u64 {
        self.opt.lock().unwrap_or_else(|e| e.into_inner()).t()
    }

    /// State buffer `name` (m, v or buf) of every parameter, as float32 copies.
    fn state<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<Vec<Bound<'py, PyArrayDyn<f32>>>> {
        let opt = self.opt.lock().unwrap_or_else(|e| e.into_inner());
        let bufs = opt.state(name).ok_or_else(|| {
            PyValueError::new_err(format!(
                "optimizer: no state '{name}' (it keeps {:?})",
                opt.config().state_names()
            ))
        })?;
        bufs.iter()
            .zip(&self.params)
            .map(|(b, p)| f32_array(py, b.clone(), p.shape()))
            .collect()
    }
}
