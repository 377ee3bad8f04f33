//! Exact integer and bool elementwise kernels on the host (ONNX int8 … int64 and bool values
//! held as int32): arithmetic, division/modulo, bit operations, comparisons, logic and
//! `where`, with NumPy broadcasting. Results wrap to the declared element type (int8 Add wraps
//! at 127, uint8 at 255, as ONNX does); a result a 64-bit or unsigned-32 type holds but int32
//! cannot is a runtime error naming the op and the value, never a silent wrap.

use super::host::{HostKernel, HostRef, HostTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::TensorType;
use crate::shape;

/// Op name of the integer elementwise family.
pub const INT_ELEMENTWISE: &str = "int_elementwise";

/// The declared integer element type the results wrap to (`Bool` results are 0/1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IntKind {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    Bool,
}

impl IntKind {
    /// Bit width of the element type.
    pub fn bits(self) -> u32 {
        match self {
            IntKind::I8 | IntKind::U8 | IntKind::Bool => 8,
            IntKind::I16 | IntKind::U16 => 16,
            IntKind::I32 | IntKind::U32 => 32,
            IntKind::I64 | IntKind::U64 => 64,
        }
    }

    fn signed(self) -> bool {
        matches!(
            self,
            IntKind::I8 | IntKind::I16 | IntKind::I32 | IntKind::I64
        )
    }

    /// `v` wrapped to the element type (two's complement), as the ONNX kernels do.
    fn wrap(self, v: i64) -> i64 {
        let bits = self.bits();
        if bits == 64 {
            return v;
        }
        let m = v & ((1i64 << bits) - 1);
        if self.signed() && m >= 1i64 << (bits - 1) {
            m - (1i64 << bits)
        } else {
            m
        }
    }
}

/// One integer elementwise operation (arity 1, 2 or 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IntOp {
    Abs,
    Neg,
    Sign,
    /// Bitwise complement (`BitwiseNot`); logical not for `Bool`.
    Not,
    Add,
    Sub,
    Mul,
    /// Division truncated toward zero (C, ONNX); a zero divisor is an error.
    Div,
    /// Remainder with the divisor's sign (Python, ONNX Mod fmod=0).
    Mod,
    /// Remainder with the dividend's sign (C fmod, ONNX Mod fmod=1).
    Fmod,
    Pow,
    Min,
    Max,
    BitAnd,
    BitOr,
    BitXor,
    /// Shift left; shifts outside 0..bits give 0.
    ShiftLeft,
    /// Shift right (arithmetic for signed types); shifts outside 0..bits give 0 or -1.
    ShiftRight,
    Equal,
    Less,
    Greater,
    LessEqual,
    GreaterEqual,
    /// `where(cond, x, y)`.
    Where,
}

impl IntOp {
    fn arity(self) -> usize {
        match self {
            IntOp::Abs | IntOp::Neg | IntOp::Sign | IntOp::Not => 1,
            IntOp::Where => 3,
            _ => 2,
        }
    }

    fn is_compare(self) -> bool {
        matches!(
            self,
            IntOp::Equal | IntOp::Less | IntOp::Greater | IntOp::LessEqual | IntOp::GreaterEqual
        )
    }
}

/// `op` over int32 inputs broadcast NumPy-style; the result wraps to `kind` (comparisons give
/// 0/1). Every input and the output are int32.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntElementwise {
    pub op: IntOp,
    pub kind: IntKind,
}

