//! Single-input elementwise ops: activations and math on fp16 (parameters fp16-rounded and
//! printed as fp16 consts), plus `logical_not` on bool.

use super::io::{expect_fp16, expect_inputs};
use super::kernel::{erf, for_chunks};
use super::{Buf, Family, Op, TensorType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &[
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "abs",
    "sin",
    "cos",
    "erf",
    "softplus",
    "relu6",
    "elu",
    "leaky_relu",
    "clip",
    "floor",
    "ceil",
    "round",
    "sign",
    "atan",
    "exp2",
    "softsign",
    "inverse",
    "threshold",
    "thresholded_relu",
    "scaled_tanh",
    "clamped_relu",
    "sigmoid_hard",
    "linear_activation",
    "logical_not",
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
    /// ln(x + epsilon), as MIL defines it.
    Log {
        eps: f32,
    },
    Sqrt,
    /// 1 / sqrt(x + epsilon).
    Rsqrt {
        eps: f32,
    },
    Abs,
    Sin,
    Cos,
    Erf,
    Softplus,
    Relu6,
    Elu {
        alpha: f32,
    },
    LeakyRelu {
        alpha: f32,
    },
    /// min(max(x, lo), hi).
    Clip {
        lo: f32,
        hi: f32,
    },
    Floor,
    Ceil,
    /// Round to the nearest integer, ties to even (NumPy `round`).
    Round,
    /// −1, 0 or 1.
    Sign,
    Atan,
    /// 2^x.
    Exp2,
    /// x / (1 + |x|).
    Softsign,
    /// 1 / (x + epsilon).
    Inverse {
        eps: f32,
    },
    /// max(x, alpha).
    Threshold {
        alpha: f32,
    },
    /// x where x ≥ alpha, else 0.
    ThresholdedRelu {
        alpha: f32,
    },
    /// alpha · tanh(beta · x).
    ScaledTanh {
        alpha: f32,
        beta: f32,
    },
    /// min(x ≥ 0 ? x : alpha·x, beta).
    ClampedRelu {
        alpha: f32,
        beta: f32,
    },
    /// min(max(alpha·x + beta, 0), 1).
    SigmoidHard {
        alpha: f32,
        beta: f32,
    },
    /// alpha·x + beta.
    LinearActivation {
        alpha: f32,
        beta: f32,
    },
    /// Boolean negation (bool in, bool out).
    LogicalNot,
}

/// Ops without parameters, looked up by MIL name when parsing.
const PLAIN: [Unary; 20] = [
    Unary::Relu,
    Unary::Silu,
    Unary::Sigmoid,
    Unary::Tanh,
    Unary::Exp,
    Unary::Sqrt,
    Unary::Abs,
    Unary::Sin,
    Unary::Cos,
    Unary::Erf,
    Unary::Softplus,
    Unary::Relu6,
    Unary::Floor,
    Unary::Ceil,
    Unary::Round,
    Unary::Sign,
    Unary::Atan,
    Unary::Exp2,
    Unary::Softsign,
    Unary::LogicalNot,
];

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
            Unary::Floor => x.floor(),
            Unary::Ceil => x.ceil(),
            Unary::Round => x.round_ties_even(),
            Unary::Sign => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    x
                }
            }
            Unary::Atan => x.atan(),
            Unary::Exp2 => x.exp2(),
            Unary::Softsign => x / (1.0 + x.abs()),
            Unary::Inverse { eps } => 1.0 / (x + eps),
            Unary::Threshold { alpha } => x.max(alpha),
            Unary::ThresholdedRelu { alpha } => {
                if x >= alpha {
                    x
                } else {
                    0.0
                }
            }
            Unary::ScaledTanh { alpha, beta } => alpha * (beta * x).tanh(),
            Unary::ClampedRelu { alpha, beta } => (if x >= 0.0 { x } else { alpha * x }).min(beta),
            Unary::SigmoidHard { alpha, beta } => (alpha * x + beta).clamp(0.0, 1.0),
            Unary::LinearActivation { alpha, beta } => alpha * x + beta,
            Unary::LogicalNot => f32::from(u8::from(x == 0.0)),
        }
    }

    /// The MIL op name.
    pub fn mil_name(self) -> &'static str {
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
            Unary::Floor => "floor",
            Unary::Ceil => "ceil",
            Unary::Round => "round",
            Unary::Sign => "sign",
            Unary::Atan => "atan",
            Unary::Exp2 => "exp2",
            Unary::Softsign => "softsign",
            Unary::Inverse { .. } => "inverse",
            Unary::Threshold { .. } => "threshold",
            Unary::ThresholdedRelu { .. } => "thresholded_relu",
            Unary::ScaledTanh { .. } => "scaled_tanh",
            Unary::ClampedRelu { .. } => "clamped_relu",
            Unary::SigmoidHard { .. } => "sigmoid_hard",
            Unary::LinearActivation { .. } => "linear_activation",
            Unary::LogicalNot => "logical_not",
        }
    }
}

