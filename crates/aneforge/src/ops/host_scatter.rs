//! `scatter` (ONNX ScatterElements / `torch.scatter` semantics) and `index_put` (a whole-row
//! update along one axis: the KV-cache write of a decoder). Duplicate target positions are
//! applied in row-major order of `indices` (the last write wins; `add` sums them all).

use super::host::checks::{check_len, resolve_index};
use super::host::lanes;
use super::host::{check_axis, expect_dtypes, HostKernel, HostRef, HostTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::TensorType;
use crate::shape::{self, Shape};

/// Op names used in errors.
pub const SCATTER: &str = "scatter";
/// Op name of the row update.
pub const INDEX_PUT: &str = "index_put";
/// Op name of the elementwise gather (the gradient of scatter's updates).
pub const TAKE_ALONG: &str = "take_along_axis";

/// How `scatter` combines an update with the value already in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScatterReduce {
    /// The update replaces the value (`reduce=None`).
    Replace,
    /// The update is added to the value (`reduce="add"`).
    Add,
}

impl ScatterReduce {
    /// `None` → Replace, `"add"` → Add; any other name is a value error listing the choices.
    pub fn parse(reduce: Option<&str>) -> Result<Self> {
        match reduce {
            None | Some("none") => Ok(ScatterReduce::Replace),
            Some("add") => Ok(ScatterReduce::Add),
            Some(other) => Err(Error::value(
                SCATTER,
                format!("reduce must be None or \"add\", got {other:?}"),
            )),
        }
    }

    /// The spelling `parse` accepts (`"none"` or `"add"`).
    pub fn name(self) -> &'static str {
        match self {
            ScatterReduce::Replace => "none",
            ScatterReduce::Add => "add",
        }
    }
}

/// Shape rule of `scatter`: `indices` and `updates` have the same shape, the rank of `x`, and
/// extents no larger than `x`'s on every axis but `axis`; the output has `x`'s shape.
pub fn scatter_shape(
    x: &[usize],
    indices: &[usize],
    updates: &[usize],
    axis: usize,
) -> Result<Shape> {
    if indices != updates {
        return Err(Error::shape(
            SCATTER,
            format!("indices {indices:?} and updates {updates:?} must have the same shape"),
        ));
    }
    if indices.len() != x.len() {
        return Err(Error::shape(
            SCATTER,
            format!("indices {indices:?} must have the rank of x {x:?}"),
        ));
    }
    if let Some(d) = (0..x.len()).find(|&d| d != axis && indices[d] > x[d]) {
        return Err(Error::shape(
            SCATTER,
            format!(
                "indices {indices:?} exceed x {x:?} on axis {d} (only axis {axis} may be larger)"
            ),
        ));
    }
    Ok(x.to_vec())
}

/// `out = x`, then for every position `p` of `indices`: `out[p with axis := indices[p]]`
/// is replaced by (or, for `Add`, incremented by) `updates[p]`. Every index is checked first.
pub fn scatter(
    x: &[f32],
    x_shape: &[usize],
    indices: &[i32],
    idx_shape: &[usize],
    updates: &[f32],
    axis: usize,
    reduce: ScatterReduce,
) -> Result<Vec<f32>> {
    scatter_shape(x_shape, idx_shape, idx_shape, axis)?;
    check_len(SCATTER, "x", x.len(), x_shape)?;
    check_len(SCATTER, "indices", indices.len(), idx_shape)?;
    check_len(SCATTER, "updates", updates.len(), idx_shape)?;
    let targets = along_offsets(SCATTER, x_shape, indices, idx_shape, axis)?;
    let mut out = x.to_vec();
    for (&t, &u) in targets.iter().zip(updates) {
        match reduce {
            ScatterReduce::Replace => out[t] = u,
            ScatterReduce::Add => out[t] += u,
        }
    }
    Ok(out)
}

