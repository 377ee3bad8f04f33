//! Ports and constants: program inputs (fp16 or uint8), baked fp16 weights and scalars,
//! and `cast` (uint8 image port to fp16); plus `input` / `image_input` / `constant` builders.

use std::sync::Arc;

use half::f16;

use super::{Buf, Family, Op, TensorType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{check_name, Tensor};
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape;

/// MIL ops this family prints as statements.
pub const MIL_OPS: &[&str] = &["const", "cast"];

/// A program input port.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// Port name; `None` until the graph assigns `x0`, `x1`, ... in creation order.
    pub name: Option<String>,
    pub ty: TensorType,
}

/// A baked constant: fp16 values in C order (rank 0 = scalar, printed inline; otherwise in weights.bin).
#[derive(Clone, Debug, PartialEq)]
pub struct Const {
    pub shape: Vec<usize>,
    pub values: Arc<Vec<f16>>,
}

/// Element type conversion (only uint8 → fp16 is needed by the graph).
#[derive(Clone, Debug, PartialEq)]
pub struct Cast {
    pub dtype: DType,
}

impl Family for Input {
    fn name(&self) -> &'static str {
        "input"
    }
    fn infer(&self, _: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![self.ty.clone()])
    }
    fn mil(&self) -> MilOp {
        MilOp::new("input", &[])
    }
    fn eval(&self, _: &[&Buf], _: &mut [Buf]) -> Result<()> {
        Ok(()) // the executor writes port data straight into the buffer
    }
}

impl Family for Const {
    fn name(&self) -> &'static str {
        "const"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs("const", inputs, 0)?;
        Ok(vec![TensorType::fp16(self.shape.clone())])
    }
    fn mil(&self) -> MilOp {
        MilOp::new("const", &[])
    }
    fn eval(&self, _: &[&Buf], out: &mut [Buf]) -> Result<()> {
        use half::slice::HalfFloatSliceExt;
        self.values.convert_to_f32_slice(&mut out[0].data);
        Ok(())
    }
}

impl Family for Cast {
    fn name(&self) -> &'static str {
        "cast"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs("cast", inputs, 1)?;
        if self.dtype != DType::Fp16 {
            return Err(Error::dtype(
                "cast",
                format!("only casts to fp16 are supported, got {}", self.dtype),
            ));
        }
        Ok(vec![TensorType {
            dtype: self.dtype,
            shape: inputs[0].shape.clone(),
        }])
    }
    fn mil(&self) -> MilOp {
        MilOp::new("cast", &["x"]).param("dtype", Literal::Str(self.dtype.mil().into()))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        out[0].data.copy_from_slice(&ins[0].data);
        Ok(())
    }
}

/// Parse the io family's MIL statements (`cast`; consts and inputs are handled by the parser).
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    match op {
        "cast" => Some((|| {
            Ok(Op::Cast(Cast {
                dtype: DType::parse("cast", &args.string("dtype")?)?,
            }))
        })()),
        _ => None,
    }
}

/// Check an op got exactly `n` inputs.
pub fn expect_inputs(op: &str, inputs: &[TensorType], n: usize) -> Result<()> {
    if inputs.len() != n {
        return Err(Error::shape(
            op,
            format!("expects {n} inputs, got {}", inputs.len()),
        ));
    }
    Ok(())
}

/// Check every input is fp16 (compute ops take fp16 only).
pub fn expect_fp16(op: &str, inputs: &[TensorType]) -> Result<()> {
    if let Some((i, t)) = inputs
        .iter()
        .enumerate()
        .find(|(_, t)| t.dtype != DType::Fp16)
    {
        return Err(Error::dtype(
            op,
            format!("input {i} is {} {:?}; this op takes fp16", t.dtype, t.shape),
        ));
    }
    Ok(())
}

/// Host array data that can be baked as a constant (f16, f32 or f64, C order).
#[derive(Clone, Copy, Debug)]
pub enum HostData<'a> {
    F16(&'a [f16]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

/// A host array: shape plus data in C order.
#[derive(Clone, Copy, Debug)]
pub struct HostArray<'a> {
    pub shape: &'a [usize],
    pub data: HostData<'a>,
}

impl<'a> HostArray<'a> {
    /// An f32 array.
    pub fn f32(shape: &'a [usize], data: &'a [f32]) -> Self {
        HostArray {
            shape,
            data: HostData::F32(data),
        }
    }

    /// Convert to fp16, rejecting non-finite values and values beyond fp16's range; errors name `op`.
    pub fn to_fp16(&self, op: &str) -> Result<Vec<f16>> {
        let n = shape::numel(self.shape);
        let len = match self.data {
            HostData::F16(d) => d.len(),
            HostData::F32(d) => d.len(),
            HostData::F64(d) => d.len(),
        };
        if len != n {
            return Err(Error::shape(
                op,
                format!(
                    "weight data has {len} elements but shape {:?} needs {n}",
                    self.shape
                ),
            ));
        }
        let out: Vec<f16> = match self.data {
            HostData::F16(d) => d.to_vec(),
            HostData::F32(d) => {
                use half::slice::HalfFloatSliceExt;
                let mut out = vec![f16::ZERO; n];
                out.convert_from_f32_slice(d);
                out
            }
            HostData::F64(d) => d.iter().map(|&v| f16::from_f64(v)).collect(),
        };
        match out.iter().position(|h| !h.is_finite()) {
            None => Ok(out),
            Some(i) => {
                let v = match self.data {
                    HostData::F16(d) => d[i].to_f64(),
                    HostData::F32(d) => d[i] as f64,
                    HostData::F64(d) => d[i],
                };
                let what = if v.is_finite() {
                    "overflows fp16 (|x| > 65504)"
                } else {
                    "is not finite"
                };
                Err(Error::value(
                    op,
                    format!("weight of shape {:?}: element {i} = {v} {what}", self.shape),
                ))
            }
        }
    }
}

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
