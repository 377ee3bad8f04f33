//! Bindings of the numerics plans (`aneforge.fft`, `aneforge.linalg`): plan factories and
//! plan objects taking and returning float32 arrays. The NumPy-facing wrappers live in Python.

use aneforge::numerics::dsp;
use aneforge::numerics::fft::{FftKind, FftPlan as CoreFftPlan};
use aneforge::numerics::linalg::{direct, eigen, krylov, lsq, Matrix, Solution};
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{asarray, borrow, fmt_shape, tensor};
use crate::errors::IntoPy;
use crate::model::{parse_outputs, OutKind};
use crate::options::plan_device;
use crate::tensor::PyTensor;

/// A C-contiguous float32 view of `obj` (converted when needed) whose shape must be `shape`.
fn f32_input<'py>(
    obj: &Bound<'py, PyAny>,
    shape: &[usize],
    op: &str,
    what: &str,
) -> PyResult<PyReadonlyArrayDyn<'py, f32>> {
    let arr = borrow::<f32>(&asarray(obj, Some("float32"))?, "float32")?;
    if arr.shape() != shape {
        return Err(PyValueError::new_err(format!(
            "{op}: {what} has shape {}, the plan was built for {}",
            fmt_shape(arr.shape()),
            fmt_shape(shape)
        )));
    }
    Ok(arr)
}

/// A float32 array of `shape` holding `data`.
fn f32_output<'py>(
    py: Python<'py>,
    data: Vec<f32>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
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
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        re: &Bound<'py, PyAny>,
        im: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyArrayDyn<f32>>>> {
        let op = self.kind();
        let re = f32_input(re, &self.inner.in_shape, &op, "re")?;
        let im = im
            .map(|a| f32_input(a, &self.inner.in_shape, &op, "im"))
            .transpose()?;
        let (r, i) = (
            re.as_slice()?,
            im.as_ref().map(|a| a.as_slice()).transpose()?,
        );
        let out = py.detach(|| self.inner.run(r, i)).py()?;
        out.into_iter()
            .map(|o| f32_output(py, o, &self.inner.out_shape))
            .collect()
    }
}

/// The cached plan for `kind` on inputs of `shape` (`n` = irfft output length).
#[pyfunction]
#[pyo3(signature = (kind, shape, n=None, **options))]
pub fn fft_plan(
    py: Python<'_>,
    kind: &str,
    shape: Vec<usize>,
    n: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<FftPlan> {
    let (kind, device) = (
        FftKind::parse(kind).py()?,
        plan_device("fft.plan", options)?,
    );
    let inner = py
        .detach(|| CoreFftPlan::new(kind, &shape, n, device))
        .py()?;
    Ok(FftPlan { inner })
}

/// Programs compiled by numerics plans in this process (cache hits do not count).
#[pyfunction]
pub fn numerics_compile_count() -> usize {
    aneforge::numerics::compile_count()
}

/// A float64 result array.
type F64Array<'py> = Bound<'py, PyArrayDyn<f64>>;

/// A C-contiguous float64 view of `obj` with rank `ndim` (1 or 2), named `what` in errors.
fn f64_array<'py>(
    obj: &Bound<'py, PyAny>,
    ndim: usize,
    op: &str,
    what: &str,
) -> PyResult<PyReadonlyArrayDyn<'py, f64>> {
    let arr = borrow::<f64>(&asarray(obj, Some("float64"))?, "float64")?;
    if arr.ndim() != ndim {
        return Err(PyValueError::new_err(format!(
            "{op}: {what} must have {ndim} dimension(s), got shape {}",
            fmt_shape(arr.shape())
        )));
    }
    Ok(arr)
}

/// A float64 array of `shape` holding `data`.
fn f64_output<'py>(py: Python<'py>, data: Vec<f64>, shape: &[usize]) -> PyResult<F64Array<'py>> {
    PyArray1::from_vec(py, data).reshape(shape.to_vec())
}

