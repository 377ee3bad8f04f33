//! Runtime integer and bool values: ONNX int8 … int64 / bool graph inputs arrive as int32
//! ports, and the elementwise ops on them (arithmetic, Mod, BitShift, Bitwise*, comparisons,
//! And/Or/Xor/Not, Where, Min/Max/Clip, Abs/Neg/Sign, Cast) run exactly on the host
//! (`ops/host_int.rs`), wrapping to the declared element type. Integer constants join them as
//! int32 when exact in fp16 (|x| <= 2048); larger ones are a clear NotImplemented.

use super::ops::{to_graph, Args, Value};
use super::tensor::Elem;
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::build::host::host;
use crate::graph::Tensor;
use crate::ops::host::HostOp;
use crate::ops::host_int::{IntElementwise, IntKind, IntOp};

/// The host kernel's element kind for ONNX element type `e` (None for floats).
pub fn int_kind(e: Elem) -> Option<IntKind> {
    Some(match e {
        Elem::I8 => IntKind::I8,
        Elem::U8 => IntKind::U8,
        Elem::I16 => IntKind::I16,
        Elem::U16 => IntKind::U16,
        Elem::I32 => IntKind::I32,
        Elem::U32 => IntKind::U32,
        Elem::I64 => IntKind::I64,
        Elem::U64 => IntKind::U64,
        Elem::Bool => IntKind::Bool,
        _ => return None,
    })
}

/// Whether `v` is a runtime int32 tensor (an int/bool input or a host kernel's result).
pub fn is_runtime_int(v: &Value) -> bool {
    matches!(v, Value::Graph { t, .. } if t.dtype() == DType::Int32)
}

/// Input `i` as an int32 tensor: runtime ints as they are, in-graph bools as 0/1, integer
/// constants when exact in fp16 (errors name the node and the value otherwise).
pub fn int_tensor(a: &Args, i: usize) -> Result<Tensor> {
    let v = a.req(i)?;
    if is_runtime_int(v) {
        if let Value::Graph { t, .. } = v {
            return Ok(t.clone());
        }
    }
    if v.elem().is_float() && !matches!(v, Value::Host(_)) {
        return Err(a.node.unsupported(&format!(
            "input {i} is a float tensor where the op takes runtime integers"
        )));
    }
    let mut t = to_graph(a.node, v)?;
    if t.rank() == 0 {
        t = t.reshape(&[1])?;
    }
    if t.dtype() == DType::Bool {
        t = t.cast(DType::Fp16)?;
    }
    t.cast(DType::Int32)
}

fn apply(op: IntOp, kind: IntKind, ins: Vec<Tensor>) -> Result<Tensor> {
    Ok(host(HostOp::IntElementwise(IntElementwise { op, kind }), ins)?.remove(0))
}

fn kind_of(a: &Args, i: usize) -> Result<IntKind> {
    let e = a.req(i)?.elem();
    int_kind(e).ok_or_else(|| {
        a.node
            .bad(format!("input {i} is {e:?}, not an integer type"))
    })
}

/// Whether node `a` must run on the int host kernels: one of its data inputs (from `first`)
/// is a runtime int32 tensor.
pub fn wants_int(a: &Args, first: usize) -> bool {
    a.vals.iter().skip(first).flatten().any(is_runtime_int)
}

