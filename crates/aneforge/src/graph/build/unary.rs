//! Builders for the unary ops.

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::elementwise::fp16_param;
use crate::ops::unary::Unary;
use crate::ops::Op;

/// Builders.
impl Tensor {
    fn unary(&self, u: Unary) -> Result<Tensor> {
        Tensor::apply1(Op::Unary(u), vec![self.clone()])
    }
    /// A two-parameter activation; both parameters fp16-rounded and finite.
    fn unary_ab(
        &self,
        op: &str,
        alpha: f32,
        beta: f32,
        mk: fn(f32, f32) -> Unary,
    ) -> Result<Tensor> {
        self.unary(mk(
            fp16_param(op, "alpha", alpha)?,
            fp16_param(op, "beta", beta)?,
        ))
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
        self.unary(Unary::Log {
            eps: fp16_param("log", "eps", eps)?,
        })
    }
    /// √x.
    pub fn sqrt(&self) -> Result<Tensor> {
        self.unary(Unary::Sqrt)
    }
    /// 1 / √(x + eps).
    pub fn rsqrt(&self, eps: f32) -> Result<Tensor> {
        self.unary(Unary::Rsqrt {
            eps: fp16_param("rsqrt", "eps", eps)?,
        })
    }
    /// |x|.
    pub fn abs(&self) -> Result<Tensor> {
        self.unary(Unary::Abs)
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
        self.unary(Unary::Elu {
            alpha: fp16_param("elu", "alpha", alpha)?,
        })
    }
    /// x if x ≥ 0 else alpha·x.
    pub fn leaky_relu(&self, alpha: f32) -> Result<Tensor> {
        self.unary(Unary::LeakyRelu {
            alpha: fp16_param("leaky_relu", "alpha", alpha)?,
        })
    }
    /// min(max(x, lo), hi); errors if lo > hi.
    pub fn clip(&self, lo: f32, hi: f32) -> Result<Tensor> {
        let (lo, hi) = (fp16_param("clip", "lo", lo)?, fp16_param("clip", "hi", hi)?);
        if lo > hi {
            return Err(Error::value(
                "clip",
                format!("lo = {lo} is greater than hi = {hi}"),
            ));
        }
        self.unary(Unary::Clip { lo, hi })
    }
    /// Largest integer ≤ x.
    pub fn floor(&self) -> Result<Tensor> {
        self.unary(Unary::Floor)
    }
    /// Smallest integer ≥ x.
    pub fn ceil(&self) -> Result<Tensor> {
        self.unary(Unary::Ceil)
    }
    /// Nearest integer, ties to even (NumPy `round`); MIL `round`.
    pub fn round(&self) -> Result<Tensor> {
        self.unary(Unary::Round)
    }
    /// −1 for x < 0, 0 for x = 0, 1 for x > 0.
    pub fn sign(&self) -> Result<Tensor> {
        self.unary(Unary::Sign)
    }
    /// arctan(x).
    pub fn atan(&self) -> Result<Tensor> {
        self.unary(Unary::Atan)
    }
    /// 2^x.
    pub fn exp2(&self) -> Result<Tensor> {
        self.unary(Unary::Exp2)
    }
    /// x / (1 + |x|).
    pub fn softsign(&self) -> Result<Tensor> {
        self.unary(Unary::Softsign)
    }
    /// 1 / (x + eps) (MIL `inverse`).
    pub fn inverse(&self, eps: f32) -> Result<Tensor> {
        self.unary(Unary::Inverse {
            eps: fp16_param("inverse", "eps", eps)?,
        })
    }
    /// max(x, alpha).
    pub fn threshold(&self, alpha: f32) -> Result<Tensor> {
        self.unary(Unary::Threshold {
            alpha: fp16_param("threshold", "alpha", alpha)?,
        })
    }
    /// x where x ≥ alpha, else 0.
    pub fn thresholded_relu(&self, alpha: f32) -> Result<Tensor> {
        self.unary(Unary::ThresholdedRelu {
            alpha: fp16_param("thresholded_relu", "alpha", alpha)?,
        })
    }
    /// alpha · tanh(beta · x).
    pub fn scaled_tanh(&self, alpha: f32, beta: f32) -> Result<Tensor> {
        self.unary_ab("scaled_tanh", alpha, beta, |alpha, beta| {
            Unary::ScaledTanh { alpha, beta }
        })
    }
    /// min(x ≥ 0 ? x : alpha·x, beta) (a leaky ReLU capped at beta).
    pub fn clamped_relu(&self, alpha: f32, beta: f32) -> Result<Tensor> {
        self.unary_ab("clamped_relu", alpha, beta, |alpha, beta| {
            Unary::ClampedRelu { alpha, beta }
        })
    }
    /// min(max(alpha·x + beta, 0), 1).
    pub fn sigmoid_hard(&self, alpha: f32, beta: f32) -> Result<Tensor> {
        self.unary_ab("sigmoid_hard", alpha, beta, |alpha, beta| {
            Unary::SigmoidHard { alpha, beta }
        })
    }
    /// alpha·x + beta in one op.
    pub fn linear_activation(&self, alpha: f32, beta: f32) -> Result<Tensor> {
        self.unary_ab("linear_activation", alpha, beta, |alpha, beta| {
            Unary::LinearActivation { alpha, beta }
        })
    }
    /// Boolean not of a bool tensor (a comparison result); errors on fp16 input.
    pub fn logical_not(&self) -> Result<Tensor> {
        self.unary(Unary::LogicalNot)
    }
}
