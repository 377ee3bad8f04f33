//! Constant folding on the host: the shape subgraphs exporters write (Shape, Size, Constant,
//! ConstantOfShape, Range, and integer/float elementwise arithmetic, comparisons, Cast and Where
//! on constants) evaluate here so they vanish from the program. Layout ops on constants fold
//! through the host side of `ops/values.rs`.

use super::ops::{Args, Value};
use super::tensor::{checked_dims, Elem, HostTensor};
use crate::error::Result;
use crate::shape::{broadcast, strides};

/// Ops folded here when every input is a constant (Shape/Size also on graph inputs).
const ELEMENTWISE: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "Pow",
    "Max",
    "Min",
    "Sum",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "Neg",
    "Abs",
    "Sqrt",
    "Floor",
    "Ceil",
    "Not",
    "Sign",
    "Reciprocal",
    "Relu",
    "Exp",
    "Cast",
    "CastLike",
    "Where",
    "Identity",
];

/// Whether `op` always folds (no mapping needed), regardless of its inputs.
pub fn is_source(op: &str) -> bool {
    matches!(
        op,
        "Constant" | "Shape" | "Size" | "ConstantOfShape" | "Range"
    )
}

/// The folded outputs of `a`'s node, or None when it does not fold.
pub fn fold(a: &Args) -> Result<Option<Vec<Value>>> {
    let n = a.node;
    let out = match n.op() {
        "Constant" => constant(a)?,
        "Shape" => {
            let dims: Vec<i64> = a.req(0)?.dims().iter().map(|&d| d as i64).collect();
            let r = dims.len() as i64;
            let clip = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let (s, e) = (clip(n.int("start", 0)?), clip(n.int("end", r)?));
            HostTensor::ints(&dims[s..e.max(s)])
        }
        "Size" => HostTensor {
            elem: Elem::I64,
            dims: vec![],
            data: vec![a.req(0)?.dims().iter().product::<usize>() as f64],
        },
        "ConstantOfShape" => {
            let shape = a.ints(0, "shape")?.unwrap_or_default();
            let dims = checked_dims(&shape, &n.what)?;
            let (elem, v) = match n.tensor("value")? {
                Some(t) => (t.elem, t.data.first().copied().unwrap_or(0.0)),
                None => (Elem::F32, 0.0),
            };
            let len = dims.iter().product();
            HostTensor {
                elem,
                dims,
                data: vec![v; len],
            }
        }
        "Range" => {
            let get = |i: usize, what: &str| -> Result<(f64, Elem)> {
                let h = a
                    .host(i, what)?
                    .ok_or_else(|| n.bad(format!("{what} is missing")))?;
                Ok((
                    h.data
                        .first()
                        .copied()
                        .ok_or_else(|| n.bad(format!("{what} is empty")))?,
                    h.elem,
                ))
            };
            let ((start, elem), (limit, _), (delta, _)) =
                (get(0, "start")?, get(1, "limit")?, get(2, "delta")?);
            if delta == 0.0 {
                return Err(n.bad("delta is 0"));
            }
            let count = ((limit - start) / delta).ceil().max(0.0);
            let dims = checked_dims(&[count as i64], &n.what)?;
            let data = (0..dims[0])
                .map(|i| elem.convert(start + i as f64 * delta))
                .collect();
            HostTensor { elem, dims, data }
        }
        op if ELEMENTWISE.contains(&op) && a.all_host() => elementwise(a)?,
        _ => return Ok(None),
    };
    Ok(Some(vec![Value::host(out)]))
}

fn constant(a: &Args) -> Result<HostTensor> {
    let n = a.node;
    if let Some(t) = n.tensor("value")? {
        return Ok(t);
    }
    if n.has("value_float") {
        return Ok(HostTensor {
            elem: Elem::F32,
            dims: vec![],
            data: vec![n.float("value_float", 0.0)? as f64],
        });
    }
    if n.has("value_int") {
        return Ok(HostTensor {
            elem: Elem::I64,
            dims: vec![],
            data: vec![n.int("value_int", 0)? as f64],
        });
    }
    if let Some(v) = n.floats("value_floats")? {
        return Ok(HostTensor {
            elem: Elem::F32,
            dims: vec![v.len()],
            data: v.iter().map(|&x| x as f64).collect(),
        });
    }
    if let Some(v) = n.ints("value_ints")? {
        return Ok(HostTensor::ints(&v));
    }
    Err(n.unsupported("a Constant without a numeric value (sparse or string constants)"))
}

/// NumPy-broadcast `inputs` and apply `f` per element.
fn broadcast_map(
    a: &Args,
    inputs: &[&HostTensor],
    f: impl Fn(&[f64]) -> f64,
) -> Result<(Vec<usize>, Vec<f64>)> {
    let mut dims: Vec<usize> = inputs[0].dims.clone();
    for h in &inputs[1..] {
        dims = broadcast(&a.node.what, &dims, &h.dims)?;
    }
    let total: usize = dims.iter().product();
    let out_strides = strides(&dims);
    let src: Vec<Vec<usize>> = inputs
        .iter()
        .map(|h| {
            let s = strides(&h.dims);
            let off = dims.len() - h.dims.len();
            (0..dims.len())
                .map(|i| {
                    if i < off || h.dims[i - off] == 1 {
                        0
                    } else {
                        s[i - off]
                    }
                })
                .collect()
        })
        .collect();
    let mut vals = vec![0.0; inputs.len()];
    let data = (0..total)
        .map(|flat| {
            for (k, h) in inputs.iter().enumerate() {
                let mut off = 0;
                let mut rem = flat;
                for (ax, &st) in out_strides.iter().enumerate() {
                    off += (rem / st) * src[k][ax];
                    rem %= st;
                }
                vals[k] = h.data[off];
            }
            f(&vals)
        })
        .collect();
    Ok((dims, data))
}

