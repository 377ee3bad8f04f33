//! Builders of the indexing and scan host ops: `scatter`, `index_put`, `take_along_axis`,
//! `cumsum`, `one_hot`, `sample`. Each graph holding one compiles to a segmented plan.

use super::host::host;
use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::host::sample::{Sample, SampleParams};
use crate::ops::host::scan::{Cumsum, OneHot, ONE_HOT};
use crate::ops::host::scatter::{IndexPut, Scatter, ScatterReduce, TakeAlong};
use crate::ops::host::HostOp;
use crate::shape;

/// The single output of a host op.
fn one(op: HostOp, srcs: Vec<Tensor>) -> Result<Tensor> {
    Ok(host(op, srcs)?.remove(0))
}

impl Tensor {
    /// `scatter(self, indices, updates, axis, reduce)`: a copy of `self` with `updates[p]`
    /// written (or added, `"add"`) at `p` with `axis` replaced by the int32 `indices[p]`
    /// (ONNX ScatterElements; duplicates: last write wins). Errors: shapes (indices = updates,
    /// rank of self), dtypes, reduce name; out-of-range indices at run time. Host op.
    pub fn scatter(
        &self,
        indices: &Tensor,
        updates: &Tensor,
        axis: i64,
        reduce: Option<&str>,
    ) -> Result<Tensor> {
        let axis = shape::axis("scatter", axis, self.rank())?;
        let op = HostOp::Scatter(Scatter {
            axis,
            reduce: ScatterReduce::parse(reduce)?,
        });
        one(op, vec![self.clone(), indices.clone(), updates.clone()])
    }

    /// `take_along_axis(self, indices, axis)` (NumPy; ONNX GatherElements): output of the int32
    /// indices' shape. Host op.
    pub fn take_along_axis(&self, indices: &Tensor, axis: i64) -> Result<Tensor> {
        let axis = shape::axis("take_along_axis", axis, self.rank())?;
        one(
            HostOp::TakeAlong(TakeAlong { axis }),
            vec![self.clone(), indices.clone()],
        )
    }

    /// `index_put(self, row_index, rows, axis)`: a copy of `self` with `rows[.., k, ..]`
    /// written at `row_index[k]` along `axis` (int32 `row_index [K]`; `rows` is self's shape
    /// with `axis` of extent K) — the KV-cache write of a decoder. Host op.
    pub fn index_put(&self, row_index: &Tensor, rows: &Tensor, axis: i64) -> Result<Tensor> {
        let axis = shape::axis("index_put", axis, self.rank())?;
        one(
            HostOp::IndexPut(IndexPut { axis }),
            vec![self.clone(), row_index.clone(), rows.clone()],
        )
    }

    /// `one_hot(self, depth)` of int32 indices: fp16 `self.shape + [depth]`, 1 at each index;
    /// depth < 1 is a value error, an index outside `0..depth` a run-time error. Host op.
    pub fn one_hot(&self, depth: i64) -> Result<Tensor> {
        if depth < 1 {
            return Err(crate::Error::value(
                ONE_HOT,
                format!("depth must be >= 1, got {depth}"),
            ));
        }
        one(
            HostOp::OneHot(OneHot {
                depth: depth as usize,
            }),
            vec![self.clone()],
        )
    }

    /// One int32 token id per row of the logits `self [..., V]` → `[..., 1]`: greedy at
    /// temperature 0, else top-k / top-p sampling with SplitMix64 seeded by `seed` (see
    /// `ops::host::sample`). Errors name the bad parameter; non-finite logits fail at run time.
    pub fn sample(&self, temperature: f64, top_k: i64, top_p: f64, seed: u64) -> Result<Tensor> {
        let vocab = *self.shape().last().unwrap_or(&0);
        let p = SampleParams::new(temperature, top_k, top_p, seed, vocab)?;
        let op = Sample {
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            seed: p.seed,
        };
        one(HostOp::Sample(op), vec![self.clone()])
    }
}

/// `cumsum(x, axis, exclusive, reverse)`: running sum of fp16 `x` along any `axis`
/// (`exclusive`: without the element itself; `reverse`: from the end), accumulated in f64 and
/// rounded once; output has x's shape. Host op (the fused [`Tensor::cumsum`] covers the plain
/// last-axis case). Gradient: the reverse running sum.
pub fn cumsum(x: &Tensor, axis: i64, exclusive: bool, reverse: bool) -> Result<Tensor> {
    let axis = shape::axis("cumsum", axis, x.rank())?;
    one(
        HostOp::Cumsum(Cumsum {
            axis,
            exclusive,
            reverse,
        }),
        vec![x.clone()],
    )
}
