//! The lazy tensor handle users build graphs with: a node in a reference-counted DAG whose
//! shape and dtype are known at construction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::dtype::DType;
use crate::error::Result;
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
        let in_types: Vec<TensorType> = srcs.iter().map(|t| t.ty().clone()).collect();
        let outs = op.family().infer(&in_types)?;
        for o in &outs {
            if !matches!(op, Op::Const(_)) || !o.shape.is_empty() {
                shape::check(op.family().name(), &o.shape)?;
            }
        }
        let node = Arc::new(NodeDef { id: NEXT_ID.fetch_add(1, Ordering::Relaxed), op, srcs, outs });
        Ok((0..node.outs.len()).map(|port| Tensor { node: node.clone(), port }).collect())
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
}
