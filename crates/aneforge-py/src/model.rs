//! `compile` / `load` and the `Model` class: feeding numpy arrays, running, returning float32
//! arrays; zero-copy views of the port buffers, resident state (`alias`) and `release`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use aneforge::exec::{port_index, PortView};
use aneforge::{Compiled, DType, PortData, PortSpec};
use half::f16;
use numpy::ndarray::ArrayViewD;
use numpy::{
    IxDyn, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::convert::{asarray, borrow, fmt_shape, require, tensor, type_name};
use crate::errors::IntoPy;
use crate::options::compile_options;
use crate::tensor::PyTensor;

/// Graphs whose values hold at least this many elements run with the GIL released.
const DETACH_MIN_ELEMENTS: usize = 1 << 16;

/// How `__call__` returns the outputs (mirrors what was passed to `compile`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutKind {
    Single,
    List,
    Dict,
}

/// A compiled program, loaded on a device; call it with numpy arrays.
#[pyclass(frozen, name = "Model", module = "aneforge")]
pub struct Model {
    /// `None` after `release()`.
    inner: Mutex<Option<Compiled>>,
    /// One clone per live view base: views keep the buffers they point at from being released.
    views: Arc<()>,
    inputs: Vec<PortSpec>,
    outputs: Vec<PortSpec>,
    kind: OutKind,
    device: &'static str,
    dir: PathBuf,
    n_ops: usize,
    detach: bool,
    /// (kind, ops, inputs, outputs) per stage; one region for a single program.
    stages: Vec<StageInfo>,
}

/// What `Model.stages` reports for one stage.
struct StageInfo {
    kind: &'static str,
    ops: Vec<String>,
    inputs: Vec<String>,
    outputs: Vec<String>,
}

/// The stages of a compiled program: the plan's, or the single program as one region.
fn stage_infos(c: &Compiled) -> Vec<StageInfo> {
    use aneforge::plan::Stage;
    let names = |ps: &[PortSpec]| ps.iter().map(|p| p.name.clone()).collect();
    match &c.plan {
        None => vec![StageInfo {
            kind: "region",
            ops: aneforge::plan::file::region_ops(&c.program),
            inputs: names(c.inputs()),
            outputs: names(c.outputs()),
        }],
        Some(plan) => plan
            .stages
            .iter()
            .map(|s| match s {
                Stage::Region { program, ops } => StageInfo {
                    kind: "region",
                    ops: ops.clone(),
                    inputs: names(&program.inputs()),
                    outputs: names(&program.outputs()),
                },
                Stage::Host {
                    op,
                    inputs,
                    outputs,
                } => StageInfo {
                    kind: "host",
                    ops: vec![aneforge::ops::Family::name(op).to_string()],
                    inputs: inputs.clone(),
                    outputs: outputs.clone(),
                },
            })
            .collect(),
    }
}

impl Model {
    fn new(c: Compiled, kind: OutKind) -> Model {
        let work: usize = c
            .program
            .graph
            .nodes
            .iter()
            .flat_map(|n| &n.outputs)
            .map(|t| t.shape.iter().product::<usize>())
            .sum();
        Model {
            inputs: c.inputs().to_vec(),
            outputs: c.outputs().to_vec(),
            kind,
            device: c.device(),
            dir: c.dir.clone(),
            n_ops: c.program.graph.n_ops(),
            detach: work >= DETACH_MIN_ELEMENTS,
            stages: stage_infos(&c),
            inner: Mutex::new(Some(c)),
            views: Arc::new(()),
        }
    }

