//! Layout ops on runtime integers (int64 `input_ids` and masks of Hugging Face exports going
//! through Transpose, Concat, Slice, Expand, Tile, Split and Gather with constant indices):
//! the op's own mapping runs on the host over *index* tensors (each runtime input replaced by
//! the positions of its elements), and the positions it returns become one exact `int_remap`
//! host op over the runtime values. Reshape-like ops already run as `int_reshape`.

use std::rc::Rc;

use super::ops::{Args, OpFn, Value};
use super::ops_int::{int_tensor, is_runtime_int};
use super::tensor::{Elem, HostTensor};
use crate::error::Result;
use crate::graph::build::host::host;
use crate::graph::Tensor;
use crate::ops::host::HostOp;
use crate::ops::host_int::{IntRemap, INT_REMAP_MAX};

/// The inputs of layout op `op` that carry data (the others are shapes, indices, axes).
fn data_inputs(op: &str, count: usize) -> std::ops::Range<usize> {
    match op {
        "Concat" => 0..count,
        _ => 0..1.min(count),
    }
}

/// Whether `op` is pure data movement that [`map`] can run on runtime integers.
pub fn is_int_layout(op: &str) -> bool {
    matches!(
        op,
        "Transpose" | "Concat" | "Slice" | "Expand" | "Tile" | "Split" | "Gather"
    )
}

/// Layout node `a` (mapped by `f`) over runtime int32 data: None when no data input is a
/// runtime integer (or a non-data input is not a constant: runtime indices take their own
/// path). Errors name the node when a table would exceed [`INT_REMAP_MAX`] elements.
pub fn map(a: &Args, f: OpFn) -> Result<Option<Vec<Value>>> {
    let n = a.node;
    let data = data_inputs(n.op(), a.vals.len());
    let runtime = data.clone().any(|i| a.get(i).is_some_and(is_runtime_int));
    let others_const = (0..a.vals.len())
        .filter(|i| !data.contains(i))
        .all(|i| matches!(a.get(i), None | Some(Value::Host(_))));
    if !runtime || !others_const {
        return Ok(None);
    }
    let elem = a.req(data.start)?.elem();
    let (mut sources, mut vals, mut offset) = (Vec::new(), a.vals.clone(), 0usize);
    for i in data {
        let Some(v) = a.get(i) else { continue };
        let t = int_tensor(a, i)?;
        let count = t.shape().iter().product::<usize>();
        if offset + count > INT_REMAP_MAX {
            return Err(n.unsupported(&format!(
                "runtime integer data of more than {INT_REMAP_MAX} elements"
            )));
        }
        // The positions of this input's elements among all the data inputs, in its shape.
        vals[i] = Some(Value::Host(Rc::new(HostTensor {
            elem: Elem::I64,
            dims: v.dims(),
            data: (offset..offset + count).map(|p| p as f64).collect(),
        })));
        offset += count;
        sources.push(t);
    }
    let positions = f(&Args {
        node: n,
        vals,
        bn: None,
        weight: None,
    })?;
    positions
        .iter()
        .map(|p| remap(a, p, &sources, elem))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The values of `sources` at the positions `p` computed on the host.
fn remap(a: &Args, p: &Value, sources: &[Tensor], elem: Elem) -> Result<Value> {
    let Value::Host(h) = p else {
        return Err(a
            .node
            .bad("the layout of runtime integers did not fold on the host"));
    };
    if h.dims.is_empty() {
        return Err(a.node.unsupported("a rank-0 runtime integer result"));
    }
    let op = HostOp::IntRemap(IntRemap {
        shape: h.dims.clone(),
        source: h.data.iter().map(|&x| x as u32).collect(),
    });
    Ok(Value::Graph {
        t: host(op, sources.to_vec())?.remove(0),
        elem,
    })
}