/// Run `f` on the matrix `a` (2-D) and the optional vectors, with the GIL released.
fn with_matrix<'py, R: Send>(
    py: Python<'py>,
    op: &str,
    a: &Bound<'py, PyAny>,
    vectors: &[(&str, Option<&Bound<'py, PyAny>>)],
    f: impl FnOnce(&Matrix, &[Option<&[f64]>]) -> aneforge::Result<R> + Send,
) -> PyResult<R> {
    let arr = f64_array(a, 2, op, "A")?;
    let (rows, cols) = (arr.shape()[0], arr.shape()[1]);
    let vs = vectors
        .iter()
        .map(|(name, v)| v.map(|v| f64_array(v, 1, op, name)).transpose())
        .collect::<PyResult<Vec<_>>>()?;
    let slices = vs
        .iter()
        .map(|v| v.as_ref().map(|a| a.as_slice()).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let data = arr.as_slice()?;
    py.detach(|| f(&Matrix::new(op, rows, cols, data)?, &slices))
        .py()
}

/// A solver's answer: (x, relative residual).
type Solved<'py> = (F64Array<'py>, f64);

/// Run the iterative solver `f(A, b, x0)` on matrix `a`, vector `b` and optional start `x0`
/// (errors name `op`), with the GIL released.
fn solve<'py>(
    py: Python<'py>,
    op: &str,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    x0: Option<&Bound<'py, PyAny>>,
    f: impl FnOnce(&Matrix, &[f64], Option<&[f64]>) -> aneforge::Result<Solution> + Send,
) -> PyResult<Solved<'py>> {
    let s = with_matrix(py, op, a, &[("b", Some(b)), ("x0", x0)], |m, v| {
        f(m, v[0].unwrap_or_default(), v[1])
    })?;
    let n = s.x.len();
    Ok((f64_output(py, s.x, &[n])?, s.residual))
}

/// Conjugate gradient (see the core docs): returns (x, relative residual).
#[pyfunction]
#[pyo3(signature = (a, b, iters, x0=None, refine=0, **options))]
pub fn linalg_conjugate_gradient<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    iters: usize,
    x0: Option<&Bound<'py, PyAny>>,
    refine: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Solved<'py>> {
    let device = plan_device("linalg.conjugate_gradient", options)?;
    solve(py, "conjugate_gradient", a, b, x0, |m, b, x0| {
        krylov::conjugate_gradient(m, b, iters, x0, refine, device)
    })
}

/// Jacobi iteration: returns (x, relative residual).
#[pyfunction]
#[pyo3(signature = (a, b, iters, x0=None, **options))]
pub fn linalg_jacobi<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    iters: usize,
    x0: Option<&Bound<'py, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Solved<'py>> {
    let device = plan_device("linalg.jacobi", options)?;
    solve(py, "jacobi", a, b, x0, |m, b, x0| {
        krylov::jacobi(m, b, iters, x0, device)
    })
}

/// Mixed-precision iterative refinement: returns (x, relative residual).
#[pyfunction]
#[pyo3(signature = (a, b, x0=None, iters=3, inner=60, **options))]
pub fn linalg_iterative_refine<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    x0: Option<&Bound<'py, PyAny>>,
    iters: usize,
    inner: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Solved<'py>> {
    let device = plan_device("linalg.iterative_refine", options)?;
    solve(py, "iterative_refine", a, b, x0, |m, b, x0| {
        krylov::iterative_refine(m, b, x0, iters, inner, device)
    })
}

/// Thin QR by modified Gram–Schmidt: (Q [m, n], R [n, n]).
#[pyfunction]
#[pyo3(signature = (a, **options))]
pub fn linalg_qr<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(F64Array<'py>, F64Array<'py>)> {
    let device = plan_device("linalg.qr", options)?;
    let (shape, (q, r)) = with_matrix(py, "qr", a, &[], |m, _| {
        Ok(([m.rows, m.cols], direct::qr(m, device)?))
    })?;
    Ok((
        f64_output(py, q, &shape)?,
        f64_output(py, r, &[shape[1], shape[1]])?,
    ))
}

/// Cholesky factor L (lower triangular).
#[pyfunction]
#[pyo3(signature = (a, **options))]
pub fn linalg_cholesky<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<F64Array<'py>> {
    let device = plan_device("linalg.cholesky", options)?;
    let (n, l) = with_matrix(py, "cholesky", a, &[], |m, _| {
        Ok((m.rows, direct::cholesky(m, device)?))
    })?;
    f64_output(py, l, &[n, n])
}

/// Dominant eigenpair by power iteration: (λ, v).
#[pyfunction]
#[pyo3(signature = (a, iters=50, **options))]
pub fn linalg_dominant_eig<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    iters: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(f64, F64Array<'py>)> {
    let device = plan_device("linalg.dominant_eig", options)?;
    let (l, v) = with_matrix(py, "dominant_eig", a, &[], |m, _| {
        eigen::dominant_eig(m, iters, device)
    })?;
    let n = v.len();
    Ok((l, f64_output(py, v, &[n])?))
}

/// Dominant singular triplet by power iteration: (σ, u, v).
#[pyfunction]
#[pyo3(signature = (a, iters=50, **options))]
pub fn linalg_dominant_svd<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    iters: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(f64, F64Array<'py>, F64Array<'py>)> {
    let device = plan_device("linalg.dominant_svd", options)?;
    let (s, u, v) = with_matrix(py, "dominant_svd", a, &[], |m, _| {
        eigen::dominant_svd(m, iters, device)
    })?;
    let (nu, nv) = (u.len(), v.len());
    Ok((s, f64_output(py, u, &[nu])?, f64_output(py, v, &[nv])?))
}

