//! Gradient rules for the unary ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::ops::unary::Unary;
use crate::ops::Family;

/// Gradient rules.
impl Differentiable for Unary {
    /// Vector-Jacobian product: the upstream gradient times dy/dx (recomputed from x and y); kinks
    /// route by comparison on x, but relu's on its output (y > 0 exactly when x > 0, ±0 and NaN
    /// included, and x is then no longer read, so it can end inside its producer's epilogue).
    /// Piecewise-constant ops (floor, ceil, round, sign) and
    /// `logical_not` are a NotImplemented error naming the op.
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
        use crate::autograd::{mask, not_differentiable};
        use crate::ops::elementwise::Compare::{Greater, GreaterEqual, Less, LessEqual};
        use std::f32::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI, LN_2};
        let (x, y, g) = (&a.x[0], &a.y[0], a.g0());
        let d = match *self {
            Unary::Relu => return Ok(vec![Some(mask(&y.compare_scalar(Greater, 0.0)?, g)?)]),
            Unary::Gelu => {
                let cdf = x
                    .mul_scalar(FRAC_1_SQRT_2)?
                    .erf()?
                    .add_scalar(1.0)?
                    .mul_scalar(0.5)?;
                let pdf = x
                    .square()?
                    .mul_scalar(-0.5)?
                    .exp()?
                    .mul_scalar(FRAC_1_SQRT_2 * FRAC_2_SQRT_PI * 0.5)?;
                cdf.add(&x.mul(&pdf)?)?
            }
            Unary::Silu => {
                let s = x.sigmoid()?;
                s.mul(&x.mul(&s.rsub_scalar(1.0)?)?.add_scalar(1.0)?)?
            }
            Unary::Sigmoid => y.mul(&y.rsub_scalar(1.0)?)?,
            Unary::Tanh => y.square()?.rsub_scalar(1.0)?,
            Unary::Exp => y.clone(),
            Unary::Log { eps } => return Ok(vec![Some(g.div(&x.add_scalar(eps)?)?)]),
            Unary::Sqrt => return Ok(vec![Some(g.div(&y.mul_scalar(2.0)?)?)]),
            Unary::Rsqrt { .. } => y.square()?.mul(y)?.mul_scalar(-0.5)?,
            Unary::Abs => {
                return Ok(vec![Some(crate::select(
                    &x.compare_scalar(Less, 0.0)?,
                    &g.neg()?,
                    g,
                )?)])
            }
            Unary::Sin => x.cos()?,
            Unary::Cos => x.sin()?.neg()?,
            Unary::Erf => x.square()?.neg()?.exp()?.mul_scalar(FRAC_2_SQRT_PI)?,
            Unary::Softplus => x.sigmoid()?,
            Unary::Relu6 => {
                return Ok(vec![Some(mask(
                    &x.compare_scalar(Greater, 0.0)?,
                    &mask(&x.compare_scalar(Less, 6.0)?, g)?,
                )?)])
            }
            Unary::Elu { alpha } => {
                return Ok(vec![Some(crate::select(
                    &x.compare_scalar(Greater, 0.0)?,
                    g,
                    &g.mul(&y.add_scalar(alpha)?)?,
                )?)])
            }
            Unary::LeakyRelu { alpha } => {
                return Ok(vec![Some(crate::select(
                    &x.compare_scalar(GreaterEqual, 0.0)?,
                    g,
                    &g.mul_scalar(alpha)?,
                )?)])
            }
            Unary::Clip { lo, hi } => {
                return Ok(vec![Some(mask(
                    &x.compare_scalar(GreaterEqual, lo)?,
                    &mask(&x.compare_scalar(LessEqual, hi)?, g)?,
                )?)])
            }
            Unary::Atan => return Ok(vec![Some(g.div(&x.square()?.add_scalar(1.0)?)?)]),
            Unary::Tan => y.square()?.add_scalar(1.0)?,
            Unary::Sinh => x.cosh()?,
            Unary::Cosh => x.sinh()?,
            Unary::Asin => return Ok(vec![Some(g.div(&x.square()?.rsub_scalar(1.0)?.sqrt()?)?)]),
            Unary::Acos => {
                return Ok(vec![Some(
                    g.div(&x.square()?.rsub_scalar(1.0)?.sqrt()?)?.neg()?,
                )])
            }
            Unary::Atanh => return Ok(vec![Some(g.div(&x.square()?.rsub_scalar(1.0)?)?)]),
            Unary::Exp2 => y.mul_scalar(LN_2)?,
            Unary::Softsign => return Ok(vec![Some(g.div(&x.abs()?.add_scalar(1.0)?.square()?)?)]),
            Unary::Inverse { .. } => y.square()?.neg()?,
            Unary::Threshold { alpha } => {
                return Ok(vec![Some(mask(&x.compare_scalar(Greater, alpha)?, g)?)])
            }
            Unary::ThresholdedRelu { alpha } => {
                return Ok(vec![Some(mask(
                    &x.compare_scalar(GreaterEqual, alpha)?,
                    g,
                )?)])
            }
            Unary::ScaledTanh { alpha, beta } => x
                .mul_scalar(beta)?
                .tanh()?
                .square()?
                .rsub_scalar(1.0)?
                .mul_scalar(alpha * beta)?,
            Unary::ClampedRelu { alpha, beta } => {
                let inner = crate::select(
                    &x.compare_scalar(GreaterEqual, 0.0)?,
                    g,
                    &g.mul_scalar(alpha)?,
                )?;
                return Ok(vec![Some(mask(&y.compare_scalar(Less, beta)?, &inner)?)]);
            }
            Unary::SigmoidHard { alpha, beta } => {
                let z = x.mul_scalar(alpha)?.add_scalar(beta)?;
                return Ok(vec![Some(mask(
                    &z.compare_scalar(Greater, 0.0)?,
                    &mask(&z.compare_scalar(Less, 1.0)?, &g.mul_scalar(alpha)?)?,
                )?)]);
            }
            Unary::LinearActivation { alpha, .. } => return Ok(vec![Some(g.mul_scalar(alpha)?)]),
            Unary::Floor | Unary::Ceil | Unary::Round | Unary::Sign | Unary::LogicalNot => {
                return Err(not_differentiable(self.name()))
            }
        };
        Ok(vec![Some(g.mul(&d)?)])
    }
}
