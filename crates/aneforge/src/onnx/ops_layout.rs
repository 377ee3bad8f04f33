//! Layout ONNX ops over [`Value`]s (host constants fold, graph tensors build): Reshape, Flatten,
//! Transpose, Squeeze/Unsqueeze, Concat, Split, Slice, Gather (constant indices), Expand, Tile,
//! Pad, DepthToSpace/SpaceToDepth, Identity/Dropout, Resize/Upsample.

use super::ops::values::{concat, reshape, take, transpose};
use super::ops::{to_graph, Args, OpFn, Value};
use crate::error::Result;
use crate::graph::build::io::constant;
use crate::onnx::node::Node;
use crate::ops::io::{HostArray, HostData};

/// The mapping of layout op `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "Reshape" => reshape_op,
        "Flatten" => flatten,
        "Transpose" => transpose_op,
        "Squeeze" => squeeze,
        "Unsqueeze" => unsqueeze,
        "Concat" => concat_op,
        "Split" => split,
        "Slice" => slice,
        "Gather" => gather,
        "Expand" => expand,
        "Tile" => tile,
        "Pad" => pad,
        "CenterCropPad" => center_crop_pad,
        "DepthToSpace" | "SpaceToDepth" => depth_space,
        "Identity" | "Dropout" => identity,
        "Resize" | "Upsample" => super::ops::resize::resize,
        _ => return None,
    })
}

/// Normalise ONNX axis `a` against `rank`.
pub fn axis(n: &Node, a: i64, rank: usize) -> Result<usize> {
    crate::shape::axis(&n.what, a, rank)
}

/// Integer list from attribute `attr` before opset `since`, else from constant input `input`.
pub fn attr_or_input(a: &Args, attr: &str, since: i64, input: usize) -> Result<Option<Vec<i64>>> {
    if a.node.opset < since {
        a.node.ints(attr)
    } else {
        a.ints(input, attr)
    }
}

fn reshape_op(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.req(0)?;
    let dims = x.dims();
    let shape = attr_or_input(a, "shape", 5, 1)?.ok_or_else(|| n.bad("shape is missing"))?;
    let allow_zero = n.int("allowzero", 0)? != 0;
    let mut out: Vec<i64> = shape
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            if s == 0 && !allow_zero {
                dims.get(i).map_or(0, |&d| d as i64)
            } else {
                s
            }
        })
        .collect();
    let total: usize = dims.iter().product();
    let known: i64 = out.iter().filter(|&&s| s != -1).product();
    if let Some(p) = out.iter().position(|&s| s == -1) {
        if known <= 0 || total as i64 % known != 0 || out.iter().filter(|&&s| s == -1).count() > 1 {
            return Err(n.bad(format!("cannot reshape {dims:?} to {shape:?}")));
        }
        out[p] = total as i64 / known;
    }
    if out.iter().any(|&s| s < 0) || out.iter().product::<i64>() != total as i64 {
        return Err(n.bad(format!("cannot reshape {dims:?} to {shape:?}")));
    }
    let out: Vec<usize> = out.iter().map(|&s| s as usize).collect();
    Ok(vec![reshape(x, &out)?])
}

fn flatten(a: &Args) -> Result<Vec<Value>> {
    let x = a.req(0)?;
    let dims = x.dims();
    let ax = a.node.int("axis", 1)?;
    let ax = if ax == dims.len() as i64 {
        dims.len()
    } else {
        axis(a.node, ax, dims.len())?
    };
    let rows: usize = dims[..ax].iter().product();
    Ok(vec![reshape(x, &[rows, dims[ax..].iter().product()])?])
}

fn transpose_op(a: &Args) -> Result<Vec<Value>> {
    let x = a.req(0)?;
    let r = x.dims().len();
    let perm: Vec<usize> = match a.node.ints("perm")? {
        Some(p) => p
            .iter()
            .map(|&v| axis(a.node, v, r))
            .collect::<Result<_>>()?,
        None => (0..r).rev().collect(),
    };
    Ok(vec![transpose(x, &perm)?])
}

