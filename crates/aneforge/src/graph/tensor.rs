//! The lazy tensor handle users build graphs with: a node in a reference-counted DAG whose
//! shape and dtype are known at construction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::Result;
use crate::graph::attention_marker::Attention;
use crate::ops::{Op, TensorType};
use crate::shape;

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// One node of the user's DAG.
#[derive(Debug)]
pub struct NodeDef {
    /// Creation order (inputs are fed in this order).
    pub id: u64,
    pub op: Op,
    pub srcs: Vec<Tensor>,
    pub outs: Vec<TensorType>,
    /// Set on the output node of a decomposed attention: how to decompose it again with another
    /// query-tile count (the `attention_tiles` compile option, see [`crate::plan::retile`]).
    pub attention: Option<Box<Attention>>,
}

impl NodeDef {
    /// Move the sources and the attention marker's operands onto `pending`.
    fn release(&mut self, pending: &mut Vec<Tensor>) {
        pending.append(&mut self.srcs);
        if let Some(a) = self.attention.take() {
            let Attention { q, k, v, .. } = *a;
            pending.extend([q, k, v]);
        }
    }
}

impl Drop for NodeDef {
    /// Free the chain of sources iteratively: the default drop recurses once per node, which
    /// overflows the stack on deep graphs (unrolled solvers are tens of thousands of nodes deep).
    fn drop(&mut self) {
        let mut pending = Vec::new();
        self.release(&mut pending);
        while let Some(t) = pending.pop() {
            if let Ok(mut node) = Arc::try_unwrap(t.node) {
                node.release(&mut pending);
            }
        }
    }
}

/// A lazy tensor: one output of a graph node. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub(crate) node: Arc<NodeDef>,
    pub(crate) port: usize,
}

impl Tensor {
    /// Build a node: infer its outputs (errors name the op and shapes) and check every output shape.
    pub fn apply(op: Op, srcs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        Tensor::apply_marked(op, srcs, None)
    }

    /// [`Tensor::apply`] with the node's attention marker.
    pub(crate) fn apply_marked(
        op: Op,
        srcs: Vec<Tensor>,
        attention: Option<Box<Attention>>,
    ) -> Result<Vec<Tensor>> {
        let in_types: Vec<TensorType> = srcs.iter().map(|t| t.ty().clone()).collect();
        if let Some(t) = in_types.iter().find(|t| t.dtype == DType::Int32) {
            if !matches!(op, Op::Cast(_) | Op::Host(_)) {
                return Err(crate::Error::dtype(
                    op.family().name(),
                    format!("does not take int32 (input {:?}); int32 values feed host ops (gather, embedding, ...) or cast(x, 'fp16')", t.shape),
                ));
            }
        }
        let outs = op.family().infer(&in_types)?;
        for o in &outs {
            if !matches!(op, Op::Const(_)) || !o.shape.is_empty() {
                shape::check(op.family().name(), &o.shape)?;
            }
        }
        let node = Arc::new(NodeDef {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            op,
            srcs,
            outs,
            attention,
        });
        Ok((0..node.outs.len())
            .map(|port| Tensor {
                node: node.clone(),
                port,
            })
            .collect())
    }

    /// Build a single-output node.
    pub fn apply1(op: Op, srcs: Vec<Tensor>) -> Result<Tensor> {
        Ok(Tensor::apply(op, srcs)?.remove(0))
    }

    /// Dtype and shape.
    pub fn ty(&self) -> &TensorType {
        &self.node.outs[self.port]
    }

    /// Static shape.
    pub fn shape(&self) -> &[usize] {
        &self.ty().shape
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.ty().dtype
    }

    /// The op that produced this tensor.
    pub fn op(&self) -> &Op {
        &self.node.op
    }

    /// Creation index of the producing node.
    pub fn id(&self) -> u64 {
        self.node.id
    }

    /// Whether two handles are the same value.
    pub fn same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.node, &other.node) && self.port == other.port
    }

    /// The inputs of the op that produced this tensor, in order.
    pub fn sources(&self) -> &[Tensor] {
        &self.node.srcs
    }

    /// The attention this tensor is the decomposed output of, if any.
    pub(crate) fn attention(&self) -> Option<&Attention> {
        self.node.attention.as_deref()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dropping_a_deep_chain_does_not_recurse() {
        // 100,000 nodes dropped on a 256 KiB stack: a recursive drop overflows it.
        let worker = std::thread::Builder::new().stack_size(256 << 10).spawn(|| {
            let mut t = crate::input(&[4]).unwrap();
            for _ in 0..100_000 {
                t = t.relu().unwrap();
            }
            drop(t);
        });
        worker
            .unwrap()
            .join()
            .expect("the drop overflowed the stack");
    }

    #[test]
    fn dropping_a_deep_chain_of_attentions_does_not_recurse() {
        // Each sdpa's marker holds its operands: they are freed iteratively too.
        let worker = std::thread::Builder::new().stack_size(256 << 10).spawn(|| {
            let mut t = crate::input(&[1, 1, 2, 2]).unwrap();
            for _ in 0..5_000 {
                t = crate::sdpa(&t, &t, &t, None, false, None).unwrap();
            }
            drop(t);
        });
        worker
            .unwrap()
            .join()
            .expect("the drop overflowed the stack");
    }
}
