//! Model loaders: safetensors reading (dtype conversion checked against values written by the
//! `safetensors` crate's serializer and `half`), bad files (missing tensors, wrong shapes and
//! dtypes, truncation) and the BERT bucket / pooling rules.

use std::path::Path;

use aneforge::models::bert::{expected_tensors, plan_batches, BertConfig, Pooling};
use aneforge::models::Weights;
use aneforge::Error;
use half::{bf16, f16};
use safetensors::tensor::{Dtype, TensorView};

/// A safetensors file holding `(name, dtype, shape, bytes)` tensors.
fn file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: Vec<(&str, TensorView)> = tensors
        .iter()
        .map(|(n, d, s, b)| (*n, TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize(views, None).unwrap()
}

fn weights(bytes: Vec<u8>) -> aneforge::Result<Weights> {
    Weights::from_bytes(Path::new("test.safetensors"), bytes)
}

fn le<T: Copy>(v: &[T], f: fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|x| f(*x)).collect()
}

#[test]
fn reads_f32_f16_and_bf16_tensors() {
    let vals = [1.5f32, -2.25, 3.0e-3, 65504.0, 0.0, -7.0];
    let w = weights(file(&[
        (
            "a",
            Dtype::F32,
            vec![2, 3],
            le(&vals, |x| x.to_le_bytes().to_vec()),
        ),
        (
            "b",
            Dtype::F16,
            vec![6],
            le(&vals, |x| f16::from_f32(x).to_le_bytes().to_vec()),
        ),
        (
            "c",
            Dtype::BF16,
            vec![3, 2],
            le(&vals, |x| bf16::from_f32(x).to_le_bytes().to_vec()),
        ),
    ]))
    .unwrap();
    assert_eq!(w.get("a", &[2, 3]).unwrap(), vals);
    assert_eq!(
        w.get("b", &[6]).unwrap(),
        vals.map(|x| f16::from_f32(x).to_f32())
    );
    assert_eq!(
        w.get("c", &[3, 2]).unwrap(),
        vals.map(|x| bf16::from_f32(x).to_f32())
    );
    assert!(w.has("a") && !w.has("z"));
    assert_eq!(w.shape("c").unwrap(), &[3, 2]);
}

fn format_msg<T>(r: aneforge::Result<T>) -> String {
    match r {
        Err(e @ Error::Format { .. }) => e.to_string(),
        Err(e) => panic!("expected a Format error, got {e}"),
        Ok(_) => panic!("expected a Format error, got Ok"),
    }
}

#[test]
fn bad_tensors_name_the_tensor_and_the_expected_shape() {
    let w = weights(file(&[
        (
            "w",
            Dtype::F32,
            vec![2, 2],
            le(&[1.0f32, 2.0, 3.0, 4.0], |x| x.to_le_bytes().to_vec()),
        ),
        (
            "ids",
            Dtype::I64,
            vec![2],
            le(&[1i64, 2], |x| x.to_le_bytes().to_vec()),
        ),
        (
            "nan",
            Dtype::F32,
            vec![2],
            le(&[1.0f32, f32::NAN], |x| x.to_le_bytes().to_vec()),
        ),
    ]))
    .unwrap();
    let m = format_msg(w.get("missing.weight", &[4, 5]));
    assert!(
        m.contains("test.safetensors")
            && m.contains("'missing.weight' is missing (expected shape [4, 5])"),
        "{m}"
    );
    let m = format_msg(w.get("w", &[4]));
    assert!(m.contains("'w' has shape [2, 2], expected [4]"), "{m}");
    let m = format_msg(w.get("ids", &[2]));
    assert!(m.contains("'ids' (shape [2]) has dtype I64"), "{m}");
    let m = format_msg(w.get("nan", &[2]));
    assert!(
        m.contains("'nan'") && m.contains("non-finite element at index 1"),
        "{m}"
    );
}

#[test]
fn truncated_and_garbage_files_are_format_errors() {
    let good = file(&[("w", Dtype::F32, vec![4], vec![0; 16])]);
    for cut in [good.len() - 1, good.len() - 16, 12, 7, 0] {
        let m = format_msg(weights(good[..cut].to_vec()));
        assert!(
            m.contains("test.safetensors") && m.contains("not a valid safetensors file"),
            "{cut}: {m}"
        );
    }
    assert!(format_msg(weights(good[..good.len() - 1].to_vec())).contains("truncated"));
    let mut padded = good.clone();
    padded.push(0);
    assert!(format_msg(weights(padded)).contains("padded"));
    let m = format_msg(weights(b"\x04\x00\x00\x00\x00\x00\x00\x00{bad".to_vec()));
    assert!(m.contains("not a valid safetensors file"), "{m}");
}

#[test]
fn missing_file_is_an_io_error() {
    assert!(matches!(
        Weights::open(Path::new("/nonexistent/model.safetensors")),
        Err(Error::Io { .. })
    ));
}

