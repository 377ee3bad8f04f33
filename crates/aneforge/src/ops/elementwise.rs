//! Elementwise ops: unary activations and math, binary arithmetic with NumPy broadcasting
//! (tensor or scalar operand), comparisons (bool results) and `select`.

use rayon::prelude::*;

use super::io::{expect_fp16, expect_inputs, scalar};
use super::kernel::{broadcast_strides, erf, for_chunks, for_each_broadcast, PAR_MIN_ELEMS};
use super::{Buf, Family, Op, TensorType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::mil::literal::round_f16;
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape;


/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &[
    "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "erf", "softplus", "relu6", "elu",
    "leaky_relu", "clip", "add", "sub", "mul", "real_div", "maximum", "minimum", "pow", "greater", "less", "equal", "not_equal",
    "less_equal", "greater_equal", "select",
];

/// Single-input elementwise ops. Parameters hold fp16-rounded values (as printed in MIL).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    Relu,
    /// Exact (erf) GELU.
    Gelu,
    Silu,
    Sigmoid,
    Tanh,
    Exp,
    /// ln(max(x, ... )) as MIL defines it: ln(x + epsilon).
    Log { eps: f32 },
    Sqrt,
    /// 1 / sqrt(x + epsilon).
    Rsqrt { eps: f32 },
    Abs,
    Sin,
    Cos,
    Erf,
    Softplus,
    Relu6,
    Elu { alpha: f32 },
    LeakyRelu { alpha: f32 },
    /// min(max(x, lo), hi).
    Clip { lo: f32, hi: f32 },
}

/// Two-input elementwise ops with NumPy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    RealDiv,
    Maximum,
    Minimum,
    Pow,
}

/// Comparisons: fp16 inputs, bool output, NumPy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    Greater,
    Less,
    Equal,
    NotEqual,
    LessEqual,
    GreaterEqual,
}

/// `select(cond, a, b)`: a where cond else b, all three broadcast together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Select;

impl Unary {
    fn apply(self, x: f32) -> f32 {
        match self {
            Unary::Relu => x.max(0.0),
            Unary::Gelu => 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2)),
            Unary::Silu => x / (1.0 + (-x).exp()),
            Unary::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Unary::Tanh => x.tanh(),
            Unary::Exp => x.exp(),
            Unary::Log { eps } => (x + eps).ln(),
            Unary::Sqrt => x.sqrt(),
            Unary::Rsqrt { eps } => 1.0 / (x + eps).sqrt(),
            Unary::Abs => x.abs(),
            Unary::Sin => x.sin(),
            Unary::Cos => x.cos(),
            Unary::Erf => erf(x),
            Unary::Softplus => {
                if x > 20.0 {
                    x
                } else {
                    x.exp().ln_1p()
                }
            }
            Unary::Relu6 => x.clamp(0.0, 6.0),
            Unary::Elu { alpha } => {
                if x > 0.0 {
                    x
                } else {
                    alpha * x.exp_m1()
                }
            }
            Unary::LeakyRelu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha * x
                }
            }
            Unary::Clip { lo, hi } => x.max(lo).min(hi),
        }
    }

    fn mil_name(self) -> &'static str {
        match self {
            Unary::Relu => "relu",
            Unary::Gelu => "gelu",
            Unary::Silu => "silu",
            Unary::Sigmoid => "sigmoid",
            Unary::Tanh => "tanh",
            Unary::Exp => "exp",
            Unary::Log { .. } => "log",
            Unary::Sqrt => "sqrt",
            Unary::Rsqrt { .. } => "rsqrt",
            Unary::Abs => "abs",
            Unary::Sin => "sin",
            Unary::Cos => "cos",
            Unary::Erf => "erf",
            Unary::Softplus => "softplus",
            Unary::Relu6 => "relu6",
            Unary::Elu { .. } => "elu",
            Unary::LeakyRelu { .. } => "leaky_relu",
            Unary::Clip { .. } => "clip",
        }
    }
}

impl Family for Unary {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 1)?;
        expect_fp16(self.name(), inputs)?;
        Ok(vec![inputs[0].clone()])
    }
    fn mil(&self) -> MilOp {
        let m = MilOp::new(self.mil_name(), &["x"]);
        match *self {
            Unary::Gelu => m.param("mode", Literal::Str("EXACT".into())),
            Unary::Log { eps } | Unary::Rsqrt { eps } => m.param("epsilon", Literal::Fp16(eps)),
            Unary::Elu { alpha } | Unary::LeakyRelu { alpha } => m.param("alpha", Literal::Fp16(alpha)),
            Unary::Clip { lo, hi } => m.param("alpha", Literal::Fp16(lo)).param("beta", Literal::Fp16(hi)),
            _ => m,
        }
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, y) = (&ins[0].data, &mut out[0].data);
        let f = *self;
        for_chunks(y, 4096, x, 4096, |yc, xc| yc.iter_mut().zip(xc).for_each(|(o, &v)| *o = f.apply(v)));
        Ok(())
    }
}

