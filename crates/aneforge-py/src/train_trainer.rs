//! The `_Trainer` binding: the core [`aneforge::train::Trainer`] behind `af.Trainer` (which
//! keeps the keyword signature, warnings and file logging in Python).

use std::path::PathBuf;
use std::sync::Mutex;

use aneforge::train::{Batch, FitOptions, Mode, OptimConfig, Trainer};

use numpy::{PyArrayDescrMethods, PyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{asarray, borrow};
use crate::errors::IntoPy;
use crate::options::compile_options;
use crate::train::{f32_array, loss as core_loss, parameter, rule};

/// A numpy-convertible array as a core batch (integer dtypes mark class indices).
fn batch(obj: &Bound<'_, PyAny>) -> PyResult<Batch> {
    let arr = asarray(obj, None)?;
    let integer = matches!(arr.dtype().kind(), b'i' | b'u');
    let shape = arr.shape().to_vec();
    let f = borrow::<f32>(&arr, "float32")?;
    Ok(Batch {
        shape,
        data: crate::train::f32_values(&f)?,
        integer,
    })
}

/// A compiled training step (see `af.Trainer`).
#[pyclass(frozen, name = "_Trainer", module = "aneforge")]
pub struct PyTrainer {
    inner: Mutex<Trainer>,
}

impl PyTrainer {
    fn with<R>(&self, f: impl FnOnce(&mut Trainer) -> aneforge::Result<R>) -> PyResult<R> {
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner())).py()
    }
}

#[pymethods]
impl PyTrainer {
    #[new]
    #[pyo3(signature = (loss, params, lr, optimizer, momentum, weight_decay, betas, eps, loss_scale, device_optimizer, resident_state, logits=None, **options))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        loss: &Bound<'_, PyAny>,
        params: Vec<Bound<'_, PyAny>>,
        lr: f32,
        optimizer: &str,
        momentum: f32,
        weight_decay: f32,
        betas: (f32, f32),
        eps: f32,
        loss_scale: f32,
        device_optimizer: bool,
        resident_state: bool,
        logits: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let opts = compile_options(options)?;
        let config = OptimConfig {
            rule: rule("Trainer", optimizer, momentum, betas, eps)?,
            lr,
            weight_decay,
            loss_scale,
        };
        let params = params
            .iter()
            .map(|p| parameter(p, "Trainer"))
            .collect::<PyResult<Vec<_>>>()?;
        let mode = match (resident_state, device_optimizer) {
            (true, _) => Mode::Resident,
            (false, true) => Mode::DeviceOptimizer,
            (false, false) => Mode::Host,
        };
        let trainer = Trainer::new(&core_loss(loss, logits)?, &params, config, mode, opts).py()?;
        Ok(PyTrainer {
            inner: Mutex::new(trainer),
        })
    }

    /// One step on the data arrays: (loss, skipped total or None).
    fn step(&self, arrays: Vec<Bound<'_, PyAny>>) -> PyResult<(f64, Option<u64>)> {
        let b = arrays.iter().map(batch).collect::<PyResult<Vec<_>>>()?;
        let r = self.with(|t| t.step(&b))?;
        Ok((r.loss, r.skipped))
    }

    /// Copy device-resident weights into the master weights.
    fn sync(&self) -> PyResult<()> {
        self.with(Trainer::sync)
    }

    /// Logits [n, K] for float32 examples x [n, ...].
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let x = batch(x)?;
        let (z, k) = self.with(|t| t.predict(&x.data))?;
        let n = z.len() / k;
        f32_array(py, z, &[n, k])
    }

    /// Fraction of argmax hits for x and integer labels [n].
    fn accuracy(&self, x: &Bound<'_, PyAny>, labels: Vec<usize>) -> PyResult<f64> {
        let x = batch(x)?;
        self.with(|t| t.accuracy(&x.data, &labels))
    }

    /// Train over (x, y): ([loss per step], [test accuracy per epoch]); `log(line)` gets the log lines.
    #[pyo3(signature = (x, y, epochs, seed, test, log_every, log))]
    #[allow(clippy::too_many_arguments)]
    fn fit(
        &self,
        x: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        epochs: usize,
        seed: u64,
        test: Option<(Bound<'_, PyAny>, Vec<usize>)>,
        log_every: usize,
        log: &Bound<'_, PyAny>,
    ) -> PyResult<(Vec<f64>, Vec<f64>)> {
        let (x, y) = (batch(x)?, batch(y)?);
        let test = test
            .map(|(tx, ty)| batch(&tx).map(|b| (b.data, ty)))
            .transpose()?;
        let mut failed: Option<PyErr> = None;
        let mut sink = |line: &str| {
            if failed.is_none() {
                failed = log.call1((line,)).err();
            }
        };
        let opts = FitOptions {
            epochs,
            seed,
            log_every,
        };
        let test_ref = test.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice()));
        let h = self.with(|t| t.fit(&x, &y, &opts, test_ref, &mut sink))?;
        if let Some(e) = failed {
            return Err(e);
        }
        Ok((h.loss, h.accuracy))
    }

    /// ({name: float32 array}, metadata) of parameters and optimizer state.
    fn state_dict<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let sd = self.with(Trainer::state_dict)?;
        let tensors = PyDict::new(py);
        for (k, (shape, v)) in sd.tensors {
            tensors.set_item(k, f32_array(py, v, &shape)?)?;
        }
        let meta = PyDict::new(py);
        for (k, v) in sd.metadata {
            meta.set_item(k, v)?;
        }
        Ok((tensors, meta))
    }

    /// Write the state dict to a safetensors file.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.with(|t| t.save(&path))
    }

    /// Restore a state dict written by `save`.
    fn load(&self, path: PathBuf) -> PyResult<()> {
        self.with(|t| t.load(&path))
    }

    /// Free the compiled programs.
    fn release(&self) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release();
    }

    /// Steps applied so far.
    #[getter]
    fn t(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).t()
    }

    /// The batch size of the compiled step.
    #[getter]
    fn batch(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).batch()
    }

    /// [(name, shape)] of the data inputs `step` takes.
    #[getter]
    fn data_inputs(&self) -> Vec<(String, Vec<usize>)> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .data_inputs()
    }

    /// The executor running the training program.
    #[getter]
    fn device(&self) -> PyResult<&'static str> {
        self.with(|t| t.device())
    }
}
