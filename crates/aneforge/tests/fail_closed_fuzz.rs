//! The fuzz targets of `crates/aneforge/fuzz` run as a short deterministic mutation fuzz (a few
//! thousand mutants per format from valid seeds): any panic fails the test and prints the input.
//! `ANEFORGE_FUZZ_ITERS=<n>` sets the mutants per target (the long runs recorded in
//! docs/fuzzing.md use this test in release mode).

mod common;
#[path = "../fuzz/src/mutate.rs"]
mod mutate;
#[path = "../fuzz/src/targets.rs"]
mod targets;

use aneforge::ops::conv::ConvOptions;
use aneforge::{conv2d, input, Graph, HostArray, Program};

/// Mutants per target: `ANEFORGE_FUZZ_ITERS`, default 1500 (the whole file stays under 30 s).
fn iters() -> u64 {
    // Mutants stay cheap: no tensor beyond 2^20 elements, no program beyond 64 MiB.
    std::env::set_var("ANEFORGE_MAX_ELEMENTS", "1048576");
    std::env::set_var("ANEFORGE_MAX_BYTES", "67108864");
    std::env::var("ANEFORGE_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500)
}

/// Run `target` on mutants of `seeds`; the thread's scratch directory is removed afterwards.
fn fuzz(name: &str, seeds: &[Vec<u8>], target: &dyn Fn(&[u8])) {
    let _scratch = common::Scratch::at(targets::scratch());
    let n = mutate::run(seeds, iters(), 0x16, target);
    eprintln!("{name}: {n} executions, 0 crashes");
}

/// model.mil, weights.bin and program.json of a small program with blobs and window ops.
fn program_files() -> [Vec<u8>; 3] {
    let x = input(&[1, 2, 4, 4]).unwrap();
    let w: Vec<f32> = (0..2 * 2 * 3 * 3).map(|i| i as f32 / 8.0).collect();
    let opts = ConvOptions {
        stride: [1, 2],
        pad: [1, 1, 2, 0],
        dilation: [1, 2],
        groups: 1,
    };
    let y = conv2d(&x, HostArray::f32(&[2, 2, 3, 3], &w), None, opts)
        .unwrap()
        .relu()
        .unwrap()
        .upsample(2, 1)
        .unwrap()
        .tile(&[1, 1, 1, 2])
        .unwrap()
        .max_pool([2, 2], [1, 1], [0, 1, 0, 1])
        .unwrap();
    let p = Program::lower(Graph::from_outputs(&[(None, y)]).unwrap()).unwrap();
    let dir = targets::scratch().join("seed");
    p.write_to(&dir).unwrap();
    ["model.mil", "weights.bin", "program.json"].map(|f| std::fs::read(dir.join(f)).unwrap())
}

#[test]
fn fuzz_mil_text() {
    let [mil, weights, _] = program_files();
    let mut with_blob = mil.clone();
    with_blob.push(0);
    with_blob.extend_from_slice(&weights);
    fuzz("mil_text", &[mil, with_blob], &targets::mil_text);
}

#[test]
fn fuzz_program_dir() {
    let [mil, weights, manifest] = program_files();
    let seed = targets::join(&[&mil, &weights, &manifest]);
    let no_manifest = targets::join(&[&mil, &weights, b""]);
    fuzz("program_dir", &[seed, no_manifest], &targets::program_dir);
}

/// A safetensors file with an F32 [2, 3], an F16 [4] and a BF16 [1] tensor.
fn safetensors_seed() -> Vec<u8> {
    let header = r#"{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"F16","shape":[4],"data_offsets":[24,32]},"c":{"dtype":"BF16","shape":[1],"data_offsets":[32,34]},"__metadata__":{"format":"pt"}}"#;
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    for i in 0..6 {
        b.extend_from_slice(&(i as f32 - 2.5).to_le_bytes());
    }
    for h in [0x3c00u16, 0xc000, 0x7bff, 0x0001, 0x3f80] {
        b.extend_from_slice(&h.to_le_bytes());
    }
    b
}

#[test]
fn fuzz_safetensors() {
    fuzz("safetensors", &[safetensors_seed()], &targets::safetensors);
}

#[test]
fn fuzz_hf_config() {
    let gpt2 = br#"{"model_type": "gpt2", "activation_function": "gelu_new", "n_embd": 8, "n_layer": 2, "n_head": 2, "n_positions": 16, "vocab_size": 10, "n_inner": null, "layer_norm_epsilon": 1e-05}"#;
    let bert = br#"{"model_type": "bert", "hidden_act": "gelu", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 10, "max_position_embeddings": 16, "type_vocab_size": 2, "layer_norm_eps": 1e-12}"#;
    let llama3 = br#"{"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "vocab_size": 10, "max_position_embeddings": 16, "tie_word_embeddings": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8}}"#;
    let qwen3 = br#"{"model_type": "qwen3", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "vocab_size": 10, "max_position_embeddings": 16, "use_sliding_window": false, "sliding_window": 4}"#;
    for seed in [&gpt2[..], llama3, qwen3] {
        let p = targets::scratch().join("seed-config.json");
        std::fs::write(&p, seed).unwrap();
        aneforge::models::llm::LlmConfig::from_hf(&p).expect("decoder seeds are valid configs");
    }
    fuzz(
        "hf_config",
        &[
            gpt2.to_vec(),
            bert.to_vec(),
            llama3.to_vec(),
            qwen3.to_vec(),
        ],
        &targets::hf_config,
    );
}

#[test]
fn fuzz_npy() {
    let p = targets::scratch().join("seed.npy");
    aneforge::cli::npy::write_f32(&p, &[2, 3], &[0.5, -1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let f32_seed = std::fs::read(&p).unwrap();
    let mut i64_seed = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }".to_string();
    let padded = (10 + header.len() + 1).next_multiple_of(64);
    header.push_str(&" ".repeat(padded - 10 - header.len() - 1));
    header.push('\n');
    i64_seed.extend_from_slice(&(header.len() as u16).to_le_bytes());
    i64_seed.extend_from_slice(header.as_bytes());
    for v in [0i64, 7, 255] {
        i64_seed.extend_from_slice(&v.to_le_bytes());
    }
    fuzz("npy", &[f32_seed, i64_seed], &targets::npy);
}

#[test]
fn fuzz_onnx() {
    // A 2 KB opset-17 model: Conv, Relu, Reshape by an int64 initializer, Cast of an fp16
    // weight, Gemm (transB, alpha), Gather with constant indices, Softmax.
    let seed = include_bytes!("../fuzz/seeds/model.onnx").to_vec();
    fuzz("onnx", &[seed], &targets::onnx);
}
