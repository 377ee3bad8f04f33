//! Additive attention masks written with `torch.finfo(float32).min` (-3.4e38): exporters
//! build `(1 - mask) * finfo.min`, `Where(causal, scores, finfo.min)` or a constant bias of
//! 0 / finfo.min, add it to the scores and take a Softmax. The value is outside fp16, but in that
//! pattern only its effect matters: any fill at or below -65504 drives `exp` of the masked
//! scores to 0 in fp32 and in fp16 alike. So a Mul / Where / Add whose result reaches only
//! Softmax inputs (through adds, wheres, casts and reshapes) has its constant fills below -65504
//! saturated to -65504; a row with every position masked gives ~uniform weights, as the fp32
//! model does. Everywhere else such a constant keeps the clear "outside fp16" error.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::ops::Value;
use super::proto::GraphProto;
use super::tensor::HostTensor;

/// Ops a mask passes through on its way to the Softmax.
const PASS: &[&str] = &[
    "Add",
    "Sub",
    "Where",
    "Mul",
    "Cast",
    "Reshape",
    "Unsqueeze",
    "Squeeze",
    "Expand",
    "Slice",
    "Transpose",
    "Identity",
];

/// Hops from the fill to the Softmax that are looked through.
const MAX_HOPS: usize = 6;

/// Indices of the Mul / Where / Add nodes of `graph` whose result reaches only Softmax /
/// LogSoftmax inputs (never a graph output).
pub fn mask_nodes(graph: &GraphProto) -> HashSet<usize> {
    let mut users: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for inp in &n.input {
            users.entry(inp.as_str()).or_default().push(i);
        }
    }
    let outputs: HashSet<&str> = graph.output.iter().map(|o| o.name()).collect();
    let only_softmax = |name: &str| {
        let mut stack = vec![(name.to_string(), 0usize)];
        let mut seen = 0;
        while let Some((v, hops)) = stack.pop() {
            let Some(us) = users
                .get(v.as_str())
                .filter(|_| !outputs.contains(v.as_str()))
            else {
                return false;
            };
            for &u in us {
                let n = &graph.node[u];
                if matches!(n.op_type(), "Softmax" | "LogSoftmax") && n.input.first() == Some(&v) {
                    seen += 1;
                } else if PASS.contains(&n.op_type()) && hops < MAX_HOPS {
                    stack.extend(n.output.iter().map(|o| (o.clone(), hops + 1)));
                } else {
                    return false;
                }
            }
        }
        seen > 0
    };
    graph
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| matches!(n.op_type(), "Mul" | "Where" | "Add"))
        .filter(|(_, n)| n.output.len() == 1 && only_softmax(&n.output[0]))
        .map(|(i, _)| i)
        .collect()
}

/// `v` with constant fills below -65504 saturated to -65504 (other values unchanged).
pub fn saturate(v: &Value) -> Value {
    match v {
        Value::Host(h) if h.data.iter().any(|&x| x.is_finite() && x < -65504.0) => {
            Value::Host(Rc::new(HostTensor {
                elem: h.elem,
                dims: h.dims.clone(),
                data: h
                    .data
                    .iter()
                    .map(|&x| if x.is_finite() { x.max(-65504.0) } else { x })
                    .collect(),
            }))
        }
        _ => v.clone(),
    }
}
