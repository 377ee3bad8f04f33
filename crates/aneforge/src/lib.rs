//! aneforge: compile a lazy tensor graph into one Apple Neural Engine program (MIL text +
//! weight blob) and run it — on the ANE through Espresso's e5rt API, or anywhere on the
//! reference executor, a CPU interpreter that defines each op under the fp16 contract.

pub mod autograd;
#[cfg(feature = "cli")]
pub mod cli;
pub mod dtype;
pub mod error;
pub mod graph;
pub mod limits;
pub mod mil;
#[cfg(feature = "safetensors")]
pub mod models;
pub mod ops;
pub mod shape;

pub use dtype::DType;
pub use error::{Error, Result};
pub use graph::build::attention::{sdpa, AttentionWeights};
pub use graph::build::conv::{conv2d, dynamic_conv};
pub use graph::build::conv_transpose::conv_transpose2d;
pub use graph::build::elementwise::select;
pub use graph::build::host::embedding;
pub use graph::build::io::{constant, image_input, input, input_port, scalar};
pub use graph::build::layout::concat;
pub use graph::build::norm::batch_norm;
pub use graph::build::rearrange::stack;
pub use graph::{Graph, Tensor};
pub use ops::conv::ConvOptions;
pub use ops::io::{HostArray, HostData};
pub mod compile;
pub mod compress;
pub mod conformance;
pub mod cost;
pub mod exec;
pub mod mlpackage;
pub mod numerics;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod options;
pub mod passes;
pub mod plan;
pub mod program;
pub mod targets;
pub mod train;
pub mod tune;

pub use autograd::backward;
pub use compile::{
    compile, compress_dir, export, load_dir, load_dir_with, CompileOptions, Compiled, Device,
    Exported,
};
pub use compress::{Compress, CompressionEntry, Encoding};
pub use exec::reference::threads::{num_threads, set_num_threads};
pub use exec::reference::MemoryReport;
pub use exec::{Executor, Loaded, PortData, Precision};
pub use options::OptionValue;
pub use program::{PortSpec, Program};
