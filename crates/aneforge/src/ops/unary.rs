//! Single-input elementwise ops: activations and math on fp16 (parameters fp16-rounded and
//! printed as fp16 consts), plus `logical_not` on bool. One table ([`unary_rows!`]) declares
//! every op; the enum, MIL names, MIL print and parse, parameter checks and the registry rows
//! ([`UNARY_OPS`]) are generated from it, and the builders and Python methods read it too.

use super::elementwise::fp16_param;
use super::io::{expect_fp16, expect_inputs};
use super::kernel::{erf, for_chunks};
use super::{Buf, Family, Op, TensorType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};

/// The unary op table. Each row: doc, method/MIL name, enum variant, then optional fp16
/// parameters `{ field: "mil_argument" = python_default }` (no default: required) and an optional
/// fixed `[mode = "..."]` string argument. Calls `$callback! { rows }` so that the ops, builder
/// and Python layers each expand the same rows.
#[macro_export]
#[doc(hidden)]
macro_rules! unary_rows {
    ($callback:ident) => {
        $callback! {
            /// max(x, 0).
            relu Relu;
            /// Exact GELU, x·Φ(x).
            gelu Gelu [mode = "EXACT"];
            /// x·sigmoid(x).
            silu Silu;
            /// 1 / (1 + e^-x).
            sigmoid Sigmoid;
            /// Hyperbolic tangent.
            tanh Tanh;
            /// e^x.
            exp Exp;
            /// ln(x + eps), as MIL defines it.
            log Log { eps: "epsilon" = 0.0 };
            /// √x.
            sqrt Sqrt;
            /// 1 / √(x + eps).
            rsqrt Rsqrt { eps: "epsilon" = 0.0 };
            /// |x|.
            abs Abs;
            /// sin(x).
            sin Sin;
            /// cos(x).
            cos Cos;
            /// Error function.
            erf Erf;
            /// ln(1 + e^x).
            softplus Softplus;
            /// min(max(x, 0), 6).
            relu6 Relu6;
            /// x if x > 0 else alpha·(e^x − 1).
            elu Elu { alpha: "alpha" = 1.0 };
            /// x if x ≥ 0 else alpha·x.
            leaky_relu LeakyRelu { alpha: "alpha" = 0.01 };
            /// min(max(x, lo), hi); errors if lo > hi.
            clip Clip { lo: "alpha", hi: "beta" };
            /// Largest integer ≤ x.
            floor Floor;
            /// Smallest integer ≥ x.
            ceil Ceil;
            /// Nearest integer, ties to even (NumPy `round`).
            round Round;
            /// −1 for x < 0, 0 for x = 0, 1 for x > 0.
            sign Sign;
            /// arctan(x).
            atan Atan;
            /// tan(x).
            tan Tan;
            /// Hyperbolic sine.
            sinh Sinh;
            /// Hyperbolic cosine.
            cosh Cosh;
            /// arcsin(x); NaN outside [−1, 1].
            asin Asin;
            /// arccos(x); NaN outside [−1, 1].
            acos Acos;
            /// artanh(x); NaN outside [−1, 1], ±inf at ±1.
            atanh Atanh;
            /// 2^x.
            exp2 Exp2;
            /// x / (1 + |x|).
            softsign Softsign;
            /// 1 / (x + eps) (MIL `inverse`).
            inverse Inverse { eps: "epsilon" = 0.0 };
            /// max(x, alpha).
            threshold Threshold { alpha: "alpha" = 0.0 };
            /// x where x ≥ alpha, else 0.
            thresholded_relu ThresholdedRelu { alpha: "alpha" = 1.0 };
            /// alpha · tanh(beta · x).
            scaled_tanh ScaledTanh { alpha: "alpha" = 1.0, beta: "beta" = 1.0 };
            /// min(x ≥ 0 ? x : alpha·x, beta) (a leaky ReLU capped at beta).
            clamped_relu ClampedRelu { alpha: "alpha" = 0.0, beta: "beta" = 6.0 };
            /// min(max(alpha·x + beta, 0), 1).
            sigmoid_hard SigmoidHard { alpha: "alpha" = 0.2, beta: "beta" = 0.5 };
            /// alpha·x + beta in one op.
            linear_activation LinearActivation { alpha: "alpha" = 1.0, beta: "beta" = 0.0 };
            /// Boolean not of a bool tensor (a comparison result); errors on fp16 input.
            logical_not LogicalNot;
        }
    };
}

/// One fp16 parameter of a table op: its builder (and Python keyword) name and its Python
/// default (empty: the argument is required).
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub default: &'static [f32],
}

/// One row of an op table as the registry exposes it: the method name (for native ops also the
/// MIL op name), its one-line doc and its parameters in order.
#[derive(Clone, Copy, Debug)]
pub struct OpRow {
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [Param],
}

