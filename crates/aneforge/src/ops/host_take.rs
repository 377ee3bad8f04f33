//! Runtime-indexed data movement: `take` (NumPy `take` with int32 indices: `gather`,
//! `embedding`) and the scatter-adds that are the gradients of `take` and of `topk`/`sort` values.

use super::host::{check_axis, expect_dtypes, lanes, HostKernel, HostTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::TensorType;

/// Index `v` (at flat position `pos` of the index tensor) into an axis of extent `n`: NumPy's
/// `mode="raise"` range `-n..n`, negatives counting from the end; an error names op, value and bound.
fn checked_index(op: &str, v: i32, pos: usize, n: usize) -> Result<usize> {
    let u = if v < 0 { v as i64 + n as i64 } else { v as i64 };
    if u < 0 || u >= n as i64 {
        return Err(Error::value(
            op,
            format!(
                "index {v} (element {pos} of the indices) is out of range for an axis of size {n} (valid: -{n}..{})",
                n as i64 - 1
            ),
        ));
    }
    Ok(u as usize)
}

/// Every index of `idx` checked against extent `n` (all of them before any output is written).
fn checked_indices(op: &str, idx: &[i32], n: usize) -> Result<Vec<usize>> {
    idx.iter()
        .enumerate()
        .map(|(pos, &v)| checked_index(op, v, pos, n))
        .collect()
}

/// `take(x, indices, axis)`: `x[..., indices[...], ...]` with the index tensor's shape replacing
/// axis `axis` (NumPy `take`); output fp16 of shape `x[:axis] + indices.shape + x[axis+1:]`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Take {
    pub axis: usize,
}

impl HostKernel for Take {
    fn name(&self) -> &'static str {
        "gather"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("gather", inputs, &[DType::Fp16, DType::Int32])?;
        let (x, idx) = (&inputs[0].shape, &inputs[1].shape);
        check_axis("gather", self.axis, x)?;
        let shape = [&x[..self.axis], &idx[..], &x[self.axis + 1..]].concat();
        Ok(vec![TensorType::fp16(shape)])
    }

    fn run(&self, inputs: &[&HostTensor], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0].f32s("gather")?;
        let (outer, n, inner) = lanes(&inputs[0].shape, self.axis);
        let idx = checked_indices("gather", inputs[1].i32s("gather")?, n)?;
        let out = outputs[0].f32s_mut("gather")?;
        let m = idx.len();
        for o in 0..outer {
            for (t, &j) in idx.iter().enumerate() {
                let dst = (o * m + t) * inner;
                let src = (o * n + j) * inner;
                out[dst..dst + inner].copy_from_slice(&x[src..src + inner]);
            }
        }
        Ok(())
    }
}

/// Gradient of [`Take`]: zeros with extent `dim` on `axis`, plus `g` added at `indices`
/// (NumPy `np.add.at`); inputs `g` (fp16) and `indices` (int32, the shape `take` inserted).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TakeAdd {
    pub axis: usize,
    pub dim: usize,
}

impl HostKernel for TakeAdd {
    fn name(&self) -> &'static str {
        "take_add"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("take_add", inputs, &[DType::Fp16, DType::Int32])?;
        let (g, idx) = (&inputs[0].shape, &inputs[1].shape);
        let end = self.axis + idx.len();
        if end > g.len() || g[self.axis..end] != idx[..] || self.dim == 0 {
            return Err(Error::shape(
                "take_add",
                format!(
                    "g {g:?} does not hold indices {idx:?} at axis {} (or dim {} is 0)",
                    self.axis, self.dim
                ),
            ));
        }
        let shape = [&g[..self.axis], &[self.dim][..], &g[end..]].concat();
        Ok(vec![TensorType::fp16(shape)])
    }

    fn run(&self, inputs: &[&HostTensor], outputs: &mut [HostTensor]) -> Result<()> {
        let g = inputs[0].f32s("take_add")?;
        let idx = checked_indices("take_add", inputs[1].i32s("take_add")?, self.dim)?;
        let (outer, _, inner) = lanes(&outputs[0].shape, self.axis);
        let out = outputs[0].f32s_mut("take_add")?;
        out.fill(0.0);
        let m = idx.len();
        for o in 0..outer {
            for (t, &j) in idx.iter().enumerate() {
                let src = (o * m + t) * inner;
                let dst = (o * self.dim + j) * inner;
                for i in 0..inner {
                    out[dst + i] += g[src + i];
                }
            }
        }
        Ok(())
    }
}

/// Gradient of `topk`/`sort` values: zeros with extent `dim` on `axis`, plus `g` added at
/// `indices` along `axis` (NumPy `put_along_axis` with add); `g` and `indices` share one shape.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AlongAdd {
    pub axis: usize,
    pub dim: usize,
}

impl HostKernel for AlongAdd {
    fn name(&self) -> &'static str {
        "along_add"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("along_add", inputs, &[DType::Fp16, DType::Int32])?;
        let (g, idx) = (&inputs[0].shape, &inputs[1].shape);
        check_axis("along_add", self.axis, g)?;
        if g != idx || self.dim == 0 {
            return Err(Error::shape(
                "along_add",
                format!(
                    "g {g:?} and indices {idx:?} differ (or dim {} is 0)",
                    self.dim
                ),
            ));
        }
        let mut shape = g.clone();
        shape[self.axis] = self.dim;
        Ok(vec![TensorType::fp16(shape)])
    }

    fn run(&self, inputs: &[&HostTensor], outputs: &mut [HostTensor]) -> Result<()> {
        let g = inputs[0].f32s("along_add")?;
        let idx = inputs[1].i32s("along_add")?;
        let (outer, k, inner) = lanes(&inputs[0].shape, self.axis);
        let out = outputs[0].f32s_mut("along_add")?;
        out.fill(0.0);
        for o in 0..outer {
            for j in 0..k {
                for i in 0..inner {
                    let src = (o * k + j) * inner + i;
                    let t = checked_index("along_add", idx[src], src, self.dim)?;
                    out[(o * self.dim + t) * inner + i] += g[src];
                }
            }
        }
        Ok(())
    }
}
