//! Builders for the norm ops.

use crate::error::{Error, Result};
use crate::graph::build::io::constant;
use crate::graph::Tensor;
use crate::ops::elementwise::fp16_param;
use crate::ops::io::{Const, HostArray};
use crate::ops::norm::{BatchNorm, InstanceNorm};
use crate::ops::Op;
use crate::shape::MAX_EXTENT;

/// The smallest positive fp16 value (2⁻²⁴): the floor of a scale, so an all-zero slice divides 0 by it, not by 0.
const FP16_TINY: f32 = 5.960_464_5e-8;

/// (x − mean)/√(var + eps)·gamma + beta over axis 1 of x (rank 2..=5; [N, C] runs as [N, C, 1]); statistics are [C], absent gamma/beta = ones/zeros.
pub fn batch_norm(
    x: &Tensor,
    mean: HostArray,
    var: HostArray,
    gamma: Option<HostArray>,
    beta: Option<HostArray>,
    eps: f32,
) -> Result<Tensor> {
    let eps = native_eps("batch_norm", eps)?;
    let c = [x.shape().get(1).copied().unwrap_or(1)]; // a bad rank is reported by `infer`
    let (ones, zeros) = (vec![1f32; c[0]], vec![0f32; c[0]]);
    let stats = [
        mean,
        var,
        gamma.unwrap_or(HostArray::f32(&c, &ones)),
        beta.unwrap_or(HostArray::f32(&c, &zeros)),
    ];
    // MIL batch_norm takes rank 3..=5: [N, C] runs as [N, C, 1].
    let flat = x.rank() == 2;
    let mut srcs = vec![if flat {
        x.reshape(&[x.shape()[0] as i64, c[0] as i64, 1])?
    } else {
        x.clone()
    }];
    for s in stats {
        srcs.push(constant("batch_norm", s)?);
    }
    let y = Tensor::apply1(Op::BatchNorm(BatchNorm { eps }), srcs)?;
    if flat {
        return y.reshape(&[x.shape()[0] as i64, c[0] as i64]);
    }
    Ok(y)
}

/// Per-(n, c) plane normalisation of x ([N, C, H, W] or rank 3) with [C] gamma/beta (absent = ones/zeros).
pub fn instance_norm(
    x: &Tensor,
    gamma: Option<HostArray>,
    beta: Option<HostArray>,
    eps: f32,
) -> Result<Tensor> {
    let eps = native_eps("instance_norm", eps)?;
    let c = [x.shape().get(1).copied().unwrap_or(1)]; // a bad rank is reported by `infer`
    let (ones, zeros) = (vec![1f32; c[0]], vec![0f32; c[0]]);
    let affine = [
        gamma.unwrap_or(HostArray::f32(&c, &ones)),
        beta.unwrap_or(HostArray::f32(&c, &zeros)),
    ];
    let mut srcs = vec![x.clone()];
    for a in affine {
        srcs.push(constant("instance_norm", a)?);
    }
    Tensor::apply1(Op::InstanceNorm(InstanceNorm { eps }), srcs)
}

/// A norm's eps: finite, >= 0 and within fp16 range; returns the fp16-rounded value, except that a
/// positive eps below fp16's range (BERT's 1e-12) is kept as given rather than flushed to 0: the
/// composites only put √eps into the program, and a native op floors it at 2⁻²⁴ ([`native_eps`]).
fn norm_eps(op: &str, eps: f32) -> Result<f32> {
    if eps < 0.0 {
        return Err(Error::value(op, format!("eps = {eps} must be >= 0")));
    }
    let rounded = fp16_param(op, "eps", eps)?;
    Ok(if rounded == 0.0 { eps } else { rounded })
}

/// The eps of a native MIL norm (stored as fp16): [`norm_eps`] floored at 2⁻²⁴ when positive, so a
/// constant plane gives 0, not 0/0.
fn native_eps(op: &str, eps: f32) -> Result<f32> {
    let e = norm_eps(op, eps)?;
    Ok(if e > 0.0 { e.max(FP16_TINY) } else { e })
}

/// Check affine operand `what` is [n] and view it as `shape` (a Const is rebuilt, anything else reshaped).
fn affine_operand(op: &str, what: &str, t: &Tensor, n: usize, shape: &[usize]) -> Result<Tensor> {
    if t.shape() != [n] {
        return Err(Error::shape(
            op,
            format!("{what} must have shape [{n}], got {:?}", t.shape()),
        ));
    }
    match t.op() {
        _ if t.shape() == shape => Ok(t.clone()),
        Op::Const(c) => Tensor::apply1(
            Op::Const(Const {
                shape: shape.to_vec(),
                values: c.values.clone(),
            }),
            vec![],
        ),
        _ => t.reshape(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>()),
    }
}

