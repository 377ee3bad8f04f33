//! Elementwise ONNX ops: activations, arithmetic with broadcasting, comparisons and logic,
//! Where, Clip, Cast.

use super::ops::{to_fp16, Args, OpFn, Value};
use super::ops_int as int;
use crate::error::Result;
use crate::graph::build::elementwise::select;
use crate::graph::Tensor;
use crate::onnx::tensor::Elem;
use crate::ops::elementwise::Compare;

/// The mapping of elementwise op `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Relu" | "Sigmoid" | "Tanh" | "Exp" | "Log" | "Sqrt" | "Abs" | "Sin" | "Cos" | "Tan"
        | "Erf" | "Softplus" | "Floor" | "Ceil" | "Round" | "Sign" | "Atan" | "Asin" | "Acos"
        | "Atanh" | "Sinh" | "Cosh" | "Softsign" | "Reciprocal" | "Neg" | "HardSwish" | "Mish" => {
            unary
        }
        "Elu" | "LeakyRelu" | "ThresholdedRelu" | "HardSigmoid" | "Selu" | "Celu" | "Gelu"
        | "Asinh" | "Acosh" | "Swish" | "Shrink" => activation,
        "Add" | "Sub" | "Mul" | "Div" | "Pow" => binary,
        "Max" | "Min" | "Sum" | "Mean" => variadic,
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => comparison,
        "Not" | "And" | "Or" | "Xor" => logic,
        "Mod" | "BitShift" | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitwiseNot" => {
            integer_only
        }
        "Where" => where_op,
        "Clip" => clip,
        "PRelu" => prelu,
        "Cast" | "CastLike" => cast,
        "IsNaN" | "IsInf" => special_values,
        _ => return None,
    })
}

/// One float output of the same element type as input 0.
fn same(a: &Args, t: Tensor) -> Result<Vec<Value>> {
    Ok(vec![Value::Graph {
        t,
        elem: a.req(0)?.elem(),
    }])
}

fn unary(a: &Args) -> Result<Vec<Value>> {
    if int::wants_int(a, 0) {
        return int::elementwise(a);
    }
    let x = a.ftensor(0)?;
    let name = match a.node.op() {
        "Relu" => "relu",
        "Sigmoid" => "sigmoid",
        "Tanh" => "tanh",
        "Exp" => "exp",
        "Sqrt" => "sqrt",
        "Abs" => "abs",
        "Sin" => "sin",
        "Cos" => "cos",
        "Tan" => "tan",
        "Erf" => "erf",
        "Softplus" => "softplus",
        "Floor" => "floor",
        "Ceil" => "ceil",
        "Round" => "round",
        "Sign" => "sign",
        "Atan" => "atan",
        "Asin" => "asin",
        "Acos" => "acos",
        "Atanh" => "atanh",
        "Sinh" => "sinh",
        "Cosh" => "cosh",
        "Softsign" => "softsign",
        "HardSwish" => "hardswish",
        "Mish" => "mish",
        "Log" => return same(a, x.unary_named("log", &[0.0])?),
        "Reciprocal" => return same(a, x.unary_named("inverse", &[0.0])?),
        "Neg" => return same(a, x.neg()?),
        other => return Err(a.node.bad(format!("{other} is not a unary op"))),
    };
    same(a, x.unary_named(name, &[])?)
}

