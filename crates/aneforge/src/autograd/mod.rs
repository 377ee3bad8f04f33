//! Reverse-mode autograd as a DAG → DAG transform: [`backward`] walks the lazy graph under a
//! loss in reverse topological order and returns, per parameter, a new lazy tensor holding the
//! gradient. Gradients are ordinary graph nodes, so a backward pass compiles to one program like
//! any other. Each family's vector-Jacobian products live in `autograd/<family>.rs` (an
//! [`Differentiable`] impl); this module only orders the walk, accumulates fan-out and dispatches.

mod channel;
mod conv;
mod conv_transpose;
mod einsum;
mod elementwise;
mod host;
mod host_bridge;
mod host_index;
mod layout;
mod linear;
mod norm;
mod pool;
mod rearrange;
mod reduce;
mod unary;

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::graph::build::layout::concat;
use crate::graph::tensor::NodeDef;
use crate::graph::Tensor;
use crate::ops::{affine, constexpr, io, resize, Family, Op};

/// What a gradient rule sees: the op's inputs `x`, its outputs `y`, the upstream gradient per
/// output port `g` (zeros for fp16 ports no consumer differentiated; the port itself for int32
/// ports, which carry no gradient) and which inputs `needs` a gradient.
pub struct Vjp<'a> {
    pub x: &'a [Tensor],
    pub y: &'a [Tensor],
    pub g: &'a [Tensor],
    pub needs: &'a [bool],
}

impl Vjp<'_> {
    /// The upstream gradient of output port 0.
    pub fn g0(&self) -> &Tensor {
        &self.g[0]
    }
}

/// Gradients per op input (`None` = no gradient flows to that input).
pub type Grads = Vec<Option<Tensor>>;

type Key = (*const NodeDef, usize);

fn key(t: &Tensor) -> Key {
    (std::sync::Arc::as_ptr(&t.node), t.port)
}

fn node_key(t: &Tensor) -> *const NodeDef {
    std::sync::Arc::as_ptr(&t.node)
}

