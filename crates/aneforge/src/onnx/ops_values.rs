//! Layout primitives over [`Value`]s, one implementation each for host constants (folded) and
//! graph tensors (builders): take along an axis, reshape, transpose, concat. The ONNX layout ops
//! (Slice, Gather, Pad, Tile, Expand, Squeeze, Split ...) are written once over these.

use std::rc::Rc;

use super::ops::Value;
use crate::error::{Error, Result};
use crate::graph::build::layout::concat as graph_concat;
use crate::onnx::tensor::HostTensor;
use crate::shape::strides;

/// A NotImplemented error when `v` is a runtime int32 tensor (`what`: the layout op).
fn not_runtime_int(v: &Value, what: &str) -> Result<()> {
    match v {
        Value::Graph { t, elem } if t.dtype() == crate::dtype::DType::Int32 => {
            Err(Error::NotImplemented(format!(
                "onnx: unsupported: {what} of a runtime {elem:?} tensor {:?} (runtime integers are reshaped on the host; other layout ops on them are not mapped)",
                t.shape()
            )))
        }
        _ => Ok(()),
    }
}

/// Elements at `idx` along `axis` (NumPy `take` with in-range indices).
pub fn take(v: &Value, axis: usize, idx: &[usize]) -> Result<Value> {
    let dims = v.dims();
    if idx.is_empty() {
        return Err(Error::NotImplemented(format!(
            "take of no elements along axis {axis} of {dims:?}: unsupported: zero-size tensors"
        )));
    }
    if idx.len() == dims[axis] && idx.iter().enumerate().all(|(i, &j)| i == j) {
        return Ok(v.clone());
    }
    not_runtime_int(v, "a gather along an axis")?;
    match v {
        Value::Graph { t, elem } => {
            let idx: Vec<i64> = idx.iter().map(|&i| i as i64).collect();
            Ok(Value::Graph {
                t: t.gather(&idx, axis as i64)?,
                elem: *elem,
            })
        }
        Value::Host(h) => {
            let outer: usize = dims[..axis].iter().product();
            let inner: usize = dims[axis + 1..].iter().product();
            let mut data = Vec::with_capacity(outer * idx.len() * inner);
            for o in 0..outer {
                for &j in idx {
                    let start = (o * dims[axis] + j) * inner;
                    data.extend_from_slice(&h.data[start..start + inner]);
                }
            }
            let mut out = dims.clone();
            out[axis] = idx.len();
            Ok(Value::host(HostTensor {
                elem: h.elem,
                dims: out,
                data,
            }))
        }
    }
}

/// `v` with dims `dims` (same element count; checked by the caller or the builder).
pub fn reshape(v: &Value, dims: &[usize]) -> Result<Value> {
    match v {
        Value::Graph { t, elem } => {
            if t.shape() == dims {
                return Ok(v.clone());
            }
            if dims.is_empty() {
                return Err(Error::NotImplemented(format!(
                    "reshape of a runtime tensor {:?} to a rank-0 scalar: unsupported: rank-0 runtime tensors",
                    t.shape()
                )));
            }
            if t.dtype() == crate::dtype::DType::Int32 {
                let op = crate::ops::host::HostOp::IntReshape(crate::ops::host_int::IntReshape {
                    shape: dims.to_vec(),
                });
                return Ok(Value::Graph {
                    t: crate::graph::build::host::host(op, vec![t.clone()])?.remove(0),
                    elem: *elem,
                });
            }
            let d: Vec<i64> = dims.iter().map(|&x| x as i64).collect();
            Ok(Value::Graph {
                t: t.reshape(&d)?,
                elem: *elem,
            })
        }
        Value::Host(h) => {
            if dims.iter().product::<usize>() != h.numel() {
                return Err(Error::shape(
                    "reshape",
                    format!("cannot reshape {:?} to {dims:?}", h.dims),
                ));
            }
            Ok(Value::Host(Rc::new(HostTensor {
                elem: h.elem,
                dims: dims.to_vec(),
                data: h.data.clone(),
            })))
        }
    }
}

/// `v` with axes permuted by `perm` (a permutation of 0..rank).
pub fn transpose(v: &Value, perm: &[usize]) -> Result<Value> {
    not_runtime_int(v, "a transpose")?;
    match v {
        Value::Graph { t, elem } => {
            let p: Vec<i64> = perm.iter().map(|&x| x as i64).collect();
            Ok(Value::Graph {
                t: t.transpose(&p)?,
                elem: *elem,
            })
        }
        Value::Host(h) => {
            let src = strides(&h.dims);
            let out: Vec<usize> = perm.iter().map(|&p| h.dims[p]).collect();
            let n = h.numel();
            let mut data = Vec::with_capacity(n);
            let mut pos = vec![0usize; out.len()];
            for _ in 0..n {
                data.push(
                    h.data[pos
                        .iter()
                        .zip(perm)
                        .map(|(&i, &p)| i * src[p])
                        .sum::<usize>()],
                );
                for a in (0..out.len()).rev() {
                    pos[a] += 1;
                    if pos[a] < out[a] {
                        break;
                    }
                    pos[a] = 0;
                }
            }
            Ok(Value::host(HostTensor {
                elem: h.elem,
                dims: out,
                data,
            }))
        }
    }
}

/// Join `vs` along `axis`: on the host when all are constants, else as one graph concat.
pub fn concat(vs: &[Value], axis: usize, node: &crate::onnx::node::Node) -> Result<Value> {
    let hosts: Option<Vec<&Rc<HostTensor>>> = vs
        .iter()
        .map(|v| match v {
            Value::Host(h) => Some(h),
            _ => None,
        })
        .collect();
    if let Some(hs) = hosts {
        let first = hs[0];
        let mut dims = first.dims.clone();
        for h in &hs[1..] {
            let same = h.dims.len() == dims.len()
                && h.dims
                    .iter()
                    .enumerate()
                    .all(|(i, &d)| i == axis || d == dims[i]);
            if !same {
                return Err(node.bad(format!(
                    "cannot concat {:?} and {:?} on axis {axis}",
                    first.dims, h.dims
                )));
            }
            dims[axis] += h.dims[axis];
        }
        let outer: usize = dims[..axis].iter().product();
        let mut data = Vec::with_capacity(dims.iter().product());
        for o in 0..outer {
            for h in &hs {
                let chunk: usize = h.dims[axis..].iter().product();
                data.extend_from_slice(&h.data[o * chunk..(o + 1) * chunk]);
            }
        }
        return Ok(Value::host(HostTensor {
            elem: first.elem,
            dims,
            data,
        }));
    }
    let ts = vs
        .iter()
        .map(|v| super::ops::to_graph(node, v))
        .collect::<Result<Vec<_>>>()?;
    let elem = vs[0].elem();
    Ok(Value::Graph {
        t: if ts.len() == 1 {
            ts[0].clone()
        } else {
            graph_concat(&ts, axis as i64)?
        },
        elem,
    })
}