/// The int-kernel mapping of elementwise node `a` (called when [`wants_int`] holds).
pub fn elementwise(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let op = n.op();
    let kind = if op == "Where" {
        kind_of(a, 1)?
    } else {
        kind_of(a, 0)?
    };
    let unary = |op: IntOp| -> Result<Tensor> { apply(op, kind, vec![int_tensor(a, 0)?]) };
    let binary = |op: IntOp| -> Result<Tensor> {
        apply(op, kind, vec![int_tensor(a, 0)?, int_tensor(a, 1)?])
    };
    let (t, elem) = match op {
        "Abs" => (unary(IntOp::Abs)?, a.req(0)?.elem()),
        "Neg" => (unary(IntOp::Neg)?, a.req(0)?.elem()),
        "Sign" => (unary(IntOp::Sign)?, a.req(0)?.elem()),
        "Not" | "BitwiseNot" => (unary(IntOp::Not)?, a.req(0)?.elem()),
        "Identity" => (int_tensor(a, 0)?, a.req(0)?.elem()),
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor"
        | "And" | "Or" | "Xor" => {
            let iop = match op {
                "Add" => IntOp::Add,
                "Sub" => IntOp::Sub,
                "Mul" => IntOp::Mul,
                "Div" => IntOp::Div,
                "Pow" => IntOp::Pow,
                "BitwiseAnd" | "And" => IntOp::BitAnd,
                "BitwiseOr" | "Or" => IntOp::BitOr,
                _ => IntOp::BitXor,
            };
            (binary(iop)?, a.req(0)?.elem())
        }
        "Mod" => {
            let iop = if n.int("fmod", 0)? != 0 {
                IntOp::Fmod
            } else {
                IntOp::Mod
            };
            (binary(iop)?, a.req(0)?.elem())
        }
        "BitShift" => {
            let iop = match n.string("direction", "")?.as_str() {
                "LEFT" => IntOp::ShiftLeft,
                "RIGHT" => IntOp::ShiftRight,
                other => {
                    return Err(n.bad(format!("direction = '{other}' is not LEFT or RIGHT")))
                }
            };
            (binary(iop)?, a.req(0)?.elem())
        }
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
            let iop = match op {
                "Equal" => IntOp::Equal,
                "Less" => IntOp::Less,
                "Greater" => IntOp::Greater,
                "LessOrEqual" => IntOp::LessEqual,
                _ => IntOp::GreaterEqual,
            };
            (binary(iop)?, Elem::Bool)
        }
        "Max" | "Min" | "Sum" => {
            let iop = match op {
                "Max" => IntOp::Max,
                "Min" => IntOp::Min,
                _ => IntOp::Add,
            };
            let mut acc = int_tensor(a, 0)?;
            for i in 1..a.vals.len() {
                acc = apply(iop, kind, vec![acc, int_tensor(a, i)?])?;
            }
            (acc, a.req(0)?.elem())
        }
        "Clip" => {
            let mut acc = int_tensor(a, 0)?;
            if a.get(1).is_some() {
                acc = apply(IntOp::Max, kind, vec![acc, int_tensor(a, 1)?])?;
            }
            if a.get(2).is_some() {
                acc = apply(IntOp::Min, kind, vec![acc, int_tensor(a, 2)?])?;
            }
            (acc, a.req(0)?.elem())
        }
        "Where" => {
            let ins = vec![int_tensor(a, 0)?, int_tensor(a, 1)?, int_tensor(a, 2)?];
            (apply(IntOp::Where, kind, ins)?, a.req(1)?.elem())
        }
        other => {
            return Err(n.unsupported(&format!(
                "{other} on runtime integer tensors (only the exact integer elementwise kernels take them)"
            )))
        }
    };
    Ok(vec![Value::Graph { t, elem }])
}

/// Cast of runtime int32 `x` (ONNX type `from`) to `to`: floats round to fp16 (the fp16
/// contract), integer/bool targets wrap exactly on the host.
pub fn cast_int(a: &Args, x: &Tensor, to: Elem) -> Result<Value> {
    let t = match int_kind(to) {
        None => x.cast(DType::Fp16)?,
        // not(not(x)): 0/1 for x != 0.
        Some(IntKind::Bool) => {
            let z = apply(IntOp::Not, IntKind::Bool, vec![x.clone()])?;
            apply(IntOp::Not, IntKind::Bool, vec![z])?
        }
        Some(kind) => apply(IntOp::Add, kind, vec![x.clone(), int_tensor_const(a, 0)?])?,
    };
    Ok(Value::Graph { t, elem: to })
}

/// The int32 constant `v` as a [1] tensor; beyond ±2048 (not exact in fp16) a NotImplemented
/// error naming the node.
pub fn int_tensor_const(a: &Args, v: i64) -> Result<Tensor> {
    if v.abs() > 2048 {
        return Err(a.node.unsupported(&format!(
            "integer constant {v} beside runtime integers (int32 constants are exact up to ±2048)"
        )));
    }
    crate::graph::build::io::scalar(&a.node.what, v as f32)?
        .reshape(&[1])?
        .cast(DType::Int32)
}

/// Cast of a float or in-graph bool tensor to integer type `to`: truncation toward zero (ONNX
/// Cast), then wrapping to the type on the host.
pub fn cast_to_int(a: &Args, x: &Tensor, to: Elem) -> Result<Value> {
    let kind = int_kind(to).ok_or_else(|| a.node.bad(format!("{to:?} is not an integer type")))?;
    let mut x = x.clone();
    if x.dtype() == DType::Bool {
        x = x.cast(DType::Fp16)?;
    }
    let t = x.cast(DType::Int32)?;
    let t = match kind {
        IntKind::I32 | IntKind::I64 => t,
        k => apply(IntOp::Add, k, vec![t, int_tensor_const(a, 0)?])?,
    };
    Ok(Value::Graph { t, elem: to })
}

/// A host copy of int32 `t` (an identity that gives an input port a producing op).
pub fn copy(t: &Tensor) -> Result<Tensor> {
    apply(IntOp::BitOr, IntKind::I32, vec![t.clone(), t.clone()])
}

/// Runtime int `v` where the fp16 0/1 mask `m` (broadcast) is 1, else 0 (Trilu on ints).
pub fn mask_int(v: &Value, m: &Tensor) -> Result<Tensor> {
    let Value::Graph { t, elem } = v else {
        return Err(crate::error::Error::value(
            "mask_int",
            "expects a runtime int tensor",
        ));
    };
    let kind = int_kind(*elem).unwrap_or(IntKind::I32);
    let mask = m.cast(DType::Int32)?;
    let zero = m.mul_scalar(0.0)?.cast(DType::Int32)?;
    apply(IntOp::Where, kind, vec![mask, t.clone(), zero])
}