fn activation(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let y = match n.op() {
        "Elu" => x.unary_named("elu", &[n.float("alpha", 1.0)?])?,
        "LeakyRelu" => x.unary_named("leaky_relu", &[n.float("alpha", 0.01)?])?,
        // ONNX keeps x only where x > alpha (MIL's thresholded_relu keeps x >= alpha).
        "ThresholdedRelu" => x.mul(&to_fp16(
            &x.compare_scalar(Compare::Greater, n.float("alpha", 1.0)?)?,
        )?)?,
        "HardSigmoid" => x.unary_named(
            "sigmoid_hard",
            &[n.float("alpha", 0.2)?, n.float("beta", 0.5)?],
        )?,
        "Selu" => {
            let alpha = n.float("alpha", 1.673_263_2)?;
            let gamma = n.float("gamma", 1.050_701)?;
            x.unary_named("elu", &[alpha])?.mul_scalar(gamma)?
        }
        "Celu" => {
            let alpha = n.float("alpha", 1.0)?;
            x.div_scalar(alpha)?
                .unary_named("elu", &[1.0])?
                .mul_scalar(alpha)?
        }
        "Gelu" => match n.string("approximate", "none")?.as_str() {
            "none" => x.unary_named("gelu", &[])?,
            "tanh" => {
                // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
                let inner = x
                    .add(&x.pow_scalar(3.0)?.mul_scalar(0.044715)?)?
                    .mul_scalar(0.797_884_6)?;
                x.mul(&inner.tanh()?.add_scalar(1.0)?)?.mul_scalar(0.5)?
            }
            other => return Err(n.bad(format!("approximate = '{other}' is not 'none' or 'tanh'"))),
        },
        "Shrink" => {
            // x + bias below −lambd, x − bias above lambd, else 0.
            let (bias, lambd) = (n.float("bias", 0.0)?, n.float("lambd", 0.5)?);
            let lo =
                to_fp16(&x.compare_scalar(Compare::Less, -lambd)?)?.mul(&x.add_scalar(bias)?)?;
            let hi =
                to_fp16(&x.compare_scalar(Compare::Greater, lambd)?)?.mul(&x.sub_scalar(bias)?)?;
            lo.add(&hi)?
        }
        "Swish" => x.mul(&x.mul_scalar(n.float("alpha", 1.0)?)?.sigmoid()?)?,
        "Asinh" => x
            .add(&x.square()?.add_scalar(1.0)?.sqrt()?)?
            .unary_named("log", &[0.0])?,
        "Acosh" => x
            .add(&x.square()?.sub_scalar(1.0)?.sqrt()?)?
            .unary_named("log", &[0.0])?,
        other => return Err(n.bad(format!("{other} is not an activation"))),
    };
    same(a, y)
}

fn apply_binary(op: &str, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    match op {
        "Add" | "Sum" | "Mean" => x.add(y),
        "Sub" => x.sub(y),
        "Mul" => x.mul(y),
        "Div" => x.div(y),
        "Pow" => x.pow(y),
        "Max" => x.maximum(y),
        _ => x.minimum(y),
    }
}

fn binary(a: &Args) -> Result<Vec<Value>> {
    if int::wants_int(a, 0) && !a.req(0)?.elem().is_float() {
        return int::elementwise(a);
    }
    let n = a.node;
    // A float base with a runtime integer exponent: the exponent joins as fp16.
    let mut b = a.ftensor_of_int(1)?;
    if n.opset < 7 && n.int("broadcast", 0)? != 0 {
        // Opset < 7 broadcasting: B's dims line up with A's starting at `axis` (default: the end).
        let ra = a.req(0)?.dims().len();
        let axis = n.int("axis", (ra - b.rank()) as i64)?;
        let axis = if axis < 0 { axis + ra as i64 } else { axis } as usize;
        let mut d: Vec<i64> = b.shape().iter().map(|&x| x as i64).collect();
        d.extend(std::iter::repeat_n(1, ra.saturating_sub(axis + b.rank())));
        if d.len() != b.rank() {
            b = b.reshape(&d)?;
        }
    }
    let y = apply_binary(n.op(), &a.ftensor(0)?, &b)?;
    same(a, y)
}

fn variadic(a: &Args) -> Result<Vec<Value>> {
    if int::wants_int(a, 0) {
        return int::elementwise(a);
    }
    let op = a.node.op();
    let mut acc = a.ftensor(0)?;
    for i in 1..a.vals.len() {
        acc = apply_binary(op, &acc, &a.ftensor(i)?)?;
    }
    if op == "Mean" && a.vals.len() > 1 {
        acc = acc.div_scalar(a.vals.len() as f32)?;
    }
    same(a, acc)
}

fn comparison(a: &Args) -> Result<Vec<Value>> {
    if int::wants_int(a, 0) {
        return int::elementwise(a);
    }
    let c = match a.node.op() {
        "Equal" => Compare::Equal,
        "Less" => Compare::Less,
        "Greater" => Compare::Greater,
        "LessOrEqual" => Compare::LessEqual,
        _ => Compare::GreaterEqual,
    };
    let t = a.ftensor(0)?.compare(c, &a.ftensor(1)?)?;
    Ok(vec![Value::Graph {
        t,
        elem: Elem::Bool,
    }])
}

fn logic(a: &Args) -> Result<Vec<Value>> {
    if int::wants_int(a, 0) {
        return int::elementwise(a);
    }
    let x = a.ftensor(0)?;
    let t = match a.node.op() {
        "Not" => x.compare_scalar(Compare::Equal, 0.0)?,
        "And" => x
            .mul(&a.ftensor(1)?)?
            .compare_scalar(Compare::NotEqual, 0.0)?,
        "Or" => x
            .maximum(&a.ftensor(1)?)?
            .compare_scalar(Compare::NotEqual, 0.0)?,
        _ => x.compare(Compare::NotEqual, &a.ftensor(1)?)?,
    };
    Ok(vec![Value::Graph {
        t,
        elem: Elem::Bool,
    }])
}

