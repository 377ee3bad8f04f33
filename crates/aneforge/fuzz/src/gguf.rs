//! The GGUF fuzz target and a seed writer, shared by cargo-fuzz and the deterministic harness
//! (`crates/aneforge-gguf/tests/fuzz_mutation.rs` includes this file).

/// A GGUF file: open (header, metadata, tensor infos, spans) and dequantize every tensor.
pub fn gguf(data: &[u8]) {
    let p = std::env::temp_dir().join(format!(
        "aneforge-fuzz-{}-{:?}.gguf",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&p, data).expect("write");
    if let Ok(f) = aneforge_gguf::GgufFile::open(&p) {
        let _ = f.architecture();
        for info in f.tensor_infos() {
            if let Ok(t) = f.tensor(&info.name) {
                let _ = t.dequantize();
            }
        }
    }
    let _ = std::fs::remove_file(&p);
}

/// A small valid GGUF v3 file: `general.architecture = "llama"`, one u32 key, one string array,
/// and an F32 [4, 2] tensor and an F16 [8] tensor (alignment 32).
pub fn seed() -> Vec<u8> {
    fn s(out: &mut Vec<u8>, v: &str) {
        out.extend_from_slice(&(v.len() as u64).to_le_bytes());
        out.extend_from_slice(v.as_bytes());
    }
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&2u64.to_le_bytes()); // tensors
    b.extend_from_slice(&3u64.to_le_bytes()); // metadata
    s(&mut b, "general.architecture");
    b.extend_from_slice(&8u32.to_le_bytes()); // string
    s(&mut b, "llama");
    s(&mut b, "llama.block_count");
    b.extend_from_slice(&4u32.to_le_bytes()); // u32
    b.extend_from_slice(&2u32.to_le_bytes());
    s(&mut b, "tokenizer.ggml.tokens");
    b.extend_from_slice(&9u32.to_le_bytes()); // array
    b.extend_from_slice(&8u32.to_le_bytes()); // of strings
    b.extend_from_slice(&2u64.to_le_bytes());
    s(&mut b, "a");
    s(&mut b, "bc");
    // tensor infos: name, n_dims, dims, type, offset
    s(&mut b, "w");
    b.extend_from_slice(&2u32.to_le_bytes());
    b.extend_from_slice(&2u64.to_le_bytes());
    b.extend_from_slice(&4u64.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // F32
    b.extend_from_slice(&0u64.to_le_bytes());
    s(&mut b, "h");
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&8u64.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes()); // F16
    b.extend_from_slice(&32u64.to_le_bytes());
    b.resize(b.len().next_multiple_of(32), 0);
    for i in 0..8 {
        b.extend_from_slice(&(i as f32 * 0.5).to_le_bytes());
    }
    for i in 0..8u16 {
        b.extend_from_slice(&(0x3c00 + i).to_le_bytes());
    }
    b
}
