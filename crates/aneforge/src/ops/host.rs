//! Host ops: ops that never enter MIL. They run in-process on the host, between the fused
//! regions of a segmented plan, with one Rust kernel on every device (the reference and the ANE
//! executor run the same code). Each op is a struct implementing [`HostKernel`] (name, shape and
//! dtype rule, kernel) in its own `ops/host_<name>.rs`, plus one row in [`host_ops!`]; the graph holds
//! it as `Op::Host(HostOp)` and the plan file stores it as JSON (`{"op": "<name>", ...fields}`).

pub use super::host_argreduce as argreduce;
pub use super::host_bridge as bridge;
pub use super::host_checks as checks;
pub use super::host_correlate as correlate;
pub use super::host_geometry as geometry;
pub use super::host_int as int;
pub use super::host_normalize as normalize;
pub use super::host_rearrange as rearrange;
pub use super::host_sample as sample;
pub use super::host_scan as scan;
pub use super::host_scatter as scatter;
pub use super::host_sdpa as sdpa;
pub use super::host_select as select;
pub use super::host_sort as sort;
pub use super::host_take as take;
pub use super::host_view as view;

use super::{Buf, Family, TensorType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::mil::MilOp;
use crate::shape;

/// Elements of a host value: f32 storage of fp16 numbers, or exact int32.
#[derive(Clone, Debug, PartialEq)]
pub enum Elems {
    F32(Vec<f32>),
    I32(Vec<i32>),
}

/// One value seen by a host kernel: shape plus elements (fp16 values widened to f32, int32 exact).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub data: Elems,
}

impl HostTensor {
    /// A zero-filled value of `ty` (f32 storage for fp16, int32 for int32; other dtypes are an error).
    pub fn zeros(ty: &TensorType) -> Result<HostTensor> {
        let n = shape::numel(&ty.shape);
        let data = match ty.dtype {
            DType::Fp16 => Elems::F32(vec![0.0; n]),
            DType::Int32 => Elems::I32(vec![0; n]),
            d => {
                return Err(Error::dtype(
                    "host stage",
                    format!(
                        "a {d} {:?} value cannot cross a cut (fp16 or int32 only)",
                        ty.shape
                    ),
                ))
            }
        };
        Ok(HostTensor {
            shape: ty.shape.clone(),
            data,
        })
    }

    /// The f32 elements; a runtime error naming `op` when the value is int32.
    pub fn f32s(&self, op: &str) -> Result<&[f32]> {
        match &self.data {
            Elems::F32(v) => Ok(v),
            Elems::I32(_) => Err(Error::dtype(op, "expected an fp16 value, got int32")),
        }
    }

    /// The int32 elements; a runtime error naming `op` when the value is fp16.
    pub fn i32s(&self, op: &str) -> Result<&[i32]> {
        match &self.data {
            Elems::I32(v) => Ok(v),
            Elems::F32(_) => Err(Error::dtype(op, "expected an int32 value, got fp16")),
        }
    }

    /// A borrowed view of this value, as a kernel reads it.
    pub fn view(&self) -> HostRef<'_> {
        HostRef {
            shape: &self.shape,
            data: match &self.data {
                Elems::F32(v) => ElemsRef::F32(v),
                Elems::I32(v) => ElemsRef::I32(v),
            },
        }
    }

    /// The f32 elements, writable; a runtime error naming `op` when the value is int32.
    pub fn f32s_mut(&mut self, op: &str) -> Result<&mut [f32]> {
        match &mut self.data {
            Elems::F32(v) => Ok(v),
            Elems::I32(_) => Err(Error::dtype(op, "expected an fp16 output, got int32")),
        }
    }

    /// The int32 elements, writable; a runtime error naming `op` when the value is fp16.
    pub fn i32s_mut(&mut self, op: &str) -> Result<&mut [i32]> {
        match &mut self.data {
            Elems::I32(v) => Ok(v),
            Elems::F32(_) => Err(Error::dtype(op, "expected an int32 output, got fp16")),
        }
    }
}

