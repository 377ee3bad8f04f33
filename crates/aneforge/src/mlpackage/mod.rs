//! `.mlpackage` export: a lowered program as the standard Core ML package that coremltools
//! and Xcode open — `Manifest.json`, `Data/com.apple.CoreML/model.mlmodel` (the Core ML
//! `Model` protobuf holding the MIL program) and `Data/com.apple.CoreML/weights/weight.bin`
//! (the MILBlob v2 weight file), written atomically (temp directory + rename).

pub mod encode;
pub mod package;
pub mod proto;
pub mod spec_version;

pub use encode::{encode, EncodedModel};
pub use package::write_mlpackage;
pub use spec_version::{CoreMlOpset, OPSETS};
