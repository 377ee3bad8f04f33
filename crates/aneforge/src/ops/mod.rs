//! Op definitions, one file per family. Each family file holds, for its ops: the op type, the
//! shape/dtype rule, the reference kernel and the MIL spelling (print and parse) — kernels beside
//! their MIL spelling. Builders live above in `graph/build/`, gradient rules in `autograd/`.
//! This module only dispatches.

pub(crate) mod add_softmax;
pub mod affine;
pub mod channel;
pub mod constexpr;
pub mod conv;
mod conv_blocks;
pub mod conv_depthwise;
mod conv_direct;
pub mod conv_gemm;
mod conv_lanes;
mod conv_panels;
pub(crate) mod conv_pointwise;
pub mod conv_transpose;
mod depthwise_lanes;
mod depthwise_reuse;
mod depthwise_rows;
pub mod einsum;
pub mod elementwise;
pub mod gemm;
pub(crate) mod gemm_avx2;
mod gemm_avx2_column;
pub(crate) mod gemm_avx512;
pub(crate) mod gemm_order;
pub(crate) mod gemm_packed;
pub(crate) mod gemv;
pub mod host;
pub mod host_argreduce;
pub mod host_bridge;
pub mod host_checks;
pub mod host_correlate;
pub mod host_geometry;
pub mod host_int;
pub mod host_normalize;
pub mod host_radix;
pub mod host_rearrange;
pub mod host_sample;
pub mod host_scan;
pub mod host_scatter;
pub mod host_sdpa;
pub mod host_select;
pub mod host_sort;
pub mod host_sort_columns;
pub mod host_sort_network;
pub mod host_take;
pub mod host_view;
pub mod io;
pub mod kernel;
pub mod layout;
pub mod linear;
pub mod norm;
pub mod pool;
mod pool_max_s2;
pub mod rearrange;
pub mod reduce;
mod reduce_lanes;
pub mod resize;
pub(crate) mod row_norm;
pub mod simd_exp;
pub mod simd_fp16;
mod simd_softmax;
mod simd_transpose;
mod table;
pub mod unary;
pub(crate) mod weight_blocks;

use crate::dtype::DType;
use crate::error::Result;
use crate::mil::{MilArgs, MilOp};
use crate::shape::Shape;
pub use kernel::Buf;

/// Type of one graph value: dtype and static shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Shape,
}

impl TensorType {
    /// An fp16 value of `shape`.
    pub fn fp16(shape: Shape) -> Self {
        TensorType {
            dtype: DType::Fp16,
            shape,
        }
    }
}

/// What every op family provides.
pub trait Family {
    /// The op name used in errors and docs (the MIL op name).
    fn name(&self) -> &'static str;
    /// Output types from input types; errors name the op and the shapes.
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>>;
    /// The MIL spelling: op name, compile-time parameters and the names of the tensor arguments.
    fn mil(&self) -> MilOp;
    /// Reference kernel: read `inputs`, write every element of the preallocated `outputs`
    /// (values in f32; the executor rounds fp16 outputs afterwards).
    fn eval(&self, inputs: &[&Buf], outputs: &mut [Buf]) -> Result<()>;
}

/// Every op the graph IR knows. Nodes are MIL-level: one node prints as one MIL statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A program input port.
    Input(io::Input),
    /// A baked constant (fp16 weight tensor in the blob, or an fp16 scalar).
    Const(io::Const),
    /// A compressed weight expanded to fp16 at load time (int8, int4 palette, sparse, blockwise).
    Constexpr(constexpr::Constexpr),
    /// Dtype conversion (uint8 image port to fp16).
    Cast(io::Cast),
    /// Elementwise single-input ops (fp16 math and activations; `logical_not` on bool).
    Unary(unary::Unary),
    /// Elementwise two-input ops with NumPy broadcasting.
    Binary(elementwise::Binary),
    /// Elementwise comparisons producing bool.
    Compare(elementwise::Compare),
    /// `select(cond, a, b)` with broadcasting.
    Select(elementwise::Select),
    /// Matrix multiply (NumPy `matmul` semantics, optional transposes).
    MatMul(linear::MatMul),
    /// 2-D convolution.
    Conv(conv::Conv),
    /// 2-D transposed convolution.
    ConvTranspose(conv_transpose::ConvTranspose),
    /// Max and average pooling.
    Pool(pool::Pool),
    /// Reductions over axes.
    Reduce(reduce::Reduce),
    /// Softmax along one axis.
    Softmax(reduce::Softmax),
    /// Inference batch normalisation.
    BatchNorm(norm::BatchNorm),
    /// Per-instance normalisation over the spatial axes.
    InstanceNorm(norm::InstanceNorm),
    /// Data movement: reshape, transpose, concat, split, slices, squeeze/expand, upsample.
    Layout(layout::Layout),
    /// More data movement: reverse, tile, flatten2d, stack.
    Rearrange(rearrange::Rearrange),
    /// Nearest-neighbour and bilinear resize of the last two axes (target sizes or scale factors).
    Resize(resize::Resize),
    /// Per-channel `prelu` and cross-channel `local_response_norm`.
    Channel(channel::Channel),
    /// Native MIL `einsum` (the `nchw,nwhu->nchu` / `chw,whu->chu` matmul).
    Einsum(einsum::Einsum),
    /// Bilinear affine warp (MIL `affine`).
    Affine(affine::Affine),
    /// An op that runs on the host between fused regions (never printed as MIL; see `ops/host`).
    Host(host::HostOp),
}

