//! Compile the Core ML schema subset in `proto/` into Rust types with prost, through protox
//! (a pure-Rust .proto compiler), so no `protoc` binary is needed. The compiled descriptor set
//! is kept too (`coreml_subset.fds.pb`) for the schema-drift test; with feature `onnx`, the same
//! for the ONNX schema subset (`onnx_subset.fds.pb`, package `onnx`).

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for f in [
        "proto/Model.proto",
        "proto/MIL.proto",
        "proto/FeatureTypes.proto",
        "proto/onnx.proto",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(["proto/Model.proto"], ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("coreml_subset.fds.pb"), fds.encode_to_vec())?;
    prost_build::Config::new().compile_fds(fds)?;
    if std::env::var_os("CARGO_FEATURE_ONNX").is_some() {
        let onnx = protox::compile(["proto/onnx.proto"], ["proto"])?;
        std::fs::write(out.join("onnx_subset.fds.pb"), onnx.encode_to_vec())?;
        // Initializer bytes stay slices of the file buffer (no copy while decoding).
        prost_build::Config::new()
            .bytes([".onnx.TensorProto.raw_data"])
            .compile_fds(onnx)?;
    }
    Ok(())
}
