//! `af.CompileOptions` and the one conversion from Python keywords to the core
//! `CompileOptions`: every binding that compiles takes `**options` and calls [`compile_options`].
//! No option is parsed, checked or defaulted here; the core does that (`aneforge::options`).

use std::path::PathBuf;

use aneforge::{CompileOptions, OptionValue};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};

use crate::convert::type_name;
use crate::errors::IntoPy;

/// The keyword that carries a whole `CompileOptions` object (other keywords override its fields).
const OPTIONS_KEYWORD: &str = "options";

/// Compile options (device, precision, compress, ...): `af.CompileOptions(**kw)`; every field
/// not given keeps the core default. Immutable; `replace(**kw)` returns a changed copy.
#[pyclass(frozen, eq, name = "CompileOptions", module = "aneforge")]
#[derive(Clone, PartialEq)]
pub struct PyCompileOptions {
    pub inner: CompileOptions,
}

/// A Python value as a core option value: None, bool, int, float, str or os.PathLike.
fn option_value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<OptionValue> {
    Ok(if v.is_none() {
        OptionValue::Default
    } else if let Ok(b) = v.cast::<PyBool>() {
        OptionValue::Bool(b.is_true())
    } else if let Ok(s) = v.cast::<PyString>() {
        OptionValue::Str(s.to_str()?.to_string())
    } else if v.is_instance_of::<PyInt>() || v.hasattr("__index__")? {
        OptionValue::Int(v.extract()?)
    } else if v.is_instance_of::<PyFloat>() {
        OptionValue::Float(v.extract()?)
    } else if let Ok(p) = v.extract::<PathBuf>() {
        OptionValue::Path(p)
    } else {
        return Err(PyTypeError::new_err(format!(
            "compile: option {key} cannot be a {}",
            type_name(v)
        )));
    })
}

/// A core option value as a Python object.
fn to_python<'py>(py: Python<'py>, v: OptionValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        OptionValue::Default => py.None().into_bound(py),
        OptionValue::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        OptionValue::Int(i) => i.into_pyobject(py)?.into_any(),
        OptionValue::Float(f) => f.into_pyobject(py)?.into_any(),
        OptionValue::Str(s) => PyString::new(py, &s).into_any(),
        OptionValue::Path(p) => PyString::new(py, &p.to_string_lossy()).into_any(),
    })
}

/// `base` with the keyword arguments applied through the core setter (`int8` last).
fn apply(mut base: CompileOptions, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<CompileOptions> {
    let mut pairs = Vec::new();
    for (k, v) in kwargs.into_iter().flat_map(|d| d.iter()) {
        let key: String = k.extract()?;
        let value = option_value(&key, &v)?;
        pairs.push((key, value));
    }
    base.apply(pairs.iter().map(|(k, v)| (k.as_str(), v.clone())))
        .py()?;
    Ok(base)
}

/// The compile options of a binding called with `**kwargs`: the `options=` object (a
/// `CompileOptions`, else TypeError) or the defaults, with the other keywords applied on top.
/// Unknown names and bad values raise the core's errors. This is the one conversion every
/// entry point (and the Trainer) calls.
pub fn compile_options(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<CompileOptions> {
    let Some(kwargs) = kwargs else {
        return Ok(CompileOptions::default());
    };
    let rest = kwargs.copy()?;
    let base = match rest.get_item(OPTIONS_KEYWORD)? {
        None => CompileOptions::default(),
        Some(o) => {
            rest.del_item(OPTIONS_KEYWORD)?;
            if o.is_none() {
                CompileOptions::default()
            } else {
                o.cast::<PyCompileOptions>()
                    .map_err(|_| {
                        PyTypeError::new_err(format!(
                            "compile: options must be an aneforge.CompileOptions, got {}",
                            type_name(&o)
                        ))
                    })?
                    .get()
                    .inner
                    .clone()
            }
        }
    };
    apply(base, Some(&rest))
}

/// The device of a numerics plan's options; any other option given is NotImplementedError naming it.
pub fn plan_device(op: &str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<aneforge::Device> {
    let opts = compile_options(kwargs)?;
    opts.only(op, &["device"]).py()?;
    Ok(opts.device)
}

impl PyCompileOptions {
    /// Field `key` as a Python value.
    fn field<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.get(key).py()?)
    }
}

#[pymethods]
impl PyCompileOptions {
    /// Options from keywords on top of `options=` (another CompileOptions) or the defaults;
    /// unknown names and bad values raise.
    #[new]
    #[pyo3(signature = (**options))]
    fn new(options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Ok(PyCompileOptions {
            inner: compile_options(options)?,
        })
    }

    /// A copy with the given keywords changed.
    #[pyo3(signature = (**options))]
    fn replace(&self, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Ok(PyCompileOptions {
            inner: apply(self.inner.clone(), options)?,
        })
    }

    /// The field names, in order.
    #[classattr]
    fn fields(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
        PyTuple::new(py, CompileOptions::FIELDS)
    }

    /// Every keyword the options accept: the fields, int8 (alias of compress="int8") and opt.
    #[classattr]
    fn keywords(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
        PyTuple::new(py, CompileOptions::KEYS)
    }

    /// "auto", "ane" or "reference".
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "device")
    }
    /// "fp16" or "fp32".
    #[getter]
    fn precision<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "precision")
    }
    /// The program directory to write, or None for the cache.
    #[getter]
    fn build_dir<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "build_dir")
    }
    /// The weight compression mode, or None for fp16 weights.
    #[getter]
    fn compress<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "compress")
    }
    /// Relative L2 error budget of the gated encodings.
    #[getter]
    fn compress_atol<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "compress_atol")
    }
    /// Blockwise int8 block length.
    #[getter]
    fn block_size<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "block_size")
    }
    /// Arch string or family to gate on, or None (ANEFORGE_TARGET, else the host).
    #[getter]
    fn target<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "target")
    }
    /// MIL opset, or None (the host's newest).
    #[getter]
    fn opset<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "opset")
    }
    /// Whether sum-like reductions are rewritten as matmuls.
    #[getter]
    fn sum_via_matmul<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "sum_via_matmul")
    }

    /// Where host ops with a fused decomposition run: "auto", "fused" or "host".
    #[getter]
    fn route<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "route")
    }

    /// Query tiles of every attention (sdpa, mha, cross_attention), or None (each one's heuristic).
    #[getter]
    fn attention_tiles<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.field(py, "attention_tiles")
    }

    /// The fields as a dict name -> value.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for key in CompileOptions::FIELDS {
            d.set_item(key, self.field(py, key)?)?;
        }
        Ok(d)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields = CompileOptions::FIELDS
            .iter()
            .map(|k| Ok(format!("{k}={}", self.field(py, k)?.repr()?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(format!("CompileOptions({})", fields.join(", ")))
    }
}

/// The core defaults as a dict field -> value (read by the tests to compare with `CompileOptions()`).
#[pyfunction]
pub fn compile_option_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    PyCompileOptions {
        inner: CompileOptions::default(),
    }
    .to_dict(py)
}