impl Family for Unary {
    fn name(&self) -> &'static str {
        self.mil_name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(self.name(), inputs, 1)?;
        if *self != Unary::LogicalNot {
            expect_fp16(self.name(), inputs)?;
        } else if inputs[0].dtype != DType::Bool {
            return Err(Error::dtype(
                "logical_not",
                format!(
                    "input is {} {:?}; this op takes bool (a comparison result)",
                    inputs[0].dtype, inputs[0].shape
                ),
            ));
        }
        Ok(vec![inputs[0].clone()])
    }
    fn mil(&self) -> MilOp {
        let m = MilOp::new(self.mil_name(), &["x"]);
        let fp16 = Literal::Fp16;
        match *self {
            Unary::Gelu => m.param("mode", Literal::Str("EXACT".into())),
            Unary::Log { eps } | Unary::Rsqrt { eps } | Unary::Inverse { eps } => {
                m.param("epsilon", fp16(eps))
            }
            Unary::Elu { alpha }
            | Unary::LeakyRelu { alpha }
            | Unary::Threshold { alpha }
            | Unary::ThresholdedRelu { alpha } => m.param("alpha", fp16(alpha)),
            Unary::Clip {
                lo: alpha,
                hi: beta,
            }
            | Unary::ScaledTanh { alpha, beta }
            | Unary::ClampedRelu { alpha, beta }
            | Unary::SigmoidHard { alpha, beta }
            | Unary::LinearActivation { alpha, beta } => {
                m.param("alpha", fp16(alpha)).param("beta", fp16(beta))
            }
            _ => m,
        }
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, y) = (&ins[0].data, &mut out[0].data);
        let f = *self;
        for_chunks(y, 4096, x, 4096, |yc, xc| {
            yc.iter_mut().zip(xc).for_each(|(o, &v)| *o = f.apply(v))
        });
        Ok(())
    }
}

/// Parse unary MIL statements.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    if let Some(&u) = PLAIN.iter().find(|u| u.mil_name() == op) {
        return Some(Ok(Op::Unary(u)));
    }
    let mut ab = |mk: fn(f32, f32) -> Unary| -> Result<Unary> {
        Ok(mk(args.fp16("alpha")?, args.fp16("beta")?))
    };
    let parsed = match op {
        "clip" => ab(|lo, hi| Unary::Clip { lo, hi }),
        "scaled_tanh" => ab(|alpha, beta| Unary::ScaledTanh { alpha, beta }),
        "clamped_relu" => ab(|alpha, beta| Unary::ClampedRelu { alpha, beta }),
        "sigmoid_hard" => ab(|alpha, beta| Unary::SigmoidHard { alpha, beta }),
        "linear_activation" => ab(|alpha, beta| Unary::LinearActivation { alpha, beta }),
        "gelu" => args.string("mode").and_then(|m| match m.as_str() {
            "EXACT" => Ok(Unary::Gelu),
            _ => Err(args.error(format!("gelu mode '{m}' is not supported (only EXACT)"))),
        }),
        "log" => args.fp16("epsilon").map(|eps| Unary::Log { eps }),
        "rsqrt" => args.fp16("epsilon").map(|eps| Unary::Rsqrt { eps }),
        "inverse" => args.fp16("epsilon").map(|eps| Unary::Inverse { eps }),
        "elu" => args.fp16("alpha").map(|alpha| Unary::Elu { alpha }),
        "leaky_relu" => args.fp16("alpha").map(|alpha| Unary::LeakyRelu { alpha }),
        "threshold" => args.fp16("alpha").map(|alpha| Unary::Threshold { alpha }),
        "thresholded_relu" => args
            .fp16("alpha")
            .map(|alpha| Unary::ThresholdedRelu { alpha }),
        _ => return None,
    };
    Some(parsed.map(Op::Unary))
}

#[cfg(test)]
mod tests {
    use super::Unary;