impl IntElementwise {
    fn apply(&self, v: &[i64]) -> Result<i64> {
        let bits = self.kind.bits() as i64;
        let zero_div = || {
            Error::value(
                INT_ELEMENTWISE,
                format!("{:?}: integer division by zero ({} / 0)", self.op, v[0]),
            )
        };
        let r = match self.op {
            IntOp::Abs => v[0].wrapping_abs(),
            IntOp::Neg => v[0].wrapping_neg(),
            IntOp::Sign => v[0].signum(),
            IntOp::Not if self.kind == IntKind::Bool => (v[0] == 0) as i64,
            IntOp::Not => !v[0],
            IntOp::Add => v[0].wrapping_add(v[1]),
            IntOp::Sub => v[0].wrapping_sub(v[1]),
            IntOp::Mul => v[0].wrapping_mul(v[1]),
            IntOp::Div => v[0].checked_div(v[1]).ok_or_else(zero_div)?,
            IntOp::Mod => v[0]
                .checked_rem_euclid(v[1])
                .ok_or_else(zero_div)
                .map(|r| if r != 0 && v[1] < 0 { r + v[1] } else { r })?,
            IntOp::Fmod => v[0].checked_rem(v[1]).ok_or_else(zero_div)?,
            IntOp::Pow => {
                if v[1] < 0 {
                    return Err(Error::value(
                        INT_ELEMENTWISE,
                        format!("Pow: negative integer exponent {}", v[1]),
                    ));
                }
                v[0].wrapping_pow(v[1].min(u32::MAX as i64) as u32)
            }
            IntOp::Min => v[0].min(v[1]),
            IntOp::Max => v[0].max(v[1]),
            IntOp::BitAnd => v[0] & v[1],
            IntOp::BitOr => v[0] | v[1],
            IntOp::BitXor => v[0] ^ v[1],
            IntOp::ShiftLeft if (0..bits).contains(&v[1]) => v[0].wrapping_shl(v[1] as u32),
            IntOp::ShiftLeft => 0,
            IntOp::ShiftRight if (0..bits).contains(&v[1]) => v[0] >> v[1],
            IntOp::ShiftRight => -((v[0] < 0) as i64),
            IntOp::Equal => (v[0] == v[1]) as i64,
            IntOp::Less => (v[0] < v[1]) as i64,
            IntOp::Greater => (v[0] > v[1]) as i64,
            IntOp::LessEqual => (v[0] <= v[1]) as i64,
            IntOp::GreaterEqual => (v[0] >= v[1]) as i64,
            IntOp::Where => {
                if v[0] != 0 {
                    v[1]
                } else {
                    v[2]
                }
            }
        };
        if self.op.is_compare() {
            return Ok(r);
        }
        let r = self.kind.wrap(r);
        if i32::try_from(r).is_err() {
            return Err(Error::value(
                INT_ELEMENTWISE,
                format!(
                    "{:?} gives {r}, which {:?} holds but int32 cannot",
                    self.op, self.kind
                ),
            ));
        }
        Ok(r)
    }
}

/// Flat index into a source of shape `src` (right-aligned, broadcast) for output index `flat`
/// of shape `out`.
fn source_index(out: &[usize], src: &[usize], mut flat: usize) -> usize {
    let (mut idx, mut stride) = (0, 1);
    let skip = out.len() - src.len();
    for ax in (0..out.len()).rev() {
        let coord = flat % out[ax];
        flat /= out[ax];
        if ax >= skip {
            let d = src[ax - skip];
            if d != 1 {
                idx += coord * stride;
            }
            stride *= d;
        }
    }
    idx
}

impl HostKernel for IntElementwise {
    fn name(&self) -> &'static str {
        INT_ELEMENTWISE
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        if inputs.len() != self.op.arity() {
            return Err(Error::shape(
                INT_ELEMENTWISE,
                format!(
                    "{:?} takes {} inputs, got {}",
                    self.op,
                    self.op.arity(),
                    inputs.len()
                ),
            ));
        }
        let mut out = inputs[0].shape.clone();
        for (i, t) in inputs.iter().enumerate() {
            if t.dtype != DType::Int32 {
                return Err(Error::dtype(
                    INT_ELEMENTWISE,
                    format!(
                        "{:?}: input {i} is {} {:?}; expected int32",
                        self.op, t.dtype, t.shape
                    ),
                ));
            }
            out = shape::broadcast(INT_ELEMENTWISE, &out, &t.shape)?;
        }
        Ok(vec![TensorType {
            dtype: DType::Int32,
            shape: out,
        }])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let srcs: Vec<&[i32]> = inputs
            .iter()
            .map(|t| t.i32s(INT_ELEMENTWISE))
            .collect::<Result<_>>()?;
        let out_shape = outputs[0].shape.clone();
        let out = outputs[0].i32s_mut(INT_ELEMENTWISE)?;
        let mut v = [0i64; 3];
        for (k, o) in out.iter_mut().enumerate() {
            for (j, (t, s)) in inputs.iter().zip(&srcs).enumerate() {
                v[j] = s[source_index(&out_shape, t.shape, k)] as i64;
            }
            *o = self.apply(&v[..srcs.len()])? as i32;
        }
        Ok(())
    }
}

/// Op name of the int32 reshape.
pub const INT_RESHAPE: &str = "int_reshape";