/// Borrowed elements of a host value (f32 storage of fp16 numbers, or exact int32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ElemsRef<'a> {
    F32(&'a [f32]),
    I32(&'a [i32]),
}

/// One value as a host kernel reads it: borrowed shape and elements, so a plan hands a kernel
/// a region's value buffer or another stage's result without copying it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostRef<'a> {
    pub shape: &'a [usize],
    pub data: ElemsRef<'a>,
}

impl<'a> HostRef<'a> {
    /// The f32 elements; a runtime error naming `op` when the value is int32.
    pub fn f32s(&self, op: &str) -> Result<&'a [f32]> {
        match self.data {
            ElemsRef::F32(v) => Ok(v),
            ElemsRef::I32(_) => Err(Error::dtype(op, "expected an fp16 value, got int32")),
        }
    }

    /// The int32 elements; a runtime error naming `op` when the value is fp16.
    pub fn i32s(&self, op: &str) -> Result<&'a [i32]> {
        match self.data {
            ElemsRef::I32(v) => Ok(v),
            ElemsRef::F32(_) => Err(Error::dtype(op, "expected an int32 value, got fp16")),
        }
    }
}

/// What every host op provides: the same three things a fused family does, minus MIL.
pub trait HostKernel {
    /// The op name used in errors, plan files and `net.stages`.
    fn name(&self) -> &'static str;
    /// Output types from input types; errors name the op, the dtypes and the shapes.
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>>;
    /// The kernel: read `inputs`, write every element of the preallocated `outputs` (fp16
    /// outputs in f32; the plan executor rounds them to fp16). Bad runtime data (an index out of
    /// range) is an error naming the op, the value and the bound, never an out-of-bounds read.
    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()>;
}

/// Declares [`HostOp`] (one variant per host-op struct, tagged by its plan-file name) and its dispatch.
macro_rules! host_ops {
    ($( $(#[$doc:meta])* $variant:ident($ty:ty) = $name:literal, )*) => {
        /// Every host op. Serialised into the plan file as `{"op": "<name>", <fields>}`.
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "op")]
        pub enum HostOp {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($ty), )*
        }

        /// Plan-file names of every host op.
        pub const HOST_OP_NAMES: &[&str] = &[$($name),*];

        impl HostOp {
            /// The op's kernel.
            pub fn kernel(&self) -> &dyn HostKernel {
                match self {
                    $( HostOp::$variant(o) => o, )*
                }
            }
        }
    };
}