    /// Each new kernel against a naive f64 formula on awkward points (ties, zero, thresholds).
    #[test]
    fn new_unary_kernels_match_f64_formulas() {
        let xs = [
            -2.5f32, -1.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.5, 2.5, 3.7,
        ];
        type Formula = fn(f64) -> f64;
        let cases: Vec<(Unary, Formula)> = vec![
            (Unary::Floor, f64::floor),
            (Unary::Ceil, f64::ceil),
            (Unary::Round, |x| {
                let r = x.round();
                if (x - x.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
                    r - x.signum()
                } else {
                    r
                }
            }),
            (Unary::Sign, |x| {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }),
            (Unary::Atan, f64::atan),
            (Unary::Exp2, f64::exp2),
            (Unary::Softsign, |x| x / (1.0 + x.abs())),
            (Unary::Inverse { eps: 0.25 }, |x| 1.0 / (x + 0.25)),
            (Unary::Threshold { alpha: 0.5 }, |x| x.max(0.5)),
            (Unary::ThresholdedRelu { alpha: 0.5 }, |x| {
                if x >= 0.5 {
                    x
                } else {
                    0.0
                }
            }),
            (
                Unary::ScaledTanh {
                    alpha: 0.5,
                    beta: 1.5,
                },
                |x| 0.5 * (1.5 * x).tanh(),
            ),
            (
                Unary::ClampedRelu {
                    alpha: 0.5,
                    beta: 1.5,
                },
                |x| (if x >= 0.0 { x } else { 0.5 * x }).min(1.5),
            ),
            (
                Unary::SigmoidHard {
                    alpha: 0.5,
                    beta: 1.5,
                },
                |x| (0.5 * x + 1.5).clamp(0.0, 1.0),
            ),
            (
                Unary::LinearActivation {
                    alpha: 0.5,
                    beta: 1.5,
                },
                |x| 0.5 * x + 1.5,
            ),
            (Unary::LogicalNot, |x| if x == 0.0 { 1.0 } else { 0.0 }),
        ];
        for (u, f) in cases {
            for &x in &xs {
                let (got, want) = (u.apply(x) as f64, f(x as f64));
                assert!(
                    (got - want).abs() <= 1e-6 * want.abs().max(1.0)
                        || (got.is_infinite() && want.is_infinite()),
                    "{u:?}({x}) = {got}, want {want}"
                );
            }
        }
    }

    /// Bad dtypes and non-finite parameters are errors, not panics.
    #[test]
    fn builder_errors_are_results() {
        let x = crate::input(&[2, 3]).unwrap();
        assert!(x.logical_not().is_err(), "logical_not takes bool");
        let b = x
            .compare_scalar(crate::ops::elementwise::Compare::Greater, 0.0)
            .unwrap();
        assert!(
            b.floor().is_err() && b.sign().is_err(),
            "fp16 ops reject bool"
        );
        assert_eq!(b.logical_not().unwrap().dtype(), crate::DType::Bool);
        assert!(x.inverse(f32::NAN).is_err());
        assert!(x.threshold(1e6).is_err(), "outside fp16 range");
        assert!(x.thresholded_relu(f32::INFINITY).is_err());
        assert!(x.scaled_tanh(1.0, f32::NAN).is_err());
        assert!(x.clamped_relu(f32::NAN, 6.0).is_err());
        assert!(x.sigmoid_hard(0.2, 1e9).is_err());
        assert!(x.linear_activation(-1e9, 0.0).is_err());
    }

    /// Every unary op prints alphabetical params and parses back to itself; bad params are errors.
    #[test]
    fn mil_round_trip() {
        use super::{from_mil, Op, PLAIN};
        use crate::mil::Literal;
        use crate::ops::layout::tests::{mil_args, round_trip};
        let with_params = [
            Unary::Gelu,
            Unary::Log { eps: 0.5 },
            Unary::Rsqrt { eps: 0.25 },
            Unary::Inverse { eps: 0.125 },
            Unary::Elu { alpha: 1.5 },
            Unary::LeakyRelu { alpha: 0.25 },
            Unary::Threshold { alpha: -0.5 },
            Unary::ThresholdedRelu { alpha: 2.0 },
            Unary::Clip { lo: -1.0, hi: 2.0 },
            Unary::ScaledTanh {
                alpha: 1.5,
                beta: 0.5,
            },
            Unary::ClampedRelu {
                alpha: 0.25,
                beta: 6.0,
            },
            Unary::SigmoidHard {
                alpha: 0.25,
                beta: 0.5,
            },
            Unary::LinearActivation {
                alpha: -2.0,
                beta: 0.75,
            },
        ];
        for u in PLAIN.into_iter().chain(with_params) {
            round_trip(&Op::Unary(u), from_mil);
        }
        assert!(from_mil("inverse", &mut mil_args(vec![])).unwrap().is_err());
        assert!(from_mil(
            "scaled_tanh",
            &mut mil_args(vec![("alpha", Literal::Fp16(1.0))])
        )
        .unwrap()
        .is_err());
        assert!(from_mil(
            "threshold",
            &mut mil_args(vec![("alpha", Literal::Int32(1))])
        )
        .unwrap()
        .is_err());
        assert!(from_mil("add", &mut mil_args(vec![])).is_none());
    }

    /// Ties go to the even neighbour.
    #[test]
    fn round_is_half_to_even() {
        let got: Vec<f32> = [-2.5f32, -1.5, -0.5, 0.5, 1.5, 2.5]
            .iter()
            .map(|&x| Unary::Round.apply(x))
            .collect();
        assert_eq!(got, [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0]);
    }
}
