//! ONNX Reduce* ops (axes as an attribute before opset 18 — 13 for ReduceSum — then as an
//! input; `noop_with_empty_axes`); ReduceProd as a chain of fp16 products along each axis;
//! CumProd as running fp16 products along its axis.

use super::ops::{Args, OpFn, Value};
use crate::error::Result;

/// The mapping of reduce op `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    if op == "LpNormalization" {
        return Some(lp_normalization);
    }
    if op == "CumProd" {
        return Some(cumprod);
    }
    matches!(
        op,
        "ReduceSum"
            | "ReduceMean"
            | "ReduceMax"
            | "ReduceMin"
            | "ReduceL1"
            | "ReduceL2"
            | "ReduceLogSum"
            | "ReduceLogSumExp"
            | "ReduceSumSquare"
            | "ReduceProd"
    )
    .then_some(reduce as OpFn)
}

fn reduce(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let since = if n.op() == "ReduceSum" { 13 } else { 18 };
    let axes = super::ops::layout::attr_or_input(a, "axes", since, 1)?.unwrap_or_default();
    let x = a.ftensor(0)?;
    let keep = n.int("keepdims", 1)? != 0;
    if axes.is_empty() && n.int("noop_with_empty_axes", 0)? != 0 {
        return Ok(vec![a.req(0)?.clone()]);
    }
    let axes: Vec<i64> = if axes.is_empty() {
        (0..x.rank() as i64).collect()
    } else {
        axes
    };
    // A full reduction without keepdims is rank 0 in ONNX: [1] here (no rank-0 tensors).
    let scalar = !keep && axes.len() == x.rank();
    let keep = keep || scalar;
    let y = match n.op() {
        "ReduceSum" => x.sum(&axes, keep)?,
        "ReduceMean" => x.mean(&axes, keep)?,
        "ReduceMax" => x.amax(&axes, keep)?,
        "ReduceMin" => x.amin(&axes, keep)?,
        "ReduceL1" => x.l1_norm(&axes, keep)?,
        "ReduceL2" => x.reduce_l2_norm(&axes, keep)?,
        "ReduceLogSum" => x.log_sum(&axes, keep)?,
        "ReduceLogSumExp" => x.log_sum_exp(&axes, keep)?,
        "ReduceProd" => product(&x, &axes, keep)?,
        _ => x.sum_square(&axes, keep)?,
    };
    let y = if scalar { y.reshape(&[1])? } else { y };
    Ok(vec![Value::float(y)])
}

/// Product over `axes`: the slices along each axis multiplied in order (fp16 products, as the
/// contract rounds every op).
fn product(x: &crate::graph::Tensor, axes: &[i64], keep: bool) -> Result<crate::graph::Tensor> {
    let rank = x.rank();
    let mut axes: Vec<usize> = axes
        .iter()
        .map(|&a| crate::shape::axis("ReduceProd", a, rank))
        .collect::<Result<_>>()?;
    axes.sort_unstable();
    axes.dedup();
    let mut y = x.clone();
    for &ax in &axes {
        let n = y.shape()[ax];
        if n > 1 {
            let parts = y.split(n, ax as i64)?;
            y = parts[1..]
                .iter()
                .try_fold(parts[0].clone(), |acc, p| acc.mul(p))?;
        }
    }
    if keep {
        return Ok(y);
    }
    y.squeeze(&axes.iter().map(|&a| a as i64).collect::<Vec<_>>())
}

/// `x / ‖x‖_p` along `axis` (p = 1 or 2); an all-zero lane stays 0.
fn lp_normalization(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let axis = [n.int("axis", -1)?];
    let norm = match n.int("p", 2)? {
        1 => x.l1_norm(&axis, true)?,
        2 => x.reduce_l2_norm(&axis, true)?,
        p => return Err(n.bad(format!("p = {p} is not 1 or 2"))),
    };
    // A zero norm (an all-zero lane) gives 0, not 0/0: the norm is floored at fp16's smallest
    // positive value, which no nonzero norm is below.
    Ok(vec![Value::float(
        x.div(&norm.maximum_scalar(5.960_464_5e-8)?)?,
    )])
}

/// CumProd along its axis (known at import): running products of the slices in order (or in
/// reverse); exclusive starts from 1.
fn cumprod(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let ax = a
        .ints(1, "axis")?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| n.bad("input 1 (axis) is missing or empty"))?;
    let ax = crate::shape::axis(&n.what, ax, x.rank())?;
    let (exclusive, reverse) = (n.int("exclusive", 0)? != 0, n.int("reverse", 0)? != 0);
    let len = x.shape()[ax];
    let slice = |i: usize| {
        let mut begin = vec![0; x.rank()];
        begin[ax] = i;
        let mut size = x.shape().to_vec();
        size[ax] = 1;
        x.slice_by_size(&begin, &size)
    };
    let order: Vec<usize> = if reverse {
        (0..len).rev().collect()
    } else {
        (0..len).collect()
    };
    let mut outs: Vec<Option<crate::graph::Tensor>> = vec![None; len];
    let mut run: Option<crate::graph::Tensor> = None;
    for i in order {
        let xi = slice(i)?;
        let incl = match &run {
            Some(r) => r.mul(&xi)?,
            None => xi.clone(),
        };
        outs[i] = Some(match (&run, exclusive) {
            (_, false) => incl.clone(),
            (Some(r), true) => r.clone(),
            (None, true) => xi.mul_scalar(0.0)?.add_scalar(1.0)?,
        });
        run = Some(incl);
    }
    let outs: Vec<crate::graph::Tensor> = outs.into_iter().flatten().collect();
    let y = crate::graph::build::layout::concat(&outs, ax as i64)?;
    Ok(vec![Value::Graph {
        t: y,
        elem: a.req(0)?.elem(),
    }])
}