impl Binary {
    fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            Binary::Add => a + b,
            Binary::Sub => a - b,
            Binary::Mul => a * b,
            Binary::RealDiv => a / b,
            Binary::Maximum => a.max(b),
            Binary::Minimum => a.min(b),
            Binary::Pow => a.powf(b),
        }
    }
    fn mil_name(self) -> &'static str {
        match self {
            Binary::Add => "add",
            Binary::Sub => "sub",
            Binary::Mul => "mul",
            Binary::RealDiv => "real_div",
            Binary::Maximum => "maximum",
            Binary::Minimum => "minimum",
            Binary::Pow => "pow",
        }
    }
}

/// Evaluate a broadcasting two-operand kernel with fast paths for equal shapes and scalars.
fn eval_broadcast2(a: &Buf, b: &Buf, out: &mut Buf, f: impl Fn(f32, f32) -> f32 + Sync) {
    let (ad, bd, od) = (&a.data, &b.data, &mut out.data);
    if ad.len() == od.len() && bd.len() == od.len() {
        if od.len() >= PAR_MIN_ELEMS {
            od.par_iter_mut().zip(ad.par_iter().zip(bd.par_iter())).for_each(|(o, (&x, &y))| *o = f(x, y));
        } else {
            od.iter_mut().zip(ad.iter().zip(bd)).for_each(|(o, (&x, &y))| *o = f(x, y));
        }
    } else if bd.len() == 1 && ad.len() == od.len() {
        let y = bd[0];
        od.iter_mut().zip(ad).for_each(|(o, &x)| *o = f(x, y));
    } else if ad.len() == 1 && bd.len() == od.len() {
        let x = ad[0];
        od.iter_mut().zip(bd).for_each(|(o, &y)| *o = f(x, y));
    } else {
        let sa = broadcast_strides(&a.shape, &out.shape);
        let sb = broadcast_strides(&b.shape, &out.shape);
        for_each_broadcast(&out.shape, [&sa, &sb], |o, [i, j]| od[o] = f(ad[i], bd[j]));
    }
}

impl Family for Binary {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 2)?;
        expect_fp16(self.name(), inputs)?;
        Ok(vec![TensorType::fp16(shape::broadcast(self.name(), &inputs[0].shape, &inputs[1].shape)?)])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(self.mil_name(), &["x", "y"])
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let f = *self;
        eval_broadcast2(ins[0], ins[1], &mut out[0], move |a, b| f.apply(a, b));
        Ok(())
    }
}

impl Compare {
    fn apply(self, a: f32, b: f32) -> bool {
        match self {
            Compare::Greater => a > b,
            Compare::Less => a < b,
            Compare::Equal => a == b,
            Compare::NotEqual => a != b,
            Compare::LessEqual => a <= b,
            Compare::GreaterEqual => a >= b,
        }
    }
    fn mil_name(self) -> &'static str {
        match self {
            Compare::Greater => "greater",
            Compare::Less => "less",
            Compare::Equal => "equal",
            Compare::NotEqual => "not_equal",
            Compare::LessEqual => "less_equal",
            Compare::GreaterEqual => "greater_equal",
        }
    }
}

impl Family for Compare {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 2)?;
        expect_fp16(self.name(), inputs)?;
        Ok(vec![TensorType { dtype: DType::Bool, shape: shape::broadcast(self.name(), &inputs[0].shape, &inputs[1].shape)? }])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(self.mil_name(), &["x", "y"])
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let f = *self;
        eval_broadcast2(ins[0], ins[1], &mut out[0], move |a, b| f.apply(a, b) as u8 as f32);
        Ok(())
    }
}

impl Family for Select {
    fn name(&self) -> &'static str {
        "select"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs("select", inputs, 3)?;
        if inputs[0].dtype != DType::Bool {
            return Err(Error::dtype("select", format!("cond must be bool (a comparison result), got {} {:?}", inputs[0].dtype, inputs[0].shape)));
        }
        expect_fp16("select", &inputs[1..])?;
        let ab = shape::broadcast("select", &inputs[1].shape, &inputs[2].shape)?;
        Ok(vec![TensorType::fp16(shape::broadcast("select", &inputs[0].shape, &ab)?)])
    }
    fn mil(&self) -> MilOp {
        MilOp::new("select", &["cond", "a", "b"])
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let o = &mut out[0];
        let s: Vec<Vec<usize>> = ins.iter().map(|b| broadcast_strides(&b.shape, &o.shape)).collect();
        let (c, a, b) = (&ins[0].data, &ins[1].data, &ins[2].data);
        let od = &mut o.data;
        for_each_broadcast(&o.shape, [&s[0], &s[1], &s[2]], |k, [i, j, l]| od[k] = if c[i] != 0.0 { a[j] } else { b[l] });
        Ok(())
    }
}

