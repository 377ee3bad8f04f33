//! One ONNX node as the op mappings see it: its name, the opset it is read under, typed
//! attribute access with defaults, and the graph-order checks (duplicate names, cycles).

use std::collections::{HashMap, HashSet};

use super::proto::{attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto};
use super::tensor::{decode, unsupported, HostTensor};
use crate::error::{Error, Result};

/// A node with its opset version; `what` names it in errors ("Conv node 'conv1'").
pub struct Node<'a> {
    pub proto: &'a NodeProto,
    pub opset: i64,
    pub what: String,
}

impl<'a> Node<'a> {
    /// Wrap `proto`, read under default-domain opset `opset`.
    pub fn new(proto: &'a NodeProto, opset: i64) -> Self {
        let what = format!("{} node '{}'", proto.op_type(), display_name(proto));
        Node { proto, opset, what }
    }

    /// The op type.
    pub fn op(&self) -> &str {
        self.proto.op_type()
    }

    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name() == name)
    }

    /// Whether attribute `name` is present.
    pub fn has(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    fn typed(&self, name: &str, ty: AttributeType) -> Result<Option<&AttributeProto>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type() == ty || a.r#type() == AttributeType::Undefined => Ok(Some(a)),
            Some(a) => Err(Error::value(
                &self.what,
                format!("attribute {name} is {:?}, expected {ty:?}", a.r#type()),
            )),
        }
    }

    /// Integer attribute `name`, or `default`.
    pub fn int(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self
            .typed(name, AttributeType::Int)?
            .map_or(default, |a| a.i()))
    }

    /// Float attribute `name`, or `default`.
    pub fn float(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self
            .typed(name, AttributeType::Float)?
            .map_or(default, |a| a.f()))
    }

    /// String attribute `name`, or `default`.
    pub fn string(&self, name: &str, default: &str) -> Result<String> {
        Ok(self
            .typed(name, AttributeType::String)?
            .map_or(default.to_string(), |a| {
                String::from_utf8_lossy(a.s()).into_owned()
            }))
    }

    /// Integer-list attribute `name` (None if absent).
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        Ok(self
            .typed(name, AttributeType::Ints)?
            .map(|a| a.ints.clone()))
    }

    /// Float-list attribute `name` (None if absent).
    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        Ok(self
            .typed(name, AttributeType::Floats)?
            .map(|a| a.floats.clone()))
    }

    /// Tensor attribute `name` decoded (None if absent).
    pub fn tensor(&self, name: &str) -> Result<Option<HostTensor>> {
        self.typed(name, AttributeType::Tensor)?
            .map(|a| match &a.t {
                Some(t) => decode(t, None),
                None => Err(Error::value(
                    &self.what,
                    format!("attribute {name} holds no tensor"),
                )),
            })
            .transpose()
    }

    /// A NotImplemented error for this node naming the op, node, opset and `reason`.
    pub fn unsupported(&self, reason: &str) -> Error {
        unsupported(&format!("{} (opset {})", self.what, self.opset), reason)
    }

    /// A value error for this node.
    pub fn bad(&self, msg: impl Into<String>) -> Error {
        Error::value(&self.what, msg.into())
    }
}

/// The node's name, or its first output when unnamed.
pub fn display_name(n: &NodeProto) -> &str {
    if n.name().is_empty() {
        n.output.first().map_or("", |s| s.as_str())
    } else {
        n.name()
    }
}

/// Node indices of `graph` in a dependency order; errors name a value defined twice, a node
/// input nothing defines, or the nodes on a cycle.
pub fn topo_order(graph: &GraphProto) -> Result<Vec<usize>> {
    let mut defined: HashSet<&str> = HashSet::new();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for t in &graph.initializer {
        if !defined.insert(t.name()) {
            return Err(Error::value(
                "onnx graph",
                format!("initializer '{}' is defined twice", t.name()),
            ));
        }
    }
    // Inputs may repeat initializers (IR < 4 lists every initializer as an input).
    defined.extend(graph.input.iter().map(|v| v.name()));
    for (i, n) in graph.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if defined.contains(o.as_str()) || producer.insert(o, i).is_some() {
                return Err(Error::value(
                    "onnx graph",
                    format!(
                        "value '{o}' (output of {} node '{}') is defined twice",
                        n.op_type(),
                        display_name(n)
                    ),
                ));
            }
        }
    }
    let mut pending: Vec<usize> = vec![0; graph.node.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); graph.node.len()];
    for (i, n) in graph.node.iter().enumerate() {
        for inp in n.input.iter().filter(|s| !s.is_empty()) {
            if let Some(&p) = producer.get(inp.as_str()) {
                pending[i] += 1;
                users[p].push(i);
            } else if !defined.contains(inp.as_str()) {
                return Err(Error::value(
                    "onnx graph",
                    format!(
                        "{} node '{}' reads '{inp}', which nothing defines",
                        n.op_type(),
                        display_name(n)
                    ),
                ));
            }
        }
    }
    let mut ready: Vec<usize> = (0..graph.node.len())
        .rev()
        .filter(|&i| pending[i] == 0)
        .collect();
    let mut order = Vec::with_capacity(graph.node.len());
    while let Some(i) = ready.pop() {
        order.push(i);
        for &u in users[i].iter().rev() {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(u);
            }
        }
    }
    if order.len() != graph.node.len() {
        let stuck: Vec<&str> = (0..graph.node.len())
            .filter(|&i| pending[i] > 0)
            .take(8)
            .map(|i| display_name(&graph.node[i]))
            .collect();
        return Err(Error::value(
            "onnx graph",
            format!("the graph has a cycle through nodes {stuck:?}"),
        ));
    }
    Ok(order)
}
