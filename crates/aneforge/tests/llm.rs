//! Language-model family pieces with closed-form answers: sampling (greedy = argmax, top-k 1 =
//! greedy, seeded draws reproducible, top-p cut, repetition penalty, parameter errors naming
//! the field), chunking under the weight budget, chat-template rendering, and GGUF errors.

use aneforge::models::llm::blocks::{chunks, layer_bytes, Chunk};
use aneforge::models::llm::tokenizer::render_chat;
use aneforge::models::llm::{Family, LlmConfig, Message, SampleOptions, Sampler};
use aneforge::Error;

fn sampler(opts: SampleOptions) -> Sampler {
    Sampler::new(opts, &[]).unwrap()
}

#[test]
fn greedy_is_argmax_and_top_k_one_is_greedy() {
    let logits = [0.1, 2.5, -1.0, 2.4, 0.0];
    assert_eq!(sampler(SampleOptions::default()).next(&logits).unwrap(), 1);
    let top1 = SampleOptions {
        temperature: 5.0,
        top_k: 1,
        seed: 9,
        ..Default::default()
    };
    for _ in 0..20 {
        assert_eq!(sampler(top1.clone()).next(&logits).unwrap(), 1);
    }
}

#[test]
fn seeded_sampling_is_reproducible_and_follows_the_softmax() {
    let logits = [0.0f32, (3f32).ln()]; // probabilities 1/4, 3/4
    let opts = SampleOptions {
        temperature: 1.0,
        seed: 42,
        ..Default::default()
    };
    let draw = |o: SampleOptions| {
        let mut s = sampler(o);
        (0..4000)
            .map(|_| s.next(&logits).unwrap())
            .collect::<Vec<_>>()
    };
    let a = draw(opts.clone());
    assert_eq!(a, draw(opts));
    let ones = a.iter().filter(|&&t| t == 1).count() as f64 / a.len() as f64;
    assert!((ones - 0.75).abs() < 0.03, "{ones}");
}

#[test]
fn top_p_keeps_the_nucleus_only() {
    // probabilities ∝ 8, 4, 2, 1, 1: top_p 0.7 keeps {0, 1} (8/16 + 4/16 = 0.75 ≥ 0.7).
    let logits = [8f32.ln(), 4f32.ln(), 2f32.ln(), 0.0, 0.0];
    let mut s = sampler(SampleOptions {
        temperature: 1.0,
        top_p: 0.7,
        seed: 3,
        ..Default::default()
    });
    let picks: Vec<u32> = (0..500).map(|_| s.next(&logits).unwrap()).collect();
    assert!(picks.iter().all(|&t| t <= 1));
    assert!(picks.contains(&0) && picks.contains(&1));
}

#[test]
fn repetition_penalty_divides_positive_and_multiplies_negative_logits() {
    let opts = SampleOptions {
        repetition_penalty: 2.0,
        ..Default::default()
    };
    // token 0 seen: 3.0 → 1.5 < 2.0, so greedy picks token 1.
    let mut s = Sampler::new(opts.clone(), &[0]).unwrap();
    assert_eq!(s.next(&[3.0, 2.0]).unwrap(), 1);
    // token 1 seen: -1.0 → -2.0 < -1.5.
    let mut s = Sampler::new(opts, &[1]).unwrap();
    assert_eq!(s.next(&[-1.5, -1.0]).unwrap(), 0);
}

#[test]
fn bad_sampling_parameters_name_the_field() {
    let bad = [
        (
            "temperature",
            SampleOptions {
                temperature: f32::NAN,
                ..Default::default()
            },
        ),
        (
            "temperature",
            SampleOptions {
                temperature: -1.0,
                ..Default::default()
            },
        ),
        (
            "top_p",
            SampleOptions {
                top_p: 0.0,
                ..Default::default()
            },
        ),
        (
            "top_p",
            SampleOptions {
                top_p: 1.5,
                ..Default::default()
            },
        ),
        (
            "repetition_penalty",
            SampleOptions {
                repetition_penalty: f32::INFINITY,
                ..Default::default()
            },
        ),
    ];
    for (field, o) in bad {
        let e = Sampler::new(o, &[]).unwrap_err();
        assert!(
            matches!(e, Error::Value { .. }) && e.to_string().contains(field),
            "{e}"
        );
    }
    let e = sampler(SampleOptions::default())
        .next(&[0.0, f32::NAN])
        .unwrap_err();
    assert!(e.to_string().contains("NaN"), "{e}");
}

fn config(layers: usize, width: usize, ffn: usize, vocab: usize) -> LlmConfig {
    LlmConfig {
        family: Family::Llama,
        layers,
        width,
        heads: 4,
        kv_heads: 2,
        head_dim: width / 4,
        ffn,
        vocab,
        max_positions: 128,
        rope_base: 1e4,
        norm_eps: 1e-5,
        sliding_window: None,
        rope_divisors: None,
    }
}