    /// Run `f` on the loaded program; an error once `release()` was called.
    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut Compiled) -> PyResult<R>) -> PyResult<R> {
        let mut guard = self
            .inner
            .lock_py_attached(py)
            .unwrap_or_else(|p| p.into_inner());
        match guard.as_mut() {
            Some(c) => f(c),
            None => Err(PyRuntimeError::new_err(
                "this model was released (Model.release()); compile or load the program again",
            )),
        }
    }

    /// A writable numpy array over input (or output) `name`'s buffer, kept alive by a [`ViewBase`].
    fn view<'py>(
        slf: &Bound<'py, Self>,
        name: Option<&str>,
        output: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (m, py) = (slf.get(), slf.py());
        let (ports, op, what) = if output {
            (&m.outputs, "output_view", "output")
        } else {
            (&m.inputs, "input_view", "input")
        };
        let i = port_index(ports, name, op, what).py()?;
        let (ptr, dtype) = m.with(py, |c| {
            let v = if output {
                c.loaded.output_view(i)
            } else {
                c.loaded.input_view(i)
            }
            .py()?;
            Ok(match v {
                PortView::F16(s) => (s.as_mut_ptr().cast::<u8>(), DType::Fp16),
                PortView::U8(s) => (s.as_mut_ptr(), DType::Uint8),
                PortView::I32(s) => (s.as_mut_ptr().cast::<u8>(), DType::Int32),
            })
        })?;
        let base = Bound::new(
            py,
            ViewBase {
                _model: slf.clone().unbind(),
                _token: m.views.clone(),
            },
        )?
        .into_any();
        let shape = IxDyn(&ports[i].shape);
        // SAFETY: `ptr` is the port buffer of the loaded program, holding the port's elements
        // (fp16 aligned to 2, int32 aligned to 4, or uint8), at an address fixed while the
        // program is loaded. The base keeps the model alive, and `release()` refuses while any
        // base is alive.
        Ok(unsafe {
            match dtype {
                DType::Uint8 => PyArrayDyn::<u8>::borrow_from_array(
                    &ArrayViewD::from_shape_ptr(shape, ptr.cast_const()),
                    base,
                )
                .into_any(),
                DType::Int32 => PyArrayDyn::<i32>::borrow_from_array(
                    &ArrayViewD::from_shape_ptr(shape, ptr.cast::<i32>().cast_const()),
                    base,
                )
                .into_any(),
                _ => PyArrayDyn::<f16>::borrow_from_array(
                    &ArrayViewD::from_shape_ptr(shape, ptr.cast::<f16>().cast_const()),
                    base,
                )
                .into_any(),
            }
        })
    }

    fn names(ports: &[PortSpec]) -> String {
        ports
            .iter()
            .map(|p| format!("'{}'", p.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn ports<'py>(py: Python<'py>, ports: &[PortSpec]) -> PyResult<Bound<'py, PyList>> {
        let items = ports
            .iter()
            .map(|p| Ok((p.name.as_str(), PyTuple::new(py, &p.shape)?, p.dtype.mil())))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Feed `args` / `kwargs`, execute, and return the outputs as `compile` was given them.
    fn call(
        &self,
        py: Python<'_>,
        c: &mut Compiled,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let n = self.inputs.len();
        match kwargs.filter(|k| !k.is_empty()) {
            None => {
                if args.len() != n {
                    return Err(PyTypeError::new_err(format!(
                        "model takes {n} input(s) ({}), got {}",
                        Self::names(&self.inputs),
                        args.len()
                    )));
                }
                for (i, port) in self.inputs.iter().enumerate() {
                    let item = args.get_borrowed_item(i)?;
                    feed(c, i, port, &item)?;
                }
            }
            Some(kw) => {
                if !args.is_empty() {
                    return Err(PyTypeError::new_err(format!(
                        "pass inputs either all by position or all by name ({}), not both",
                        Self::names(&self.inputs)
                    )));
                }
                let mut vals = Vec::with_capacity(n);
                let mut missing = Vec::new();
                for port in &self.inputs {
                    match kw.get_item(&port.name)? {
                        Some(v) => vals.push(v),
                        None => missing.push(format!("'{}'", port.name)),
                    }
                }
                if !missing.is_empty() {
                    return Err(PyTypeError::new_err(format!(
                        "missing input(s) {} (inputs: {})",
                        missing.join(", "),
                        Self::names(&self.inputs)
                    )));
                }
                if kw.len() != n {
                    let extra: Vec<String> = kw
                        .keys()
                        .iter()
                        .filter(|k| {
                            k.extract::<&str>()
                                .map_or(true, |s| !self.inputs.iter().any(|p| p.name == s))
                        })
                        .map(|k| k.repr().map(|r| r.to_string()).unwrap_or_default())
                        .collect();
                    return Err(PyTypeError::new_err(format!(
                        "unknown input name(s) {} (inputs: {})",
                        extra.join(", "),
                        Self::names(&self.inputs)
                    )));
                }
                for (i, (port, v)) in self.inputs.iter().zip(&vals).enumerate() {
                    feed(c, i, port, v)?;
                }
            }
        }
        if self.detach {
            let loaded = &mut c.loaded;
            py.detach(|| loaded.execute()).py()?;
        } else {
            c.loaded.execute().py()?;
        }
        let out = |j: usize| -> PyResult<Bound<'_, PyAny>> {
            if self.outputs[j].dtype == DType::Int32 {
                let arr = numpy_empty::<i32>(py, &self.outputs[j].shape)?;
                let s = unsafe { arr.as_slice_mut() }
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                c.loaded.read_output_i32(j, s).py()?;
                return Ok(arr.into_any());
            }
            let arr = numpy_empty::<f32>(py, &self.outputs[j].shape)?;
            let s =
                unsafe { arr.as_slice_mut() }.map_err(|e| PyValueError::new_err(e.to_string()))?;
            c.loaded.read_output(j, s).py()?;
            Ok(arr.into_any())
        };
        Ok(match self.kind {
            OutKind::Single => out(0)?.unbind(),
            OutKind::List => PyList::new(
                py,
                (0..self.outputs.len())
                    .map(out)
                    .collect::<PyResult<Vec<_>>>()?,
            )?
            .into_any()
            .unbind(),
            OutKind::Dict => {
                let d = PyDict::new(py);
                for (j, p) in self.outputs.iter().enumerate() {
                    d.set_item(&p.name, out(j)?)?;
                }
                d.into_any().unbind()
            }
        })
    }
}