#[test]
fn pooling_names() {
    assert_eq!(Pooling::parse("mean").unwrap(), Pooling::Mean);
    assert_eq!(Pooling::parse("cls").unwrap(), Pooling::Cls);
    assert!(matches!(
        Pooling::parse("max"),
        Err(Error::NotImplemented(_))
    ));
    assert!(matches!(Pooling::parse("avg"), Err(Error::Value { .. })));
}

/// Batches hold one bucket each, longest first, in power-of-two sizes capped by batch_size and
/// 512 tokens per call; remainders split into binary parts (expected plans written out).
#[test]
fn encoder_batches_group_buckets_without_padded_rows() {
    // Buckets of 11 sequences: 7 of length 16, 3 of 64, 1 of 8 (input order mixed).
    let buckets = [16, 64, 16, 8, 16, 64, 16, 16, 64, 16, 16];
    let plan = plan_batches(&buckets, 32);
    assert_eq!(
        plan,
        vec![
            vec![1, 5],
            vec![8],
            vec![0, 2, 4, 6],
            vec![7, 9],
            vec![10],
            vec![3]
        ]
    );
    // batch_size caps below the token budget; a 3 is not a power of two: batches of 2.
    assert_eq!(
        plan_batches(&[16; 5], 3),
        vec![vec![0, 1], vec![2, 3], vec![4]]
    );
    // 512 tokens per call: 40 sequences of 24 tokens go 16 (384 tokens) at a time, then 8.
    let sizes: Vec<usize> = plan_batches(&[24; 40], 32).iter().map(Vec::len).collect();
    assert_eq!(sizes, [16, 16, 8]);
    // A sequence longer than the budget still runs, alone; batch_size 1 is one per call.
    assert_eq!(plan_batches(&[600, 600], 32), vec![vec![0], vec![1]]);
    assert_eq!(plan_batches(&[8, 8], 1), vec![vec![0], vec![1]]);
    assert!(plan_batches(&[], 32).is_empty());
}

#[test]
fn bert_tensor_list_follows_the_hf_layout() {
    let cfg = BertConfig {
        hidden: 384,
        layers: 6,
        heads: 12,
        intermediate: 1536,
        vocab: 30522,
        max_positions: 512,
        type_vocab: 2,
        layer_norm_eps: 1e-12,
    };
    let t = expected_tensors(&cfg, "");
    // 5 embedding tensors + 16 per layer (the pooler and position_ids are not read).
    assert_eq!(t.len(), 5 + 16 * 6);
    let find = |n: &str| t.iter().find(|(k, _)| k == n).map(|(_, s)| s.clone());
    assert_eq!(
        find("encoder.layer.5.output.dense.weight"),
        Some(vec![384, 1536])
    );
    assert_eq!(
        find("encoder.layer.0.intermediate.dense.bias"),
        Some(vec![1536])
    );
    assert!(expected_tensors(&cfg, "bert.")
        .iter()
        .all(|(k, _)| k.starts_with("bert.")));
}

/// A fresh scratch directory for one test.
#[cfg(feature = "cli")]
fn scratch(name: &str) -> std::path::PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("models-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Write f32 tensors as a safetensors file.
#[cfg(feature = "cli")]
fn save(path: &Path, tensors: Vec<(String, Vec<usize>, Vec<f32>)>) {
    let t: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, s, v)| {
            (
                n.as_str(),
                Dtype::F32,
                s.clone(),
                le(v, |x| x.to_le_bytes().to_vec()),
            )
        })
        .collect();
    std::fs::write(path, file(&t)).unwrap();
}

#[cfg(feature = "cli")]
fn aneforge_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_aneforge"))
        .args(args)
        .env("ANEFORGE_QUIET", "1")
        .env("ANEFORGE_CACHE_DIR", scratch("cli-cache"))
        .output()
        .unwrap()
}

