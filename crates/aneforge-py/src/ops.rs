//! Free builder functions: ports, constants, conv, concat/split, select, batch_norm.

use aneforge::ops::conv::{conv2d, ConvOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::convert::{floats, opt_host, opt_weight, pad4, pair, sizes, tensor, tensor_like, type_name, Weight};
use crate::errors::IntoPy;
use crate::tensor::{wrap, PyTensor};

type R = PyResult<PyTensor>;

/// A program input port of `shape` (fp16 or uint8), fed in creation order or by name.
#[pyfunction]
#[pyo3(signature = (shape, dtype="fp16", name=None))]
pub fn input(shape: &Bound<'_, PyAny>, dtype: &str, name: Option<&str>) -> R {
    let dt = aneforge::DType::parse("input", dtype).py()?;
    wrap(aneforge::input_port(&sizes(shape, "input", "shape")?, dt, name))
}

/// A uint8 image port cast to fp16 and scaled: `x * scale + bias` (scalars or per-channel).
#[pyfunction]
#[pyo3(signature = (shape, scale=None, bias=None, name=None), text_signature = "(shape, scale=0.00392156862745098, bias=0.0, name=None)")]
pub fn image_input(shape: &Bound<'_, PyAny>, scale: Option<&Bound<'_, PyAny>>, bias: Option<&Bound<'_, PyAny>>, name: Option<&str>) -> R {
    let scale = match scale {
        Some(s) if !s.is_none() => floats(s, "image_input", "scale")?,
        _ => vec![1.0 / 255.0],
    };
    let bias = match bias {
        Some(b) if !b.is_none() => floats(b, "image_input", "bias")?,
        _ => vec![0.0],
    };
    wrap(aneforge::image_input(&sizes(shape, "image_input", "shape")?, &scale, &bias, name))
}

/// Bake a float array as an fp16 constant tensor.
#[pyfunction]
pub fn constant(array: &Bound<'_, PyAny>) -> R {
    Weight::extract(array, "constant")?.constant("constant").map(PyTensor::from)
}

/// 2-D convolution of NCHW `x` with a baked weight [Cout, Cin/groups, kH, kW] and optional bias.
#[pyfunction]
#[pyo3(signature = (x, weight, stride=None, pad=None, dilation=None, groups=1, bias=None), text_signature = "(x, weight, stride=1, pad=0, dilation=1, groups=1, bias=None)")]
#[allow(clippy::too_many_arguments)]
pub fn conv(
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    pad: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: usize,
    bias: Option<&Bound<'_, PyAny>>,
) -> R {
    let x = tensor(x, "conv", "x")?;
    let w = Weight::extract(weight, "conv")?;
    let b = opt_weight(bias, "conv")?;
    let opts = ConvOptions {
        stride: given(stride).map(|s| pair(s, "conv", "stride")).transpose()?.unwrap_or([1, 1]),
        pad: given(pad).map(|p| pad4(p, "conv")).transpose()?.unwrap_or([0; 4]),
        dilation: given(dilation).map(|d| pair(d, "conv", "dilation")).transpose()?.unwrap_or([1, 1]),
        groups,
    };
    wrap(conv2d(&x, w.host()?, opt_host(&b)?, opts))
}

/// An optional argument that is present and not None.
fn given<'a, 'py>(o: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    o.filter(|v| !v.is_none())
}

/// Join tensors along `axis`.
#[pyfunction]
#[pyo3(signature = (tensors, axis=1))]
pub fn concat(tensors: &Bound<'_, PyAny>, axis: i64) -> R {
    let items = tensors.try_iter().map_err(|_| PyTypeError::new_err(format!("concat: expected a sequence of Tensors, got {}", type_name(tensors))))?;
    let ts = items.map(|t| tensor(&t?, "concat", "every item")).collect::<PyResult<Vec<_>>>()?;
    wrap(aneforge::ops::layout::concat(&ts, axis))
}

/// Split `x` into equal parts (int) or parts of the given sizes (sequence) along `axis`.
#[pyfunction]
#[pyo3(signature = (x, num_or_sizes, axis=0))]
pub fn split(x: &Bound<'_, PyAny>, num_or_sizes: &Bound<'_, PyAny>, axis: i64) -> PyResult<Vec<PyTensor>> {
    crate::tensor::split(&tensor(x, "split", "x")?, num_or_sizes, axis)
}

/// `a` where `cond` else `b` (broadcasting); `a` / `b` may be floats.
#[pyfunction]
pub fn select(cond: &Bound<'_, PyAny>, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    let c = tensor(cond, "select", "cond")?;
    wrap(aneforge::select(&c, &tensor_like(a, "select")?, &tensor_like(b, "select")?))
}

/// The tensor among two operands (the op is commutative).
fn commutative<'a, 'py>(a: &'a Bound<'py, PyAny>, b: &'a Bound<'py, PyAny>, op: &str) -> PyResult<(&'a Bound<'py, PyTensor>, &'a Bound<'py, PyAny>)> {
    match (a.cast::<PyTensor>(), b.cast::<PyTensor>()) {
        (Ok(t), _) => Ok((t, b)),
        (_, Ok(t)) => Ok((t, a)),
        _ => Err(PyTypeError::new_err(format!("{op}: at least one argument must be a Tensor, got {} and {}", type_name(a), type_name(b)))),
    }
}

/// Elementwise maximum of a Tensor and a Tensor, float or array.
#[pyfunction]
pub fn maximum(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    let (t, o) = commutative(a, b, "maximum")?;
    t.get().maximum(o)
}

/// Elementwise minimum of a Tensor and a Tensor, float or array.
#[pyfunction]
pub fn minimum(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    let (t, o) = commutative(a, b, "minimum")?;
    t.get().minimum(o)
}

/// Inference batch normalisation with per-channel statistics baked as weights.
#[pyfunction]
#[pyo3(signature = (x, mean, var, gamma=None, beta=None, eps=1e-5))]
pub fn batch_norm(
    x: &Bound<'_, PyAny>,
    mean: &Bound<'_, PyAny>,
    var: &Bound<'_, PyAny>,
    gamma: Option<&Bound<'_, PyAny>>,
    beta: Option<&Bound<'_, PyAny>>,
    eps: f32,
) -> R {
    let x = tensor(x, "batch_norm", "x")?;
    let (m, v) = (Weight::extract(mean, "batch_norm")?, Weight::extract(var, "batch_norm")?);
    let (g, b) = (opt_weight(gamma, "batch_norm")?, opt_weight(beta, "batch_norm")?);
    wrap(aneforge::ops::norm::batch_norm(&x, m.host()?, v.host()?, opt_host(&g)?, opt_host(&b)?, eps))
}