/// Doolittle LU without pivoting: (L, U).
#[pyfunction]
#[pyo3(signature = (a, **options))]
pub fn linalg_lu<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(F64Array<'py>, F64Array<'py>)> {
    let device = plan_device("linalg.lu", options)?;
    let (n, (l, u)) = with_matrix(py, "lu", a, &[], |m, _| {
        Ok((m.rows, direct::lu(m, device)?))
    })?;
    Ok((f64_output(py, l, &[n, n])?, f64_output(py, u, &[n, n])?))
}

/// Least squares by CGLS (`method="cgls"`) or LSQR (`method="lsqr"`): returns (x, relative residual).
#[pyfunction]
#[pyo3(signature = (a, b, iters, x0=None, refine=0, method="cgls", **options))]
#[allow(clippy::too_many_arguments)]
pub fn linalg_least_squares<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    iters: usize,
    x0: Option<&Bound<'py, PyAny>>,
    refine: usize,
    method: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Solved<'py>> {
    let device = plan_device("linalg.least_squares", options)?;
    let solver = match method {
        "cgls" => lsq::least_squares,
        "lsqr" => lsq::lsqr,
        _ => {
            return Err(PyValueError::new_err(format!(
                "least_squares: unknown method '{method}' (expected cgls or lsqr)"
            )))
        }
    };
    solve(py, method, a, b, x0, |m, b, x0| {
        solver(m, b, iters, x0, refine, device)
    })
}

/// GMRES(m) with `restarts` cycles: returns (x, relative residual).
#[pyfunction]
#[pyo3(signature = (a, b, m, restarts=1, x0=None, **options))]
pub fn linalg_gmres<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    m: usize,
    restarts: usize,
    x0: Option<&Bound<'py, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Solved<'py>> {
    let device = plan_device("linalg.gmres", options)?;
    solve(py, "gmres", a, b, x0, |mat, b, x0| {
        lsq::gmres(mat, b, m, restarts, x0, device)
    })
}

/// Symmetric eigen-decomposition by cyclic Jacobi: (ascending eigenvalues, eigenvectors as columns).
#[pyfunction]
#[pyo3(signature = (a, sweeps=6, **options))]
pub fn linalg_eigh<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    sweeps: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(F64Array<'py>, F64Array<'py>)> {
    let device = plan_device("linalg.eigh", options)?;
    let (n, (w, v)) = with_matrix(py, "eigh", a, &[], |m, _| {
        Ok((m.rows, eigen::eigh(m, sweeps, device)?))
    })?;
    Ok((f64_output(py, w, &[n])?, f64_output(py, v, &[n, n])?))
}

/// Thin SVD through the Gram matrix: (U, singular values descending, Vt).
#[pyfunction]
#[pyo3(signature = (a, sweeps=6, **options))]
pub fn linalg_svd<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    sweeps: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(F64Array<'py>, F64Array<'py>, F64Array<'py>)> {
    let device = plan_device("linalg.svd", options)?;
    let (shape, (u, s, vt)) = with_matrix(py, "svd", a, &[], |m, _| {
        Ok(([m.rows, m.cols], eigen::svd(m, sweeps, device)?))
    })?;
    let n = shape[1];
    Ok((
        f64_output(py, u, &shape)?,
        f64_output(py, s, &[n])?,
        f64_output(py, vt, &[n, n])?,
    ))
}

/// Principal components of the rows of X: (components [k, n], explained variances [k]).
#[pyfunction]
#[pyo3(signature = (x, k, sweeps=6, **options))]
pub fn linalg_pca<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    k: usize,
    sweeps: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(F64Array<'py>, F64Array<'py>)> {
    let device = plan_device("linalg.pca", options)?;
    let (n, (c, var)) = with_matrix(py, "pca", x, &[], |m, _| {
        Ok((m.cols, eigen::pca(m, k, sweeps, device)?))
    })?;
    Ok((f64_output(py, c, &[k, n])?, f64_output(py, var, &[k])?))
}