#[cfg(feature = "cli")]
#[test]
fn cli_classify_prints_the_top_classes() {
    // Every conv and BN shift is zero, so the features are zero and the logits are exactly fc.bias.
    let root = scratch("classify");
    let mut t: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut conv_bn = |conv: &str, bn: &str, cout: usize, cin: usize, k: usize| {
        t.push((
            format!("{conv}.weight"),
            vec![cout, cin, k, k],
            vec![0.0; cout * cin * k * k],
        ));
        for (s, v) in [
            ("weight", 1.0),
            ("bias", 0.0),
            ("running_mean", 0.0),
            ("running_var", 1.0),
        ] {
            t.push((format!("{bn}.{s}"), vec![cout], vec![v; cout]));
        }
    };
    conv_bn("conv1", "bn1", 64, 3, 7);
    let mut cin = 64;
    for stage in 0..4 {
        let width = 64 << stage;
        for b in 0..2 {
            let p = format!("layer{}.{b}", stage + 1);
            conv_bn(&format!("{p}.conv1"), &format!("{p}.bn1"), width, cin, 3);
            conv_bn(&format!("{p}.conv2"), &format!("{p}.bn2"), width, width, 3);
            if b == 0 && stage > 0 {
                conv_bn(
                    &format!("{p}.downsample.0"),
                    &format!("{p}.downsample.1"),
                    width,
                    cin,
                    1,
                );
            }
            cin = width;
        }
    }
    let bias = [0.5f32, -1.0, 2.5, 0.0, 1.25, -3.0, 2.0];
    t.push(("fc.weight".into(), vec![7, 512], vec![0.0; 7 * 512]));
    t.push(("fc.bias".into(), vec![7], bias.to_vec()));
    save(&root.join("r18.safetensors"), t);
    aneforge::cli::npy::write_f32(
        &root.join("img.npy"),
        &[1, 3, 32, 32],
        &vec![0.5; 3 * 32 * 32],
    )
    .unwrap();
    let out = aneforge_cli(&[
        "classify",
        root.join("img.npy").to_str().unwrap(),
        "--resnet",
        root.join("r18.safetensors").to_str().unwrap(),
        "--top",
        "3",
        "--device",
        "reference",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("device: reference"), "{text}");
    let classes: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("class"))
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(classes, ["2", "6", "4"], "{text}");
    // The same network from a PNG (non-square: centre-cropped); the logits are fc.bias whatever the pixels.
    let mut png_bytes = Vec::new();
    let mut enc = png::Encoder::new(&mut png_bytes, 40, 32);
    enc.set_color(png::ColorType::Rgb);
    let mut w = enc.write_header().unwrap();
    w.write_image_data(
        &(0..40 * 32 * 3)
            .map(|i| (i % 256) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    w.finish().unwrap();
    std::fs::write(root.join("img.png"), &png_bytes).unwrap();
    let out = aneforge_cli(&[
        "classify",
        root.join("img.png").to_str().unwrap(),
        "--resnet",
        root.join("r18.safetensors").to_str().unwrap(),
        "--top",
        "2",
        "--device",
        "reference",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let classes: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("class"))
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(classes, ["2", "6"], "{text}");
    std::fs::write(root.join("broken.png"), &png_bytes[..png_bytes.len() / 2]).unwrap();
    let broken = aneforge_cli(&[
        "classify",
        root.join("broken.png").to_str().unwrap(),
        "--resnet",
        root.join("r18.safetensors").to_str().unwrap(),
    ]);
    assert!(
        !broken.status.success() && String::from_utf8_lossy(&broken.stderr).contains("broken.png"),
        "{}",
        String::from_utf8_lossy(&broken.stderr)
    );
    let bad = aneforge_cli(&[
        "classify",
        root.join("r18.safetensors").to_str().unwrap(),
        "--resnet",
        root.join("r18.safetensors").to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
}

#[cfg(feature = "cli")]
#[test]
fn cli_embed_prints_vectors_and_similarities() {
    let root = scratch("embed");
    let cfg = BertConfig {
        hidden: 8,
        layers: 1,
        heads: 2,
        intermediate: 16,
        vocab: 4,
        max_positions: 16,
        type_vocab: 2,
        layer_norm_eps: 1e-12,
    };
    let config = r#"{"model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 4, "max_position_embeddings": 16}"#;
    std::fs::write(root.join("config.json"), config).unwrap();
    let mut seed = 1u32;
    let tensors = expected_tensors(&cfg, "")
        .into_iter()
        .map(|(n, s)| {
            let v = (0..s.iter().product::<usize>()).map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                ((seed >> 16) % 1000) as f32 / 1000.0 - 0.5
            });
            (n, s, v.collect())
        })
        .collect();
    save(&root.join("model.safetensors"), tensors);
    let tok = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2, "again": 3}, "unk_token": "[UNK]"}}"#;
    std::fs::write(root.join("tokenizer.json"), tok).unwrap();
    let out = aneforge_cli(&[
        "embed",
        "hello world",
        "hello world",
        "again",
        "--model",
        root.to_str().unwrap(),
        "--device",
        "reference",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("device: reference") && text.contains("\"again\": norm 1.00"),
        "{text}"
    );
    // Identical sentences: similarity 1 to display precision, on and off the diagonal.
    let row0: Vec<f64> = text
        .lines()
        .find(|l| l.trim_start().starts_with("[0]"))
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(
        (row0[0] - 1.0).abs() < 2e-3 && (row0[1] - 1.0).abs() < 2e-3 && row0[2] < 0.9999,
        "{text}"
    );
    let missing = aneforge_cli(&[
        "embed",
        "x",
        "--model",
        root.join("absent").to_str().unwrap(),
    ]);
    assert!(!missing.status.success());
}
