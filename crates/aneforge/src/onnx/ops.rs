//! The ONNX op table: each op type maps to one function from its node and input values to its
//! output values, built from the graph builders (`graph/build/`) or folded on the host
//! (`fold.rs`) when every input is a constant. Ops whose output shape depends on input values
//! are rows of [`DATA_DEPENDENT_SHAPE`].

pub(super) use super::ops_attention as attention;
pub(super) use super::ops_elementwise as elementwise;
pub(super) use super::ops_grid as grid;
pub(super) use super::ops_index as index;
pub(super) use super::ops_int as int;
pub(super) use super::ops_layout as layout;
pub(super) use super::ops_loss as loss;
pub(super) use super::ops_nd as nd;
pub(super) use super::ops_nn as nn;
pub(super) use super::ops_recurrent as recurrent;
pub(super) use super::ops_reduce as reduce;
pub(super) use super::ops_resize as resize;
pub(super) use super::ops_signal as signal;
pub(super) use super::ops_values as values;

pub use nn::bn_affine;

use std::rc::Rc;

use super::node::Node;
use super::tensor::{Elem, HostTensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::build::io::{constant, scalar};
use crate::graph::Tensor;
use crate::ops::io::{Cast, HostArray, HostData};
use crate::ops::Op;

/// A value flowing between ONNX nodes: a host constant, or a graph tensor (fp16 or bool) with
/// the ONNX element type it stands for.
#[derive(Clone, Debug)]
pub enum Value {
    Host(Rc<HostTensor>),
    Graph { t: Tensor, elem: Elem },
}

impl Value {
    /// The value's ONNX element type.
    pub fn elem(&self) -> Elem {
        match self {
            Value::Host(h) => h.elem,
            Value::Graph { elem, .. } => *elem,
        }
    }

    /// The value's static shape.
    pub fn dims(&self) -> Vec<usize> {
        match self {
            Value::Host(h) => h.dims.clone(),
            Value::Graph { t, .. } => t.shape().to_vec(),
        }
    }

    /// A graph float value.
    pub fn float(t: Tensor) -> Value {
        Value::Graph { t, elem: Elem::F32 }
    }

    /// A host value.
    pub fn host(h: HostTensor) -> Value {
        Value::Host(Rc::new(h))
    }
}

/// The input values of one node (None: an omitted optional input).
pub struct Args<'n, 'a> {
    pub node: &'n Node<'a>,
    pub vals: Vec<Option<Value>>,
    /// A following BatchNormalization to fold into this Conv/Gemm: (scale, shift) per channel.
    pub bn: Option<(Vec<f64>, Vec<f64>)>,
    /// The weight (input 1) of a Conv, a Gemm with transB = 1 or a MatMul as raw f32 bytes when
    /// it is a float32 initializer of rank 2 (Conv: any rank); `vals[1]` is then None.
    pub weight: Option<super::weights::RawF32>,
}

impl Args<'_, '_> {
    /// Input `i` if present.
    pub fn get(&self, i: usize) -> Option<&Value> {
        self.vals.get(i).and_then(|v| v.as_ref())
    }

    /// Input `i`, required.
    pub fn req(&self, i: usize) -> Result<&Value> {
        self.get(i)
            .ok_or_else(|| self.node.bad(format!("input {i} is missing")))
    }

    /// Input `i` as a graph tensor (host constants are baked as fp16 consts; ints only when
    /// every value is exact in fp16).
    pub fn tensor(&self, i: usize) -> Result<Tensor> {
        to_graph(self.node, self.req(i)?)
    }

    /// Input `i` as a float graph tensor where runtime ints may stand for floats (the fp16
    /// contract rounds them, as it rounds every input): bool and int32 become fp16.
    pub fn ftensor_of_int(&self, i: usize) -> Result<Tensor> {
        match self.req(i)? {
            Value::Graph { t, .. } if t.dtype() == DType::Int32 => t.cast(DType::Fp16),
            _ => self.ftensor(i),
        }
    }

    /// Input `i` as a float graph tensor: bool is cast to fp16.
    pub fn ftensor(&self, i: usize) -> Result<Tensor> {
        if let Some(Value::Graph {
            t,
            elem: Elem::Bool,
        }) = self.get(i)
        {
            if t.dtype() == DType::Int32 {
                return t.cast(DType::Fp16);
            }
        }
        let t = self.tensor(i)?;
        if t.dtype() == DType::Bool {
            return to_fp16(&t);
        }
        Ok(t)
    }

    /// Optional input `i`, which must be a host constant (`what` names it in the error).
    pub fn host(&self, i: usize, what: &str) -> Result<Option<Rc<HostTensor>>> {
        match self.get(i) {
            None => Ok(None),
            Some(Value::Host(h)) => Ok(Some(h.clone())),
            Some(Value::Graph { .. }) => {
                let name = self.node.proto.input.get(i).map_or("", |s| s.as_str());
                Err(self.node.unsupported(&format!(
                    "input {i} ({what}) is computed at runtime; a static-shape compiler {}",
                    super::bind::needs_value(name)
                )))
            }
        }
    }

    /// Optional constant input `i` as integers.
    pub fn ints(&self, i: usize, what: &str) -> Result<Option<Vec<i64>>> {
        Ok(self.host(i, what)?.map(|h| h.to_i64()))
    }

    /// Every present input from index `i` on is a host constant.
    pub fn all_host_from(&self, i: usize) -> bool {
        self.vals
            .iter()
            .skip(i)
            .flatten()
            .all(|v| matches!(v, Value::Host(_)))
    }

    /// Every present input is a host constant.
    pub fn all_host(&self) -> bool {
        self.vals
            .iter()
            .flatten()
            .all(|v| matches!(v, Value::Host(_)))
    }
}

/// `v` as a graph tensor; host constants are baked (errors name the node and the bad value).
pub fn to_graph(node: &Node, v: &Value) -> Result<Tensor> {
    match v {
        Value::Graph { t, elem } if t.dtype() == DType::Int32 => Err(node.unsupported(&format!(
            "a runtime {elem:?} input; {} on runtime integer tensors is not mapped (they feed the exact integer host kernels: elementwise, comparisons, logic, Where, Cast, and indices of ArgMax/TopK/Gather/GatherElements/ScatterElements/OneHot)",
            node.op()
        ))),
        Value::Graph { t, .. } => Ok(t.clone()),
        Value::Host(h) => {
            // ±inf is an fp16 value (masks write -inf); NaN and finite values beyond ±65504 are not.
            if let Some(x) = h
                .data
                .iter()
                .find(|x| x.is_nan() || (x.is_finite() && x.abs() > 65504.0))
            {
                return Err(node.unsupported(&format!("constant value {x} is outside fp16")));
            }
            if !h.elem.is_float() {
                if let Some(x) = h.data.iter().find(|&&x| x.abs() > 2048.0) {
                    return Err(node.unsupported(&format!(
                        "integer constant value {x} is not exact in fp16 and meets fp16 arithmetic here \
                         (exact int32 host ops run only on runtime integer inputs)"
                    )));
                }
            }
            if h.data.iter().any(|x| x.is_infinite()) {
                return infinite_constant(node, h);
            }
            if h.dims.is_empty() {
                return scalar(&node.what, h.data[0] as f32);
            }
            constant(
                &node.what,
                HostArray {
                    shape: &h.dims,
                    data: HostData::F64(&h.data),
                },
            )
        }
    }
}

/// A constant holding ±inf (weights are finite): ±65504 where the value is infinite, plus
/// ±65504 again there, which overflows to ±inf in the add's fp16 result (as on the ANE).
fn infinite_constant(node: &Node, h: &HostTensor) -> Result<Tensor> {
    let clamp = |x: f64| x.clamp(-65504.0, 65504.0);
    let base: Vec<f64> = h.data.iter().map(|&x| clamp(x)).collect();
    let extra: Vec<f64> = h
        .data
        .iter()
        .map(|&x| if x.is_infinite() { clamp(x) } else { 0.0 })
        .collect();
    let dims = if h.dims.is_empty() {
        vec![1]
    } else {
        h.dims.clone()
    };
    let part = |data: &[f64]| {
        constant(
            &node.what,
            HostArray {
                shape: &dims,
                data: HostData::F64(data),
            },
        )
    };
    // A rank-0 value becomes [1] (the IR has no rank-0 op results); broadcasting agrees.
    part(&base)?.add(&part(&extra)?)
}

/// `v` as a program output: like [`to_graph`], but a runtime int32 value is returned (through a
/// copy on the host, since an int32 input cannot be an output as it is); rank 0 becomes [1].
pub fn output_graph(node: &Node, v: &Value) -> Result<Tensor> {
    match v {
        Value::Graph { t, .. } if t.dtype() == DType::Int32 => {
            if t.rank() == 0 {
                return Err(node.unsupported("a rank-0 runtime integer output"));
            }
            int::copy(t)
        }
        _ => {
            let mut t = to_graph(node, v)?;
            if t.dtype() == DType::Bool {
                t = to_fp16(&t)?;
            }
            if t.rank() == 0 {
                t = t.reshape(&[1])?;
            }
            Ok(t)
        }
    }
}

/// A bool tensor as fp16 0/1.
pub fn to_fp16(t: &Tensor) -> Result<Tensor> {
    Tensor::apply1(Op::Cast(Cast { dtype: DType::Fp16 }), vec![t.clone()])
}

/// One op mapping.
pub type OpFn = fn(&Args) -> Result<Vec<Value>>;

/// The mapping of ONNX op `op` (default domain), or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    elementwise::lookup(op)
        .or_else(|| nn::lookup(op))
        .or_else(|| layout::lookup(op))
        .or_else(|| reduce::lookup(op))
        .or_else(|| index::lookup(op))
        .or_else(|| attention::lookup(op))
        .or_else(|| loss::lookup(op))
        .or_else(|| recurrent::lookup(op))
        .or_else(|| nd::lookup(op))
        .or_else(|| signal::lookup(op))
        .or_else(|| grid::lookup(op))
}

/// Ops whose output shape depends on the input values (a static-shape program cannot size it).
pub const DATA_DEPENDENT_SHAPE: &[&str] = &["NonZero", "Unique", "NonMaxSuppression", "Compress"];

/// The one-line reason an op without a mapping is unsupported.
pub fn missing_reason(op: &str) -> String {
    if DATA_DEPENDENT_SHAPE.contains(&op) {
        "the output shape depends on the input values (dynamic output shape)".to_string()
    } else if op.starts_with("Sequence")
        || op.starts_with("Optional")
        || op == "SplitToSequence"
        || op == "ConcatFromSequence"
    {
        "sequence/optional types".to_string()
    } else if matches!(op, "Loop" | "If" | "Scan") {
        "control flow (dynamic output shape)".to_string()
    } else if matches!(op, "Gradient" | "Momentum" | "Adagrad" | "Adam") {
        "training-only op".to_string()
    } else {
        "no mapping to the aneforge IR yet".to_string()
    }
}
