//! Ops along the channel axis (axis 1) of `[N, C, ...]` tensors: `prelu` (a slope per channel)
//! and `local_response_norm` (each value divided by a power of the squares of its neighbouring
//! channels), plus the `lrn` spelling that lowers to `local_response_norm` with a window of C.

use super::elementwise::fp16_param;
use super::io::{constant, expect_fp16, expect_inputs, HostArray};
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape;

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &["prelu", "local_response_norm"];

/// Channel-axis ops; parameters hold fp16-rounded values (as printed in MIL).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Channel {
    /// MIL `prelu(x, alpha)`: `x` where x ≥ 0, else `alpha[c]·x`; x has rank 3..=5 `[N, C, ...]`,
    /// alpha is a `[C]` tensor.
    Prelu,
    /// MIL `local_response_norm(x, size, alpha, beta, k)` on x of rank 3 or 4 `[N, C, ...]`:
    /// `x[c] / (k + alpha/size · Σ x[j]²)^beta`, j over the channels
    /// `c − ⌊(size−1)/2⌋ ..= c + ⌈(size−1)/2⌉` clipped to `0..C` (the Caffe/ONNX window).
    LocalResponseNorm {
        size: usize,
        alpha: f32,
        beta: f32,
        k: f32,
    },
}

/// Channels `lo..hi` of the local window of `size` around channel `c` of `n` channels.
fn window(c: usize, size: usize, n: usize) -> std::ops::Range<usize> {
    c.saturating_sub((size - 1) / 2)..(c + size / 2 + 1).min(n)
}