/// Gradients of `loss` with respect to each of `params` (program inputs, e.g. from
/// `parameter`), seeded with `loss_scale` everywhere on the loss; gradient does not flow through
/// any tensor in `stop`. A parameter the loss does not depend on gets a zero gradient. Errors:
/// a parameter that is not an fp16 input, or a non-differentiable op between a parameter and
/// the loss (the error names the op).
pub fn backward(
    loss: &Tensor,
    params: &[Tensor],
    loss_scale: f32,
    stop: &[Tensor],
) -> Result<Vec<Tensor>> {
    for (i, p) in params.iter().enumerate() {
        if !matches!(p.op(), Op::Input(_)) || p.dtype() != crate::DType::Fp16 {
            return Err(Error::value(
                "backward",
                format!(
                    "params[{i}] is a {} {} {:?}; parameters must be fp16 graph inputs",
                    p.op().family().name(),
                    p.dtype(),
                    p.shape()
                ),
            ));
        }
    }
    if loss.dtype() != crate::DType::Fp16 {
        return Err(Error::dtype(
            "backward",
            format!(
                "the loss must be fp16, got {} {:?}",
                loss.dtype(),
                loss.shape()
            ),
        ));
    }
    let param_nodes: HashSet<_> = params.iter().map(node_key).collect();
    let stopped: HashSet<_> = stop
        .iter()
        .map(node_key)
        .filter(|k| !param_nodes.contains(k))
        .collect();

    // Post-order (sources first) over the DAG under the loss, not entering stopped nodes.
    let mut order: Vec<&Tensor> = Vec::new();
    let mut seen: HashSet<*const NodeDef> = HashSet::new();
    let mut stack: Vec<(&Tensor, usize)> = vec![(loss, 0)];
    while let Some((t, next)) = stack.pop() {
        let k = node_key(t);
        if next == 0 && seen.contains(&k) {
            continue;
        }
        seen.insert(k);
        let srcs: &[Tensor] = if stopped.contains(&k) {
            &[]
        } else {
            &t.node.srcs
        };
        if next < srcs.len() {
            stack.push((t, next + 1));
            if !seen.contains(&node_key(&srcs[next])) {
                stack.push((&srcs[next], 0));
            }
        } else {
            order.push(t);
        }
    }
    // Which nodes lie on a path from a parameter.
    let mut live: HashSet<*const NodeDef> = HashSet::new();
    for t in &order {
        let k = node_key(t);
        if param_nodes.contains(&k)
            || (!stopped.contains(&k) && t.node.srcs.iter().any(|s| live.contains(&node_key(s))))
        {
            live.insert(k);
        }
    }

    let mut grads: HashMap<Key, Tensor> = HashMap::new();
    if live.contains(&node_key(loss)) {
        grads.insert(key(loss), fill_like(loss, loss_scale)?);
    }
    for t in order.iter().rev() {
        let k = node_key(t);
        if !live.contains(&k) || param_nodes.contains(&k) {
            continue;
        }
        let outs: Vec<Tensor> = (0..t.node.outs.len())
            .map(|port| Tensor {
                node: t.node.clone(),
                port,
            })
            .collect();
        if outs.iter().all(|o| !grads.contains_key(&key(o))) {
            continue;
        }
        // Ports that are not fp16 (int32 indices) carry no gradient; rules see the port itself.
        let g = outs
            .iter()
            .map(|o| match grads.remove(&key(o)) {
                Some(g) => Ok(g),
                None if o.dtype() != crate::DType::Fp16 => Ok(o.clone()),
                None => fill_like(o, 0.0),
            })
            .collect::<Result<Vec<_>>>()?;
        let needs: Vec<bool> = t
            .node
            .srcs
            .iter()
            .map(|s| live.contains(&node_key(s)))
            .collect();
        let args = Vjp {
            x: &t.node.srcs,
            y: &outs,
            g: &g,
            needs: &needs,
        };
        let dx = vjp(&t.node.op, &args)?;
        for ((src, need), d) in t.node.srcs.iter().zip(&needs).zip(dx) {
            let Some(d) = d.filter(|_| *need) else {
                continue;
            };
            if d.shape() != src.shape() {
                return Err(Error::shape(
                    "backward",
                    format!(
                        "{} gradient rule returned {:?} for an input of shape {:?}",
                        t.op().family().name(),
                        d.shape(),
                        src.shape()
                    ),
                ));
            }
            let acc = match grads.remove(&key(src)) {
                Some(prev) => prev.add(&d)?,
                None => d,
            };
            grads.insert(key(src), acc);
        }
    }
    params
        .iter()
        .map(|p| {
            grads
                .get(&key(p))
                .cloned()
                .map_or_else(|| fill_like(p, 0.0), Ok)
        })
        .collect()
}

/// A family's gradient rules. The default is the "not differentiable" NotImplemented error
/// naming the op, so a family without gradients declares that with an empty impl.
pub trait Differentiable: Family {
    /// Vector-Jacobian product: one entry per op input (`None` = no gradient flows there).
    fn vjp(&self, _a: &Vjp) -> Result<Grads> {
        Err(not_differentiable(self.name()))
    }
}

impl Differentiable for io::Input {}
impl Differentiable for io::Const {}
impl Differentiable for io::Cast {}
impl Differentiable for constexpr::Constexpr {}
impl Differentiable for crate::ops::elementwise::Compare {}
impl Differentiable for resize::Resize {}
impl Differentiable for affine::Affine {}

