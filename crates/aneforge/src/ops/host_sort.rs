//! `topk` and stable `sort` / `argsort` along one axis: values (fp16) and int32 indices. Order:
//! by value, NaN above every number, ties by the lower index (stable, also when descending).

use std::cmp::Ordering;

use super::host::{check_axis, expect_dtypes, lanes, nan_last, HostKernel, HostTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::TensorType;

/// Values and indices of `x` along `axis`, as the (values, indices) output pair of `shape`.
fn pair(shape: Vec<usize>) -> Vec<TensorType> {
    vec![
        TensorType {
            dtype: DType::Fp16,
            shape: shape.clone(),
        },
        TensorType {
            dtype: DType::Int32,
            shape,
        },
    ]
}

/// Order of lane positions `a`, `b` (values `va`, `vb`): by value (descending when `desc`), then by index.
fn order(va: f32, vb: f32, a: usize, b: usize, desc: bool) -> Ordering {
    let by_value = if desc {
        nan_last(vb, va)
    } else {
        nan_last(va, vb)
    };
    by_value.then(a.cmp(&b))
}

/// Run `pick(lane values, scratch of lane indices) -> chosen indices` on every lane of `inputs[0]`
/// along `axis` and write the chosen values and indices (`k` per lane) into `outputs`.
fn per_lane(
    op: &str,
    axis: usize,
    k: usize,
    inputs: &[&HostTensor],
    outputs: &mut [HostTensor],
    pick: impl Fn(&[f32], &mut Vec<usize>),
) -> Result<()> {
    let x = inputs[0].f32s(op)?;
    let (outer, n, inner) = lanes(&inputs[0].shape, axis);
    let (vals, idxs) = outputs.split_at_mut(1);
    let (vals, idxs) = (vals[0].f32s_mut(op)?, idxs[0].i32s_mut(op)?);
    let (mut lane, mut order) = (vec![0.0f32; n], Vec::with_capacity(n));
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for (j, v) in lane.iter_mut().enumerate() {
                *v = x[base + j * inner];
            }
            order.clear();
            order.extend(0..n);
            pick(&lane, &mut order);
            let out = o * k * inner + i;
            for (j, &src) in order[..k].iter().enumerate() {
                vals[out + j * inner] = lane[src];
                idxs[out + j * inner] = src as i32;
            }
        }
    }
    Ok(())
}

/// `topk(x, k, axis, largest, sorted)`: the `k` largest (smallest when not `largest`) elements
/// along `axis`; `sorted` lists them best first, otherwise in their original index order.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TopK {
    pub k: usize,
    pub axis: usize,
    pub largest: bool,
    pub sorted: bool,
}

impl HostKernel for TopK {
    fn name(&self) -> &'static str {
        "topk"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("topk", inputs, &[DType::Fp16])?;
        let s = &inputs[0].shape;
        check_axis("topk", self.axis, s)?;
        if self.k == 0 || self.k > s[self.axis] {
            return Err(Error::value(
                "topk",
                format!(
                    "k = {} must be in 1..={} (axis {} of {s:?})",
                    self.k, s[self.axis], self.axis
                ),
            ));
        }
        let mut shape = s.clone();
        shape[self.axis] = self.k;
        Ok(pair(shape))
    }

    fn run(&self, inputs: &[&HostTensor], outputs: &mut [HostTensor]) -> Result<()> {
        let (k, desc, sorted) = (self.k, self.largest, self.sorted);
        per_lane("topk", self.axis, k, inputs, outputs, |lane, idx| {
            let cmp = |a: &usize, b: &usize| order(lane[*a], lane[*b], *a, *b, desc);
            if k < idx.len() {
                idx.select_nth_unstable_by(k - 1, cmp);
            }
            if sorted {
                idx[..k].sort_unstable_by(cmp);
            } else {
                idx[..k].sort_unstable();
            }
        })
    }
}

/// Stable sort along `axis` (descending when `descending`, ties keeping their index order):
/// output 0 the sorted values, output 1 the int32 permutation (`argsort`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sort {
    pub axis: usize,
    pub descending: bool,
}

impl HostKernel for Sort {
    fn name(&self) -> &'static str {
        "sort"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("sort", inputs, &[DType::Fp16])?;
        check_axis("sort", self.axis, &inputs[0].shape)?;
        Ok(pair(inputs[0].shape.clone()))
    }

    fn run(&self, inputs: &[&HostTensor], outputs: &mut [HostTensor]) -> Result<()> {
        let n = inputs[0].shape.get(self.axis).copied().unwrap_or(0);
        let desc = self.descending;
        per_lane("sort", self.axis, n, inputs, outputs, |lane, idx| {
            idx.sort_unstable_by(|a, b| order(lane[*a], lane[*b], *a, *b, desc))
        })
    }
}