/// An int32 value with a new shape of the same element count (the fused IR keeps int32 out of
/// its layout ops, so reshapes of runtime integers run here).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntReshape {
    pub shape: Vec<usize>,
}

impl HostKernel for IntReshape {
    fn name(&self) -> &'static str {
        INT_RESHAPE
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        super::host::expect_dtypes(INT_RESHAPE, inputs, &[DType::Int32])?;
        if shape::numel(&inputs[0].shape) != shape::numel(&self.shape) {
            return Err(Error::shape(
                INT_RESHAPE,
                format!("cannot reshape {:?} to {:?}", inputs[0].shape, self.shape),
            ));
        }
        Ok(vec![TensorType {
            dtype: DType::Int32,
            shape: self.shape.clone(),
        }])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0].i32s(INT_RESHAPE)?;
        outputs[0].i32s_mut(INT_RESHAPE)?.copy_from_slice(x);
        Ok(())
    }
}

/// Op name of the int32 index remap.
pub const INT_REMAP: &str = "int_remap";

/// Most elements an [`IntRemap`] table may hold (its table is stored in the plan file).
pub const INT_REMAP_MAX: usize = 1 << 22;

/// Any pure data movement of int32 values (transpose, concat, slice, expand, tile, gather with
/// constant indices): output element `i` of `shape` is element `source[i]` of the inputs'
/// flattened elements laid end to end. The fused IR keeps int32 out of its layout ops, so
/// layout ops on runtime ONNX integers (token ids, masks) run here, exactly.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntRemap {
    pub shape: Vec<usize>,
    pub source: Vec<u32>,
}