host_ops! {
    /// `argmax` / `argmin` along one axis.
    ArgReduce(argreduce::ArgReduce) = "arg_reduce",
    /// `topk`: the k largest (or smallest) values and their indices along one axis.
    TopK(sort::TopK) = "topk",
    /// Stable `sort` / `argsort` along one axis (values and indices).
    Sort(sort::Sort) = "sort",
    /// The values of a `sort` whose permutation nothing reads (chosen by the segmenter).
    SortValues(sort::SortValues) = "sort_values",
    /// `gather` / `take` / `embedding` with runtime int32 indices (NumPy `take`).
    Take(take::Take) = "take",
    /// Gradient of `take`: scatter-add of `g` into zeros at `indices` along one axis.
    TakeAdd(take::TakeAdd) = "take_add",
    /// Gradient of `topk`/`sort` values: `put_along_axis` with add into zeros.
    AlongAdd(take::AlongAdd) = "along_add",
    /// `scatter(x, indices, updates, axis, reduce)` (ONNX ScatterElements; replace or add).
    Scatter(scatter::Scatter) = "scatter",
    /// `take_along_axis` (ONNX GatherElements): the gradient of scatter's updates.
    TakeAlong(scatter::TakeAlong) = "take_along_axis",
    /// `index_put(x, row_index, rows, axis)`: whole-row writes (a KV-cache update).
    IndexPut(scatter::IndexPut) = "index_put",
    /// `cumsum(x, axis, exclusive, reverse)`.
    Cumsum(scan::Cumsum) = "cumsum",
    /// `one_hot(indices, depth)`: int32 → fp16 0/1 on a new last axis.
    OneHot(scan::OneHot) = "one_hot",
    /// `sample(logits, temperature, top_k, top_p, seed)`: int32 token ids (SplitMix64).
    Sample(sample::Sample) = "sample",
    /// `cross_product(a, b)` of 3-vectors.
    CrossProduct(bridge::CrossProduct) = "cross_product",
    /// `cross_correlation(x, template)`: valid, unflipped, 2-D.
    CrossCorrelation(bridge::CrossCorrelation) = "cross_correlation",
    /// `cost_volume(aux, reference, disparity_range)`.
    CostVolume(bridge::CostVolume) = "cost_volume",
    /// `fps(points, k)`: greedy farthest point sampling.
    Fps(bridge::Fps) = "fps",
    /// `radius_search(points, centroids, radius)`: 0/1 membership.
    RadiusSearch(bridge::RadiusSearch) = "radius_search",
    /// `minmax_norm(x, dimension, eps)` along width or height.
    MinmaxNorm(bridge::MinmaxNorm) = "minmax_norm",
    /// `scaled_elementwise(x, z, op, scale)`.
    ScaledElementwise(bridge::ScaledElementwise) = "scaled_elementwise",
    /// space/batch/channel block rearranges (TensorFlow orders).
    BlockRearrange(bridge::BlockRearrange) = "block_rearrange",
    /// `flatten(x)` to 1-D.
    Flatten(bridge::Flatten) = "flatten",
    /// `input_view(x, offset, size)`: a flat window.
    InputView(bridge::InputView) = "input_view",
    /// `dynamic_slice(x, start, sizes)` with a runtime int32 start.
    DynamicSlice(bridge::DynamicSlice) = "dynamic_slice",
    /// Gradient of `dynamic_slice`: `g` placed into zeros at the runtime start.
    DynamicSliceAdd(bridge::DynamicSliceAdd) = "dynamic_slice_add",
    /// `sdpa(q, k, v[, mask])` with an optional runtime additive mask.
    Sdpa(bridge::Sdpa) = "sdpa",
    /// Exact integer/bool elementwise ops (ONNX int tensors as int32), wrapping to their type.
    IntElementwise(int::IntElementwise) = "int_elementwise",
    /// An int32 value with a new shape (reshapes of runtime ONNX integers).
    IntReshape(int::IntReshape) = "int_reshape",
    /// Data movement of int32 values by a source-index table (layout ops on runtime ONNX ints).
    IntRemap(int::IntRemap) = "int_remap",
}

impl Family for HostOp {
    fn name(&self) -> &'static str {
        self.kernel().name()
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        self.kernel().infer(inputs)
    }
    /// Host ops have no MIL spelling; `Program::lower_for` rejects a graph holding one, so this
    /// placeholder (the op name, no arguments) is never printed.
    fn mil(&self) -> MilOp {
        MilOp::new(self.kernel().name(), &[])
    }
    fn eval(&self, _: &[&Buf], _: &mut [Buf]) -> Result<()> {
        Err(Error::NotImplemented(format!(
            "{}: a host op runs in a host stage of a plan, not inside a fused program",
            self.name()
        )))
    }
}

/// The (outer, extent, inner) split of `shape` around `axis`: element (o, j, i) sits at
/// `(o * extent + j) * inner + i`.
pub fn lanes(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

/// Check an op got exactly the input dtypes `want` (errors name the op, position, dtype and shape).
pub fn expect_dtypes(op: &str, inputs: &[TensorType], want: &[DType]) -> Result<()> {
    if inputs.len() != want.len() {
        return Err(Error::shape(
            op,
            format!("expects {} inputs, got {}", want.len(), inputs.len()),
        ));
    }
    for (i, (t, &d)) in inputs.iter().zip(want).enumerate() {
        if t.dtype != d {
            return Err(Error::dtype(
                op,
                format!("input {i} is {} {:?}; expected {d}", t.dtype, t.shape),
            ));
        }
    }
    Ok(())
}

/// Check a stored axis is inside `rank` (plan files are user data).
pub fn check_axis(op: &str, axis: usize, shape: &[usize]) -> Result<()> {
    if axis >= shape.len() {
        return Err(Error::shape(
            op,
            format!("axis {axis} is out of range for shape {shape:?}"),
        ));
    }
    Ok(())
}