fn check_shape(port: &PortSpec, got: &[usize]) -> PyResult<()> {
    if got != port.shape.as_slice() {
        return Err(PyValueError::new_err(format!(
            "input '{}': expected shape {}, got an array of shape {}",
            port.name,
            fmt_shape(&port.shape),
            fmt_shape(got)
        )));
    }
    Ok(())
}

/// The values of an array fed to a uint8 port: borrowed when already uint8, else converted.
pub(crate) enum Uint8Input<'py> {
    Borrowed(numpy::PyReadonlyArrayDyn<'py, u8>),
    Owned(Vec<u8>),
}

impl Uint8Input<'_> {
    /// The bytes, C order.
    pub(crate) fn as_slice(&self) -> PyResult<&[u8]> {
        match self {
            Uint8Input::Borrowed(a) => a
                .as_slice()
                .map_err(|e| PyValueError::new_err(e.to_string())),
            Uint8Input::Owned(v) => Ok(v),
        }
    }
}

/// An uninitialised C-order NumPy array of `shape` (`PyArray_NewFromDescr`, as `numpy.empty`
/// does, without the module lookup and argument parsing per call); a failed allocation is
/// NumPy's MemoryError (the numpy crate's constructors panic instead). The caller writes every
/// element.
fn numpy_empty<'py, T: numpy::Element>(
    py: Python<'py>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    use numpy::npyffi::{get_type_object, npy_intp, NpyTypes, PY_ARRAY_API};
    let mut dims = shape
        .iter()
        .map(|&d| npy_intp::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| PyValueError::new_err(format!("output shape {shape:?} is too large")))?;
    let nd = std::os::raw::c_int::try_from(dims.len())
        .map_err(|_| PyValueError::new_err(format!("output shape {shape:?} has too many axes")))?;
    // SAFETY: the GIL is held; `PyArray_NewFromDescr` steals the descriptor reference, reads
    // `nd` dims, allocates the data itself (null data, strides and base: C order) and returns a
    // new reference or null with a Python error set, which `from_owned_ptr_or_err` raises.
    unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            get_type_object(py, NpyTypes::PyArray_Type),
            T::get_dtype(py).into_dtype_ptr(),
            nd,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        Ok(Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked())
    }
}

