//! GGUF reader: open a file (versions 2 and 3, little-endian), read its metadata with typed
//! accessors and its tensor infos, and dequantize tensors to f32 straight from the memory map.
//!
//! ```no_run
//! let file = aneforge_gguf::GgufFile::open("model.gguf")?;
//! let arch = file.architecture()?;
//! let layers = file.metadata().get_unsigned(&arch.key("block_count"))?;
//! let embedding = file.tensor("token_embd.weight")?.dequantize()?;
//! # Ok::<(), aneforge_gguf::GgufError>(())
//! ```
//!
//! Every count and size read from the file is checked (against the bytes left, in checked
//! arithmetic) before anything is allocated from it; failures are [`GgufError`]s naming the
//! file and the key, tensor or byte offset.

pub mod architecture;
mod cursor;
pub mod error;
pub mod file;
mod header;
pub mod metadata;
pub mod quant;
pub mod tensors;

pub use architecture::Architecture;
pub use error::{GgufError, Result};
pub use file::{GgufFile, Tensor};
pub use metadata::{Array, Metadata, Value, ValueType, MAX_ARRAY_NESTING};
pub use tensors::{GgmlType, TensorInfo};
