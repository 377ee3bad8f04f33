//! ONNX ops with runtime indices, onto the host ops of `ops/host_*.rs`: ArgMax/ArgMin, TopK,
//! Gather with runtime indices, GatherElements, ScatterElements/Scatter, CumSum and OneHot.
//! Index outputs are int32 tensors standing for ONNX int64.

use super::ops::to_fp16;
use super::ops::{Args, OpFn, Value};
use super::ops_int::{int_tensor, int_tensor_const, is_runtime_int};
use super::ops_layout::axis;
use super::ops_values::take;
use super::tensor::Elem;
use crate::error::Result;
use crate::graph::build::host::host;
use crate::graph::build::io::constant;
use crate::ops::elementwise::Compare;
use crate::ops::host::HostOp;
use crate::ops::host_int::{IntElementwise, IntKind, IntOp};
use crate::ops::host_scan::Cumsum;
use crate::ops::host_scatter::{Scatter, ScatterReduce, TakeAlong};
use crate::ops::io::HostArray;

/// The mapping of index op `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "ArgMax" | "ArgMin" => arg_reduce,
        "TopK" => topk,
        "GatherElements" => gather_elements,
        "ScatterElements" | "Scatter" => scatter_elements,
        "CumSum" => cumsum,
        "OneHot" => one_hot,
        _ => return None,
    })
}

fn index_value(t: crate::graph::Tensor) -> Value {
    Value::Graph { t, elem: Elem::I64 }
}

fn arg_reduce(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.req(0)?;
    let dims = x.dims();
    let ax = axis(n, n.int("axis", 0)?, dims.len())?;
    let keepdims = n.int("keepdims", 1)? != 0;
    let max = n.op() == "ArgMax";
    if !keepdims && dims.len() == 1 {
        return Err(n.unsupported("a rank-0 result (keepdims = 0 on a 1-D input)"));
    }
    let last = n.int("select_last_index", 0)? != 0;
    // The last extreme: the first one of the input reversed along the axis, counted back.
    let src = if last {
        let rev: Vec<usize> = (0..dims[ax]).rev().collect();
        take(x, ax, &rev)?
    } else {
        x.clone()
    };
    let t = super::ops::to_graph(n, &src)?;
    let mut idx = if max {
        t.argmax(ax as i64, keepdims)?
    } else {
        t.argmin(ax as i64, keepdims)?
    };
    if last {
        let top = int_tensor_const(a, dims[ax] as i64 - 1)?;
        let op = HostOp::IntElementwise(IntElementwise {
            op: IntOp::Sub,
            kind: IntKind::I64,
        });
        idx = host(op, vec![top, idx])?.remove(0);
    }
    Ok(vec![index_value(idx)])
}

fn topk(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.tensor(0)?;
    let rank = x.rank();
    let ax = axis(n, n.int("axis", -1)?, rank)?;
    let k = if n.opset < 10 {
        n.int("k", 0)?
    } else {
        let ks = a
            .ints(1, "K")?
            .ok_or_else(|| n.bad("input 1 (K) is missing"))?;
        *ks.first().ok_or_else(|| n.bad("K is empty"))?
    };
    if k < 1 || k as usize > x.shape()[ax] {
        return Err(n.bad(format!(
            "K = {k} is outside 1..={} (axis {ax} of {:?})",
            x.shape()[ax],
            x.shape()
        )));
    }
    let largest = n.int("largest", 1)? != 0;
    let sorted = n.int("sorted", 1)? != 0;
    let (values, indices) = x.topk(k as usize, ax as i64, largest, sorted)?;
    Ok(vec![
        Value::Graph {
            t: values,
            elem: a.req(0)?.elem(),
        },
        index_value(indices),
    ])
}

fn gather_elements(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.tensor(0)?;
    let ax = axis(n, n.int("axis", 0)?, x.rank())?;
    let idx = int_tensor(a, 1)?;
    let op = HostOp::TakeAlong(TakeAlong { axis: ax });
    Ok(vec![Value::Graph {
        t: host(op, vec![x, idx])?.remove(0),
        elem: a.req(0)?.elem(),
    }])
}

