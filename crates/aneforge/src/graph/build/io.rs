//! Builders for the io ops.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{check_name, Tensor};
use crate::ops::io::{Cast, Const, HostArray, Input};
use crate::ops::{Op, TensorType};
use crate::shape;
use half::f16;
use std::sync::Arc;

/// An fp16 input port of `shape` (named `x0`, `x1`, ... in creation order unless `name` is given).
pub fn input(shape: &[usize]) -> Result<Tensor> {
    input_port(shape, DType::Fp16, None)
}

/// An input port with an explicit dtype (fp16 or uint8) and optional name.
pub fn input_port(shape: &[usize], dtype: DType, name: Option<&str>) -> Result<Tensor> {
    shape::check("input", shape)?;
    if dtype == DType::Bool {
        return Err(Error::dtype(
            "input",
            "bool is not a port dtype (use fp16 or uint8)",
        ));
    }
    if let Some(n) = name {
        check_name("input", n)?;
    }
    let ty = TensorType {
        dtype,
        shape: shape.to_vec(),
    };
    Tensor::apply1(
        Op::Input(Input {
            name: name.map(String::from),
            ty,
        }),
        vec![],
    )
}

/// A uint8 image port cast to fp16 in-graph, then `x * scale + bias`; scale and bias are scalars
/// (length 1) or per-channel (length C = shape[1], broadcast as [1, C, 1, 1]); identity steps are omitted.
pub fn image_input(
    shape: &[usize],
    scale: &[f32],
    bias: &[f32],
    name: Option<&str>,
) -> Result<Tensor> {
    let port = input_port(shape, DType::Uint8, name)?;
    let mut x = Tensor::apply1(Op::Cast(Cast { dtype: DType::Fp16 }), vec![port])?;
    let per_channel = |v: &[f32], what: &str| -> Result<Option<Tensor>> {
        match v.len() {
            1 => Ok(None),
            c if shape.len() >= 2 && c == shape[1] => {
                let mut s = vec![1; shape.len()];
                s[1] = c;
                Ok(Some(constant("image_input", HostArray::f32(&s, v))?))
            }
            c => Err(Error::shape(
                "image_input",
                format!(
                    "{what} has {c} values; expected 1 or C = {:?}",
                    shape.get(1)
                ),
            )),
        }
    };
    if let Some(s) = per_channel(scale, "scale")? {
        x = x.mul(&s)?;
    } else if scale[0] != 1.0 {
        x = x.mul_scalar(scale[0])?;
    }
    if let Some(b) = per_channel(bias, "bias")? {
        x = x.add(&b)?;
    } else if bias[0] != 0.0 {
        x = x.add_scalar(bias[0])?;
    }
    Ok(x)
}

/// Bake a host array as an fp16 constant (rank 1..=5; errors name `op`, the shape and any bad element).
pub fn constant(op: &str, arr: HostArray) -> Result<Tensor> {
    shape::check(op, arr.shape)?;
    let values = arr.to_fp16(op)?;
    Tensor::apply1(
        Op::Const(Const {
            shape: arr.shape.to_vec(),
            values: Arc::new(values),
        }),
        vec![],
    )
}

/// An fp16 scalar constant (rank 0); errors if `v` is not finite or overflows fp16.
pub fn scalar(op: &str, v: f32) -> Result<Tensor> {
    let h = f16::from_f32(v);
    if !v.is_finite() || !h.is_finite() {
        return Err(Error::value(
            op,
            format!("scalar {v} is not a finite fp16 value"),
        ));
    }
    Tensor::apply1(
        Op::Const(Const {
            shape: vec![],
            values: Arc::new(vec![h]),
        }),
        vec![],
    )
}