/// The one rule for every uint8 port (`Model` inputs and `uint8=True` vision models): uint8
/// arrays as they are, other integer arrays range-checked to 0..=255 (ValueError naming the
/// element), float or other dtypes a TypeError; never wrapped modulo 256. `name` and `shape`
/// name the port in errors.
pub(crate) fn uint8_bytes<'py>(
    arr: &Bound<'py, PyUntypedArray>,
    name: &str,
    shape: &[usize],
) -> PyResult<Uint8Input<'py>> {
    let d = arr.dtype();
    match (d.kind(), d.itemsize()) {
        (b'u', 1) => Ok(Uint8Input::Borrowed(borrow::<u8>(arr, "uint8")?)),
        (kind @ (b'i' | b'u'), _) => {
            let slice_err = |e: numpy::AsSliceError| PyValueError::new_err(e.to_string());
            let wide = require(arr.as_any(), if kind == b'i' { "int64" } else { "uint64" })?;
            let vals: Vec<i128> = if kind == b'i' {
                borrow::<i64>(&wide, "int64")?.as_slice().map_err(slice_err)?.iter().map(|&v| v as i128).collect()
            } else {
                borrow::<u64>(&wide, "uint64")?.as_slice().map_err(slice_err)?.iter().map(|&v| v as i128).collect()
            };
            if let Some((k, v)) = vals.iter().enumerate().find(|(_, &v)| !(0..=255).contains(&v)) {
                return Err(PyValueError::new_err(format!(
                    "input '{name}': element {k} = {v} is outside 0..=255 (uint8 port of shape {})",
                    fmt_shape(shape)
                )));
            }
            Ok(Uint8Input::Owned(vals.into_iter().map(|v| v as u8).collect()))
        }
        _ => Err(PyTypeError::new_err(format!(
            "input '{name}' is a uint8 port (shape {}); pass an integer array with values in 0..=255, got dtype {d}",
            fmt_shape(shape)
        ))),
    }
}

/// Feed `obj` to input `i` without a copy on the numpy side when it is a C-contiguous, aligned
/// array of `T`; `None` when it is not (the caller converts it).
fn feed_native<T: numpy::Element>(
    c: &mut Compiled,
    i: usize,
    port: &PortSpec,
    obj: &Bound<'_, PyAny>,
    wrap: fn(&[T]) -> PortData<'_>,
) -> Option<PyResult<()>> {
    let a = obj.cast::<PyArrayDyn<T>>().ok()?;
    if !(a.is_c_contiguous() && a.is_aligned()) {
        return None;
    }
    Some(check_shape(port, a.shape()).and_then(|_| {
        // SAFETY: the GIL is held and no Python code runs while the slice is alive; the data is
        // copied into the executor's buffer before returning.
        let data = unsafe { a.as_slice() }.map_err(|e| PyValueError::new_err(e.to_string()))?;
        c.loaded.set_input(i, wrap(data)).py()
    }))
}