fn scatter_elements(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.tensor(0)?;
    let ax = axis(n, n.int("axis", 0)?, x.rank())?;
    let reduce = scatter_reduction(n)?;
    let idx = int_tensor(a, 1)?;
    let op = HostOp::Scatter(Scatter { axis: ax, reduce });
    Ok(vec![Value::Graph {
        t: host(op, vec![x, idx, a.tensor(2)?])?.remove(0),
        elem: a.req(0)?.elem(),
    }])
}

fn cumsum(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.tensor(0)?;
    let ax = a
        .ints(1, "axis")?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| n.bad("input 1 (axis) is missing or empty"))?;
    let ax = axis(n, ax, x.rank())?;
    let op = HostOp::Cumsum(Cumsum {
        axis: ax,
        exclusive: n.int("exclusive", 0)? != 0,
        reverse: n.int("reverse", 0)? != 0,
    });
    Ok(vec![Value::Graph {
        t: host(op, vec![x])?.remove(0),
        elem: a.req(0)?.elem(),
    }])
}

/// Gather with runtime int indices (NumPy `take`; negative indices count from the end).
pub fn gather_runtime(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.tensor(0)?;
    let ax = axis(n, n.int("axis", 0)?, x.rank())?;
    let idx = match a.req(1)? {
        v if is_runtime_int(v) => int_tensor(a, 1)?,
        _ => return Err(n.bad("indices are not runtime integers")),
    };
    Ok(vec![Value::Graph {
        t: x.take(&idx, ax as i64)?,
        elem: a.req(0)?.elem(),
    }])
}

/// OneHot: `off + (on − off)·[index == k]` on a new axis of extent depth (a constant; bind a
/// runtime depth with input_values). Negative indices count from depth; indices outside
/// -depth..depth give an all-off row; float indices truncate toward zero. Indices compare in
/// fp16, exact up to 2048, so depth is limited to 2048.
fn one_hot(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let depth = a
        .ints(1, "depth")?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| n.bad("input 1 (depth) is missing or empty"))?;
    if !(1..=2048).contains(&depth) {
        return Err(n.unsupported(&format!(
            "depth {depth} outside 1..=2048 (indices compare in fp16, exact up to 2048)"
        )));
    }
    let mut idx = a.ftensor_of_int(0)?;
    if a.req(0)?.elem().is_float() {
        // trunc(x) = sign(x)·floor(|x|)
        let mag = idx.unary_named("abs", &[])?.unary_named("floor", &[])?;
        idx = idx.unary_named("sign", &[])?.mul(&mag)?;
    }
    let rank = idx.rank();
    let ax = axis(n, n.int("axis", -1)?, rank + 1)?;
    let idx = idx.expand_dims(&[rank as i64])?;
    let ks: Vec<f32> = (0..depth).map(|k| k as f32).collect();
    let negs: Vec<f32> = (0..depth).map(|k| (k - depth) as f32).collect();
    let shape = [depth as usize];
    let hit = |ks: &[f32]| -> Result<crate::graph::Tensor> {
        let k = constant(&n.what, HostArray::f32(&shape, ks))?;
        to_fp16(&idx.compare(Compare::Equal, &k)?)
    };
    let hot = hit(&ks)?.add(&hit(&negs)?)?;
    let values = a.ftensor(2)?.reshape(&[2])?;
    let off = values.slice_by_size(&[0], &[1])?;
    let on = values.slice_by_size(&[1], &[1])?;
    let y = hot.mul(&on.sub(&off)?)?.add(&off)?;
    let y = if ax == rank {
        y
    } else {
        let mut perm: Vec<i64> = (0..rank as i64).collect();
        perm.insert(ax, rank as i64);
        y.transpose(&perm)?
    };
    Ok(vec![Value::Graph {
        t: y,
        elem: a.req(2)?.elem(),
    }])
}

/// The `reduction` attribute of ScatterElements/ScatterND: "none" or "add" (the host scatter
/// kernel's two modes); any other is unsupported, naming it.
pub(super) fn scatter_reduction(n: &super::node::Node) -> Result<ScatterReduce> {
    match n.string("reduction", "none")?.as_str() {
        "none" => Ok(ScatterReduce::Replace),
        "add" => Ok(ScatterReduce::Add),
        other => Err(n.unsupported(&format!(
            "reduction = '{other}' (the host scatter kernel replaces or adds)"
        ))),
    }
}