/// Parse elementwise MIL statements.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    let unary = |u: Unary| Some(Ok(Op::Unary(u)));
    let binary = |b: Binary| Some(Ok(Op::Binary(b)));
    let compare = |c: Compare| Some(Ok(Op::Compare(c)));
    match op {
        "relu" => unary(Unary::Relu),
        "gelu" => Some(args.string("mode").and_then(|m| match m.as_str() {
            "EXACT" => Ok(Op::Unary(Unary::Gelu)),
            _ => Err(args.error(format!("gelu mode '{m}' is not supported (only EXACT)"))),
        })),
        "silu" => unary(Unary::Silu),
        "sigmoid" => unary(Unary::Sigmoid),
        "tanh" => unary(Unary::Tanh),
        "exp" => unary(Unary::Exp),
        "log" => Some(args.fp16("epsilon").map(|eps| Op::Unary(Unary::Log { eps }))),
        "sqrt" => unary(Unary::Sqrt),
        "rsqrt" => Some(args.fp16("epsilon").map(|eps| Op::Unary(Unary::Rsqrt { eps }))),
        "abs" => unary(Unary::Abs),
        "sin" => unary(Unary::Sin),
        "cos" => unary(Unary::Cos),
        "erf" => unary(Unary::Erf),
        "softplus" => unary(Unary::Softplus),
        "relu6" => unary(Unary::Relu6),
        "elu" => Some(args.fp16("alpha").map(|alpha| Op::Unary(Unary::Elu { alpha }))),
        "leaky_relu" => Some(args.fp16("alpha").map(|alpha| Op::Unary(Unary::LeakyRelu { alpha }))),
        "clip" => Some((|| Ok(Op::Unary(Unary::Clip { lo: args.fp16("alpha")?, hi: args.fp16("beta")? })))()),
        "add" => binary(Binary::Add),
        "sub" => binary(Binary::Sub),
        "mul" => binary(Binary::Mul),
        "real_div" => binary(Binary::RealDiv),
        "maximum" => binary(Binary::Maximum),
        "minimum" => binary(Binary::Minimum),
        "pow" => binary(Binary::Pow),
        "greater" => compare(Compare::Greater),
        "less" => compare(Compare::Less),
        "equal" => compare(Compare::Equal),
        "not_equal" => compare(Compare::NotEqual),
        "less_equal" => compare(Compare::LessEqual),
        "greater_equal" => compare(Compare::GreaterEqual),
        "select" => Some(Ok(Op::Select(Select))),
        _ => None,
    }
}

/// A finite fp16 parameter (rounded as MIL will print it); errors name `op`.
pub fn fp16_param(op: &str, what: &str, v: f32) -> Result<f32> {
    let r = round_f16(v);
    if !v.is_finite() || !r.is_finite() {
        return Err(Error::value(op, format!("{what} = {v} is not a finite fp16 value")));
    }
    Ok(r)
}

/// Builders.
impl Tensor {
    fn unary(&self, u: Unary) -> Result<Tensor> {
        Tensor::apply1(Op::Unary(u), vec![self.clone()])
    }
    fn binary(&self, b: Binary, other: &Tensor) -> Result<Tensor> {
        Tensor::apply1(Op::Binary(b), vec![self.clone(), other.clone()])
    }
    fn binary_scalar(&self, b: Binary, k: f32) -> Result<Tensor> {
        self.binary(b, &scalar(b.mil_name(), k)?)
    }