/// Expands the rows of [`unary_rows!`] into the op layer.
macro_rules! define_unary {
    ($( $(#[doc = $doc:literal])* $name:ident $variant:ident
        $({ $($field:ident : $arg:literal $(= $default:literal)?),+ })?
        $([mode = $mode:literal])? ; )+) => {
        /// Single-input elementwise ops, one per table row. Parameters hold fp16-rounded values
        /// (as printed in MIL).
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Unary {
            $( $(#[doc = $doc])* $variant $({ $($field: f32),+ })?, )+
        }

        /// MIL ops this family prints.
        pub const MIL_OPS: &[&str] = &[$(stringify!($name)),+];

        /// The registry rows of the native unary ops, in table order.
        pub const UNARY_OPS: &[OpRow] = &[$(OpRow {
            name: stringify!($name),
            doc: concat!($($doc),*),
            params: &[$($(Param { name: stringify!($field), default: &[$($default)?] }),+)?],
        }),+];

        impl Unary {
            /// The MIL op name.
            pub fn mil_name(self) -> &'static str {
                match self {
                    $(Unary::$variant { .. } => stringify!($name),)+
                }
            }

            /// The op called `name` with `params` in table order (not yet validated); `None` if
            /// no row has that name or the parameter count differs.
            pub fn from_params(name: &str, params: &[f32]) -> Option<Unary> {
                let mut it = params.iter().copied();
                let u = match name {
                    $(stringify!($name) => Unary::$variant { $($($field: it.next()?),+)? },)+
                    _ => return None,
                };
                it.next().is_none().then_some(u)
            }

            /// The parameters in table order.
            pub fn params(self) -> Vec<f32> {
                match self {
                    $(Unary::$variant { $($($field),+)? } => vec![$($($field),+)?],)+
                }
            }

            /// Every parameter fp16-rounded and finite (errors name the op and the parameter),
            /// then the cross-parameter rules of [`Unary::check`].
            pub fn validated(self) -> Result<Unary> {
                let u = match self {
                    $(Unary::$variant { $($($field),+)? } => Unary::$variant {
                        $($($field: fp16_param(stringify!($name), stringify!($field), $field)?),+)?
                    },)+
                };
                u.check()?;
                Ok(u)
            }

            fn mil_op(self) -> MilOp {
                match self {
                    $(Unary::$variant { $($($field),+)? } => {
                        let m = MilOp::new(stringify!($name), &["x"]);
                        $($(let m = m.param($arg, Literal::Fp16($field));)+)?
                        $(let m = m.param("mode", Literal::Str($mode.into()));)?
                        m
                    })+
                }
            }
        }

        /// Parse unary MIL statements.
        pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
            let parsed = match op {
                $(stringify!($name) => {
                    #[allow(unused_variables)] // rows without parameters read no argument
                    fn parse(args: &mut MilArgs) -> Result<Unary> {
                        $(
                            let m = args.string("mode")?;
                            if m != $mode {
                                return Err(args.error(format!(
                                    "{} mode '{m}' is not supported (only {})",
                                    stringify!($name),
                                    $mode
                                )));
                            }
                        )?
                        Ok(Unary::$variant { $($($field: args.fp16($arg)?),+)? })
                    }
                    parse(args)
                })+
                _ => return None,
            };
            Some(parsed.map(Op::Unary))
        }
    };
}

unary_rows!(define_unary);

/// Reference kernels.
impl Unary {
    /// The op on one value (f32; the executor rounds to fp16).
    pub(crate) fn apply(self, x: f32) -> f32 {
        match self {
            Unary::Relu
            | Unary::Relu6
            | Unary::Abs
            | Unary::Clip { .. }
            | Unary::LeakyRelu { .. }
            | Unary::ClampedRelu { .. }
            | Unary::SigmoidHard { .. }
            | Unary::LinearActivation { .. } => self.piecewise(x),
            Unary::Gelu => 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2)),
            Unary::Silu => x / (1.0 + (-x).exp()),
            Unary::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Unary::Tanh => x.tanh(),
            Unary::Exp => x.exp(),
            Unary::Log { eps } => (x + eps).ln(),
            Unary::Sqrt => x.sqrt(),
            Unary::Rsqrt { eps } => 1.0 / (x + eps).sqrt(),
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
            Unary::Elu { alpha } => {
                if x > 0.0 {
                    x
                } else {
                    alpha * x.exp_m1()
                }
            }
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
            Unary::Tan => x.tan(),
            Unary::Sinh => x.sinh(),
            Unary::Cosh => x.cosh(),
            Unary::Asin => x.asin(),
            Unary::Acos => x.acos(),
            Unary::Atanh => x.atanh(),
            Unary::Exp2 => x.exp2(),
            Unary::Softsign => x / (1.0 + x.abs()),
            // x + 0.0 would turn −0 into +0; 1/−0 is −inf under IEEE.
            Unary::Inverse { eps } => 1.0 / if eps == 0.0 { x } else { x + eps },
            Unary::Threshold { alpha } => x.max(alpha),
            Unary::ThresholdedRelu { alpha } => {
                if x >= alpha {
                    x
                } else {
                    0.0
                }
            }
            Unary::ScaledTanh { alpha, beta } => alpha * (beta * x).tanh(),
            Unary::LogicalNot => f32::from(u8::from(x == 0.0)),
        }
    }
}

