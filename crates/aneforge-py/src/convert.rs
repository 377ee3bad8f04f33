//! Python → core conversions: numpy weight arrays (zero-copy when already C-contiguous),
//! operands (Tensor, float or array), and int / tuple arguments.

use aneforge::{HostArray, HostData};
use half::f16;
use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::errors::IntoPy;
use crate::tensor::PyTensor;

static REQUIRE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn numpy_fn<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(cell
        .get_or_try_init(py, || py.import("numpy")?.getattr(name).map(Bound::unbind))?
        .bind(py)
        .clone())
}

/// `numpy.require(obj, dtype, "CA")`: a C-contiguous, aligned, native-order array of `dtype`.
pub fn require<'py>(obj: &Bound<'py, PyAny>, dtype: &str) -> PyResult<Bound<'py, PyUntypedArray>> {
    let r = numpy_fn(obj.py(), &REQUIRE, "require")?.call1((obj, dtype, "CA"))?;
    Ok(r.cast_into::<PyUntypedArray>()?)
}

/// `numpy.asarray(obj[, dtype])`.
pub fn asarray<'py>(
    obj: &Bound<'py, PyAny>,
    dtype: Option<&str>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let r = numpy_fn(obj.py(), &ASARRAY, "asarray")?.call1((obj, dtype))?;
    Ok(r.cast_into::<PyUntypedArray>()?)
}

/// Python-style tuple text of a shape: `(1, 16)`, `(64,)`, `()`.
pub use aneforge::cli::npy::shape_tuple as fmt_shape;

/// Name of an object's type for error messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A C-contiguous borrow of a float array, `T` its element type.
pub fn borrow<'py, T: numpy::Element>(
    arr: &Bound<'py, PyUntypedArray>,
    dtype: &str,
) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    let fast = arr
        .cast::<PyArrayDyn<T>>()
        .ok()
        .filter(|a| a.is_c_contiguous() && a.is_aligned())
        .cloned();
    let typed = match fast {
        Some(a) => a,
        None => require(arr.as_any(), dtype)?.cast_into::<PyArrayDyn<T>>()?,
    };
    typed
        .try_readonly()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

enum WeightData<'py> {
    F16(PyReadonlyArrayDyn<'py, f16>),
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

/// A host weight array borrowed from numpy (float16/32/64, C order).
pub struct Weight<'py> {
    shape: Vec<usize>,
    data: WeightData<'py>,
}

impl<'py> Weight<'py> {
    /// Accept a float16/32/64 ndarray (any layout) or anything `numpy.asarray(x, float64)` takes;
    /// integer, bool, complex and object arrays are a TypeError naming the dtype.
    pub fn extract(obj: &Bound<'py, PyAny>, op: &str) -> PyResult<Self> {
        let arr = match obj.cast::<PyUntypedArray>() {
            Ok(a) => a.clone(),
            Err(_) if obj.is_instance_of::<PyTensor>() => {
                return Err(PyTypeError::new_err(format!(
                    "{op}: expected a numpy array of weights, got a Tensor"
                )));
            }
            Err(_) => asarray(obj, Some("float64")).map_err(|e| {
                PyTypeError::new_err(format!(
                    "{op}: expected a float array of weights, got {} ({e})",
                    type_name(obj)
                ))
            })?,
        };
        let d = arr.dtype();
        let shape = arr.shape().to_vec();
        let data = match (d.kind(), d.itemsize()) {
            (b'f', 2) => WeightData::F16(borrow(&arr, "float16")?),
            (b'f', 4) => WeightData::F32(borrow(&arr, "float32")?),
            (b'f', _) => WeightData::F64(borrow(&arr, "float64")?),
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "{op}: weights must be a float16, float32 or float64 array, got dtype {d} with shape {}",
                    fmt_shape(&shape)
                )))
            }
        };
        Ok(Weight { shape, data })
    }

    /// The core's view of the array.
    pub fn host(&self) -> PyResult<HostArray<'_>> {
        let bad = |e: numpy::AsSliceError| PyValueError::new_err(e.to_string());
        let data = match &self.data {
            WeightData::F16(a) => HostData::F16(a.as_slice().map_err(bad)?),
            WeightData::F32(a) => HostData::F32(a.as_slice().map_err(bad)?),
            WeightData::F64(a) => HostData::F64(a.as_slice().map_err(bad)?),
        };
        Ok(HostArray {
            shape: &self.shape,
            data,
        })
    }

    /// Bake as an fp16 constant tensor (errors name `op`).
    pub fn constant(&self, op: &str) -> PyResult<aneforge::Tensor> {
        aneforge::constant(op, self.host()?).py()
    }
}