fn squeeze(a: &Args) -> Result<Vec<Value>> {
    let x = a.req(0)?;
    let dims = x.dims();
    let axes = attr_or_input(a, "axes", 13, 1)?;
    let drop: Vec<usize> = match axes {
        Some(ax) => ax
            .iter()
            .map(|&v| axis(a.node, v, dims.len()))
            .collect::<Result<_>>()?,
        None => (0..dims.len()).filter(|&i| dims[i] == 1).collect(),
    };
    if let Some(&bad) = drop.iter().find(|&&i| dims[i] != 1) {
        return Err(a.node.bad(format!("axis {bad} of {dims:?} is not 1")));
    }
    let out: Vec<usize> = (0..dims.len())
        .filter(|i| !drop.contains(i))
        .map(|i| dims[i])
        .collect();
    Ok(vec![reshape(x, &out)?])
}

fn unsqueeze(a: &Args) -> Result<Vec<Value>> {
    let x = a.req(0)?;
    let dims = x.dims();
    let axes = attr_or_input(a, "axes", 13, 1)?.ok_or_else(|| a.node.bad("axes is missing"))?;
    let r = dims.len() + axes.len();
    let mut ins: Vec<usize> = axes
        .iter()
        .map(|&v| axis(a.node, v, r))
        .collect::<Result<_>>()?;
    ins.sort_unstable();
    let mut out = dims.clone();
    for &i in &ins {
        out.insert(i, 1);
    }
    Ok(vec![reshape(x, &out)?])
}

fn concat_op(a: &Args) -> Result<Vec<Value>> {
    let vs: Vec<Value> = a.vals.iter().flatten().cloned().collect();
    let rank = vs
        .first()
        .ok_or_else(|| a.node.bad("no inputs"))?
        .dims()
        .len();
    let ax = axis(a.node, a.node.int("axis", 0)?, rank)?;
    Ok(vec![concat(&vs, ax, a.node)?])
}

