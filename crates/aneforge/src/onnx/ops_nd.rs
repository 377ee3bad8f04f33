//! GatherND and ScatterND onto the host `take` / `scatter` kernels: the index tuples become one
//! flat row index into the data viewed as [rows, trailing dims...]. The flat index is computed
//! in fp16 (exact up to 2048), so the indexed prefix of the data holds at most 2048 rows.

use super::ops::{Args, OpFn, Value};
use super::ops_index::scatter_reduction;
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::build::host::host;
use crate::graph::build::io::constant;
use crate::graph::Tensor;
use crate::ops::elementwise::Compare;
use crate::ops::host::HostOp;
use crate::ops::host_scatter::Scatter;
use crate::ops::io::HostArray;

/// The mapping of `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "GatherND" => gather_nd,
        "ScatterND" => scatter_nd,
        _ => return None,
    })
}

/// Largest row count of the indexed prefix (fp16 integers are exact up to 2048).
const MAX_ROWS: usize = 2048;

/// Flat row indices (fp16, shape `indices.shape[..-1] + [1]`) of the index tuples of input 1
/// into the data dims `d` with `b` batch dims; negative entries count from the end.
fn flat_rows(a: &Args, d: &[usize], b: usize) -> Result<Tensor> {
    let n = a.node;
    let idims = a.req(1)?.dims();
    let k = *idims.last().unwrap_or(&0);
    if idims.len() <= b || b + k > d.len() || k == 0 || idims[..b] != d[..b] {
        return Err(n.bad(format!(
            "indices {idims:?} do not index data {d:?} with batch_dims {b}"
        )));
    }
    let rows: usize = d[..b + k].iter().product();
    if rows > MAX_ROWS {
        return Err(n.unsupported(&format!(
            "an indexed prefix of {rows} rows (flat indices are exact in fp16 up to {MAX_ROWS})"
        )));
    }
    let idx = a.ftensor_of_int(1)?;
    let ext: Vec<f32> = d[b..b + k].iter().map(|&x| x as f32).collect();
    let strides: Vec<f32> = (0..k)
        .map(|j| d[b + j + 1..b + k].iter().product::<usize>() as f32)
        .collect();
    let ext = constant(&n.what, HostArray::f32(&[k], &ext))?;
    let strides = constant(&n.what, HostArray::f32(&[k], &strides))?;
    let negative = super::ops::to_fp16(&idx.compare_scalar(Compare::Less, 0.0)?)?;
    let wrapped = idx.add(&negative.mul(&ext)?)?;
    let last = idims.len() as i64 - 1;
    let mut flat = wrapped.mul(&strides)?.sum(&[last], true)?;
    if b > 0 {
        // Batch offsets: the linear batch position times the rows of one batch.
        let per: usize = d[b..b + k].iter().product();
        let batches: usize = d[..b].iter().product();
        let offsets: Vec<f32> = (0..batches).map(|i| (i * per) as f32).collect();
        let mut shape = d[..b].to_vec();
        shape.resize(idims.len(), 1);
        flat = flat.add(&constant(&n.what, HostArray::f32(&shape, &offsets))?)?;
    }
    Ok(flat)
}

fn dims_i64(d: &[usize]) -> Vec<i64> {
    d.iter().map(|&x| x as i64).collect()
}

/// GatherND (any batch_dims): rows of the data viewed as [rows, trailing...] at the flat index.
fn gather_nd(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let data = a.tensor(0)?;
    let d = data.shape().to_vec();
    let b = n.int("batch_dims", 0)?.max(0) as usize;
    let idims = a.req(1)?.dims();
    let flat = flat_rows(a, &d, b)?.cast(DType::Int32)?;
    let k = idims[idims.len() - 1];
    let mut view = vec![d[..b + k].iter().product::<usize>()];
    view.extend_from_slice(&d[b + k..]);
    let rows = data.reshape(&dims_i64(&view))?.take(&flat, 0)?;
    let mut out = idims[..idims.len() - 1].to_vec();
    out.extend_from_slice(&d[b + k..]);
    if out.is_empty() {
        out.push(1);
    }
    Ok(vec![Value::Graph {
        t: rows.reshape(&dims_i64(&out))?,
        elem: a.req(0)?.elem(),
    }])
}

/// ScatterND (reduction none or add): a scatter along the rows of the data viewed as
/// [rows, trailing...]; the flat row index is broadcast over the trailing dims.
fn scatter_nd(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let data = a.tensor(0)?;
    let d = data.shape().to_vec();
    let reduce = scatter_reduction(n)?;
    let idims = a.req(1)?.dims();
    let k = *idims.last().unwrap_or(&0);
    let flat = flat_rows(a, &d, 0)?;
    let m: usize = idims[..idims.len() - 1].iter().product();
    let rest = &d[k..];
    let mut upd_shape = vec![m];
    upd_shape.extend_from_slice(rest);
    let mut ones = vec![m];
    ones.resize(upd_shape.len(), 1);
    let zeros = vec![0.0f32; upd_shape.iter().product()];
    let index = flat
        .reshape(&dims_i64(&ones))?
        .add(&constant(&n.what, HostArray::f32(&upd_shape, &zeros))?)?
        .cast(DType::Int32)?;
    let updates = a.tensor(2)?.reshape(&dims_i64(&upd_shape))?;
    let mut view = vec![d[..k].iter().product::<usize>()];
    view.extend_from_slice(rest);
    let op = HostOp::Scatter(Scatter { axis: 0, reduce });
    let y = host(op, vec![data.reshape(&dims_i64(&view))?, index, updates])?.remove(0);
    Ok(vec![Value::Graph {
        t: y.reshape(&dims_i64(&d))?,
        elem: a.req(0)?.elem(),
    }])
}
