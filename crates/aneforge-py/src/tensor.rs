//! The `Tensor` class: a frozen handle on a core lazy tensor; every method is one core builder call.

use aneforge::ops::elementwise::Compare;
use aneforge::ops::unary::OpRow;
use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};

use crate::convert::{
    fmt_shape, ints, need_operand, operand, pad4, pair, sizes, type_name, Operand, Weight,
};
use crate::errors::IntoPy;

/// A lazy tensor: a value in the graph being built. Its shape and dtype are known; its values
/// exist only once the graph is compiled and run.
#[pyclass(frozen, subclass, name = "Tensor", module = "aneforge")]
pub struct PyTensor {
    pub t: aneforge::Tensor,
}

impl From<aneforge::Tensor> for PyTensor {
    fn from(t: aneforge::Tensor) -> Self {
        PyTensor { t }
    }
}

type R = PyResult<PyTensor>;

/// Wrap a core result.
pub fn wrap(r: aneforge::Result<aneforge::Tensor>) -> R {
    r.py().map(PyTensor::from)
}

/// Wrap a core result as a Python object (operators).
fn obj(py: Python<'_>, r: aneforge::Result<aneforge::Tensor>) -> PyResult<Py<PyAny>> {
    Ok(Bound::new(py, wrap(r)?)?.into_any().unbind())
}

/// Optional norm parameter: a Tensor or an array baked as a constant.
fn norm_param(obj: Option<&Bound<'_, PyAny>>, op: &str) -> PyResult<Option<aneforge::Tensor>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => match o.cast::<PyTensor>() {
            Ok(t) => Ok(Some(t.get().t.clone())),
            Err(_) => Weight::extract(o, op)?.constant(op).map(Some),
        },
    }
}

/// Optional scale and shift of a norm (see `norm_param`).
fn norm_params(
    gamma: Option<&Bound<'_, PyAny>>,
    beta: Option<&Bound<'_, PyAny>>,
    op: &str,
) -> PyResult<(Option<aneforge::Tensor>, Option<aneforge::Tensor>)> {
    Ok((norm_param(gamma, op)?, norm_param(beta, op)?))
}

/// `*args` that may also be one tuple/list: `reshape(2, 3)` or `reshape((2, 3))`.
fn varargs(args: &Bound<'_, PyTuple>, op: &str, what: &str) -> PyResult<Vec<i64>> {
    if args.len() == 1 {
        return ints(&args.get_item(0)?, op, what);
    }
    ints(args.as_any(), op, what)
}

/// Axes argument: int, sequence, or None (= every axis).
fn axes_arg(t: &aneforge::Tensor, axes: Option<&Bound<'_, PyAny>>, op: &str) -> PyResult<Vec<i64>> {
    match axes {
        Some(a) if !a.is_none() => ints(a, op, "axes"),
        _ => Ok((0..t.rank() as i64).collect()),
    }
}

impl PyTensor {
    /// Comparison `c` against a Tensor or scalar operand, errors naming `op`.
    fn cmp(&self, c: Compare, other: &Bound<'_, PyAny>, op: &str) -> R {
        self.either(
            other,
            op,
            |a, b| a.compare(c, b),
            |a, k| a.compare_scalar(c, k),
        )
    }

    /// A method taking a Tensor (via `tt`) or a scalar (via `ts`); anything else is a TypeError naming `op`.
    fn either(
        &self,
        other: &Bound<'_, PyAny>,
        op: &str,
        tt: impl FnOnce(&aneforge::Tensor, &aneforge::Tensor) -> aneforge::Result<aneforge::Tensor>,
        ts: impl FnOnce(&aneforge::Tensor, f32) -> aneforge::Result<aneforge::Tensor>,
    ) -> R {
        match need_operand(other, op)? {
            Operand::Tensor(o) => wrap(tt(&self.t, &o)),
            Operand::Scalar(k) => wrap(ts(&self.t, k)),
        }
    }

    /// One reduction `f` over `axes` (None: every axis), errors naming `op`.
    fn reduce(
        &self,
        axes: Option<&Bound<'_, PyAny>>,
        keepdims: bool,
        op: &str,
        f: impl FnOnce(&aneforge::Tensor, &[i64], bool) -> aneforge::Result<aneforge::Tensor>,
    ) -> R {
        wrap(f(&self.t, &axes_arg(&self.t, axes, op)?, keepdims))
    }

