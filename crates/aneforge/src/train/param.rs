//! Trainable parameters: a named fp16 graph input whose fp32 master weights live on the host,
//! shared by every clone of the [`Parameter`] (the optimizers and the Trainer update them in place).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::conv::Conv;
use crate::ops::Op;
use crate::DType;

static NEXT_NAME: AtomicUsize = AtomicUsize::new(0);

/// A trainable parameter: name, shape, fp32 master weights and the fp16 graph input they feed.
/// Clones share the master weights; they are freed with the last clone.
#[derive(Clone)]
pub struct Parameter {
    name: String,
    tensor: Tensor,
    master: Arc<Mutex<Vec<f32>>>,
}

impl std::fmt::Debug for Parameter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Parameter({:?}, {:?})", self.name, self.shape())
    }
}

impl Parameter {
    /// A parameter of `shape` initialised from `init` (row-major, `numel(shape)` finite values),
    /// named `name` or `param<k>`; errors name the shape and the first non-finite value.
    pub fn new(init: &[f32], shape: &[usize], name: Option<&str>) -> Result<Parameter> {
        let name = match name {
            Some(n) => n.to_string(),
            None => format!("param{}", NEXT_NAME.fetch_add(1, Ordering::Relaxed)),
        };
        let tensor = crate::input_port(shape, DType::Fp16, Some(&name))?;
        if init.len() != crate::shape::numel(shape) {
            return Err(Error::shape(
                "parameter",
                format!(
                    "'{name}': init has {} values for shape {shape:?}",
                    init.len()
                ),
            ));
        }
        check_finite("parameter", &name, init)?;
        Ok(Parameter {
            name,
            tensor,
            master: Arc::new(Mutex::new(init.to_vec())),
        })
    }

    /// The parameter's name (also its program input port's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parameter's shape.
    pub fn shape(&self) -> &[usize] {
        self.tensor.shape()
    }

    /// The fp16 graph input this parameter feeds; use it in graph arithmetic.
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// A copy of the fp32 master weights (row-major, `numel(shape)` values).
    pub fn value(&self) -> Vec<f32> {
        self.master().clone()
    }

    /// Overwrite the master weights with `v` (`numel(shape)` finite values, else a Shape / Value error).
    pub fn set_value(&self, v: &[f32]) -> Result<()> {
        let mut m = self.master();
        if v.len() != m.len() {
            return Err(Error::shape(
                "Parameter.set_value",
                format!(
                    "'{}' has {} values (shape {:?}), got {}",
                    self.name,
                    m.len(),
                    self.shape(),
                    v.len()
                ),
            ));
        }
        check_finite("Parameter.set_value", &self.name, v)?;
        m.copy_from_slice(v);
        Ok(())
    }

    /// The master weights, locked for an in-place update.
    pub fn master(&self) -> MutexGuard<'_, Vec<f32>> {
        // A panic while holding the lock cannot leave the weights half-typed: recover them.
        self.master.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A Value error naming `what` and the first non-finite entry of `v`.
pub(crate) fn check_finite(op: &str, what: &str, v: &[f32]) -> Result<()> {
    match v.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(Error::value(
            op,
            format!("'{what}' has a non-finite value {} at index {i}", v[i]),
        )),
        None => Ok(()),
    }
}

/// A trainable convolution weight from `w` [Cout, Cin, kH, kW] (row-major), stored flattened as
/// [Cin·kH·kW, Cout] (row ci·kH·kW + ky·kW + kx) for [`conv2d`]; errors name a wrong shape.
pub fn conv_param(w: &[f32], shape: &[usize], name: Option<&str>) -> Result<Parameter> {
    let &[cout, cin, kh, kw] = shape else {
        return Err(Error::shape(
            "conv_param",
            format!("weight must be [Cout, Cin, kH, kW], got shape {shape:?}"),
        ));
    };
    let rows = cin * kh * kw;
    if w.len() != rows * cout {
        return Err(Error::shape(
            "conv_param",
            format!("{} values for shape {shape:?}", w.len()),
        ));
    }
    let mut t = vec![0.0; w.len()];
    for o in 0..cout {
        for r in 0..rows {
            t[r * cout + o] = w[o * rows + r];
        }
    }
    Parameter::new(&t, &[rows, cout], name)
}

/// Convolution of `x` [N, Cin, H, W] with a [`conv_param`] weight [Cin·k·k, Cout] (square kernel
/// k inferred from the rows), `stride` and zero padding `pad` on every side: the core conv op
/// with the weight as a graph tensor (its gradient is the conv's vjp); returns [N, Cout, H', W'].
/// Errors name the shapes when the weight is not [Cin·k·k, Cout] or the kernel does not fit.
pub fn conv2d(x: &Tensor, weight: &Tensor, stride: usize, pad: usize) -> Result<Tensor> {
    let op = "conv2d";
    let (&[_, c, h, w], &[rows, cout]) = (x.shape(), weight.shape()) else {
        return Err(Error::shape(
            op,
            format!(
                "x must be [N, Cin, H, W] and weight [Cin*k*k, Cout], got {:?} and {:?}",
                x.shape(),
                weight.shape()
            ),
        ));
    };
    let k = ((rows as f64 / c as f64).sqrt()).round() as usize;
    if k * k * c != rows {
        return Err(Error::shape(
            op,
            format!(
                "weight {:?} is not [Cin*k*k, Cout] for Cin = {c} (x {:?})",
                weight.shape(),
                x.shape()
            ),
        ));
    }
    if stride < 1 || h + 2 * pad < k || w + 2 * pad < k {
        return Err(Error::shape(
            op,
            format!(
                "kernel {k}, stride {stride}, pad {pad} do not fit x {:?}",
                x.shape()
            ),
        ));
    }
    let kernel =
        weight
            .transpose(&[1, 0])?
            .reshape(&[cout as i64, c as i64, k as i64, k as i64])?;
    let conv = Conv {
        strides: [stride; 2],
        pad: [pad; 4],
        dilations: [1; 2],
        groups: 1,
    };
    Tensor::apply1(Op::Conv(conv), vec![x.clone(), kernel])
}