/// Composite norms (emit MIL primitives; gamma/beta are constants or trainable tensors).
impl Tensor {
    /// (x − mean)/√(var + eps) over `axes`, safe for every finite fp16 x: x is halved first so
    /// x − mean cannot overflow, the residual mean of the deviations (the fp16 rounding error of
    /// the mean) is subtracted again, and the squares are taken after scaling (see `rms_scaled`).
    fn standardize(&self, axes: &[i64], eps: f32) -> Result<Tensor> {
        let half = self.mul_scalar(0.5)?;
        let dev = half.sub(&half.mean(axes, true)?)?;
        let dev = dev.sub(&dev.mean(axes, true)?)?;
        dev.rms_scaled(axes, ((eps as f64).sqrt() / 2.0) as f32)
    }
    /// x / √(mean(x²) + r²) over `axes`, computed on u = x / s with s = max(max |x|, r, 2⁻²⁴) as
    /// u·rsqrt(mean(u²) + (r/s)²): u and r/s lie in [−1, 1], so no square overflows fp16 and the
    /// largest is 1 (the sum does not vanish into subnormals).
    /// A positive r below fp16's range is floored at 2⁻²⁴ so a constant slice gives 0, not 0·∞.
    fn rms_scaled(&self, axes: &[i64], r: f32) -> Result<Tensor> {
        let r = if r > 0.0 { r.max(FP16_TINY) } else { r };
        let s = self
            .abs()?
            .amax(axes, true)?
            .maximum_scalar(r.max(FP16_TINY))?;
        let u = self.div(&s)?;
        let mean_square = u.square()?.mean(axes, true)?;
        u.mul(&mean_square.add(&s.rdiv_scalar(r)?.square()?)?.rsqrt(0.0)?)
    }
    /// self·gamma + beta (absent terms skipped), each operand checked as [n] and viewed as `shape`.
    fn affine(
        &self,
        op: &str,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        n: usize,
        shape: &[usize],
    ) -> Result<Tensor> {
        let mut y = self.clone();
        if let Some(g) = gamma {
            y = y.mul(&affine_operand(op, "gamma", g, n, shape)?)?;
        }
        if let Some(b) = beta {
            y = y.add(&affine_operand(op, "beta", b, n, shape)?)?;
        }
        Ok(y)
    }
    /// LayerNorm over the last axis: (x − mean)/√(var + eps)·gamma + beta, overflow-safe for every
    /// finite fp16 x (see `standardize`); gamma and beta are [D].
    pub fn layer_norm(
        &self,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        eps: f32,
    ) -> Result<Tensor> {
        let y = self.standardize(&[-1], norm_eps("layer_norm", eps)?)?;
        let d = y.shape()[y.rank() - 1];
        y.affine("layer_norm", gamma, beta, d, &[d])
    }
    /// LayerNorm over channel axis 1 of x [N, C, 1, S] (the ANE transformer layout), same chain
    /// as `layer_norm`; gamma and beta are [C], applied as [1, C, 1, 1].
    pub fn channel_layer_norm(
        &self,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        eps: f32,
    ) -> Result<Tensor> {
        const OP: &str = "channel_layer_norm";
        let eps = norm_eps(OP, eps)?;
        let &[_, c, 1, _] = self.shape() else {
            return Err(Error::shape(
                OP,
                format!("x must be [N, C, 1, S], got {:?}", self.shape()),
            ));
        };
        self.standardize(&[1], eps)?
            .affine(OP, gamma, beta, c, &[1, c, 1, 1])
    }
    /// RMSNorm over the last axis (PyTorch/HF form): x / √(mean(x²) + eps) · gamma; gamma is [D].
    pub fn rms_norm(&self, gamma: Option<&Tensor>, eps: f32) -> Result<Tensor> {
        norm_eps("rms_norm", eps)?;
        let d = self.shape().last().copied().unwrap_or(1); // a scalar is rejected by the reduction
        let y = self.rms_scaled(&[-1], (eps as f64).sqrt() as f32)?;
        y.affine("rms_norm", gamma, None, d, &[d])
    }
    /// x / max(‖x‖₂, eps) along `axis` (negative allowed; eps fp16-rounded, floored at 2⁻²⁴ so a
    /// zero vector gives 0), computed on x / max(max |x|, eps) so the norm cannot overflow fp16.
    pub fn l2_norm(&self, axis: i64, eps: f32) -> Result<Tensor> {
        let floor = norm_eps("l2_norm", eps)?.max(FP16_TINY);
        let s = self.abs()?.amax(&[axis], true)?.maximum_scalar(floor)?;
        let u = self.div(&s)?;
        u.div(
            &u.reduce_l2_norm(&[axis], true)?
                .maximum(&s.rdiv_scalar(floor)?)?,
        )
    }
    /// GroupNorm of x [N, C, H, W] or [N, C, L] in `num_groups` groups (C/G, H·W ≤ 65536), then ·gamma + beta ([C] each).
    pub fn group_norm(
        &self,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        num_groups: usize,
        eps: f32,
    ) -> Result<Tensor> {
        const OP: &str = "group_norm";
        let eps = norm_eps(OP, eps)?;
        let (n, c, h, w) = match *self.shape() {
            [n, c, h, w] => (n, c, h, w),
            [n, c, l] => (n, c, l, 1),
            _ => {
                return Err(Error::shape(
                    OP,
                    format!(
                        "x must be [N, C, H, W] or [N, C, L], got {:?}",
                        self.shape()
                    ),
                ))
            }
        };
        if num_groups == 0 || c % num_groups != 0 {
            return Err(Error::shape(
                OP,
                format!(
                    "C = {c} is not divisible by num_groups = {num_groups} (x {:?})",
                    self.shape()
                ),
            ));
        }
        let (cg, hw) = (c / num_groups, h * w);
        if cg.max(hw) > MAX_EXTENT {
            return Err(Error::shape(
                OP,
                format!(
                    "C/G = {cg} and H·W = {hw} must each be <= {MAX_EXTENT} (x {:?})",
                    self.shape()
                ),
            ));
        }
        let dims = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let y = self
            .reshape(&dims(&[n, num_groups, cg, hw]))?
            .standardize(&[2, 3], eps)?
            .reshape(&dims(&[n, c, h, w]))?
            .affine(OP, gamma, beta, c, &[1, c, 1, 1])?;
        if self.rank() == 4 {
            return Ok(y);
        }
        y.reshape(&dims(self.shape()))
    }
}