/// Optional weight argument.
pub fn opt_weight<'py>(obj: Option<&Bound<'py, PyAny>>, op: &str) -> PyResult<Option<Weight<'py>>> {
    obj.filter(|o| !o.is_none())
        .map(|o| Weight::extract(o, op))
        .transpose()
}

/// The host view of an optional weight.
pub fn opt_host<'a>(w: &'a Option<Weight<'_>>) -> PyResult<Option<HostArray<'a>>> {
    w.as_ref().map(|w| w.host()).transpose()
}

/// The other operand of a binary op.
pub enum Operand {
    Tensor(aneforge::Tensor),
    Scalar(f32),
}

/// Tensor, Python/numpy real number, 0-d array (scalar) or ndarray (baked as a constant named
/// after `op`); `None` for anything else (operators then return NotImplemented).
pub fn operand(obj: &Bound<'_, PyAny>, op: &str) -> PyResult<Option<Operand>> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(Some(Operand::Tensor(t.get().t.clone())));
    }
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        if a.ndim() > 0 {
            return Ok(Some(Operand::Tensor(
                Weight::extract(obj, op)?.constant(op)?,
            )));
        }
    }
    if obj.is_instance_of::<pyo3::types::PyString>() {
        return Ok(None);
    }
    Ok(obj.extract::<f64>().ok().map(|v| Operand::Scalar(v as f32)))
}

/// Like [`operand`], but a TypeError for unsupported types.
pub fn need_operand(obj: &Bound<'_, PyAny>, op: &str) -> PyResult<Operand> {
    operand(obj, op)?.ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{op}: expected a Tensor, a float or a numpy array, got {}",
            type_name(obj)
        ))
    })
}

/// A Tensor operand, or a float / array baked as a constant.
pub fn tensor_like(obj: &Bound<'_, PyAny>, op: &str) -> PyResult<aneforge::Tensor> {
    match need_operand(obj, op)? {
        Operand::Tensor(t) => Ok(t),
        Operand::Scalar(v) => aneforge::scalar(op, v).py(),
    }
}

/// The wrapped tensor of a `Tensor` argument.
pub fn tensor(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<aneforge::Tensor> {
    match obj.cast::<PyTensor>() {
        Ok(t) => Ok(t.get().t.clone()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{op}: {what} must be a Tensor, got {}",
            type_name(obj)
        ))),
    }
}

/// An int or a sequence of ints.
pub fn ints(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Vec<i64>> {
    if let Ok(v) = obj.extract::<i64>() {
        return Ok(vec![v]);
    }
    if obj.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{op}: {what} must be an int or a sequence of ints, got str"
        )));
    }
    obj.extract::<Vec<i64>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{op}: {what} must be an int or a sequence of ints, got {}",
            type_name(obj)
        ))
    })
}

/// An int or a sequence of non-negative ints.
pub fn sizes(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Vec<usize>> {
    let v = ints(obj, op, what)?;
    v.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                PyValueError::new_err(format!("{op}: {what} must be non-negative, got {v:?}"))
            })
        })
        .collect()
}

/// An int (used for both) or a pair.
pub fn pair(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<[usize; 2]> {
    match sizes(obj, op, what)?[..] {
        [a] => Ok([a, a]),
        [a, b] => Ok([a, b]),
        ref v => Err(PyValueError::new_err(format!(
            "{op}: {what} must be an int or a pair, got {v:?}"
        ))),
    }
}

/// Padding: an int, (ph, pw) or (top, bottom, left, right).
pub fn pad4(obj: &Bound<'_, PyAny>, op: &str) -> PyResult<[usize; 4]> {
    match sizes(obj, op, "pad")?[..] {
        [p] => Ok([p; 4]),
        [h, w] => Ok([h, h, w, w]),
        [t, b, l, r] => Ok([t, b, l, r]),
        ref v => Err(PyValueError::new_err(format!(
            "{op}: pad must be an int, (ph, pw) or (top, bottom, left, right), got {v:?}"
        ))),
    }
}

/// A float or a sequence of floats.
pub fn floats(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Vec<f32>> {
    if let Ok(v) = obj.extract::<f64>() {
        return Ok(vec![v as f32]);
    }
    let v = obj
        .extract::<Vec<f64>>()
        .or_else(|_| {
            asarray(obj, Some("float64")).and_then(|a| {
                a.call_method0("ravel")?
                    .call_method0("tolist")?
                    .extract::<Vec<f64>>()
            })
        })
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{op}: {what} must be a float or a sequence of floats, got {}",
                type_name(obj)
            ))
        })?;
    Ok(v.into_iter().map(|x| x as f32).collect())
}