/// Static lint of fp16-narrow sums under `outputs` (a Tensor, list/tuple or dict of Tensors):
/// `{"graph_error": worst estimate, "hotspots": [{node, op, shape, k, est_error, fixable, reason}]}`.
#[pyfunction]
pub fn precision_risk<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let (outs, _) = parse_outputs(outputs)?;
    let ts: Vec<aneforge::Tensor> = outs.into_iter().map(|(_, t)| t).collect();
    let found = aneforge::passes::precision_risk(&ts).py()?;
    let hotspots = PyList::empty(py);
    for h in &found {
        let d = PyDict::new(py);
        d.set_item("node", h.node)?;
        d.set_item("op", h.op)?;
        d.set_item("shape", h.shape.clone())?;
        d.set_item("k", h.k)?;
        d.set_item("est_error", h.est_error)?;
        d.set_item("fixable", h.fixable)?;
        d.set_item("reason", &h.reason)?;
        hotspots.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("graph_error", found.first().map_or(0.0, |h| h.est_error))?;
    out.set_item("hotspots", hotspots)?;
    Ok(out)
}

/// `outputs` (a Tensor, list/tuple or dict of Tensors) with sum-like reductions rewritten as
/// matmuls with ones; returns the same container kind.
#[pyfunction]
pub fn reduce_sum_to_matmul<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let (outs, kind) = parse_outputs(outputs)?;
    let ts: Vec<aneforge::Tensor> = outs.iter().map(|(_, t)| t.clone()).collect();
    let new = aneforge::passes::reduce_sum_to_matmul(&ts).py()?;
    let wrap = |t: aneforge::Tensor| Bound::new(py, PyTensor::from(t));
    match kind {
        OutKind::Single => Ok(wrap(new[0].clone())?.into_any()),
        OutKind::List => Ok(PyList::new(
            py,
            new.into_iter().map(wrap).collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any()),
        OutKind::Dict => {
            let d = PyDict::new(py);
            for ((name, _), t) in outs.iter().zip(new) {
                d.set_item(name.clone().unwrap_or_default(), wrap(t)?)?;
            }
            Ok(d.into_any())
        }
    }
}

/// Special function `name` (erfc, expm1, log1p, bessel_j0, bessel_i0, bessel_k0) of Tensor `x`, as a graph.
#[pyfunction]
pub fn special(name: &str, x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let t = tensor(x, name, "x")?;
    Ok(PyTensor::from(
        aneforge::numerics::special::apply(name, &t).py()?,
    ))
}

/// Two 1-D float64 signals, with the GIL released while `f` runs on them.
fn with_signals<'py, R: Send>(
    py: Python<'py>,
    op: &str,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    f: impl FnOnce(&[f64], &[f64]) -> aneforge::Result<R> + Send,
) -> PyResult<R> {
    let (a, b) = (
        f64_array(a, 1, op, "first signal")?,
        f64_array(b, 1, op, "second signal")?,
    );
    let (a, b) = (a.as_slice()?, b.as_slice()?);
    py.detach(|| f(a, b)).py()
}

/// A window of length `n` (hann, hamming, blackman), periodic or symmetric.
#[pyfunction]
#[pyo3(signature = (name, n, periodic=true))]
pub fn dsp_window<'py>(
    py: Python<'py>,
    name: &str,
    n: usize,
    periodic: bool,
) -> PyResult<F64Array<'py>> {
    f64_output(py, dsp::window(name, n, periodic).py()?, &[n])
}

/// `kind` = fir (direct for K <= 15, else FFT), fft (FFT convolution) or correlate, NumPy modes.
#[pyfunction]
#[pyo3(signature = (kind, a, b, mode="full", **options))]
pub fn dsp_convolve<'py>(
    py: Python<'py>,
    kind: &str,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    mode: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<F64Array<'py>> {
    let device = plan_device("dsp.convolve", options)?;
    let f = match kind {
        "fir" => dsp::fir_filter,
        "fft" => dsp::fft_convolve,
        "correlate" => dsp::correlate,
        _ => {
            return Err(PyValueError::new_err(format!(
                "convolve: unknown kind '{kind}' (expected fir, fft or correlate)"
            )))
        }
    };
    let y = with_signals(py, kind, a, b, |a, b| f(a, b, mode, device))?;
    let n = y.len();
    f64_output(py, y, &[n])
}

/// STFT of `x` with `window` every `hop` samples: (re, im) as [frames, win // 2 + 1].
#[pyfunction]
#[pyo3(signature = (x, window, hop, **options))]
pub fn dsp_stft<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    window: &Bound<'py, PyAny>,
    hop: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(F64Array<'py>, F64Array<'py>)> {
    let device = plan_device("dsp.stft", options)?;
    let (re, im, frames) =
        with_signals(py, "stft", x, window, |x, w| dsp::stft(x, w, hop, device))?;
    let bins = re.len() / frames.max(1);
    Ok((
        f64_output(py, re, &[frames, bins])?,
        f64_output(py, im, &[frames, bins])?,
    ))
}