    /// max(x, 0).
    pub fn relu(&self) -> Result<Tensor> {
        self.unary(Unary::Relu)
    }
    /// Exact GELU, x·Φ(x).
    pub fn gelu(&self) -> Result<Tensor> {
        self.unary(Unary::Gelu)
    }
    /// x·sigmoid(x).
    pub fn silu(&self) -> Result<Tensor> {
        self.unary(Unary::Silu)
    }
    /// 1 / (1 + e^-x).
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.unary(Unary::Sigmoid)
    }
    /// Hyperbolic tangent.
    pub fn tanh(&self) -> Result<Tensor> {
        self.unary(Unary::Tanh)
    }
    /// e^x.
    pub fn exp(&self) -> Result<Tensor> {
        self.unary(Unary::Exp)
    }
    /// ln(x + eps).
    pub fn log(&self, eps: f32) -> Result<Tensor> {
        self.unary(Unary::Log { eps: fp16_param("log", "eps", eps)? })
    }
    /// √x.
    pub fn sqrt(&self) -> Result<Tensor> {
        self.unary(Unary::Sqrt)
    }
    /// 1 / √(x + eps).
    pub fn rsqrt(&self, eps: f32) -> Result<Tensor> {
        self.unary(Unary::Rsqrt { eps: fp16_param("rsqrt", "eps", eps)? })
    }
    /// |x|.
    pub fn abs(&self) -> Result<Tensor> {
        self.unary(Unary::Abs)
    }
    /// x², lowered as `mul(x, x)` (native `square` fused with a following nonlinearity miscompiles).
    pub fn square(&self) -> Result<Tensor> {
        self.binary(Binary::Mul, self)
    }
    /// sin(x).
    pub fn sin(&self) -> Result<Tensor> {
        self.unary(Unary::Sin)
    }
    /// cos(x).
    pub fn cos(&self) -> Result<Tensor> {
        self.unary(Unary::Cos)
    }
    /// Error function.
    pub fn erf(&self) -> Result<Tensor> {
        self.unary(Unary::Erf)
    }
    /// ln(1 + e^x).
    pub fn softplus(&self) -> Result<Tensor> {
        self.unary(Unary::Softplus)
    }
    /// min(max(x, 0), 6).
    pub fn relu6(&self) -> Result<Tensor> {
        self.unary(Unary::Relu6)
    }
    /// x if x > 0 else alpha·(e^x − 1).
    pub fn elu(&self, alpha: f32) -> Result<Tensor> {
        self.unary(Unary::Elu { alpha: fp16_param("elu", "alpha", alpha)? })
    }
    /// x if x ≥ 0 else alpha·x.
    pub fn leaky_relu(&self, alpha: f32) -> Result<Tensor> {
        self.unary(Unary::LeakyRelu { alpha: fp16_param("leaky_relu", "alpha", alpha)? })
    }
    /// min(max(x, lo), hi); errors if lo > hi.
    pub fn clip(&self, lo: f32, hi: f32) -> Result<Tensor> {
        let (lo, hi) = (fp16_param("clip", "lo", lo)?, fp16_param("clip", "hi", hi)?);
        if lo > hi {
            return Err(Error::value("clip", format!("lo = {lo} is greater than hi = {hi}")));
        }
        self.unary(Unary::Clip { lo, hi })
    }

    /// self + other (broadcasting).
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Add, other)
    }
    /// self − other (broadcasting).
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Sub, other)
    }
    /// self · other (broadcasting).
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Mul, other)
    }
    /// self / other (broadcasting; MIL `real_div`).
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::RealDiv, other)
    }
    /// Elementwise maximum (broadcasting).
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Maximum, other)
    }
    /// Elementwise minimum (broadcasting).
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Minimum, other)
    }
    /// self ^ other (broadcasting).
    pub fn pow(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Pow, other)
    }
    /// self + k.
    pub fn add_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Add, k)
    }
    /// self − k.
    pub fn sub_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Sub, k)
    }
    /// k − self.
    pub fn rsub_scalar(&self, k: f32) -> Result<Tensor> {
        scalar("sub", k)?.binary(Binary::Sub, self)
    }
    /// self · k.
    pub fn mul_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Mul, k)
    }
    /// self / k.
    pub fn div_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::RealDiv, k)
    }
    /// k / self.
    pub fn rdiv_scalar(&self, k: f32) -> Result<Tensor> {
        scalar("real_div", k)?.binary(Binary::RealDiv, self)
    }
    /// self ^ k.
    pub fn pow_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Pow, k)
    }
    /// max(self, k).
    pub fn maximum_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Maximum, k)
    }
    /// min(self, k).
    pub fn minimum_scalar(&self, k: f32) -> Result<Tensor> {
        self.binary_scalar(Binary::Minimum, k)
    }
    /// −self, as `mul(x, -1)`.
    pub fn neg(&self) -> Result<Tensor> {
        self.mul_scalar(-1.0)
    }

    /// Elementwise comparison producing a bool tensor (for `select`).
    pub fn compare(&self, c: Compare, other: &Tensor) -> Result<Tensor> {
        Tensor::apply1(Op::Compare(c), vec![self.clone(), other.clone()])
    }
    /// Elementwise comparison against a scalar.
    pub fn compare_scalar(&self, c: Compare, k: f32) -> Result<Tensor> {
        self.compare(c, &scalar(c.mil_name(), k)?)
    }
}

/// `cond ? a : b` elementwise with broadcasting; `cond` must be bool.
pub fn select(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Tensor::apply1(Op::Select(Select), vec![cond.clone(), a.clone(), b.clone()])
}