fn where_op(a: &Args) -> Result<Vec<Value>> {
    if int::wants_int(a, 1) {
        return int::elementwise(a);
    }
    let c = a.ftensor(0)?.compare_scalar(Compare::NotEqual, 0.0)?;
    let (x, y) = (a.tensor(1)?, a.tensor(2)?);
    let (x, y) = match (x.dtype() == y.dtype(), x.dtype()) {
        (true, _) => (x, y),
        _ => (a.ftensor(1)?, a.ftensor(2)?),
    };
    let elem = a.req(1)?.elem();
    Ok(vec![Value::Graph {
        t: select(&c, &x, &y)?,
        elem,
    }])
}

fn clip(a: &Args) -> Result<Vec<Value>> {
    if int::wants_int(a, 0) {
        return int::elementwise(a);
    }
    let n = a.node;
    let mut x = a.ftensor(0)?;
    if n.opset < 11 {
        let (lo, hi) = (n.float("min", f32::MIN)?, n.float("max", f32::MAX)?);
        if lo > -65504.0 {
            x = x.maximum_scalar(lo)?;
        }
        if hi < 65504.0 {
            x = x.minimum_scalar(hi)?;
        }
        return same(a, x);
    }
    // Runtime bounds: max then min (ONNX: min > max gives max everywhere, as here).
    if a.get(1).is_some() {
        x = x.maximum(&a.ftensor(1)?)?;
    }
    if a.get(2).is_some() {
        x = x.minimum(&a.ftensor(2)?)?;
    }
    same(a, x)
}

fn prelu(a: &Args) -> Result<Vec<Value>> {
    let x = a.ftensor(0)?;
    let mut slope = a.ftensor(1)?;
    // Before opset 7 a 1-D slope of length C is per channel (axis 1); from 7 on it broadcasts
    // NumPy-style from the right.
    let (xs, ss) = (x.shape(), slope.shape());
    if a.node.opset < 7 && ss.len() == 1 && xs.len() > 2 && ss[0] == xs[1] {
        let mut per_channel = vec![ss[0] as i64];
        per_channel.resize(xs.len() - 1, 1);
        slope = slope.reshape(&per_channel)?;
    }
    let y = x
        .maximum_scalar(0.0)?
        .add(&x.minimum_scalar(0.0)?.mul(&slope)?)?;
    same(a, y)
}

fn cast(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let to = if n.op() == "CastLike" {
        a.req(1)?.elem()
    } else {
        Elem::from_code(n.int("to", 0)? as i32, &n.what)?
    };
    if let Some(Value::Graph { t, .. }) = a.get(0).filter(|v| int::is_runtime_int(v)) {
        return Ok(vec![int::cast_int(a, t, to)?]);
    }
    let x = a.tensor(0)?;
    let t = match to {
        Elem::Bool => a.ftensor(0)?.compare_scalar(Compare::NotEqual, 0.0)?,
        e if e.is_float() => match x.dtype() {
            crate::dtype::DType::Bool => to_fp16(&x)?,
            _ => x,
        },
        e => return Ok(vec![int::cast_to_int(a, &x, e)?]),
    };
    Ok(vec![Value::Graph { t, elem: to }])
}

/// Mod, BitShift and the Bitwise ops: integer kernels on runtime ints (constant inputs fold);
/// float Mod maps onto fp16 arithmetic.
fn integer_only(a: &Args) -> Result<Vec<Value>> {
    if a.node.op() == "Mod" && a.req(0)?.elem().is_float() {
        return float_mod(a);
    }
    int::elementwise(a)
}

/// Float Mod: fmod = 1 is C fmod (x − trunc(x/y)·y), fmod = 0 is Python's (x − floor(x/y)·y).
fn float_mod(a: &Args) -> Result<Vec<Value>> {
    let (x, y) = (a.ftensor(0)?, a.ftensor(1)?);
    let q = x.div(&y)?;
    let whole = if a.node.int("fmod", 0)? == 0 {
        q.unary_named("floor", &[])?
    } else {
        // trunc(q) = sign(q)·floor(|q|)
        q.unary_named("sign", &[])?
            .mul(&q.unary_named("abs", &[])?.unary_named("floor", &[])?)?
    };
    same(a, x.sub(&whole.mul(&y)?)?)
}

fn special_values(a: &Args) -> Result<Vec<Value>> {
    Err(a
        .node
        .unsupported("NaN/inf inputs are outside the fp16 contract (graph inputs must be finite)"))
}