    /// A binary operator: Tensor-Tensor via `tt`, Tensor-scalar via `ts`; NotImplemented otherwise.
    fn binop(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: &str,
        tt: impl FnOnce(&aneforge::Tensor, &aneforge::Tensor) -> aneforge::Result<aneforge::Tensor>,
        ts: impl FnOnce(&aneforge::Tensor, f32) -> aneforge::Result<aneforge::Tensor>,
    ) -> PyResult<Py<PyAny>> {
        match operand(other, op)? {
            Some(Operand::Tensor(o)) => obj(py, tt(&self.t, &o)),
            Some(Operand::Scalar(k)) => obj(py, ts(&self.t, k)),
            None => Ok(py.NotImplemented()),
        }
    }
}

#[pymethods]
impl PyTensor {
    /// numpy defers every operator to us (so `arr + x` calls `x.__radd__`).
    #[classattr]
    fn __array_ufunc__(py: Python<'_>) -> Py<PyAny> {
        py.None()
    }

    /// Static shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.shape())
    }
    /// Element type: "fp16", "uint8" or "bool".
    #[getter]
    fn dtype(&self) -> &'static str {
        self.t.dtype().mil()
    }
    /// Rank.
    #[getter]
    fn ndim(&self) -> usize {
        self.t.rank()
    }
    /// Name of the op that produced this tensor.
    #[getter]
    fn op(&self) -> &'static str {
        self.t.op().family().name()
    }

    fn __repr__(&self) -> String {
        format!(
            "Tensor({}, shape={}, {})",
            self.op(),
            fmt_shape(self.t.shape()),
            self.dtype()
        )
    }
    /// Identity hash (tensors compare and hash by identity).
    fn __hash__(slf: &Bound<'_, Self>) -> isize {
        (slf.as_ptr() as usize).rotate_right(4) as isize
    }
    /// Always raises TypeError: a lazy tensor has no truth value.
    fn __bool__(&self) -> PyResult<bool> {
        Err(PyTypeError::new_err("a Tensor is lazy and has no truth value; compare values after af.compile(...) runs them"))
    }
    /// Always raises TypeError: a lazy tensor has no values until compiled and run.
    #[pyo3(signature = (*_args, **_kwargs))]
    fn __array__(
        &self,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        Err(PyTypeError::new_err(format!(
            "{} is lazy and has no values; compile it with af.compile(...) and call the model",
            self.__repr__()
        )))
    }

    /// x * x.
    fn square(&self) -> R {
        wrap(self.t.square())
    }
    /// Alias of clip.
    fn clamp(&self, lo: f32, hi: f32) -> R {
        wrap(self.t.clip(lo, hi))
    }
    /// -x.
    fn neg(&self) -> R {
        wrap(self.t.neg())
    }
    /// Per-channel leaky ReLU: x where x >= 0 else alpha[c] * x; alpha has length C = shape[1], rank 3..=5.
    fn prelu(&self, alpha: &Bound<'_, PyAny>) -> R {
        wrap(self.t.prelu(Weight::extract(alpha, "prelu")?.host()?))
    }

    /// self ** other (broadcasting).
    fn pow(&self, other: &Bound<'_, PyAny>) -> R {
        self.either(
            other,
            "pow",
            aneforge::Tensor::pow,
            aneforge::Tensor::pow_scalar,
        )
    }
    /// Elementwise maximum (broadcasting).
    pub fn maximum(&self, other: &Bound<'_, PyAny>) -> R {
        self.either(
            other,
            "maximum",
            aneforge::Tensor::maximum,
            aneforge::Tensor::maximum_scalar,
        )
    }
    /// Elementwise minimum (broadcasting).
    pub fn minimum(&self, other: &Bound<'_, PyAny>) -> R {
        self.either(
            other,
            "minimum",
            aneforge::Tensor::minimum,
            aneforge::Tensor::minimum_scalar,
        )
    }

    /// self > other as a bool tensor (feed it to af.select).
    fn greater(&self, other: &Bound<'_, PyAny>) -> R {
        self.cmp(Compare::Greater, other, "greater")
    }
    /// self < other as a bool tensor.
    fn less(&self, other: &Bound<'_, PyAny>) -> R {
        self.cmp(Compare::Less, other, "less")
    }
    /// self == other as a bool tensor.
    fn equal(&self, other: &Bound<'_, PyAny>) -> R {
        self.cmp(Compare::Equal, other, "equal")
    }
    /// self != other as a bool tensor.
    fn not_equal(&self, other: &Bound<'_, PyAny>) -> R {
        self.cmp(Compare::NotEqual, other, "not_equal")
    }
    /// self <= other as a bool tensor.
    fn less_equal(&self, other: &Bound<'_, PyAny>) -> R {
        self.cmp(Compare::LessEqual, other, "less_equal")
    }
    /// self >= other as a bool tensor.
    fn greater_equal(&self, other: &Bound<'_, PyAny>) -> R {
        self.cmp(Compare::GreaterEqual, other, "greater_equal")
    }

    /// `<, <=, >, >=` build bool tensors; `==` / `!=` keep Python's identity semantics.
    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let (c, name) = match op {
            CompareOp::Lt => (Compare::Less, "less"),
            CompareOp::Le => (Compare::LessEqual, "less_equal"),
            CompareOp::Gt => (Compare::Greater, "greater"),
            CompareOp::Ge => (Compare::GreaterEqual, "greater_equal"),
            CompareOp::Eq | CompareOp::Ne => return Ok(py.NotImplemented()),
        };
        self.binop(
            py,
            other,
            name,
            |a, b| a.compare(c, b),
            |a, k| a.compare_scalar(c, k),
        )
    }

    /// self + other.
    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binop(py, other, "add", |a, b| a.add(b), |a, k| a.add_scalar(k))
    }
    /// other + self.
    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binop(py, other, "add", |a, b| b.add(a), |a, k| a.add_scalar(k))
    }
    /// self - other.
    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binop(py, other, "sub", |a, b| a.sub(b), |a, k| a.sub_scalar(k))
    }
    /// other - self.
    fn __rsub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binop(py, other, "sub", |a, b| b.sub(a), |a, k| a.rsub_scalar(k))
    }
    /// self * other.
    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binop(py, other, "mul", |a, b| a.mul(b), |a, k| a.mul_scalar(k))
    }
    /// other * self.
    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binop(py, other, "mul", |a, b| b.mul(a), |a, k| a.mul_scalar(k))
    }
    /// self / other.
    fn __truediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binop(
            py,
            other,
            "real_div",
            |a, b| a.div(b),
            |a, k| a.div_scalar(k),
        )
    }
    /// other / self.
    fn __rtruediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binop(
            py,
            other,
            "real_div",
            |a, b| b.div(a),
            |a, k| a.rdiv_scalar(k),
        )
    }
    /// self ** other.
    fn __pow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if modulo.is_some_and(|m| !m.is_none()) {
            return Ok(py.NotImplemented());
        }
        self.binop(py, other, "pow", |a, b| a.pow(b), |a, k| a.pow_scalar(k))
    }
    /// other ** self.
    fn __rpow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if modulo.is_some_and(|m| !m.is_none()) {
            return Ok(py.NotImplemented());
        }
        self.binop(
            py,
            other,
            "pow",
            |a, b| b.pow(a),
            |a, k| aneforge::scalar("pow", k)?.pow(a),
        )
    }
    /// -self.
    fn __neg__(&self) -> R {
        wrap(self.t.neg())
    }
    /// self.
    fn __pos__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// `x @ W` (numpy W [K, N] baked as a weight) or `x @ y` (Tensor matmul).
    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if let Ok(o) = other.cast::<PyTensor>() {
            return obj(py, self.t.matmul(&o.get().t));
        }
        if other.cast::<numpy::PyUntypedArray>().is_ok()
            || other.is_instance_of::<pyo3::types::PyList>()
        {
            let w = Weight::extract(other, "matmul")?;
            return obj(py, self.t.matmul_weight(w.host()?));
        }
        Ok(py.NotImplemented())
    }
    /// Always raises TypeError: write x @ W, not W @ x.
    fn __rmatmul__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        Err(PyTypeError::new_err(format!(
            "matmul: W @ x with a host {} W is not supported; write x @ W (W of shape [K, N] is baked as a weight), \
             x.linear(W) for a PyTorch-style [out, in] weight, or af.constant(W) @ x",
            type_name(other)
        )))
    }

    /// `self @ other`: a Tensor (NumPy matmul semantics) or a numpy weight [K, N].
    fn matmul(&self, other: &Bound<'_, PyAny>) -> R {
        match other.cast::<PyTensor>() {
            Ok(o) => wrap(self.t.matmul(&o.get().t)),
            Err(_) => wrap(
                self.t
                    .matmul_weight(Weight::extract(other, "matmul")?.host()?),
            ),
        }
    }
    /// PyTorch linear: self @ weight.T + bias, weight [out, in], bias [out].
    #[pyo3(signature = (weight, bias=None))]
    fn linear(&self, weight: &Bound<'_, PyAny>, bias: Option<&Bound<'_, PyAny>>) -> R {
        let w = Weight::extract(weight, "linear")?;
        let b = crate::convert::opt_weight(bias, "linear")?;
        wrap(self.t.linear(w.host()?, crate::convert::opt_host(&b)?))
    }

    /// Same elements in a new shape (one extent may be -1).
    #[pyo3(signature = (*shape))]
    fn reshape(&self, shape: &Bound<'_, PyTuple>) -> R {
        wrap(self.t.reshape(&varargs(shape, "reshape", "shape")?))
    }
    /// Permute axes (no arguments: reverse them).
    #[pyo3(signature = (*perm))]
    fn transpose(&self, perm: &Bound<'_, PyTuple>) -> R {
        let perm = if perm.is_empty() {
            (0..self.t.rank() as i64).rev().collect()
        } else {
            varargs(perm, "transpose", "perm")?
        };
        wrap(self.t.transpose(&perm))
    }
    /// Flip the order of elements along the given axes.
    fn reverse(&self, axes: &Bound<'_, PyAny>) -> R {
        wrap(self.t.reverse(&ints(axes, "reverse", "axes")?))
    }
    /// Repeat the tensor reps[i] times along axis i (one factor per axis).
    fn tile(&self, reps: &Bound<'_, PyAny>) -> R {
        wrap(self.t.tile(&sizes(reps, "tile", "reps")?))
    }
    /// Collapse to 2-D: (prod(shape[:axis]), prod(shape[axis:])).
    #[pyo3(signature = (axis=1))]
    fn flatten2d(&self, axis: i64) -> R {
        wrap(self.t.flatten2d(axis))
    }
    /// Running sum along the last axis (a matmul with a baked triangular ones matrix).
    #[pyo3(signature = (axis=-1))]
    fn cumsum(&self, axis: i64) -> R {
        wrap(self.t.cumsum(axis))
    }
    /// Drop the given extent-1 axes.
    fn squeeze(&self, axes: &Bound<'_, PyAny>) -> R {
        wrap(self.t.squeeze(&ints(axes, "squeeze", "axes")?))
    }
    /// Insert extent-1 axes at the given output positions.
    fn expand_dims(&self, axes: &Bound<'_, PyAny>) -> R {
        wrap(self.t.expand_dims(&ints(axes, "expand_dims", "axes")?))
    }
    /// The static window begin .. begin + size on every axis.
    fn slice_by_size(&self, begin: &Bound<'_, PyAny>, size: &Bound<'_, PyAny>) -> R {
        wrap(self.t.slice_by_size(
            &sizes(begin, "slice_by_size", "begin")?,
            &sizes(size, "slice_by_size", "size")?,
        ))
    }
    /// Equal parts (int) or parts of the given sizes (sequence) along axis.
    #[pyo3(signature = (num_or_sizes, axis=0))]
    fn split(&self, num_or_sizes: &Bound<'_, PyAny>, axis: i64) -> PyResult<Vec<PyTensor>> {
        split(&self.t, num_or_sizes, axis)
    }

    /// Mean over axes (None: every axis).
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn mean(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.reduce(axes, keepdims, "reduce_mean", aneforge::Tensor::mean)
    }
    /// Sum over axes (None: every axis).
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn sum(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.reduce(axes, keepdims, "reduce_sum", aneforge::Tensor::sum)
    }
    /// Maximum over axes (None: every axis).
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn amax(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.reduce(axes, keepdims, "reduce_max", aneforge::Tensor::amax)
    }
    /// Minimum over axes (None: every axis).
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn amin(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.reduce(axes, keepdims, "reduce_min", aneforge::Tensor::amin)
    }
    /// Sum of |x| over axes (None: every axis).
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn l1_norm(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.reduce(axes, keepdims, "reduce_l1_norm", aneforge::Tensor::l1_norm)
    }
    /// ln of the sum over axes (None: every axis).
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn log_sum(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.reduce(axes, keepdims, "reduce_log_sum", aneforge::Tensor::log_sum)
    }
    /// Sum of x * x over axes (None: every axis).
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn sum_square(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.reduce(
            axes,
            keepdims,
            "reduce_sum_square",
            aneforge::Tensor::sum_square,
        )
    }
    /// ln(sum(exp(x))) over axes (None: every axis), computed stably.
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn log_sum_exp(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.reduce(
            axes,
            keepdims,
            "reduce_log_sum_exp",
            aneforge::Tensor::log_sum_exp,
        )
    }
    /// Alias of log_sum_exp.
    #[pyo3(signature = (axes=None, keepdims=true))]
    fn reduce_log_sum_exp(&self, axes: Option<&Bound<'_, PyAny>>, keepdims: bool) -> R {
        self.log_sum_exp(axes, keepdims)
    }
    /// Softmax along axis.
    #[pyo3(signature = (axis=-1), text_signature = "($self, axis=-1)")]
    fn softmax(&self, axis: i64) -> R {
        wrap(self.t.softmax(axis))
    }

    /// Layer norm over the last axis, optional scale and shift.
    #[pyo3(signature = (gamma=None, beta=None, eps=1e-5))]
    fn layer_norm(
        &self,
        gamma: Option<&Bound<'_, PyAny>>,
        beta: Option<&Bound<'_, PyAny>>,
        eps: f32,
    ) -> R {
        let (g, b) = norm_params(gamma, beta, "layer_norm")?;
        wrap(self.t.layer_norm(g.as_ref(), b.as_ref(), eps))
    }
    /// x / sqrt(mean(x**2, last axis) + eps) * gamma.
    #[pyo3(signature = (gamma=None, eps=1e-5))]
    fn rms_norm(&self, gamma: Option<&Bound<'_, PyAny>>, eps: f32) -> R {
        let g = norm_param(gamma, "rms_norm")?;
        wrap(self.t.rms_norm(g.as_ref(), eps))
    }
    /// x / max(||x||_2 along axis, eps).
    #[pyo3(signature = (axis=-1, eps=1e-12), text_signature = "($self, axis=-1, eps=1e-12)")]
    fn l2_norm(&self, axis: i64, eps: f32) -> R {
        wrap(self.t.l2_norm(axis, eps))
    }
    /// Layer norm over channel axis 1 of x [N, C, 1, S], optional [C] scale and shift.
    #[pyo3(signature = (gamma=None, beta=None, eps=1e-5))]
    fn channel_layer_norm(
        &self,
        gamma: Option<&Bound<'_, PyAny>>,
        beta: Option<&Bound<'_, PyAny>>,
        eps: f32,
    ) -> R {
        let (g, b) = norm_params(gamma, beta, "channel_layer_norm")?;
        wrap(self.t.channel_layer_norm(g.as_ref(), b.as_ref(), eps))
    }
    /// Group norm of NCHW-style x over channel groups, per-channel scale and shift.
    #[pyo3(signature = (num_groups, gamma=None, beta=None, eps=1e-5))]
    fn group_norm(
        &self,
        num_groups: usize,
        gamma: Option<&Bound<'_, PyAny>>,
        beta: Option<&Bound<'_, PyAny>>,
        eps: f32,
    ) -> R {
        let (g, b) = norm_params(gamma, beta, "group_norm")?;
        wrap(self.t.group_norm(g.as_ref(), b.as_ref(), num_groups, eps))
    }

    /// Max pooling over H, W (stride defaults to kernel).
    #[pyo3(signature = (kernel, stride=None, pad=None), text_signature = "($self, kernel, stride=None, pad=0)")]
    fn max_pool(
        &self,
        kernel: &Bound<'_, PyAny>,
        stride: Option<&Bound<'_, PyAny>>,
        pad: Option<&Bound<'_, PyAny>>,
    ) -> R {
        let (k, s, p) = pool_args(kernel, stride, pad, "max_pool")?;
        wrap(self.t.max_pool(k, s, p))
    }
    /// Average pooling over H, W (stride defaults to kernel).
    #[pyo3(signature = (kernel, stride=None, pad=None, count_include_pad=true), text_signature = "($self, kernel, stride=None, pad=0, count_include_pad=True)")]
    fn avg_pool(
        &self,
        kernel: &Bound<'_, PyAny>,
        stride: Option<&Bound<'_, PyAny>>,
        pad: Option<&Bound<'_, PyAny>>,
        count_include_pad: bool,
    ) -> R {
        let (k, s, p) = pool_args(kernel, stride, pad, "avg_pool")?;
        wrap(self.t.avg_pool(k, s, p, count_include_pad))
    }
    /// Nearest-neighbour upsample of the last two axes by integer factors.
    #[pyo3(signature = (scale=None), text_signature = "($self, scale=2)")]
    fn upsample(&self, scale: Option<&Bound<'_, PyAny>>) -> R {
        let [h, w] = match scale {
            Some(s) if !s.is_none() => pair(s, "upsample", "scale")?,
            _ => [2, 2],
        };
        wrap(self.t.upsample(h, w))
    }
}