/// A per-element function of the broadcast input values.
type Kernel = Box<dyn Fn(&[f64]) -> f64>;

fn elementwise(a: &Args) -> Result<HostTensor> {
    let n = a.node;
    let hs: Vec<std::rc::Rc<HostTensor>> = a
        .vals
        .iter()
        .flatten()
        .map(|v| match v {
            Value::Host(h) => h.clone(),
            Value::Graph { .. } => unreachable!("all inputs are host constants"),
        })
        .collect();
    let refs: Vec<&HostTensor> = hs.iter().map(|h| h.as_ref()).collect();
    let first = refs.first().ok_or_else(|| n.bad("no inputs"))?;
    let int = !first.elem.is_float();
    let fmod = n.int("fmod", 0)? != 0;
    let op = n.op();
    let (elem, f): (Elem, Kernel) = match op {
        "Add" | "Sum" => (first.elem, Box::new(|v| v.iter().sum())),
        "Sub" => (first.elem, Box::new(|v| v[0] - v[1])),
        "Mul" => (first.elem, Box::new(|v| v[0] * v[1])),
        "Div" => (
            first.elem,
            Box::new(move |v| {
                if int {
                    if v[1] == 0.0 {
                        0.0
                    } else {
                        (v[0] / v[1]).trunc()
                    }
                } else {
                    v[0] / v[1]
                }
            }),
        ),
        // fmod = 1: C fmod (sign of the dividend); 0: the sign of the divisor (Python %).
        "Mod" => (
            first.elem,
            Box::new(move |v| {
                if v[1] == 0.0 {
                    0.0
                } else if fmod {
                    v[0] % v[1]
                } else {
                    v[0] - (v[0] / v[1]).floor() * v[1]
                }
            }),
        ),
        "Pow" => (first.elem, Box::new(|v| v[0].powf(v[1]))),
        "Max" => (
            first.elem,
            Box::new(|v| v.iter().copied().fold(f64::MIN, f64::max)),
        ),
        "Min" => (
            first.elem,
            Box::new(|v| v.iter().copied().fold(f64::MAX, f64::min)),
        ),
        "Equal" => (Elem::Bool, Box::new(|v| f64::from(u8::from(v[0] == v[1])))),
        "Less" => (Elem::Bool, Box::new(|v| f64::from(u8::from(v[0] < v[1])))),
        "Greater" => (Elem::Bool, Box::new(|v| f64::from(u8::from(v[0] > v[1])))),
        "LessOrEqual" => (Elem::Bool, Box::new(|v| f64::from(u8::from(v[0] <= v[1])))),
        "GreaterOrEqual" => (Elem::Bool, Box::new(|v| f64::from(u8::from(v[0] >= v[1])))),
        "And" => (
            Elem::Bool,
            Box::new(|v| f64::from(u8::from(v[0] != 0.0 && v[1] != 0.0))),
        ),
        "Or" => (
            Elem::Bool,
            Box::new(|v| f64::from(u8::from(v[0] != 0.0 || v[1] != 0.0))),
        ),
        "Xor" => (
            Elem::Bool,
            Box::new(|v| f64::from(u8::from((v[0] != 0.0) != (v[1] != 0.0)))),
        ),
        "Not" => (Elem::Bool, Box::new(|v| f64::from(u8::from(v[0] == 0.0)))),
        "Neg" => (first.elem, Box::new(|v| -v[0])),
        "Abs" => (first.elem, Box::new(|v| v[0].abs())),
        "Sqrt" => (first.elem, Box::new(|v| v[0].sqrt())),
        "Floor" => (first.elem, Box::new(|v| v[0].floor())),
        "Ceil" => (first.elem, Box::new(|v| v[0].ceil())),
        "Sign" => (
            first.elem,
            Box::new(|v| {
                if v[0] > 0.0 {
                    1.0
                } else if v[0] < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }),
        ),
        "Reciprocal" => (first.elem, Box::new(|v| 1.0 / v[0])),
        "Relu" => (first.elem, Box::new(|v| v[0].max(0.0))),
        "Exp" => (first.elem, Box::new(|v| v[0].exp())),
        "Identity" => (first.elem, Box::new(|v| v[0])),
        "Cast" => (
            Elem::from_code(n.int("to", 0)? as i32, &n.what)?,
            Box::new(|v| v[0]),
        ),
        "CastLike" => (
            refs.get(1)
                .ok_or_else(|| n.bad("target_type is missing"))?
                .elem,
            Box::new(|v| v[0]),
        ),
        "Where" => (
            refs.get(1).ok_or_else(|| n.bad("X is missing"))?.elem,
            Box::new(|v| if v[0] != 0.0 { v[1] } else { v[2] }),
        ),
        other => return Err(n.bad(format!("{other} does not fold"))),
    };
    let used: Vec<&HostTensor> = if op == "CastLike" {
        refs[..1].to_vec()
    } else {
        refs
    };
    let (dims, data) = broadcast_map(a, &used, f)?;
    let data = data.into_iter().map(|v| elem.convert(v)).collect();
    Ok(HostTensor { elem, dims, data })
}
