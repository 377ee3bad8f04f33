//! Legalize a graph for a MIL opset: compressed weights whose constexpr op the opset lacks (or
//! spells with another signature) are folded back to their dense fp16 constant, the same values
//! the constexpr expands to; any other op the opset lacks is an error naming it.

use std::sync::Arc;

use half::f16;

use crate::error::Result;
use crate::graph::Graph;
use crate::ops::{io, Op};
use crate::targets::Opset;

/// `graph` with every op printable in `opset`: constexprs folded to fp16 consts where needed,
/// else a `Value` error naming the op, the opset and the first opset that has it.
pub fn for_opset(mut graph: Graph, opset: Opset) -> Result<Graph> {
    for node in &mut graph.nodes {
        let op = node.op.family().mil().op;
        if matches!(node.op, Op::Input(_) | Op::Const(_)) || opset.prints(op) {
            continue;
        }
        let Op::Constexpr(c) = &node.op else {
            opset.require(op)?;
            continue;
        };
        let mut dense = vec![0f32; crate::shape::numel(c.shape())];
        c.expand(&mut dense);
        let values = Arc::new(dense.iter().map(|&v| f16::from_f32(v)).collect());
        node.op = Op::Const(io::Const {
            shape: c.shape().to_vec(),
            values,
        });
    }
    Ok(graph)
}
