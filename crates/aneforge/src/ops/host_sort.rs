//! `topk` and stable `sort` / `argsort` along one axis: values (fp16) and int32 indices. Order:
//! by value, NaN above every number, −0 equal to +0, ties by the lower index (stable, also when
//! descending). Both run the one kernel of `host_select`.

use super::host::{check_axis, expect_dtypes, lanes, HostKernel, HostRef, HostTensor};
use super::host_select::Select;
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

/// Run the one ordering kernel ([`Select`]) over `inputs[0]` along `axis`, keeping `k` per lane.
fn select(
    op: &str,
    axis: usize,
    k: usize,
    largest: bool,
    sorted: bool,
    inputs: &[HostRef<'_>],
    outputs: &mut [HostTensor],
) -> Result<()> {
    let x = inputs[0].f32s(op)?;
    let (outer, n, inner) = lanes(inputs[0].shape, axis);
    let (vals, idxs) = outputs.split_at_mut(1);
    let plan = Select {
        outer,
        n,
        inner,
        k,
        largest,
        sorted,
    };
    plan.run(op, x, vals[0].f32s_mut(op)?, idxs[0].i32s_mut(op)?)
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

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let (k, largest, sorted) = (self.k, self.largest, self.sorted);
        select("topk", self.axis, k, largest, sorted, inputs, outputs)
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

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let n = inputs[0].shape.get(self.axis).copied().unwrap_or(0);
        select("sort", self.axis, n, self.descending, true, inputs, outputs)
    }
}

/// Values-only stable sort along `axis`: output 0 of [`Sort`], bit for bit, without the
/// permutation. Not built by users: a plan runs it for a `sort` whose permutation nothing reads.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SortValues {
    pub axis: usize,
    pub descending: bool,
}

impl HostKernel for SortValues {
    fn name(&self) -> &'static str {
        "sort_values"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("sort_values", inputs, &[DType::Fp16])?;
        check_axis("sort_values", self.axis, &inputs[0].shape)?;
        Ok(vec![TensorType::fp16(inputs[0].shape.clone())])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0].f32s("sort_values")?;
        check_axis("sort_values", self.axis, inputs[0].shape)?;
        let (outer, n, inner) = lanes(inputs[0].shape, self.axis);
        let plan = Select {
            outer,
            n,
            inner,
            k: n,
            largest: self.descending,
            sorted: true,
        };
        plan.sort_values("sort_values", x, outputs[0].f32s_mut("sort_values")?)
    }
}