/// Kernel, stride (default = kernel) and padding of a pool.
fn pool_args(
    kernel: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    pad: Option<&Bound<'_, PyAny>>,
    op: &str,
) -> PyResult<([usize; 2], [usize; 2], [usize; 4])> {
    let k = pair(kernel, op, "kernel")?;
    let s = match stride {
        Some(s) if !s.is_none() => pair(s, op, "stride")?,
        _ => k,
    };
    let p = match pad {
        Some(p) if !p.is_none() => pad4(p, op)?,
        _ => [0; 4],
    };
    Ok((k, s, p))
}

/// `split(x, 3)` (equal parts) or `split(x, [2, 5])` (sizes).
pub fn split(
    t: &aneforge::Tensor,
    num_or_sizes: &Bound<'_, PyAny>,
    axis: i64,
) -> PyResult<Vec<PyTensor>> {
    let parts = if let Ok(n) = num_or_sizes.extract::<i64>() {
        let n = usize::try_from(n).map_err(|_| {
            PyValueError::new_err(format!("split: number of parts must be positive, got {n}"))
        })?;
        t.split(n, axis)
    } else {
        t.split_sizes(&sizes(num_or_sizes, "split", "sizes")?, axis)
    };
    Ok(parts.py()?.into_iter().map(PyTensor::from).collect())
}