/// Write one numpy array (or array-like) into input port `i`.
fn feed(c: &mut Compiled, i: usize, port: &PortSpec, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    // Fast paths: a C-contiguous, aligned, native float32 array (fp16 port) or int32 array
    // (int32 port) goes straight from numpy's buffer, with no numpy call.
    let fast = match port.dtype {
        DType::Fp16 => feed_native::<f32>(c, i, port, obj, |d| PortData::F32(d)),
        DType::Int32 => feed_native::<i32>(c, i, port, obj, |d| PortData::I32(d)),
        _ => None,
    };
    if let Some(done) = fast {
        return done;
    }
    let arr = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => {
            let dtype = (port.dtype == DType::Fp16).then_some("float64");
            asarray(obj, dtype).map_err(|e| {
                PyTypeError::new_err(format!(
                    "input '{}': expected a numpy array, got {} ({e})",
                    port.name,
                    type_name(obj)
                ))
            })?
        }
    };
    check_shape(port, arr.shape())?;
    let d = arr.dtype();
    let (kind, size) = (d.kind(), d.itemsize());
    match port.dtype {
        DType::Int32 => match kind {
            b'i' | b'u' | b'b' => {
                let wide = require(arr.as_any(), "int64")?;
                let vals = borrow::<i64>(&wide, "int64")?;
                let vals = vals
                    .as_slice()
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                let ints = vals
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| {
                        i32::try_from(v).map_err(|_| {
                            PyValueError::new_err(format!(
                                "input '{}': element {k} = {v} is outside the int32 range (port of shape {})",
                                port.name,
                                fmt_shape(&port.shape)
                            ))
                        })
                    })
                    .collect::<PyResult<Vec<i32>>>()?;
                c.loaded.set_input(i, PortData::I32(&ints)).py()
            }
            _ => Err(PyTypeError::new_err(format!(
                "input '{}' is an int32 port (shape {}); pass an integer array, got dtype {d}",
                port.name,
                fmt_shape(&port.shape)
            ))),
        },
        DType::Uint8 => {
            let bytes = uint8_bytes(&arr, &port.name, &port.shape)?;
            c.loaded.set_input(i, PortData::U8(bytes.as_slice()?)).py()
        }
        _ => {
            let slice_err = |e: numpy::AsSliceError| PyValueError::new_err(e.to_string());
            match (kind, size) {
                (b'f', 2) => c.loaded.set_input(i, PortData::F16(borrow::<f16>(&arr, "float16")?.as_slice().map_err(slice_err)?)).py(),
                (b'f', 4) => c.loaded.set_input(i, PortData::F32(borrow::<f32>(&arr, "float32")?.as_slice().map_err(slice_err)?)).py(),
                (b'f', _) => c.loaded.set_input(i, PortData::F64(borrow::<f64>(&arr, "float64")?.as_slice().map_err(slice_err)?)).py(),
                _ => Err(PyTypeError::new_err(format!(
                    "input '{}' is an fp16 port (shape {}); pass a float16, float32 or float64 array, got dtype {d}",
                    port.name,
                    fmt_shape(&port.shape)
                ))),
            }
        }
    }
}

