//! Ops along the channel axis (axis 1) of `[N, C, ...]` tensors: `prelu` (a slope per channel)
//! and `local_response_norm` (each value divided by a power of the squares of its neighbouring
//! channels), plus the `lrn` spelling that lowers to `local_response_norm` with a window of C.

use super::io::{expect_fp16, expect_inputs};
use super::table::mil_kinds;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};
use crate::shape;

mil_kinds! {
    Channel =>
    /// The MIL op of each [`Channel`] variant.
    pub enum ChannelOp {
        Prelu = "prelu",
        LocalResponseNorm = "local_response_norm",
    }
}

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = ChannelOp::MIL_NAMES;

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
pub fn window(c: usize, size: usize, n: usize) -> std::ops::Range<usize> {
    c.saturating_sub((size - 1) / 2)..(c + size / 2 + 1).min(n)
}

impl Family for Channel {
    fn name(&self) -> &'static str {
        self.mil_name()
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
            Channel::Prelu => MilOp::new(ChannelOp::Prelu.mil_name(), &["x", "alpha"]),
            Channel::LocalResponseNorm {
                size,
                alpha,
                beta,
                k,
            } => MilOp::new(ChannelOp::LocalResponseNorm.mil_name(), &["x"])
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
    let parsed = match ChannelOp::from_mil_name(op)? {
        ChannelOp::Prelu => Ok(Channel::Prelu),
        ChannelOp::LocalResponseNorm => (|| {
            let size = super::layout::index_param(args, "size")?;
            Ok(Channel::LocalResponseNorm {
                size,
                alpha: args.fp16("alpha")?,
                beta: args.fp16("beta")?,
                k: args.fp16("k")?,
            })
        })(),
    };
    Some(parsed.map(Op::Channel))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::input;
    use crate::ops::io::HostArray;
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
