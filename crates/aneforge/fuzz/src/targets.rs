//! The fuzz targets, shared by the cargo-fuzz binaries (`fuzz_targets/`) and the deterministic
//! mutation harness that runs in `make test` (`crates/aneforge/tests/fail_closed_fuzz.rs`
//! includes this file). Each takes arbitrary bytes and must return without panicking, reading
//! out of bounds or allocating past the caps of `aneforge::limits`; errors are the expected
//! outcome for most inputs and are ignored.

use std::path::{Path, PathBuf};

/// A scratch directory private to this process and thread (fuzz targets write files there).
pub fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "aneforge-fuzz-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Splits `data` into `n` parts, each prefixed by a little-endian u32 length (clamped to what
/// is left; the last part takes the rest), so one byte string can carry several files.
pub fn split(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(n);
    let mut rest = data;
    for _ in 0..n.saturating_sub(1) {
        let len = rest
            .get(..4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        rest = rest.get(4..).unwrap_or_default();
        let (part, tail) = rest.split_at(len.min(rest.len()));
        parts.push(part);
        rest = tail;
    }
    parts.push(rest);
    parts
}

/// [`split`]'s inverse: length-prefixed parts, the last one bare.
pub fn join(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if i + 1 < parts.len() {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(p);
    }
    out
}

/// MIL text, then optionally a NUL byte and a weights.bin image, through the parser.
pub fn mil_text(data: &[u8]) {
    let (text, weights) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(text) = std::str::from_utf8(text) {
        let _ = aneforge::mil::parse::parse(
            text,
            "model.mil".as_ref(),
            weights,
            "weights.bin".as_ref(),
        );
    }
}

/// A whole program directory (model.mil, weights.bin, program.json as [`split`] parts) through
/// `Program::load_dir`: parser, blob reader, manifest check and lowering.
pub fn program_dir(data: &[u8]) {
    let dir = scratch().join("prog");
    std::fs::create_dir_all(&dir).expect("prog dir");
    let parts = split(data, 3);
    for (name, bytes) in ["model.mil", "weights.bin", "program.json"]
        .iter()
        .zip(&parts)
    {
        std::fs::write(dir.join(name), bytes).expect("write");
    }
    let _ = aneforge::Program::load_dir(&dir);
}

/// A safetensors state dict: validated, then every tensor read at its declared shape.
pub fn safetensors(data: &[u8]) {
    let Ok(w) =
        aneforge::models::Weights::from_bytes(Path::new("model.safetensors"), data.to_vec())
    else {
        return;
    };
    for (name, shape) in w.shapes() {
        let _ = w.get(&name, &shape);
    }
}

/// A Hugging Face `config.json` through the decoder family's (GPT-2, llama, ...) and BERT
/// config readers.
pub fn hf_config(data: &[u8]) {
    let p = scratch().join("config.json");
    std::fs::write(&p, data).expect("write");
    let _ = aneforge::models::llm::LlmConfig::from_hf(&p);
    let _ = aneforge::models::bert::BertConfig::from_file(&p);
}

/// A `.npy` file through the CLI's reader.
pub fn npy(data: &[u8]) {
    let _ = aneforge::cli::npy::parse(data, Path::new("x.npy"));
}

/// An ONNX ModelProto through the importer (protobuf, initializers, folding, op mapping), then
/// lowered to a program when it imports.
pub fn onnx(data: &[u8]) {
    if let Ok(m) = aneforge::onnx::import_bytes(data, None, &[]) {
        if let Ok(g) = aneforge::Graph::from_outputs(&m.named_outputs()) {
            let _ = aneforge::Program::lower(g);
        }
    }
}