#[pymethods]
impl Model {
    /// Run on numpy arrays given in input creation order or by port name; returns float32 arrays.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        self.with(py, |c| self.call(py, c, args, kwargs))
    }

    /// A writable numpy view of input `name` (the only input when omitted): float16 or uint8,
    /// the port's shape, aliasing the executor's buffer (valid until `release()`).
    #[pyo3(signature = (name=None))]
    fn input_view<'py>(slf: &Bound<'py, Self>, name: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, name, false)
    }

    /// A numpy view of output `name` (the only output when omitted), aliasing the buffer
    /// `execute()` writes (valid until `release()`).
    #[pyo3(signature = (name=None))]
    fn output_view<'py>(slf: &Bound<'py, Self>, name: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        Self::view(slf, name, true)
    }

    /// Profile `repeat` calls on these inputs (after one warm-up call): a dict (see
    /// `aneforge.Model.profile` in the stubs); `trace` writes Chrome trace JSON there; `clock`
    /// is `"wall"` or `"cpu"` (process CPU time).
    #[pyo3(signature = (*args, repeat=10, trace=None, clock="wall", **kwargs))]
    fn profile<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        repeat: usize,
        trace: Option<PathBuf>,
        clock: &str,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let clock = aneforge::exec::clock::Clock::parse(clock).py()?;
        self.with(py, |c| {
            self.call(py, c, args, kwargs)?;
            let loaded = &mut c.loaded;
            let report = py
                .detach(|| aneforge::cost::profile::profile_calls(loaded.as_mut(), repeat, clock))
                .py()?;
            if let Some(path) = &trace {
                report.write_trace(path).py()?;
            }
            crate::cost::profile_dict(py, &report)
        })
    }

    /// Run the program on what the input buffers hold now (no copies in or out).
    fn execute(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| {
            if self.detach {
                let loaded = &mut c.loaded;
                py.detach(|| loaded.execute()).py()
            } else {
                c.loaded.execute().py()
            }
        })
    }

    /// After every execute, input `input` holds output `output` (resident state; the
    /// reference package's share_buffer). Call before the first execute.
    fn alias(&self, py: Python<'_>, output: &str, input: &str) -> PyResult<()> {
        self.with(py, |c| c.loaded.alias(output, input).py())
    }

    /// Free the program now (its buffers and, on the ANE, its program slot); later calls
    /// raise. Refused while views of its buffers are alive.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let views = Arc::strong_count(&self.views) - 1;
        if views > 0 {
            return Err(PyRuntimeError::new_err(format!("release: {views} numpy view(s) of this model's buffers are still alive; delete them first")));
        }
        let c = self
            .inner
            .lock_py_attached(py)
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(c);
        Ok(())
    }
    /// The executor running the program: "reference" or "ane".
    #[getter]
    fn device(&self) -> &'static str {
        self.device
    }
    /// The program directory (model.mil, weights.bin, program.json).
    #[getter]
    fn program_dir(&self) -> String {
        self.dir.display().to_string()
    }
    /// The MIL text of the program.
    #[getter]
    fn mil(&self, py: Python<'_>) -> PyResult<Py<PyString>> {
        self.with(py, |c| Ok(PyString::new(py, &c.program.mil).unbind()))
    }
    /// Input ports in feeding order: (name, shape, dtype).
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        Self::ports(py, &self.inputs)
    }
    /// Output ports: (name, shape, dtype).
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        Self::ports(py, &self.outputs)
    }
    /// The stages in execution order, one dict each: kind ("region": a fused program on
    /// `device`; "host": a host op run in-process), ops, executor, inputs and outputs (value names).
    #[getter]
    fn stages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = self.stages.iter().map(|s| {
            let d = PyDict::new(py);
            d.set_item("kind", s.kind)?;
            d.set_item("ops", &s.ops)?;
            d.set_item(
                "executor",
                if s.kind == "host" {
                    "host"
                } else {
                    self.device
                },
            )?;
            d.set_item("inputs", &s.inputs)?;
            d.set_item("outputs", &s.outputs)?;
            Ok(d)
        });
        PyList::new(py, rows.collect::<PyResult<Vec<_>>>()?)
    }
    /// The routing decision per routable host op, e.g. "routed fused: minmax_norm (removes 1
    /// cut)" (see the `route` compile option); empty for a loaded directory.
    #[getter]
    fn routes(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with(py, |c| Ok(c.routes.iter().map(|r| r.to_string()).collect()))
    }
    /// Number of compute ops in the program.
    #[getter]
    fn n_ops(&self) -> usize {
        self.n_ops
    }
    /// The reference executor's planned host memory in bytes: dict with weights, activations
    /// (the liveness plan's slots), io, peak (their sum) and unplanned_activations (one buffer
    /// per value); NotImplementedError on other executors.
    fn memory<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.with(py, |c| c.memory().py())?;
        let d = PyDict::new(py);
        d.set_item("weights", m.weight_bytes)?;
        d.set_item("activations", m.activation_bytes)?;
        d.set_item("io", m.io_bytes)?;
        d.set_item("peak", m.peak_bytes)?;
        d.set_item("unplanned_activations", m.unplanned_activation_bytes)?;
        Ok(d)
    }
    /// One dict per weight when compiled with `compress`: name, site, shape, encoding,
    /// bytes_fp16, bytes_encoded, rel_error (||W − dequant(W)|| / ||W||); else an empty list.
    fn compression_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = self.with(py, |c| Ok(c.report.clone()))?;
        report_dicts(py, &rows)
    }

    /// Write the program as a Core ML .mlpackage at `path` (must end in .mlpackage and not
    /// exist); returns the path. uint8 [1, 1 or 3, H, W] ports become Core ML images; other
    /// uint8 ports raise NotImplementedError.
    fn save_mlpackage(&self, py: Python<'_>, path: PathBuf) -> PyResult<String> {
        let out = self.with(py, |c| c.save_mlpackage(&path).py())?;
        Ok(out.display().to_string())
    }

    fn __repr__(&self) -> String {
        let ports = |ps: &[PortSpec]| {
            ps.iter()
                .map(|p| format!("{}: {} {}", p.name, p.dtype, fmt_shape(&p.shape)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "Model(device='{}', inputs=[{}], outputs=[{}], n_ops={}, program_dir='{}')",
            self.device,
            ports(&self.inputs),
            ports(&self.outputs),
            self.n_ops,
            self.dir.display()
        )
    }
}

/// Named (or automatically named) program outputs.
pub(crate) type Outputs = Vec<(Option<String>, aneforge::Tensor)>;

/// The base object of a view: keeps the model alive and counts as a live view.
#[pyclass(frozen, name = "_PortBuffer", module = "aneforge")]
struct ViewBase {
    _model: Py<Model>,
    _token: Arc<()>,
}

/// Outputs given as a Tensor, a list/tuple of Tensors, or a dict name → Tensor.
pub(crate) fn parse_outputs(outputs: &Bound<'_, PyAny>) -> PyResult<(Outputs, OutKind)> {
    if let Ok(t) = outputs.cast::<PyTensor>() {
        Ok((vec![(None, t.get().t.clone())], OutKind::Single))
    } else if let Ok(d) = outputs.cast::<PyDict>() {
        let mut outs = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let name: String = k.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "compile: output names must be str, got {}",
                    type_name(&k)
                ))
            })?;
            let t = tensor(&v, "compile", &format!("output '{name}'"))?;
            outs.push((Some(name), t));
        }
        Ok((outs, OutKind::Dict))
    } else if outputs.is_instance_of::<PyList>() || outputs.is_instance_of::<PyTuple>() {
        let outs = outputs
            .try_iter()?
            .map(|t| Ok((None, tensor(&t?, "compile", "every output")?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok((outs, OutKind::List))
    } else {
        Err(PyTypeError::new_err(format!(
            "compile: outputs must be a Tensor, a list or tuple of Tensors, or a dict name -> Tensor, got {}",
            type_name(outputs)
        )))
    }
}

/// Compile `outputs` (a Tensor, a list/tuple of Tensors, or a dict name → Tensor) into one
/// program, write its directory and load it on the options' device (`**options`: see `CompileOptions`).
#[pyfunction]
#[pyo3(signature = (outputs, **options))]
pub fn compile(
    py: Python<'_>,
    outputs: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Model> {
    let opts = compile_options(options)?;
    let (outs, kind) = parse_outputs(outputs)?;
    let compiled = py.detach(|| aneforge::compile(&outs, &opts)).py()?;
    crate::cost::warn_at_compile(py, &compiled, &opts)?;
    Ok(Model::new(compiled, kind))
}

/// Lower `outputs` and write the program directory (model.mil, weights.bin, program.json)
/// into `build_dir` or the content-addressed cache (gated on `target` as in `compile`), without
/// loading it; returns the directory.
#[pyfunction]
#[pyo3(signature = (outputs, **options))]
pub fn export(
    py: Python<'_>,
    outputs: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let opts = compile_options(options)?;
    let (outs, _) = parse_outputs(outputs)?;
    let exported = py.detach(|| aneforge::export(&outs, &opts)).py()?;
    Ok(exported.dir.display().to_string())
}

/// Load a program directory (model.mil + weights.bin [+ program.json]) on the options' device.
/// With `compress`, its fp16 weights are compressed into a new program in the cache. Calls
/// return one array for a single output, else a dict name → array.
#[pyfunction]
#[pyo3(signature = (program_dir, **options))]
pub fn load(
    py: Python<'_>,
    program_dir: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Model> {
    let opts = compile_options(options)?;
    let compiled = py
        .detach(|| aneforge::load_dir_with(&program_dir, &opts))
        .py()?;
    let kind = if compiled.outputs().len() == 1 {
        OutKind::Single
    } else {
        OutKind::Dict
    };
    Ok(Model::new(compiled, kind))
}

/// A compression report as a list of dicts: name, site, shape, encoding, bytes_fp16,
/// bytes_encoded, rel_error.
pub(crate) fn report_dicts<'py>(
    py: Python<'py>,
    rows: &[aneforge::compress::CompressionEntry],
) -> PyResult<Bound<'py, PyList>> {
    let rows = rows.iter().map(|e| {
        let d = PyDict::new(py);
        d.set_item("name", &e.name)?;
        d.set_item("site", e.site)?;
        d.set_item("shape", PyTuple::new(py, &e.shape)?)?;
        d.set_item("encoding", e.encoding.name())?;
        d.set_item("bytes_fp16", e.bytes_fp16)?;
        d.set_item("bytes_encoded", e.bytes_encoded)?;
        d.set_item("rel_error", e.rel_error)?;
        Ok(d)
    });
    PyList::new(py, rows.collect::<PyResult<Vec<_>>>()?)
}