#[test]
fn chunks_respect_the_weight_budget() {
    let c = config(10, 64, 128, 1000);
    // per layer: 2 bytes · (64·16·(2·4 + 2·2) + 3·64·128) = 2 · (12288 + 24576)
    assert_eq!(layer_bytes(&c), 73_728);
    let one = chunks(&c, 10_000_000);
    assert_eq!(
        one,
        vec![Chunk {
            layers: 0..10,
            head: true
        }]
    );
    // 3 layers fit in 230 000 bytes; the head (2·1000·64 = 128 000) fits beside layer 9 alone.
    let split = chunks(&c, 230_000);
    let ranges: Vec<_> = split.iter().map(|c| (c.layers.clone(), c.head)).collect();
    assert_eq!(
        ranges,
        vec![(0..3, false), (3..6, false), (6..9, false), (9..10, true)]
    );
    let tight = chunks(&c, 150_000);
    assert_eq!(
        tight.last(),
        Some(&Chunk {
            layers: 10..10,
            head: true
        })
    );
}

#[test]
fn chat_template_renders_messages_and_generation_prompt() {
    let template =
        "{% for m in messages %}<{{ m['role'] }}>{{ m.content }}{{ eos_token }}\n{% endfor %}\
                    {% if add_generation_prompt %}<assistant>{% endif %}";
    let msgs = [
        Message {
            role: "system".into(),
            content: "Be brief.".into(),
        },
        Message {
            role: "user".into(),
            content: "Hi".into(),
        },
    ];
    let out = render_chat(template, &msgs, true, "<s>", "</s>").unwrap();
    assert_eq!(out, "<system>Be brief.</s>\n<user>Hi</s>\n<assistant>");
    let raise = "{{ raise_exception('roles must alternate') }}";
    let e = render_chat(raise, &msgs, false, "", "").unwrap_err();
    assert!(e.to_string().contains("roles must alternate"), "{e}");
}

#[test]
fn missing_gguf_is_an_io_error_naming_the_file() {
    let e = aneforge::models::llm::Llm::load(
        "/nonexistent/model.gguf".as_ref(),
        None,
        &Default::default(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("/nonexistent/model.gguf"), "{e}");
}

/// A tiny Hugging Face llama folder (config.json + model.safetensors, weights 0.01·k) in a
/// fresh directory under the target's temp dir.
fn tiny_hf_folder(name: &str, cfg: &LlmConfig) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("aneforge-llm-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = serde_json::json!({
        "model_type": "llama", "hidden_size": cfg.width, "num_hidden_layers": cfg.layers,
        "num_attention_heads": cfg.heads, "num_key_value_heads": cfg.kv_heads,
        "intermediate_size": cfg.ffn, "vocab_size": cfg.vocab, "max_position_embeddings": 32,
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let (d, f, q, kv) = (
        cfg.width,
        cfg.ffn,
        cfg.heads * cfg.head_dim,
        cfg.kv_heads * cfg.head_dim,
    );
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        ("model.embed_tokens.weight".into(), vec![cfg.vocab, d]),
        ("model.norm.weight".into(), vec![d]),
        ("lm_head.weight".into(), vec![cfg.vocab, d]),
    ];
    for l in 0..cfg.layers {
        let p = |s: &str| format!("model.layers.{l}.{s}");
        shapes.extend([
            (p("input_layernorm.weight"), vec![d]),
            (p("post_attention_layernorm.weight"), vec![d]),
            (p("self_attn.q_proj.weight"), vec![q, d]),
            (p("self_attn.k_proj.weight"), vec![kv, d]),
            (p("self_attn.v_proj.weight"), vec![kv, d]),
            (p("self_attn.o_proj.weight"), vec![d, q]),
            (p("mlp.gate_proj.weight"), vec![f, d]),
            (p("mlp.up_proj.weight"), vec![f, d]),
            (p("mlp.down_proj.weight"), vec![d, f]),
        ]);
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = shapes
        .into_iter()
        .map(|(n, s)| {
            let data = (0..s.iter().product::<usize>())
                .flat_map(|k| (0.01 * (k % 7) as f32).to_le_bytes())
                .collect();
            (n, s, data)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = bytes
        .iter()
        .map(|(n, s, b)| {
            let v = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b);
            (n.clone(), v.unwrap())
        })
        .collect();
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
    dir
}

#[test]
fn load_progress_counts_every_weight_byte_up_to_the_total() {
    let cfg = config(2, 32, 48, 40);
    let dir = tiny_hf_folder("progress", &cfg);
    let seen = std::cell::RefCell::new(Vec::new());
    let record = |done: u64, total: u64| seen.borrow_mut().push((done, total));
    let opts = aneforge::CompileOptions {
        device: aneforge::Device::Reference,
        ..Default::default()
    };
    aneforge::models::llm::Llm::load_with_progress(&dir, Some(16), &opts, Some(&record)).unwrap();
    let seen = seen.into_inner();
    // fp16 bytes: per layer q, k, v, o (32·8·(2·4 + 2·2)) + gate, up, down (3·32·48), and lm_head.
    let total = 2 * (2 * (32 * 8 * 12 + 3 * 32 * 48) + 40 * 32) as u64;
    assert!(seen.iter().all(|&(_, t)| t == total));
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(seen.last().unwrap().0, total);
    assert_eq!(seen.len(), 2 * 7 + 1); // seven projections per layer, one lm_head tile
    std::fs::remove_dir_all(&dir).unwrap();
}
