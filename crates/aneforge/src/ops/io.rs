//! Ports and constants: program inputs (fp16 or uint8), baked fp16 weights and scalars,
//! and `cast` (uint8 image port to fp16); plus `input` / `image_input` / `constant` builders.

use std::sync::Arc;

use half::f16;

use super::{Buf, Family, Op, TensorType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape;

/// The MIL op name of [`Const`].
pub const CONST: &str = "const";
/// The MIL op name of [`Cast`].
pub const CAST: &str = "cast";

/// MIL ops this family prints as statements.
pub const MIL_OPS: &[&str] = &[CONST, CAST];

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

/// Element type conversion: uint8 → fp16, int32 → fp16 (rounded to nearest, beyond ±65504 →
/// ±inf) and fp16 → int32 (truncated toward zero, like MIL's cast; ±inf saturate, NaN → 0).
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
        CONST
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(CONST, inputs, 0)?;
        Ok(vec![TensorType::fp16(self.shape.clone())])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(CONST, &[])
    }
    fn eval(&self, _: &[&Buf], out: &mut [Buf]) -> Result<()> {
        use half::slice::HalfFloatSliceExt;
        self.values.convert_to_f32_slice(&mut out[0].data);
        Ok(())
    }
}

impl Family for Cast {
    fn name(&self) -> &'static str {
        CAST
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(CAST, inputs, 1)?;
        let from = inputs[0].dtype;
        let supported = matches!(
            (from, self.dtype),
            (
                DType::Uint8 | DType::Int32 | DType::Bool | DType::Fp16,
                DType::Fp16
            ) | (DType::Fp16, DType::Int32)
        );
        if !supported {
            return Err(Error::dtype(
                CAST,
                format!(
                    "cast from {from} to {} is not supported (supported: uint8/int32/bool -> fp16, fp16 -> int32)",
                    self.dtype
                ),
            ));
        }
        Ok(vec![TensorType {
            dtype: self.dtype,
            shape: inputs[0].shape.clone(),
        }])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(CAST, &["x"]).param("dtype", Literal::Str(self.dtype.mil().into()))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        if self.dtype == DType::Int32 {
            let trunc = |v: f32| (v as i32) as f32;
            out[0]
                .data
                .iter_mut()
                .zip(&ins[0].data)
                .for_each(|(o, &v)| *o = trunc(v));
        } else {
            out[0].data.copy_from_slice(&ins[0].data);
        }
        Ok(())
    }
}

/// Parse the io family's MIL statements (`cast`; consts and inputs are handled by the parser).
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    match op {
        CAST => Some((|| {
            Ok(Op::Cast(Cast {
                dtype: DType::parse(CAST, &args.string("dtype")?)?,
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