/// Flat offsets into `x` of every position `p` of `indices` with `axis` replaced by
/// `indices[p]` (each index checked against `x`'s extent, naming `op`).
fn along_offsets(
    op: &str,
    x_shape: &[usize],
    indices: &[i32],
    idx_shape: &[usize],
    axis: usize,
) -> Result<Vec<usize>> {
    let x_strides = shape::strides(x_shape);
    let mut offsets = Vec::with_capacity(indices.len());
    let mut coord = vec![0usize; idx_shape.len()];
    for &index in indices {
        let at = resolve_index(op, "indices", index as i64, x_shape[axis])?;
        let offset: usize = coord
            .iter()
            .zip(&x_strides)
            .enumerate()
            .map(|(d, (&c, &s))| if d == axis { at * s } else { c * s })
            .sum();
        offsets.push(offset);
        for d in (0..coord.len()).rev() {
            coord[d] += 1;
            if coord[d] < idx_shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    Ok(offsets)
}

/// `take_along_axis` (ONNX GatherElements): `out[p] = x[p with axis := indices[p]]`, output of
/// the indices' shape (same rank as `x`, extents no larger off `axis`); indices checked first.
pub fn take_along(
    x: &[f32],
    x_shape: &[usize],
    indices: &[i32],
    idx_shape: &[usize],
    axis: usize,
) -> Result<Vec<f32>> {
    scatter_shape(x_shape, idx_shape, idx_shape, axis)?;
    check_len(TAKE_ALONG, "x", x.len(), x_shape)?;
    check_len(TAKE_ALONG, "indices", indices.len(), idx_shape)?;
    let offsets = along_offsets(TAKE_ALONG, x_shape, indices, idx_shape, axis)?;
    Ok(offsets.iter().map(|&o| x[o]).collect())
}

/// Shape rule of `index_put`: `row_index` is 1-D `[K]` and `rows` is `x`'s shape with `axis`
/// of extent `K`; the output has `x`'s shape.
pub fn index_put_shape(
    x: &[usize],
    row_index: &[usize],
    rows: &[usize],
    axis: usize,
) -> Result<Shape> {
    if row_index.len() != 1 {
        return Err(Error::shape(
            INDEX_PUT,
            format!("row_index must be 1-D [K], got shape {row_index:?}"),
        ));
    }
    let mut want = x.to_vec();
    want[axis] = row_index[0];
    if rows != want.as_slice() {
        return Err(Error::shape(
            INDEX_PUT,
            format!("rows must have shape {want:?} (x {x:?} with axis {axis} of extent {}), got {rows:?}", row_index[0]),
        ));
    }
    Ok(x.to_vec())
}

/// `out = x`, then `out[.., row_index[k], ..] = rows[.., k, ..]` along `axis` for each `k`
/// (a later `k` wins on a repeated index). Every index is checked first.
pub fn index_put(
    x: &[f32],
    x_shape: &[usize],
    row_index: &[i32],
    rows: &[f32],
    axis: usize,
) -> Result<Vec<f32>> {
    let mut rows_shape = x_shape.to_vec();
    rows_shape[axis] = row_index.len();
    check_len(INDEX_PUT, "x", x.len(), x_shape)?;
    check_len(INDEX_PUT, "rows", rows.len(), &rows_shape)?;
    let (outer, extent, inner) = lanes(x_shape, axis);
    let at = row_index
        .iter()
        .map(|&i| resolve_index(INDEX_PUT, "row_index", i as i64, extent))
        .collect::<Result<Vec<_>>>()?;
    let mut out = x.to_vec();
    let k = at.len();
    for o in 0..outer {
        for (j, &a) in at.iter().enumerate() {
            let src = (o * k + j) * inner;
            let dst = (o * extent + a) * inner;
            out[dst..dst + inner].copy_from_slice(&rows[src..src + inner]);
        }
    }
    Ok(out)
}

/// `scatter(x, indices, updates, axis, reduce)` as a host op: fp16 `x`, int32 `indices`, fp16
/// `updates` → fp16 of `x`'s shape.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scatter {
    pub axis: usize,
    pub reduce: ScatterReduce,
}

impl HostKernel for Scatter {
    fn name(&self) -> &'static str {
        SCATTER
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(SCATTER, inputs, &[DType::Fp16, DType::Int32, DType::Fp16])?;
        check_axis(SCATTER, self.axis, &inputs[0].shape)?;
        let (x, i, u) = (&inputs[0].shape, &inputs[1].shape, &inputs[2].shape);
        Ok(vec![TensorType::fp16(scatter_shape(x, i, u, self.axis)?)])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let (x, i, u) = (inputs[0], inputs[1], inputs[2]);
        let out = scatter(
            x.f32s(SCATTER)?,
            x.shape,
            i.i32s(SCATTER)?,
            i.shape,
            u.f32s(SCATTER)?,
            self.axis,
            self.reduce,
        )?;
        outputs[0].f32s_mut(SCATTER)?.copy_from_slice(&out);
        Ok(())
    }
}

/// `take_along_axis(x, indices, axis)` (ONNX GatherElements): `out[p] = x[p with axis :=
/// indices[p]]`; fp16 `x`, int32 `indices` of `x`'s rank → fp16 of the indices' shape. The
/// gradient of `scatter`'s updates.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TakeAlong {
    pub axis: usize,
}

impl HostKernel for TakeAlong {
    fn name(&self) -> &'static str {
        TAKE_ALONG
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(TAKE_ALONG, inputs, &[DType::Fp16, DType::Int32])?;
        check_axis(TAKE_ALONG, self.axis, &inputs[0].shape)?;
        let (x, i) = (&inputs[0].shape, &inputs[1].shape);
        scatter_shape(x, i, i, self.axis).map_err(|e| Error::shape(TAKE_ALONG, e.to_string()))?;
        Ok(vec![TensorType::fp16(i.clone())])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let (x, i) = (inputs[0], inputs[1]);
        let out = take_along(
            x.f32s(TAKE_ALONG)?,
            x.shape,
            i.i32s(TAKE_ALONG)?,
            i.shape,
            self.axis,
        )?;
        outputs[0].f32s_mut(TAKE_ALONG)?.copy_from_slice(&out);
        Ok(())
    }
}

