//! The graph IR: an arena of MIL-level nodes in topological order, built from the user's DAG.
//! Passes and the printer work on [`Graph`]; users build with [`Tensor`].

pub mod attention_marker;
pub mod build;
pub mod tensor;

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::ops::{io, Op, TensorType};
pub use tensor::Tensor;

/// Index of a node in a [`Graph`].
pub type NodeId = usize;

/// One output of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    pub node: NodeId,
    pub port: usize,
}

/// A graph node: an op, its input values and its output types.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: Op,
    pub inputs: Vec<Value>,
    pub outputs: Vec<TensorType>,
}

/// A whole program's graph: nodes in topological order, named input and output ports.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    pub nodes: Vec<Node>,
    /// Input nodes in feeding order.
    pub inputs: Vec<NodeId>,
    /// Output ports: (name, value).
    pub outputs: Vec<(String, Value)>,
}

/// Check a user-supplied port name is a MIL identifier.
pub fn check_name(op: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::value(op, format!("name '{name}' is not an identifier (letters, digits and _, not starting with a digit, at most 64 characters)")))
    }
}

impl Graph {
    /// Collect the DAG under `outputs` (name `None` = automatic), order it, and name the ports.
    /// Inputs are ordered by creation; an output that is an input or repeats an earlier output
    /// is copied through `x * 1.0` (an empty program body crashes the ANE compiler), or for
    /// int32 through an exact host copy (`int_reshape` to the same shape). Errors if the
    /// program's buffers and weights exceed the byte cap of [`crate::limits`].
    pub fn from_outputs(outputs: &[(Option<String>, Tensor)]) -> Result<Graph> {
        if outputs.is_empty() {
            return Err(Error::value("compile", "no outputs given"));
        }
        // Wrap outputs that are inputs or repeat another output.
        let mut outs: Vec<(Option<String>, Tensor)> = Vec::with_capacity(outputs.len());
        for (name, t) in outputs {
            if let Some(n) = name {
                check_name("compile", n)?;
            }
            let repeated = outs.iter().any(|(_, o)| o.same(t));
            let copy = matches!(t.op(), Op::Input(_)) || repeated;
            let t = match t.dtype() {
                crate::DType::Fp16 if copy => t.mul_scalar(1.0)?,
                // int32 has no fused copy: an exact host copy (the output becomes a plan stage).
                crate::DType::Int32 if copy => Tensor::apply1(
                    Op::Host(crate::ops::host::HostOp::IntReshape(crate::ops::host_int::IntReshape { shape: t.shape().to_vec() })),
                    vec![t.clone()],
                )?,
                crate::DType::Fp16 | crate::DType::Int32 => t.clone(),
                d => return Err(Error::dtype("compile", format!("output {} is {d} {:?}; program outputs must be fp16 or int32 (compare results are internal, feed them to select)", outs.len(), t.shape()))),
            };
            outs.push((name.clone(), t));
        }

        // Iterative post-order DFS (deep graphs must not overflow the stack).
        let mut index: HashMap<*const tensor::NodeDef, NodeId> = HashMap::new();
        let mut order: Vec<&Tensor> = Vec::new();
        let mut stack: Vec<(&Tensor, usize)> = outs.iter().rev().map(|(_, t)| (t, 0)).collect();
        while let Some((t, next)) = stack.pop() {
            let key = std::sync::Arc::as_ptr(&t.node);
            if index.contains_key(&key) {
                continue;
            }
            if next < t.node.srcs.len() {
                stack.push((t, next + 1));
                let src = &t.node.srcs[next];
                if !index.contains_key(&std::sync::Arc::as_ptr(&src.node)) {
                    stack.push((src, 0));
                }
            } else {
                index.insert(key, order.len());
                order.push(t);
            }
        }

        // Canonical order: inputs first (in creation order, which is also the feeding order), then the rest in DFS order.
        let mut input_pos: Vec<usize> = (0..order.len())
            .filter(|&i| matches!(order[i].op(), Op::Input(_)))
            .collect();
        input_pos.sort_by_key(|&i| order[i].node.id);
        let n_in = input_pos.len();
        let sequence: Vec<usize> = input_pos
            .into_iter()
            .chain((0..order.len()).filter(|&i| !matches!(order[i].op(), Op::Input(_))))
            .collect();
        let mut position = vec![0; order.len()];
        for (new, &old) in sequence.iter().enumerate() {
            position[old] = new;
        }
        let at = |t: &Tensor| position[index[&std::sync::Arc::as_ptr(&t.node)]];
        let mut nodes = Vec::with_capacity(order.len());
        for &old in &sequence {
            let t = order[old];
            let inputs = t
                .node
                .srcs
                .iter()
                .map(|s| Value {
                    node: at(s),
                    port: s.port,
                })
                .collect();
            nodes.push(Node {
                op: t.node.op.clone(),
                inputs,
                outputs: t.node.outs.clone(),
            });
        }
        let inputs: Vec<NodeId> = (0..n_in).collect();
        let mut taken: HashSet<String> = HashSet::new();
        let mut claim = |name: &str, what: &str| -> Result<()> {
            if !taken.insert(name.to_string()) {
                return Err(Error::value(
                    "compile",
                    format!("{what} name '{name}' is used twice"),
                ));
            }
            Ok(())
        };
        for &i in &inputs {
            if let Op::Input(io::Input { name: Some(n), .. }) = &nodes[i].op {
                claim(n, "input")?;
            }
        }
        for (name, _) in &outs {
            if let Some(n) = name {
                claim(n, "output")?;
            }
        }
        let mut k = 0;
        for &i in &inputs {
            if let Op::Input(inp) = &mut nodes[i].op {
                if inp.name.is_none() {
                    while taken.contains(&format!("x{k}")) {
                        k += 1;
                    }
                    inp.name = Some(format!("x{k}"));
                    taken.insert(format!("x{k}"));
                }
            }
        }
        let mut outputs = Vec::with_capacity(outs.len());
        let mut k = 0;
        for (name, t) in &outs {
            let name = match name {
                Some(n) => n.clone(),
                None => {
                    while taken.contains(&format!("y{k}")) {
                        k += 1;
                    }
                    taken.insert(format!("y{k}"));
                    format!("y{k}")
                }
            };
            outputs.push((
                name,
                Value {
                    node: at(t),
                    port: t.port,
                },
            ));
        }
        let graph = Graph {
            nodes,
            inputs,
            outputs,
        };
        graph.check_limits(&crate::limits::Limits::current()?, "compile")?;
        Ok(graph)
    }

    /// Checks every node output (weights included) against `limits`: each tensor against the
    /// element cap, their total against the byte cap; errors name `what`, the largest tensor and the cap.
    pub fn check_limits(&self, limits: &crate::limits::Limits, what: &str) -> Result<()> {
        limits.buffers(
            what,
            self.nodes.iter().flat_map(|n| {
                n.outputs.iter().map(move |o| {
                    (
                        n.op.family().name(),
                        o.shape.as_slice(),
                        o.dtype.size().max(1),
                    )
                })
            }),
        )
    }

    /// Type of a value.
    pub fn ty(&self, v: Value) -> &TensorType {
        &self.nodes[v.node].outputs[v.port]
    }

    /// Name of input node `i` (every input node carries its resolved name).
    pub fn input_name(&self, node: NodeId) -> &str {
        match &self.nodes[node].op {
            Op::Input(io::Input { name: Some(n), .. }) => n,
            _ => "",
        }
    }

    /// Number of compute nodes (everything but inputs and constants, compressed ones included).
    pub fn n_ops(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !matches!(n.op, Op::Input(_) | Op::Const(_) | Op::Constexpr(_)))
            .count()
    }
}
