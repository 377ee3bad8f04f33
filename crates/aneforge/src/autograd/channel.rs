//! Gradient rules for the channel ops.

use super::{Differentiable, Grads, Vjp};
use crate::error::Result;
use crate::graph::build::io::constant;
use crate::graph::Tensor;
use crate::ops::channel::Channel;
use crate::ops::io::HostArray;
use crate::shape;

/// Gradient rules.
impl Differentiable for Channel {
    /// Vector-Jacobian product. prelu: dx = G where x ≥ 0 else alpha[c]·G (alpha is always a baked
    /// constant, so it gets none). local_response_norm, with s = k + (alpha/size)·M·x² over the
    /// channel window matrix M: dx = G·s^−β − (2αβ/size)·x·Mᵀ(G·x·s^(−β−1)).
    fn vjp(&self, a: &Vjp) -> Result<Grads> {
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
                        for col in crate::ops::channel::window(row, size, c) {
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