/// `index_put(x, row_index, rows, axis)` as a host op: fp16 `x`, int32 `row_index [K]`, fp16
/// `rows` (x's shape with `axis` of extent K) → fp16 of `x`'s shape.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IndexPut {
    pub axis: usize,
}

impl HostKernel for IndexPut {
    fn name(&self) -> &'static str {
        INDEX_PUT
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(INDEX_PUT, inputs, &[DType::Fp16, DType::Int32, DType::Fp16])?;
        check_axis(INDEX_PUT, self.axis, &inputs[0].shape)?;
        let (x, i, r) = (&inputs[0].shape, &inputs[1].shape, &inputs[2].shape);
        Ok(vec![TensorType::fp16(index_put_shape(x, i, r, self.axis)?)])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let (x, i, r) = (inputs[0], inputs[1], inputs[2]);
        let out = index_put(
            x.f32s(INDEX_PUT)?,
            x.shape,
            i.i32s(INDEX_PUT)?,
            r.f32s(INDEX_PUT)?,
            self.axis,
        )?;
        outputs[0].f32s_mut(INDEX_PUT)?.copy_from_slice(&out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_replace_follows_the_onnx_scatter_elements_example() {
        // ONNX ScatterElements example 1 (axis 0) written out by hand.
        let x = [0.0; 9];
        let idx = [1, 0, 2, 0, 2, 1];
        let upd = [1.0, 1.1, 1.2, 2.0, 2.1, 2.2];
        let out = scatter(&x, &[3, 3], &idx, &[2, 3], &upd, 0, ScatterReduce::Replace).unwrap();
        assert_eq!(out, [2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2]);
    }

    #[test]
    fn scatter_add_sums_duplicates_and_negative_indices_count_from_the_end() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let out = scatter(
            &x,
            &[1, 5],
            &[1, 3, -4],
            &[1, 3],
            &[1.1, 2.1, 0.5],
            1,
            ScatterReduce::Add,
        )
        .unwrap();
        assert_eq!(out, [1.0, 2.0 + 1.1 + 0.5, 3.0, 4.0 + 2.1, 5.0]);
    }

    #[test]
    fn scatter_rejects_out_of_range_indices_and_shape_mismatches() {
        let e = scatter(
            &[0.0; 4],
            &[4],
            &[4],
            &[1],
            &[1.0],
            0,
            ScatterReduce::Replace,
        )
        .unwrap_err();
        assert!(e.to_string().contains("index 4"), "{e}");
        assert!(scatter_shape(&[2, 3], &[2, 4], &[2, 4], 0).is_err());
        assert!(scatter_shape(&[2, 3], &[2], &[2], 0).is_err());
        assert!(scatter_shape(&[2, 3], &[5, 3], &[5, 2], 0).is_err());
        assert_eq!(scatter_shape(&[2, 3], &[5, 3], &[5, 3], 0).unwrap(), [2, 3]);
        assert!(ScatterReduce::parse(Some("mul")).is_err());
    }

    #[test]
    fn take_along_reads_what_scatter_wrote() {
        // np.take_along_axis([[10, 20, 30], [40, 50, 60]], [[2, 0], [1, 1]], axis=1)
        let x = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0];
        let out = take_along(&x, &[2, 3], &[2, 0, 1, -1], &[2, 2], 1).unwrap();
        assert_eq!(out, [30.0, 10.0, 50.0, 60.0]);
        assert!(take_along(&x, &[2, 3], &[3, 0, 0, 0], &[2, 2], 1).is_err());
    }

    #[test]
    fn index_put_writes_rows_along_the_axis() {
        // A [2 heads, 3 positions, 2 dims] cache, write position 1 of both heads.
        let cache: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let out = index_put(&cache, &[2, 3, 2], &[1], &[-1.0, -2.0, -3.0, -4.0], 1).unwrap();
        let mut want = cache.clone();
        want[2..4].copy_from_slice(&[-1.0, -2.0]);
        want[8..10].copy_from_slice(&[-3.0, -4.0]);
        assert_eq!(out, want);
        assert!(index_put(&cache, &[2, 3, 2], &[3], &[0.0; 4], 1).is_err());
        assert!(index_put_shape(&[2, 3, 2], &[1], &[2, 1, 3], 1).is_err());
        assert_eq!(
            index_put_shape(&[2, 3, 2], &[2], &[2, 2, 2], 1).unwrap(),
            [2, 3, 2]
        );
    }
}
