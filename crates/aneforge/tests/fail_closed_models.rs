//! Issue 16, model folders: layer counts are 1..=the layer cap, optional config fields are
//! validated (never a silent default), and config files must be regular files.
#![cfg(feature = "tokenizers")]

use std::path::PathBuf;

mod common;

use aneforge::models::bert::BertConfig;
#[cfg(feature = "llm")]
use aneforge::models::llm::LlmConfig;
use aneforge::Error;
use common::Scratch;
use serde_json::json;

/// `v` written as `config.json` in a fresh scratch directory (removed when the guard drops).
fn config(name: &str, v: &serde_json::Value) -> (Scratch, PathBuf) {
    let d = Scratch::new(&format!("fc-{name}"));
    let p = d.join("config.json");
    std::fs::write(&p, v.to_string()).unwrap();
    (d, p)
}

#[cfg(feature = "llm")]
fn gpt2(n_layer: serde_json::Value) -> serde_json::Value {
    json!({"model_type": "gpt2", "activation_function": "gelu_new", "n_embd": 8, "n_layer": n_layer, "n_head": 2,
           "n_positions": 16, "vocab_size": 10})
}

fn bert(field: &str, value: serde_json::Value) -> serde_json::Value {
    let mut v = json!({"model_type": "bert", "hidden_act": "gelu", "hidden_size": 8,
        "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
        "vocab_size": 10, "max_position_embeddings": 16});
    v[field] = value;
    v
}

fn assert_err(e: Error, format: bool, needles: &[&str]) {
    let s = e.to_string();
    let kind_ok = if format {
        matches!(e, Error::Format { .. })
    } else {
        matches!(e, Error::Resource { .. })
    };
    assert!(kind_ok, "wrong kind: {e:?}");
    assert!(
        needles.iter().all(|n| s.contains(n)),
        "'{s}' lacks {needles:?}"
    );
}

#[cfg(feature = "llm")]
#[test]
fn gpt2_layer_count_is_one_to_the_cap() {
    let (_dir, p) = config("g1", &gpt2(json!(2)));
    assert_eq!(LlmConfig::from_hf(&p).unwrap().0.layers, 2);
    for bad in [json!(0), json!(-1), json!("12"), json!(1.5)] {
        let (_dir, p) = config("g0", &gpt2(bad.clone()));
        assert_err(
            LlmConfig::from_hf(&p).unwrap_err(),
            true,
            &["n_layer", &bad.to_string()],
        );
    }
    let (_dir, p) = config("gbig", &gpt2(json!(1_000_000_000u64)));
    assert_err(
        LlmConfig::from_hf(&p).unwrap_err(),
        false,
        &["n_layer", "1000000000", "1024"],
    );
}

#[test]
fn bert_optional_fields_are_validated_not_defaulted() {
    let (_dir, p) = config("b1", &bert("type_vocab_size", json!(3)));
    assert_eq!(BertConfig::from_file(&p).unwrap().type_vocab, 3);
    for (field, bad) in [
        ("type_vocab_size", json!(-1)),
        ("type_vocab_size", json!("8")),
        ("layer_norm_eps", json!(-1e-5)),
        ("layer_norm_eps", json!("1e-12")),
        ("num_hidden_layers", json!(0)),
    ] {
        let (_dir, p) = config("b0", &bert(field, bad.clone()));
        assert_err(
            BertConfig::from_file(&p).unwrap_err(),
            true,
            &[field, &bad.to_string()],
        );
    }
    // null means absent: the documented default (2 token types) applies.
    let (_dir, p) = config("bnull", &bert("type_vocab_size", json!(null)));
    assert_eq!(BertConfig::from_file(&p).unwrap().type_vocab, 2);
}

#[cfg(all(unix, feature = "llm"))]
#[test]
fn config_that_is_a_device_is_refused() {
    let d = Scratch::new("fc-dev");
    let p = d.join("config.json");
    std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
    let e = LlmConfig::from_hf(&p).unwrap_err().to_string();
    assert!(e.contains("a device"), "{e}");
}

/// Found by the 1 M-mutant hf_config fuzz run: a huge `head_dim` with `rope_scaling` sized the
/// RoPE table (an 8 GiB allocation, abort); it is a Resource error naming the table now.
#[cfg(feature = "llm")]
#[test]
fn huge_head_dim_is_refused_before_allocating() {
    let llama = |head_dim: u64| {
        json!({"model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
               "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": head_dim,
               "vocab_size": 10, "rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    };
    let (_dir, p) = config("hd4", &llama(4));
    assert_eq!(
        LlmConfig::from_hf(&p).unwrap().0.rope_divisors,
        Some(vec![2.0; 2])
    );
    let (_dir, p) = config("hdbig", &llama(1 << 31));
    assert_err(
        LlmConfig::from_hf(&p).unwrap_err(),
        false,
        &["RoPE frequencies", "1073741824"],
    );
}