impl HostKernel for IntRemap {
    fn name(&self) -> &'static str {
        INT_REMAP
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        if inputs.is_empty() {
            return Err(Error::value(INT_REMAP, "needs at least one input"));
        }
        if let Some(t) = inputs.iter().find(|t| t.dtype != DType::Int32) {
            return Err(Error::dtype(
                INT_REMAP,
                format!("inputs must be int32, got {} {:?}", t.dtype, t.shape),
            ));
        }
        let total: usize = inputs.iter().map(|t| shape::numel(&t.shape)).sum();
        let n = shape::numel(&self.shape);
        if n != self.source.len() || n > INT_REMAP_MAX {
            return Err(Error::shape(
                INT_REMAP,
                format!(
                    "{} sources for shape {:?} (at most {INT_REMAP_MAX})",
                    self.source.len(),
                    self.shape
                ),
            ));
        }
        if let Some(&s) = self.source.iter().find(|&&s| s as usize >= total) {
            return Err(Error::value(
                INT_REMAP,
                format!("source index {s} is out of range for {total} input elements"),
            ));
        }
        Ok(vec![TensorType {
            dtype: DType::Int32,
            shape: self.shape.clone(),
        }])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let mut all = Vec::new();
        for t in inputs {
            all.extend_from_slice(t.i32s(INT_REMAP)?);
        }
        let out = outputs[0].i32s_mut(INT_REMAP)?;
        for (o, &s) in out.iter_mut().zip(&self.source) {
            *o = *all.get(s as usize).ok_or_else(|| {
                Error::value(
                    INT_REMAP,
                    format!(
                        "source index {s} is out of range for {} input elements",
                        all.len()
                    ),
                )
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: IntOp, kind: IntKind, ins: &[(&[usize], &[i32])]) -> Result<Vec<i32>> {
        let k = IntElementwise { op, kind };
        let tys: Vec<TensorType> = ins
            .iter()
            .map(|(s, _)| TensorType {
                dtype: DType::Int32,
                shape: s.to_vec(),
            })
            .collect();
        let out_ty = k.infer(&tys)?.remove(0);
        let hs: Vec<HostTensor> = ins
            .iter()
            .map(|(s, d)| HostTensor {
                shape: s.to_vec(),
                data: super::super::host::Elems::I32(d.to_vec()),
            })
            .collect();
        let mut outs = vec![HostTensor::zeros(&out_ty)?];
        k.run(
            &hs.iter().map(HostTensor::view).collect::<Vec<_>>(),
            &mut outs,
        )?;
        Ok(outs[0].i32s("test")?.to_vec())
    }

    #[test]
    fn int8_add_wraps_and_broadcasts() {
        // Closed form: 127 + 1 wraps to -128 in int8; [2,1] + [3] broadcasts to [2,3].
        let got = run(
            IntOp::Add,
            IntKind::I8,
            &[(&[2, 1], &[127, -128]), (&[3], &[1, 0, -1])],
        )
        .unwrap();
        assert_eq!(got, vec![-128, 127, 126, -127, -128, 127]);
    }

    #[test]
    fn division_and_remainders_follow_c_and_python() {
        let a: &[i32] = &[7, -7, 7, -7];
        let b: &[i32] = &[2, 2, -2, -2];
        let div = run(IntOp::Div, IntKind::I32, &[(&[4], a), (&[4], b)]).unwrap();
        assert_eq!(div, vec![3, -3, -3, 3]);
        let m = run(IntOp::Mod, IntKind::I32, &[(&[4], a), (&[4], b)]).unwrap();
        assert_eq!(m, vec![1, 1, -1, -1]);
        let f = run(IntOp::Fmod, IntKind::I32, &[(&[4], a), (&[4], b)]).unwrap();
        assert_eq!(f, vec![1, -1, 1, -1]);
        let e = run(IntOp::Div, IntKind::I32, &[(&[1], &[1]), (&[1], &[0])]).unwrap_err();
        assert!(e.to_string().contains("division by zero"), "{e}");
    }

    #[test]
    fn shifts_and_wide_overflow() {
        let l = run(
            IntOp::ShiftLeft,
            IntKind::U8,
            &[(&[3], &[16, 1, 1]), (&[3], &[4, 8, 7])],
        )
        .unwrap();
        assert_eq!(l, vec![0, 0, 128]);
        let r = run(
            IntOp::ShiftRight,
            IntKind::I8,
            &[(&[2], &[-16, -16]), (&[2], &[2, 9])],
        )
        .unwrap();
        assert_eq!(r, vec![-4, -1]);
        let e = run(
            IntOp::Mul,
            IntKind::I64,
            &[(&[1], &[65536]), (&[1], &[65536])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("4294967296"), "{e}");
    }

    #[test]
    fn reshape_keeps_values_and_checks_count() {
        let k = IntReshape { shape: vec![3, 2] };
        let ty = |s: Vec<usize>| TensorType {
            dtype: DType::Int32,
            shape: s,
        };
        assert_eq!(k.infer(&[ty(vec![6])]).unwrap()[0].shape, vec![3, 2]);
        assert!(k.infer(&[ty(vec![5])]).is_err());
    }

    /// A transpose-plus-concat table moves exact int32 values (beyond fp16's exact range);
    /// tables pointing past the inputs are refused.
    #[test]
    fn remap_moves_values_and_checks_sources() {
        let ty = |s: Vec<usize>| TensorType {
            dtype: DType::Int32,
            shape: s,
        };
        // [[a, b, c], [d, e, f]]^T then concat [g]: a d b e c f g.
        let k = IntRemap {
            shape: vec![7],
            source: vec![0, 3, 1, 4, 2, 5, 6],
        };
        assert_eq!(
            k.infer(&[ty(vec![2, 3]), ty(vec![1])]).unwrap()[0].shape,
            vec![7]
        );
        let ins = [
            HostTensor {
                shape: vec![2, 3],
                data: super::super::host::Elems::I32(vec![50256, 1, 2, 30000, 4, 5]),
            },
            HostTensor {
                shape: vec![1],
                data: super::super::host::Elems::I32(vec![-7]),
            },
        ];
        let mut out = [HostTensor {
            shape: vec![7],
            data: super::super::host::Elems::I32(vec![0; 7]),
        }];
        k.run(&[ins[0].view(), ins[1].view()], &mut out).unwrap();
        assert_eq!(out[0].i32s("t").unwrap(), &[50256, 30000, 1, 4, 2, 5, -7]);
        let bad = IntRemap {
            shape: vec![1],
            source: vec![7],
        };
        let msg = bad
            .infer(&[ty(vec![2, 3]), ty(vec![1])])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("source index 7 is out of range for 7 input elements"),
            "{msg}"
        );
    }

    #[test]
    fn where_and_compare() {
        let w = run(
            IntOp::Where,
            IntKind::I32,
            &[(&[2], &[1, 0]), (&[1], &[5]), (&[2], &[6, 7])],
        )
        .unwrap();
        assert_eq!(w, vec![5, 7]);
        let c = run(IntOp::Less, IntKind::I32, &[(&[2], &[1, 3]), (&[1], &[2])]).unwrap();
        assert_eq!(c, vec![1, 0]);
    }
}
