//! Bindings of the numerics plans (`aneforge.fft`, `aneforge.linalg`): plan factories and
//! plan objects taking and returning float32 arrays. The NumPy-facing wrappers live in Python.

use aneforge::numerics::fft::{FftKind, FftPlan as CoreFftPlan};
use aneforge::Device;
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::{asarray, borrow, fmt_shape};
use crate::errors::IntoPy;

/// A C-contiguous float32 view of `obj` (converted when needed) whose shape must be `shape`.
fn f32_input<'py>(obj: &Bound<'py, PyAny>, shape: &[usize], op: &str, what: &str) -> PyResult<PyReadonlyArrayDyn<'py, f32>> {
    let arr = borrow::<f32>(&asarray(obj, Some("float32"))?, "float32")?;
    if arr.shape() != shape {
        return Err(PyValueError::new_err(format!("{op}: {what} has shape {}, the plan was built for {}", fmt_shape(arr.shape()), fmt_shape(shape))));
    }
    Ok(arr)
}

/// A float32 array of `shape` holding `data`.
fn f32_output<'py>(py: Python<'py>, data: Vec<f32>, shape: &[usize]) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    PyArray1::from_vec(py, data).reshape(shape.to_vec())
}

/// A compiled transform for one (kind, shape, device): call it with float32 parts.
#[pyclass(frozen, name = "FftPlan", module = "aneforge.fft")]
pub struct FftPlan {
    inner: CoreFftPlan,
}

#[pymethods]
impl FftPlan {
    /// The transform: fft, ifft, rfft, irfft, fft2 or ifft2.
    #[getter]
    fn kind(&self) -> String {
        format!("{:?}", self.inner.kind).to_lowercase()
    }
    /// Shape of the input (of each part for complex inputs).
    #[getter]
    fn in_shape(&self) -> Vec<usize> {
        self.inner.in_shape.clone()
    }
    /// Shape of the output (of each part for complex outputs).
    #[getter]
    fn out_shape(&self) -> Vec<usize> {
        self.inner.out_shape.clone()
    }
    /// The executor running the plan.
    #[getter]
    fn device(&self) -> &'static str {
        self.inner.device()
    }
    /// Transform (re[, im]) → [re, im], or [x] for irfft.
    #[pyo3(signature = (re, im=None))]
    fn __call__<'py>(&self, py: Python<'py>, re: &Bound<'py, PyAny>, im: Option<&Bound<'py, PyAny>>) -> PyResult<Vec<Bound<'py, PyArrayDyn<f32>>>> {
        let op = self.kind();
        let re = f32_input(re, &self.inner.in_shape, &op, "re")?;
        let im = im.map(|a| f32_input(a, &self.inner.in_shape, &op, "im")).transpose()?;
        let (r, i) = (re.as_slice()?, im.as_ref().map(|a| a.as_slice()).transpose()?);
        let out = py.detach(|| self.inner.run(r, i)).py()?;
        out.into_iter().map(|o| f32_output(py, o, &self.inner.out_shape)).collect()
    }
}

/// The cached plan for `kind` on inputs of `shape` (`n` = irfft output length).
#[pyfunction]
#[pyo3(signature = (kind, shape, n=None, device="auto"))]
pub fn fft_plan(py: Python<'_>, kind: &str, shape: Vec<usize>, n: Option<usize>, device: &str) -> PyResult<FftPlan> {
    let (kind, device) = (FftKind::parse(kind).py()?, Device::parse(device).py()?);
    let inner = py.detach(|| CoreFftPlan::new(kind, &shape, n, device)).py()?;
    Ok(FftPlan { inner })
}

/// Programs compiled by numerics plans in this process (cache hits do not count).
#[pyfunction]
pub fn numerics_compile_count() -> usize {
    aneforge::numerics::compile_count()
}