fn split(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.req(0)?;
    let dims = x.dims();
    let ax = axis(n, n.int("axis", 0)?, dims.len())?;
    let outs = n.proto.output.len();
    let sizes: Vec<usize> = match attr_or_input(a, "split", 13, 1)? {
        Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
        None => {
            let parts = if n.opset >= 18 && n.has("num_outputs") {
                n.int("num_outputs", 1)?.max(1) as usize
            } else {
                outs
            };
            let each = dims[ax].div_ceil(parts);
            (0..parts)
                .map(|i| each.min(dims[ax].saturating_sub(i * each)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != dims[ax] || sizes.len() != outs {
        return Err(n.bad(format!(
            "split sizes {sizes:?} do not cover axis {ax} of {dims:?} in {outs} outputs"
        )));
    }
    let mut start = 0;
    sizes
        .iter()
        .map(|&s| {
            let idx: Vec<usize> = (start..start + s).collect();
            start += s;
            take(x, ax, &idx)
        })
        .collect()
}

/// Indices selected by a NumPy-style slice (start, end, step) over extent `d`.
pub fn slice_indices(d: usize, start: i64, end: i64, step: i64) -> Vec<usize> {
    let d = d as i64;
    let clamp = |v: i64, lo: i64, hi: i64| v.clamp(lo, hi);
    let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let mut out = Vec::new();
    if step > 0 {
        let (s, e) = (clamp(norm(start), 0, d), clamp(norm(end), 0, d));
        let mut i = s;
        while i < e {
            out.push(i as usize);
            i += step;
        }
    } else {
        let (s, e) = (clamp(norm(start), -1, d - 1), clamp(norm(end), -1, d - 1));
        let mut i = s;
        while i > e {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

fn slice(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let mut x = a.req(0)?.clone();
    let dims = x.dims();
    let (starts, ends, axes, steps) = if n.opset < 10 {
        (n.ints("starts")?, n.ints("ends")?, n.ints("axes")?, None)
    } else {
        (
            a.ints(1, "starts")?,
            a.ints(2, "ends")?,
            a.ints(3, "axes")?,
            a.ints(4, "steps")?,
        )
    };
    let (starts, ends) = (starts.unwrap_or_default(), ends.unwrap_or_default());
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(n.bad("starts, ends, axes and steps must have equal lengths"));
    }
    for i in 0..starts.len() {
        let ax = axis(n, axes[i], dims.len())?;
        if steps[i] == 0 {
            return Err(n.bad("a step is 0"));
        }
        let idx = slice_indices(dims[ax], starts[i], ends[i], steps[i]);
        if idx.is_empty() {
            return Err(n.unsupported("an empty slice (zero-size tensors)"));
        }
        x = take(&x, ax, &idx)?;
    }
    Ok(vec![x])
}

fn gather(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.req(0)?;
    let dims = x.dims();
    let ax = axis(n, n.int("axis", 0)?, dims.len())?;
    if a.get(1).is_some_and(super::ops_int::is_runtime_int) {
        return super::ops_index::gather_runtime(a);
    }
    let ind = a
        .host(1, "indices")?
        .ok_or_else(|| n.bad("indices are missing"))?;
    let d = dims[ax] as i64;
    let idx = ind
        .to_i64()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + d } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| j < dims[ax])
                .ok_or_else(|| {
                    n.bad(format!(
                        "index {i} is out of range for axis {ax} of {dims:?}"
                    ))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    if idx.is_empty() {
        return Err(n.unsupported("empty indices (zero-size tensors)"));
    }
    let y = take(x, ax, &idx)?;
    let out: Vec<usize> = [&dims[..ax], &ind.dims[..], &dims[ax + 1..]].concat();
    Ok(vec![reshape(&y, &out)?])
}

/// `x` broadcast to `target` dims (ranks aligned on the right) by repeating size-1 axes.
fn broadcast_to(n: &Node, x: &Value, target: &[usize]) -> Result<Value> {
    let dims = x.dims();
    let r = target.len().max(dims.len());
    let mut padded = vec![1usize; r - dims.len()];
    padded.extend_from_slice(&dims);
    let mut y = reshape(x, &padded)?;
    for i in 0..r {
        let t = if i < r - target.len() {
            1
        } else {
            target[i - (r - target.len())]
        };
        if padded[i] == 1 && t > 1 {
            y = take(&y, i, &vec![0; t])?;
        } else if padded[i] != t && t != 1 {
            return Err(n.bad(format!("cannot expand {dims:?} to {target:?}")));
        }
    }
    Ok(y)
}

fn expand(a: &Args) -> Result<Vec<Value>> {
    let shape = a
        .ints(1, "shape")?
        .ok_or_else(|| a.node.bad("shape is missing"))?;
    if shape.iter().any(|&s| s < 0) {
        return Err(a.node.bad(format!("negative dims in shape {shape:?}")));
    }
    let target: Vec<usize> = shape.iter().map(|&s| s as usize).collect();
    Ok(vec![broadcast_to(a.node, a.req(0)?, &target)?])
}

fn tile(a: &Args) -> Result<Vec<Value>> {
    let x = a.req(0)?;
    let dims = x.dims();
    let reps = a
        .ints(1, "repeats")?
        .ok_or_else(|| a.node.bad("repeats are missing"))?;
    if reps.len() != dims.len() || reps.iter().any(|&r| r < 1) {
        return Err(a.node.bad(format!(
            "repeats {reps:?} must be {} values >= 1",
            dims.len()
        )));
    }
    let mut y = x.clone();
    for (i, &r) in reps.iter().enumerate() {
        if r > 1 {
            let idx: Vec<usize> = (0..r as usize * dims[i]).map(|j| j % dims[i]).collect();
            y = take(&y, i, &idx)?;
        }
    }
    Ok(vec![y])
}

fn pad(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.req(0)?.clone();
    let rank = x.dims().len();
    // A runtime constant_value stays runtime: pad with 0, then add value · (1 − padded ones).
    let runtime_value = n.opset >= 11 && matches!(a.get(2), Some(Value::Graph { .. }));
    let (pads, value) = if n.opset < 11 {
        (n.ints("pads")?, n.float("value", 0.0)? as f64)
    } else if runtime_value {
        (a.ints(1, "pads")?, 0.0)
    } else {
        let v = a
            .host(2, "constant_value")?
            .map_or(0.0, |h| h.data.first().copied().unwrap_or(0.0));
        (a.ints(1, "pads")?, v)
    };
    let pads = pads.ok_or_else(|| n.bad("pads are missing"))?;
    let axes: Vec<usize> = match if n.opset >= 18 {
        a.ints(3, "axes")?
    } else {
        None
    } {
        Some(ax) => ax
            .iter()
            .map(|&v| axis(n, v, rank))
            .collect::<Result<_>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(n.bad(format!("pads {pads:?} need {} values", 2 * axes.len())));
    }
    let mode = n.string("mode", "constant")?;
    let y = pad_value(a, x.clone(), &pads, &axes, &mode, value)?;
    if !runtime_value || mode != "constant" {
        return Ok(vec![y]);
    }
    let dims = x.dims();
    let ones = crate::onnx::tensor::HostTensor::new(
        crate::onnx::tensor::Elem::F32,
        dims.clone(),
        vec![1.0; dims.iter().product()],
        &n.what,
    )?;
    let kept = pad_value(a, Value::host(ones), &pads, &axes, &mode, 0.0)?;
    let hole = to_graph(n, &kept)?.rsub_scalar(1.0)?;
    let t = to_graph(n, &y)?.add(&hole.mul(&a.ftensor(2)?)?)?;
    Ok(vec![Value::Graph { t, elem: x.elem() }])
}

/// `x` padded per `pads` on `axes` in `mode` (constant fill `value`); negative pads crop.
fn pad_value(
    a: &Args,
    mut x: Value,
    pads: &[i64],
    axes: &[usize],
    mode: &str,
    value: f64,
) -> Result<Value> {
    let n = a.node;
    for (k, &ax) in axes.iter().enumerate() {
        let (pb, pe) = (pads[k], pads[k + axes.len()]);
        let d = x.dims()[ax] as i64;
        // Negative pads crop first.
        let (cb, ce) = ((-pb).max(0), (-pe).max(0));
        if cb + ce >= d {
            return Err(n.unsupported("pads that remove a whole axis (zero-size tensors)"));
        }
        if cb + ce > 0 {
            x = take(
                &x,
                ax,
                &(cb as usize..(d - ce) as usize).collect::<Vec<_>>(),
            )?;
        }
        let (pb, pe, d) = (
            pb.max(0) as usize,
            pe.max(0) as usize,
            (d - cb - ce) as usize,
        );
        if pb + pe == 0 {
            continue;
        }
        x = match mode {
            "constant" => {
                let mut parts = Vec::new();
                for (len, at_end) in [(pb, false), (pe, true)] {
                    if len == 0 {
                        continue;
                    }
                    let mut dims = x.dims();
                    dims[ax] = len;
                    let data = vec![value; dims.iter().product()];
                    let block = match &x {
                        Value::Host(h) => Value::host(crate::onnx::tensor::HostTensor {
                            elem: h.elem,
                            dims,
                            data,
                        }),
                        Value::Graph { elem, .. } => Value::Graph {
                            t: constant(
                                &n.what,
                                HostArray {
                                    shape: &dims,
                                    data: HostData::F64(&data),
                                },
                            )?,
                            elem: *elem,
                        },
                    };
                    parts.push((block, at_end));
                }
                let mut vs: Vec<Value> =
                    parts.iter().filter(|p| !p.1).map(|p| p.0.clone()).collect();
                vs.push(x.clone());
                vs.extend(parts.iter().filter(|p| p.1).map(|p| p.0.clone()));
                concat(&vs, ax, n)?
            }
            "reflect" | "edge" | "wrap" => {
                let (di, reflect) = (d as i64, mode == "reflect");
                if reflect && (pb >= d || pe >= d) {
                    return Err(n.bad(format!("reflect pads {pb}, {pe} must be < extent {d}")));
                }
                let idx: Vec<usize> = (-(pb as i64)..di + pe as i64)
                    .map(|i| match mode {
                        "reflect" => {
                            (if i < 0 {
                                -i
                            } else if i >= di {
                                2 * (di - 1) - i
                            } else {
                                i
                            }) as usize
                        }
                        "edge" => i.clamp(0, di - 1) as usize,
                        _ => i.rem_euclid(di) as usize,
                    })
                    .collect();
                take(&x, ax, &idx)?
            }
            other => {
                return Err(n.bad(format!(
                    "mode = '{other}' is not constant, reflect, edge or wrap"
                )))
            }
        };
    }
    Ok(x)
}

/// CenterCropPad: per axis, a centered crop (start ⌊(d − t)/2⌋) or zero padding (⌊(t − d)/2⌋
/// before) to the target extent; the target shape must be known at import.
fn center_crop_pad(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let mut y = a.req(0)?.clone();
    let dims = y.dims();
    let rank = dims.len();
    let shape = a
        .ints(1, "shape")?
        .ok_or_else(|| n.bad("input 1 (shape) is missing"))?;
    let axes: Vec<usize> = match n.ints("axes")? {
        Some(ax) => ax
            .iter()
            .map(|&v| axis(n, v, rank))
            .collect::<Result<_>>()?,
        None => (0..rank).collect(),
    };
    if shape.len() != axes.len() || shape.iter().any(|&t| t < 1) {
        return Err(n.bad(format!(
            "shape {shape:?} needs one extent >= 1 per axis of {axes:?}"
        )));
    }
    let mut pads = vec![0i64; 2 * rank];
    for (&ax, &t) in axes.iter().zip(&shape) {
        let d = dims[ax] as i64;
        if t < d {
            let start = ((d - t) / 2) as usize;
            y = take(&y, ax, &(start..start + t as usize).collect::<Vec<_>>())?;
        } else {
            pads[ax] = (t - d) / 2;
            pads[ax + rank] = t - d - (t - d) / 2;
        }
    }
    if pads.iter().any(|&p| p > 0) {
        let all: Vec<usize> = (0..rank).collect();
        y = pad_value(a, y, &pads, &all, "constant", 0.0)?;
    }
    Ok(vec![y])
}

fn depth_space(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.req(0)?;
    let b = n.int("blocksize", 0)?;
    let dims = x.dims();
    let [bn, c, h, w] = dims[..] else {
        return Err(n.bad(format!("input must be 4-D, got {dims:?}")));
    };
    if b < 1 {
        return Err(n.bad(format!("blocksize = {b} must be >= 1")));
    }
    let b = b as usize;
    // Both as reshape → transpose → reshape (ONNX's definition), so host and graph agree.
    let (shape6, perm, out): (Vec<usize>, Vec<usize>, Vec<usize>) = if n.op() == "DepthToSpace" {
        if c % (b * b) != 0 {
            return Err(n.bad(format!(
                "C = {c} is not divisible by blocksize² = {}",
                b * b
            )));
        }
        let co = c / (b * b);
        if n.string("mode", "DCR")? == "CRD" {
            (
                vec![bn, co, b, b, h, w],
                vec![0, 1, 4, 2, 5, 3],
                vec![bn, co, h * b, w * b],
            )
        } else {
            (
                vec![bn, b, b, co, h, w],
                vec![0, 3, 4, 1, 5, 2],
                vec![bn, co, h * b, w * b],
            )
        }
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(n.bad(format!(
                "H, W = {h}, {w} are not divisible by blocksize {b}"
            )));
        }
        // DCR (default) puts the block offsets first in the channels, CRD puts them last.
        let perm = if n.string("mode", "DCR")? == "CRD" {
            vec![0, 1, 3, 5, 2, 4]
        } else {
            vec![0, 3, 5, 1, 2, 4]
        };
        (
            vec![bn, c, h / b, b, w / b, b],
            perm,
            vec![bn, c * b * b, h / b, w / b],
        )
    };
    if matches!(x, Value::Graph { .. }) {
        let t = super::ops::to_graph(n, x)?;
        let y = match (n.op(), n.string("mode", "DCR")?.as_str()) {
            ("DepthToSpace", "CRD") => t.pixel_shuffle(b)?,
            ("DepthToSpace", _) => t.depth_to_space(b)?,
            (_, "CRD") => t.pixel_unshuffle(b)?,
            _ => t.space_to_depth(b)?,
        };
        return Ok(vec![Value::Graph {
            t: y,
            elem: x.elem(),
        }]);
    }
    let y = transpose(&reshape(x, &shape6)?, &perm)?;
    Ok(vec![reshape(&y, &out)?])
}

fn identity(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let training = a
        .host(2, "training_mode")?
        .is_some_and(|t| t.data.first().is_some_and(|&v| v != 0.0));
    if n.op() == "Dropout" && training {
        return Err(n.unsupported("Dropout with training_mode = true (training only)"));
    }
    // Inference: the output is the input and the optional mask is all true.
    let x = a.req(0)?.clone();
    let dims = x.dims();
    let mask = crate::onnx::tensor::HostTensor {
        elem: crate::onnx::tensor::Elem::Bool,
        data: vec![1.0; dims.iter().product()],
        dims,
    };
    Ok(vec![x, Value::host(mask)])
}