macro_rules! dispatch {
    ($self:expr, $f:ident ( $($arg:expr),* )) => {
        match $self {
            Op::Input(o) => o.$f($($arg),*),
            Op::Const(o) => o.$f($($arg),*),
            Op::Constexpr(o) => o.$f($($arg),*),
            Op::Cast(o) => o.$f($($arg),*),
            Op::Unary(o) => o.$f($($arg),*),
            Op::Binary(o) => o.$f($($arg),*),
            Op::Compare(o) => o.$f($($arg),*),
            Op::Select(o) => o.$f($($arg),*),
            Op::MatMul(o) => o.$f($($arg),*),
            Op::Conv(o) => o.$f($($arg),*),
            Op::ConvTranspose(o) => o.$f($($arg),*),
            Op::Pool(o) => o.$f($($arg),*),
            Op::Reduce(o) => o.$f($($arg),*),
            Op::Softmax(o) => o.$f($($arg),*),
            Op::BatchNorm(o) => o.$f($($arg),*),
            Op::InstanceNorm(o) => o.$f($($arg),*),
            Op::Layout(o) => o.$f($($arg),*),
            Op::Rearrange(o) => o.$f($($arg),*),
            Op::Resize(o) => o.$f($($arg),*),
            Op::Channel(o) => o.$f($($arg),*),
            Op::Einsum(o) => o.$f($($arg),*),
            Op::Affine(o) => o.$f($($arg),*),
            Op::Host(o) => o.$f($($arg),*),
        }
    };
}

impl Op {
    /// The family's view of this op.
    pub fn family(&self) -> &dyn Family {
        dispatch!(self, as_family())
    }

    /// Rebuild an op from a parsed MIL statement; `None` if no family knows `op`.
    pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
        io::from_mil(op, args)
            .or_else(|| constexpr::from_mil(op, args))
            .or_else(|| unary::from_mil(op, args))
            .or_else(|| elementwise::from_mil(op, args))
            .or_else(|| linear::from_mil(op, args))
            .or_else(|| conv::from_mil(op, args))
            .or_else(|| conv_transpose::from_mil(op, args))
            .or_else(|| pool::from_mil(op, args))
            .or_else(|| reduce::from_mil(op, args))
            .or_else(|| norm::from_mil(op, args))
            .or_else(|| layout::from_mil(op, args))
            .or_else(|| rearrange::from_mil(op, args))
            .or_else(|| resize::from_mil(op, args))
            .or_else(|| channel::from_mil(op, args))
            .or_else(|| einsum::from_mil(op, args))
            .or_else(|| affine::from_mil(op, args))
    }
}

/// Every MIL op name the families print (each must have a lowering case in the tests).
pub fn mil_op_names() -> Vec<&'static str> {
    [
        io::MIL_OPS,
        constexpr::MIL_OPS,
        unary::MIL_OPS,
        elementwise::Binary::MIL_NAMES,
        elementwise::Compare::MIL_NAMES,
        &[elementwise::SELECT],
        linear::MIL_OPS,
        conv::MIL_OPS,
        conv_transpose::MIL_OPS,
        pool::MIL_OPS,
        reduce::ReduceKind::MIL_NAMES,
        &[reduce::SOFTMAX],
        norm::MIL_OPS,
        layout::MIL_OPS,
        rearrange::RearrangeOp::MIL_NAMES,
        rearrange::Shuffle::MIL_NAMES,
        resize::MIL_OPS,
        channel::MIL_OPS,
        einsum::MIL_OPS,
        affine::MIL_OPS,
    ]
    .concat()
}

/// Blanket helper so `dispatch!` can hand out `&dyn Family`.
pub trait AsFamily {
    fn as_family(&self) -> &dyn Family;
}

impl<T: Family> AsFamily for T {
    fn as_family(&self) -> &dyn Family {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{mil_op_names, Op};
    use crate::mil::MilArgs;
    use crate::{Graph, Program};

    /// The registry lists each MIL name once.
    #[test]
    fn registry_names_are_unique() {
        let names = mil_op_names();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    /// Every registry name is printed by some corpus node, and that node's MIL statement parses
    /// back (by name, through `Op::from_mil`) to the same op. `const` statements are rebuilt by
    /// the MIL parser from their literal, so they are only required to be printed.
    #[test]
    fn every_registry_name_parses_back_to_the_op_that_printed_it() {
        let (mut printed, mut parsed) = (BTreeSet::new(), BTreeSet::new());
        for (case, t) in crate::conformance::corpus::conformance().unwrap() {
            let p = Program::lower(Graph::from_outputs(&[(None, t)]).unwrap()).unwrap();
            for node in &p.graph.nodes {
                if matches!(node.op, Op::Input(_)) {
                    continue;
                }
                let m = node.op.family().mil();
                printed.insert(m.op);
                if matches!(node.op, Op::Const(_)) {
                    continue;
                }
                let params = m.params.iter().map(|(k, v)| (k.to_string(), v.clone()));
                let mut args = MilArgs::new("model.mil", case, params.collect());
                args.blobs = m
                    .blobs
                    .iter()
                    .map(|(k, shape, payload)| (k.to_string(), (shape.clone(), payload.clone())))
                    .collect();
                let back = Op::from_mil(m.op, &mut args)
                    .unwrap_or_else(|| panic!("{case}: no family parses '{}'", m.op))
                    .unwrap_or_else(|e| panic!("{case}: '{}' does not parse back: {e}", m.op));
                assert_eq!(back, node.op, "{case}: '{}'", m.op);
                parsed.insert(m.op);
            }
        }
        for name in mil_op_names() {
            assert!(printed.contains(name), "no corpus node prints '{name}'");
            assert!(
                name == super::io::CONST || parsed.contains(name),
                "'{name}' never parsed back"
            );
        }
    }
}