/// Dispatch to the op family's gradient rule.
fn vjp(op: &Op, a: &Vjp) -> Result<Grads> {
    match op {
        Op::Input(o) => o.vjp(a),
        Op::Const(o) => o.vjp(a),
        Op::Constexpr(o) => o.vjp(a),
        Op::Cast(o) => o.vjp(a),
        Op::Unary(o) => o.vjp(a),
        Op::Binary(o) => o.vjp(a),
        Op::Compare(o) => o.vjp(a),
        Op::Select(o) => o.vjp(a),
        Op::MatMul(o) => o.vjp(a),
        Op::Conv(o) => o.vjp(a),
        Op::ConvTranspose(o) => o.vjp(a),
        Op::Pool(o) => o.vjp(a),
        Op::Reduce(o) => o.vjp(a),
        Op::Softmax(o) => o.vjp(a),
        Op::BatchNorm(o) => o.vjp(a),
        Op::InstanceNorm(o) => o.vjp(a),
        Op::Layout(o) => o.vjp(a),
        Op::Rearrange(o) => o.vjp(a),
        Op::Resize(o) => o.vjp(a),
        Op::Channel(o) => o.vjp(a),
        Op::Einsum(o) => o.vjp(a),
        Op::Affine(o) => o.vjp(a),
        Op::Host(o) => o.vjp(a),
    }
}

/// The error for differentiating through an op that has no gradient rule.
pub fn not_differentiable(op: &str) -> Error {
    Error::NotImplemented(format!("backward: {op} is not differentiable (no gradient rule); detach it with stop= or keep it off the path from the parameters to the loss"))
}

/// A tensor shaped like `t` filled with `c`, built as `(t − t) + c` (no constant-tensor op; a
/// multiply by zero is avoided, see the spec's compiler-defect notes).
pub fn fill_like(t: &Tensor, c: f32) -> Result<Tensor> {
    let z = t.sub(t)?;
    if c == 0.0 {
        Ok(z)
    } else {
        z.add_scalar(c)
    }
}

/// Zeros of `shape` (same rank as `like`), made from one element of `like` and tiled.
pub fn zeros(like: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if like.shape() == shape {
        return fill_like(like, 0.0);
    }
    let one = like
        .slice_by_size(&vec![0; like.rank()], &vec![1; like.rank()])?
        .reshape(&vec![1; shape.len()])?;
    fill_like(&one, 0.0)?.tile(shape)
}

/// Sum `g` down to `shape` (undo NumPy broadcasting: sum the broadcast axes, then reshape).
pub fn unbroadcast(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let (gr, r) = (g.rank(), shape.len());
    let axes: Vec<i64> = (0..gr)
        .filter(|&i| i + r < gr || (shape[i + r - gr] == 1 && g.shape()[i] != 1))
        .map(|i| i as i64)
        .collect();
    let s = if axes.is_empty() {
        g.clone()
    } else {
        g.sum(&axes, true)?
    };
    if r == 0 {
        return Err(Error::shape(
            "backward",
            format!(
                "cannot reduce a gradient of shape {:?} to a scalar constant",
                g.shape()
            ),
        ));
    }
    s.reshape(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>())
}

/// Repeat `g` (same rank, extents 1 or equal) up to `shape`.
pub fn broadcast_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let reps: Vec<usize> = g
        .shape()
        .iter()
        .zip(shape)
        .map(|(&a, &b)| if a == b { 1 } else { b })
        .collect();
    g.tile(&reps)
}

/// `g` where `cond`, else 0.
pub fn mask(cond: &Tensor, g: &Tensor) -> Result<Tensor> {
    crate::select(cond, g, &crate::scalar("select", 0.0)?)
}

/// Extend axis `axis` of `t` with `before` zeros in front and `after` zeros behind.
pub fn pad_axis(t: &Tensor, axis: usize, before: usize, after: usize) -> Result<Tensor> {
    if before == 0 && after == 0 {
        return Ok(t.clone());
    }
    let mut parts = Vec::with_capacity(3);
    for (n, body) in [(before, None), (0, Some(t.clone())), (after, None)] {
        if let Some(b) = body {
            parts.push(b);
        } else if n > 0 {
            let mut s = t.shape().to_vec();
            s[axis] = n;
            parts.push(zeros(t, &s)?);
        }
    }
    concat(&parts, axis as i64)
}

/// `t` reshaped to `shape` (usize extents); `t` itself when it has that shape already (a
/// reshape is a copy step on the reference executor).
pub fn reshape_to(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if t.shape() == shape {
        return Ok(t.clone());
    }
    t.reshape(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>())
}
