//! Builders for the linear ops.

use crate::error::{Error, Result};
use crate::graph::build::io::constant;
use crate::graph::Tensor;
use crate::ops::io::{self, HostArray, HostData};
use crate::ops::linear::MatMul;
use crate::ops::Op;
use crate::shape;
use std::sync::Arc;

/// A rank-2 host weight's [rows, cols], or a shape error naming `op` and `layout`.
fn rank2(op: &str, w: &HostArray, layout: &str) -> Result<[usize; 2]> {
    match *w.shape {
        [r, c] => Ok([r, c]),
        _ => Err(Error::shape(
            op,
            format!("weight must be rank 2 {layout}, got shape {:?}", w.shape),
        )),
    }
}

/// Builders.
impl Tensor {
    fn matmul_t(&self, other: &Tensor, transpose_y: bool) -> Result<Tensor> {
        Tensor::apply1(
            Op::MatMul(MatMul {
                transpose_x: false,
                transpose_y,
            }),
            vec![self.clone(), other.clone()],
        )
    }

    /// self @ other with NumPy `matmul` semantics (rank-1 promotion, broadcast batch axes). A
    /// rank-1 `other` under a rank ≥ 2 `self` is printed as a `[K, 1]` column and the result
    /// reshaped back, because CoreML's matmul type inference does not promote a 1-D `y`.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        if other.rank() != 1 || self.rank() < 2 {
            return self.matmul_t(other, false);
        }
        let out: Vec<i64> = self.shape()[..self.rank() - 1]
            .iter()
            .map(|&d| d as i64)
            .collect();
        self.matmul_t(&other.reshape(&[other.shape()[0] as i64, 1])?, false)?
            .reshape(&out)
    }

    /// self @ W for a host weight W [K, N], baked transposed as a [N, K] const (`transpose_y = true`).
    pub fn matmul_weight(&self, w: HostArray) -> Result<Tensor> {
        let [k, n] = rank2("matmul", &w, "[K, N]")?;
        let v = w.to_fp16("matmul")?;
        let t: Vec<_> = (0..n * k).map(|i| v[(i % k) * n + i / k]).collect();
        let wt = Tensor::apply1(
            Op::Const(io::Const {
                shape: vec![n, k],
                values: Arc::new(t),
            }),
            vec![],
        )?;
        self.matmul_t(&wt, true)
    }

    /// PyTorch `linear`: self @ W.T (+ b) for W [out, in] (baked as is, `transpose_y = true`) and bias [out].
    pub fn linear(&self, w: HostArray, bias: Option<HostArray>) -> Result<Tensor> {
        let [out, _] = rank2("linear", &w, "[out, in]")?;
        let y = self.matmul_t(&constant("linear", w)?, true)?;
        match bias {
            None => Ok(y),
            Some(b) if b.shape == [out] => y.add(&constant("linear", b)?),
            Some(b) => Err(Error::shape(
                "linear",
                format!(
                    "bias must have shape [{out}] for weight {:?}, got {:?}",
                    w.shape, b.shape
                ),
            )),
        }
    }
}

/// Largest last-axis extent `cumsum` accepts (it bakes a K×K weight).
pub const CUMSUM_MAX_K: usize = 4096;

impl Tensor {
    /// Running sum along the last axis (`axis` must name it), as `linear` with a lower-triangular
    /// ones weight (x @ upper-triangular); K ≤ [`CUMSUM_MAX_K`].
    pub fn cumsum(&self, axis: i64) -> Result<Tensor> {
        let last = self.rank() - 1;
        if shape::axis("cumsum", axis, self.rank())? != last {
            return Err(Error::shape(
                "cumsum",
                format!(
                    "only the last axis is supported, got axis {axis} of {:?}",
                    self.shape()
                ),
            ));
        }
        let k = self.shape()[last];
        if k > CUMSUM_MAX_K {
            return Err(Error::shape("cumsum", format!("last axis of {:?} has extent {k} > {CUMSUM_MAX_K} (cumsum bakes a K x K weight)", self.shape())));
        }
        let w: Vec<f32> = (0..k * k)
            .map(|i| f32::from(u8::from(i % k <= i / k)))
            .collect();
        self.linear(HostArray::f32(&[k, k], &w), None)
    }

    /// GEGLU: `weight` [2·Dff, D] (and `bias` [2·Dff]) split at build time into value (first Dff
    /// rows) and gate halves; returns `linear(value) · gelu(linear(gate))`, [.., Dff].
    pub fn geglu(&self, weight: HostArray, bias: Option<HostArray>) -> Result<Tensor> {
        let [rows, d] = rank2("geglu", &weight, "[2*Dff, D]")?;
        if rows % 2 != 0 || rows == 0 {
            return Err(Error::shape(
                "geglu",
                format!(
                    "weight {:?} needs an even, non-zero row count 2*Dff",
                    weight.shape
                ),
            ));
        }
        let dff = rows / 2;
        if let Some(b) = bias.filter(|b| b.shape != [rows]) {
            return Err(Error::shape(
                "geglu",
                format!(
                    "bias must have shape [{rows}] for weight {:?}, got {:?}",
                    weight.shape, b.shape
                ),
            ));
        }
        let (w, b) = (
            weight.to_fp16("geglu")?,
            bias.map(|b| b.to_fp16("geglu")).transpose()?,
        );
        let half = |i: usize| -> Result<Tensor> {
            let wh = HostArray {
                shape: &[dff, d],
                data: HostData::F16(&w[i * dff * d..(i + 1) * dff * d]),
            };
            let bh = b.as_ref().map(|b| HostArray {
                shape: std::slice::from_ref(&dff),
                data: HostData::F16(&b[i * dff..(i + 1) * dff]),
            });
            self.linear(wh, bh)
        };
        half(0)?.mul(&half(1)?.gelu()?)
    }
}