impl Family for Channel {
    fn name(&self) -> &'static str {
        match self {
            Channel::Prelu => "prelu",
            Channel::LocalResponseNorm { .. } => "local_response_norm",
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.name();
        let (n_in, ranks) = match self {
            Channel::Prelu => (2, 3..=5),
            Channel::LocalResponseNorm { .. } => (1, 3..=4),
        };
        expect_inputs(op, inputs, n_in)?;
        expect_fp16(op, inputs)?;
        let s = &inputs[0].shape;
        if !ranks.contains(&s.len()) {
            return Err(Error::shape(
                op,
                format!(
                    "x must have rank {}..={} ([N, C, ...]), got {s:?}",
                    ranks.start(),
                    ranks.end()
                ),
            ));
        }
        if *self == Channel::Prelu && inputs[1].shape != [s[1]] {
            return Err(Error::shape(
                op,
                format!(
                    "alpha must have shape [C] = [{}] for x {s:?}, got {:?}",
                    s[1], inputs[1].shape
                ),
            ));
        }
        if let Channel::LocalResponseNorm { size, .. } = *self {
            if size == 0 || size > shape::MAX_EXTENT {
                return Err(Error::value(
                    op,
                    format!("size = {size} must be in 1..={}", shape::MAX_EXTENT),
                ));
            }
        }
        Ok(vec![inputs[0].clone()])
    }
    fn mil(&self) -> MilOp {
        match *self {
            Channel::Prelu => MilOp::new("prelu", &["x", "alpha"]),
            Channel::LocalResponseNorm {
                size,
                alpha,
                beta,
                k,
            } => MilOp::new("local_response_norm", &["x"])
                .param("alpha", Literal::Fp16(alpha))
                .param("beta", Literal::Fp16(beta))
                .param("k", Literal::Fp16(k))
                .param("size", Literal::Int32(size as i32)),
        }
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let x = ins[0];
        let (c, plane) = (x.shape[1], shape::numel(&x.shape[2..]));
        let y = &mut out[0].data;
        match *self {
            Channel::Prelu => {
                let alpha = &ins[1].data;
                for (i, (yp, xp)) in y.chunks_mut(plane).zip(x.data.chunks(plane)).enumerate() {
                    let a = alpha[i % c];
                    yp.iter_mut()
                        .zip(xp)
                        .for_each(|(o, &v)| *o = if v >= 0.0 { v } else { a * v });
                }
            }
            Channel::LocalResponseNorm {
                size,
                alpha,
                beta,
                k,
            } => {
                let scale = alpha as f64 / size as f64;
                for (yb, xb) in y.chunks_mut(c * plane).zip(x.data.chunks(c * plane)) {
                    for ch in 0..c {
                        for p in 0..plane {
                            let sum: f64 = window(ch, size, c)
                                .map(|j| (xb[j * plane + p] as f64).powi(2))
                                .sum();
                            let v = xb[ch * plane + p] as f64;
                            yb[ch * plane + p] =
                                (v / (k as f64 + scale * sum).powf(beta as f64)) as f32;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Parse `prelu` and `local_response_norm`.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    let parsed = match op {
        "prelu" => Ok(Channel::Prelu),
        "local_response_norm" => (|| {
            let size = super::layout::index_param(args, "size")?;
            Ok(Channel::LocalResponseNorm {
                size,
                alpha: args.fp16("alpha")?,
                beta: args.fp16("beta")?,
                k: args.fp16("k")?,
            })
        })(),
        _ => return None,
    };
    Some(parsed.map(Op::Channel))
}

/// Builders (x is `[N, C, ...]`, fp16).
impl Tensor {
    /// Per-channel leaky ReLU: x where x ≥ 0 else alpha[c]·x; alpha is `[C]` (C = shape[1]), x rank 3..=5.
    /// MIL prelu takes rank 3 and 5 only with one slope for every channel, so those ranks with
    /// distinct slopes run as rank 4 (`[N, C, L, 1]` / `[N, C, D, H·W]`) between two reshapes.
    pub fn prelu(&self, alpha: HostArray) -> Result<Tensor> {
        let slopes = alpha.to_fp16("prelu")?;
        let op = |x: &Tensor| {
            Tensor::apply1(
                Op::Channel(Channel::Prelu),
                vec![x.clone(), constant("prelu", alpha)?],
            )
        };
        let s = self.shape();
        if !matches!(s.len(), 3 | 5) || slopes.windows(2).all(|w| w[0] == w[1]) {
            return op(self);
        }
        let as4: Vec<i64> = if s.len() == 3 {
            vec![s[0] as i64, s[1] as i64, s[2] as i64, 1]
        } else {
            vec![s[0] as i64, s[1] as i64, s[2] as i64, (s[3] * s[4]) as i64]
        };
        op(&self.reshape(&as4)?)?.reshape(&s.iter().map(|&d| d as i64).collect::<Vec<_>>())
    }
    /// MIL local response normalisation over `size` neighbouring channels (see [`Channel::LocalResponseNorm`]);
    /// x rank 3 or 4, size ≥ 1, alpha/beta/k finite fp16 values, k > 0.
    pub fn local_response_norm(
        &self,
        size: usize,
        alpha: f32,
        beta: f32,
        k: f32,
    ) -> Result<Tensor> {
        const OP: &str = "local_response_norm";
        let (alpha, beta, k) = (
            fp16_param(OP, "alpha", alpha)?,
            fp16_param(OP, "beta", beta)?,
            fp16_param(OP, "k", k)?,
        );
        if k <= 0.0 || alpha < 0.0 {
            return Err(Error::value(OP, format!("k = {k} must be > 0 and alpha = {alpha} >= 0 (the base of the power must stay positive)")));
        }
        Tensor::apply1(
            Op::Channel(Channel::LocalResponseNorm {
                size,
                alpha,
                beta,
                k,
            }),
            vec![self.clone()],
        )
    }
    /// `x / (k + alpha · Σ x[j]²)^beta` over the clipped window of C channels around each channel
    /// (the reference's `lrn` bridge op), lowered as `local_response_norm(size = C, alpha = alpha·C)`.
    pub fn lrn(&self, alpha: f32, beta: f32, k: f32) -> Result<Tensor> {
        let c = self.shape().get(1).copied().unwrap_or(1); // a bad rank is reported by `infer`
        self.local_response_norm(c, alpha * c as f32, beta, k)
    }
}

/// Gradient rules.
impl Channel {
    /// Vector-Jacobian product. prelu: dx = G where x ≥ 0 else alpha[c]·G (alpha is always a baked
    /// constant, so it gets none). local_response_norm, with s = k + (alpha/size)·M·x² over the
    /// channel window matrix M: dx = G·s^−β − (2αβ/size)·x·Mᵀ(G·x·s^(−β−1)).
    pub fn vjp(&self, a: &crate::autograd::Vjp) -> Result<crate::autograd::Grads> {
        use crate::autograd::reshape_to;
        use crate::ops::elementwise::Compare;
        let (x, g) = (&a.x[0], a.g0());
        let c = x.shape()[1];
        let mut per_channel = vec![1; x.rank()];
        per_channel[1] = c;
        let dx = match *self {
            Channel::Prelu => {
                let slope = reshape_to(&a.x[1], &per_channel)?;
                crate::select(
                    &x.compare_scalar(Compare::GreaterEqual, 0.0)?,
                    g,
                    &g.mul(&slope)?,
                )?
            }
            Channel::LocalResponseNorm {
                size,
                alpha,
                beta,
                k,
            } => {
                // Channels first as the matrix rows: [N, C, P] with P the flattened plane.
                let (n, plane) = (x.shape()[0], shape::numel(&x.shape()[2..]));
                let flat = |t: &Tensor| reshape_to(t, &[n, c, plane]);
                let band = |transposed: bool| -> Result<Tensor> {
                    let mut m = vec![0f32; c * c];
                    for row in 0..c {
                        for col in window(row, size, c) {
                            m[if transposed {
                                col * c + row
                            } else {
                                row * c + col
                            }] = 1.0;
                        }
                    }
                    constant("local_response_norm", HostArray::f32(&[c, c], &m))
                };
                let (xf, gf) = (flat(x)?, flat(g)?);
                let s = band(false)?
                    .matmul(&xf.square()?)?
                    .mul_scalar(alpha / size as f32)?
                    .add_scalar(k)?;
                let t = gf.mul(&xf)?.mul(&s.pow_scalar(-beta - 1.0)?)?;
                let back = band(true)?
                    .matmul(&t)?
                    .mul(&xf)?
                    .mul_scalar(-2.0 * alpha * beta / size as f32)?;
                reshape_to(&gf.mul(&s.pow_scalar(-beta)?)?.add(&back)?, x.shape())?
            }
        };
        Ok(vec![a.needs[0].then_some(dx), None]
            .into_iter()
            .take(a.x.len())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input;
    use crate::ops::layout::tests::{buf, mil_args, round_trip, run};

    #[test]
    fn prelu_matches_naive() {
        let x = buf(&[2, 3, 4, 5], 1);
        let alpha = Buf {
            shape: vec![3],
            data: vec![0.25, -1.5, 2.0],
        };
        let y = run(&Op::Channel(Channel::Prelu), &[&x, &alpha]).remove(0);
        for (i, (&v, &o)) in x.data.iter().zip(&y.data).enumerate() {
            let a = alpha.data[(i / 20) % 3];
            assert_eq!(o, if v >= 0.0 { v } else { a * v }, "element {i}");
        }
    }

    #[test]
    fn lrn_matches_naive_windows() {
        let x = buf(&[2, 6, 3], 2);
        for size in [1, 2, 3, 4, 5, 6, 11] {
            let op = Channel::LocalResponseNorm {
                size,
                alpha: 0.5,
                beta: 0.75,
                k: 2.0,
            };
            let y = run(&Op::Channel(op), &[&x]).remove(0);
            for (i, &o) in y.data.iter().enumerate() {
                let (n, c, p) = (i / 18, (i / 3) % 6, i % 3);
                // Window by offsets: before = ⌊(size−1)/2⌋, after = ⌈(size−1)/2⌉.
                let (before, after) = ((size as i64 - 1) / 2, size as i64 / 2);
                let sum: f64 = (c as i64 - before..=c as i64 + after)
                    .filter(|j| (0..6).contains(j))
                    .map(|j| (x.data[n * 18 + j as usize * 3 + p] as f64).powi(2))
                    .sum();
                let want = x.data[i] as f64 / (2.0 + 0.5 / size as f64 * sum).powf(0.75);
                assert!(
                    (o as f64 - want).abs() < 1e-5 * want.abs().max(1.0),
                    "size {size} element {i}: {o} vs {want}"
                );
            }
        }
    }

    #[test]
    fn builders_errors_and_mil() {
        let x = input(&[1, 3, 4, 5]).unwrap();
        let a = [0.1f32, 0.2, 0.3];
        assert_eq!(
            x.prelu(HostArray::f32(&[3], &a)).unwrap().shape(),
            [1, 3, 4, 5]
        );
        assert!(
            x.prelu(HostArray::f32(&[1, 3], &a)).is_err(),
            "alpha must be [C]"
        );
        assert!(
            input(&[3, 4])
                .unwrap()
                .prelu(HostArray::f32(&[4], &[0.0; 4]))
                .is_err(),
            "rank 2"
        );
        assert!(x.local_response_norm(0, 1e-4, 0.75, 1.0).is_err());
        assert!(x.local_response_norm(3, 1e-4, 0.75, 0.0).is_err(), "k = 0");
        assert!(x.local_response_norm(3, f32::NAN, 0.75, 1.0).is_err());
        assert!(
            input(&[1, 3, 2, 2, 2])
                .unwrap()
                .local_response_norm(3, 1e-4, 0.75, 1.0)
                .is_err(),
            "rank 5"
        );
        match x.lrn(0.5, 0.75, 1.0).unwrap().op() {
            Op::Channel(Channel::LocalResponseNorm { size: 3, alpha, .. }) => {
                assert_eq!(*alpha, 1.5)
            }
            other => panic!("{other:?}"),
        }
        round_trip(&Op::Channel(Channel::Prelu), from_mil);
        round_trip(
            &Op::Channel(Channel::LocalResponseNorm {
                size: 5,
                alpha: 1.5,
                beta: 0.75,
                k: 2.0,
            }),
            from_mil,
        );
        assert!(from_mil(
            "local_response_norm",
            &mut mil_args(vec![("size", Literal::Int32(-1))])
        )
        .unwrap()
        .is_err());
        assert!(from_mil("relu", &mut mil_args(vec![])).is_none());
    }
}
