//! aneforge: compile a lazy tensor graph into one Apple Neural Engine program (MIL text +
//! weight blob) and run it — on the ANE through Espresso's e5rt API, or anywhere on the
//! reference executor, a CPU interpreter that defines each op under the fp16 contract.

pub mod autograd;
#[cfg(feature = "cli")]
pub mod cli;
pub mod dtype;
pub mod error;
pub mod graph;
pub mod mil;
#[cfg(feature = "safetensors")]
pub mod models;
pub mod ops;
pub mod shape;

pub use dtype::DType;
pub use error::{Error, Result};
pub use graph::{Graph, Tensor};
pub use ops::attention::{sdpa, AttentionWeights};
pub use ops::conv::{conv2d, dynamic_conv, ConvOptions};
pub use ops::conv_transpose::conv_transpose2d;
pub use ops::elementwise::select;
pub use ops::io::{constant, image_input, input, input_port, scalar, HostArray, HostData};
pub use ops::layout::concat;
pub use ops::norm::batch_norm;
pub use ops::rearrange::stack;
pub mod compile;
pub mod compress;
pub mod conformance;
pub mod exec;
pub mod mlpackage;
pub mod numerics;
pub mod options;
pub mod passes;
pub mod program;
pub mod targets;
pub mod train;

pub use autograd::backward;
pub use compile::{
    compile, compress_dir, export, load_dir, load_dir_with, CompileOptions, Compiled, Device,
    Exported,
};
pub use compress::{Compress, CompressionEntry, Encoding};
pub use exec::{Executor, Loaded, PortData, Precision};
pub use options::OptionValue;
pub use program::{PortSpec, Program};