impl Unary {
    /// The cheap piecewise ops on one value (what [`Unary::apply`] computes for them); small
    /// and always inlined, so a loop over one of them vectorises. Other ops: `x`.
    #[inline(always)]
    fn piecewise(self, x: f32) -> f32 {
        match self {
            // Not `x.max(0.0)`: the sign of its zero for x = −0 is unspecified (debug builds gave
            // −0, release +0); NaN and ±0 give +0 here in every build (`vmaxps(x, 0)`).
            Unary::Relu => {
                if x > 0.0 {
                    x
                } else {
                    0.0
                }
            }
            Unary::Relu6 => x.clamp(0.0, 6.0),
            Unary::Abs => x.abs(),
            Unary::Clip { lo, hi } => x.max(lo).min(hi),
            Unary::LeakyRelu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha * x
                }
            }
            Unary::ClampedRelu { alpha, beta } => (if x >= 0.0 { x } else { alpha * x }).min(beta),
            Unary::SigmoidHard { alpha, beta } => (alpha * x + beta).clamp(0.0, 1.0),
            Unary::LinearActivation { alpha, beta } => alpha * x + beta,
            _ => x,
        }
    }

    /// y[i] = self.apply(x[i]) (same bits; `y.len() == x.len()`); the piecewise ops and sqrt
    /// get a loop of their own, with the op fixed, so it vectorises.
    pub(crate) fn map(self, x: &[f32], y: &mut [f32]) {
        #[inline(always)]
        fn each(x: &[f32], y: &mut [f32], f: impl Fn(f32) -> f32) {
            y.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v));
        }
        match self {
            Unary::Relu => each(x, y, |v| Unary::Relu.piecewise(v)),
            Unary::Relu6 => each(x, y, |v| Unary::Relu6.piecewise(v)),
            Unary::Abs => each(x, y, |v| Unary::Abs.piecewise(v)),
            Unary::Sqrt => each(x, y, f32::sqrt),
            Unary::SigmoidHard { alpha, beta } => {
                each(x, y, |v| Unary::SigmoidHard { alpha, beta }.piecewise(v))
            }
            Unary::Clip { lo, hi } => each(x, y, |v| Unary::Clip { lo, hi }.piecewise(v)),
            Unary::LeakyRelu { alpha } => each(x, y, |v| Unary::LeakyRelu { alpha }.piecewise(v)),
            Unary::ClampedRelu { alpha, beta } => {
                each(x, y, |v| Unary::ClampedRelu { alpha, beta }.piecewise(v))
            }
            Unary::LinearActivation { alpha, beta } => each(x, y, |v| {
                Unary::LinearActivation { alpha, beta }.piecewise(v)
            }),
            u => each(x, y, |v| u.apply(v)),
        }
    }

    /// Cross-parameter rules beyond each parameter being a finite fp16: `clip` needs lo ≤ hi.
    fn check(self) -> Result<()> {
        match self {
            Unary::Clip { lo, hi } if lo > hi => Err(Error::value(
                "clip",
                format!("lo = {lo} is greater than hi = {hi}"),
            )),
            _ => Ok(()),
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
        self.mil_op()
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let (x, y) = (&ins[0].data, &mut out[0].data);
        let f = *self;
        for_chunks(y, 4096, x, 4096, |yc, xc| f.map(xc, yc));
        Ok(())
    }
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
            (Unary::Tan, f64::tan),
            (Unary::Sinh, f64::sinh),
            (Unary::Cosh, f64::cosh),
            (Unary::Asin, f64::asin),
            (Unary::Acos, f64::acos),
            (Unary::Atanh, f64::atanh),
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
                        || (got.is_infinite() && want.is_infinite())
                        || (got.is_nan() && want.is_nan()),
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
        use super::{from_mil, Op, UNARY_OPS};
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
        let plain = UNARY_OPS
            .iter()
            .filter_map(|row| Unary::from_params(row.name, &[]));
        for u in plain.chain(with_params) {
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

    /// Table rows, names and parameter lists agree: every row rebuilds from its parameters.
    #[test]
    fn rows_rebuild_from_their_parameters() {
        use super::UNARY_OPS;
        for row in UNARY_OPS {
            let params: Vec<f32> = (0..row.params.len()).map(|i| i as f32 + 0.5).collect();
            let u = Unary::from_params(row.name, &params).unwrap();
            assert_eq!((u.mil_name(), u.params()), (row.name, params));
            assert!(Unary::from_params(row.name, &[0.5; 3]).is_none());
        }
        assert!(Unary::from_params("hardswish", &[]).is_none());
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