/// Adds one method per unary table row (native and composite, see
/// `aneforge::graph::build::unary::unary_builders`) to the Tensor class:
/// `x.<name>(*params, **params)` with the row's parameters, defaults and doc.
pub fn install_unary_methods(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let cls = py.get_type::<PyTensor>();
    let partialmethod = py.import("functools")?.getattr("partialmethod")?;
    for row in aneforge::graph::build::unary::unary_builders() {
        let f = PyCFunction::new_closure(py, None, None, move |args, kwargs| {
            call_unary_row(&row, args, kwargs)
        })?;
        let method = partialmethod.call1((f,))?;
        method.setattr("__doc__", row.doc.trim())?;
        cls.setattr(row.name, method)?;
    }
    Ok(())
}

/// One call of a unary table method: `args` is (self, positional parameters…), `kwargs` the
/// keyword parameters; a missing, repeated, unknown or non-numeric parameter is a TypeError.
fn call_unary_row(row: &OpRow, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> R {
    let name = row.name;
    let x: PyRef<'_, PyTensor> = args.get_item(0)?.extract()?;
    let positional = args.len() - 1;
    if positional > row.params.len() {
        return Err(PyTypeError::new_err(format!(
            "{name}() takes {} parameter(s), got {positional}",
            row.params.len()
        )));
    }
    if let Some(kw) = kwargs {
        for key in kw.keys() {
            let key: String = key.extract()?;
            if !row.params.iter().any(|p| p.name == key) {
                return Err(PyTypeError::new_err(format!(
                    "{name}() got an unexpected keyword argument '{key}'"
                )));
            }
        }
    }
    let mut values = Vec::with_capacity(row.params.len());
    for (i, p) in row.params.iter().enumerate() {
        let by_keyword = kwargs.map(|k| k.get_item(p.name)).transpose()?.flatten();
        let given = match (i < positional, by_keyword) {
            (true, Some(_)) => {
                return Err(PyTypeError::new_err(format!(
                    "{name}() got multiple values for argument '{}'",
                    p.name
                )))
            }
            (true, None) => Some(args.get_item(i + 1)?),
            (false, kw) => kw,
        };
        values.push(match (given, p.default.first()) {
            (Some(v), _) => v.extract::<f32>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{name}(): {} must be a number, got {}",
                    p.name,
                    type_name(&v)
                ))
            })?,
            (None, Some(&d)) => d,
            (None, None) => {
                return Err(PyTypeError::new_err(format!(
                    "{name}() missing required argument '{}'",
                    p.name
                )))
            }
        });
    }
    wrap(x.t.unary_named(name, &values))
}
