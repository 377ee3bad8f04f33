//! Model loaders: safetensors reading (dtype conversion checked against values written by the
//! `safetensors` crate's serializer and `half`), bad files (missing tensors, wrong shapes and
//! dtypes, truncation) and the BERT bucket / pooling rules.

use std::path::Path;

use aneforge::models::bert::{expected_tensors, BertConfig, Pooling};
use aneforge::models::Weights;
use aneforge::Error;
use half::{bf16, f16};
use safetensors::tensor::{Dtype, TensorView};

/// A safetensors file holding `(name, dtype, shape, bytes)` tensors.
fn file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: Vec<(&str, TensorView)> = tensors.iter().map(|(n, d, s, b)| (*n, TensorView::new(*d, s.clone(), b).unwrap())).collect();
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
        ("a", Dtype::F32, vec![2, 3], le(&vals, |x| x.to_le_bytes().to_vec())),
        ("b", Dtype::F16, vec![6], le(&vals, |x| f16::from_f32(x).to_le_bytes().to_vec())),
        ("c", Dtype::BF16, vec![3, 2], le(&vals, |x| bf16::from_f32(x).to_le_bytes().to_vec())),
    ]))
    .unwrap();
    assert_eq!(w.get("a", &[2, 3]).unwrap(), vals);
    assert_eq!(w.get("b", &[6]).unwrap(), vals.map(|x| f16::from_f32(x).to_f32()));
    assert_eq!(w.get("c", &[3, 2]).unwrap(), vals.map(|x| bf16::from_f32(x).to_f32()));
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
        ("w", Dtype::F32, vec![2, 2], le(&[1.0f32, 2.0, 3.0, 4.0], |x| x.to_le_bytes().to_vec())),
        ("ids", Dtype::I64, vec![2], le(&[1i64, 2], |x| x.to_le_bytes().to_vec())),
        ("nan", Dtype::F32, vec![2], le(&[1.0f32, f32::NAN], |x| x.to_le_bytes().to_vec())),
    ]))
    .unwrap();
    let m = format_msg(w.get("missing.weight", &[4, 5]));
    assert!(m.contains("test.safetensors") && m.contains("'missing.weight' is missing (expected shape [4, 5])"), "{m}");
    let m = format_msg(w.get("w", &[4]));
    assert!(m.contains("'w' has shape [2, 2], expected [4]"), "{m}");
    let m = format_msg(w.get("ids", &[2]));
    assert!(m.contains("'ids' (shape [2]) has dtype I64"), "{m}");
    let m = format_msg(w.get("nan", &[2]));
    assert!(m.contains("'nan'") && m.contains("non-finite element at index 1"), "{m}");
}

#[test]
fn truncated_and_garbage_files_are_format_errors() {
    let good = file(&[("w", Dtype::F32, vec![4], vec![0; 16])]);
    for cut in [good.len() - 1, good.len() - 16, 12, 7, 0] {
        let m = format_msg(weights(good[..cut].to_vec()));
        assert!(m.contains("test.safetensors") && m.contains("not a valid safetensors file"), "{cut}: {m}");
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
    assert!(matches!(Weights::open(Path::new("/nonexistent/model.safetensors")), Err(Error::Io { .. })));
}

#[test]
fn pooling_names() {
    assert_eq!(Pooling::parse("mean").unwrap(), Pooling::Mean);
    assert_eq!(Pooling::parse("cls").unwrap(), Pooling::Cls);
    assert!(matches!(Pooling::parse("max"), Err(Error::NotImplemented(_))));
    assert!(matches!(Pooling::parse("avg"), Err(Error::Value { .. })));
}

#[test]
fn bert_tensor_list_follows_the_hf_layout() {
    let cfg = BertConfig { hidden: 384, layers: 6, heads: 12, intermediate: 1536, vocab: 30522, max_positions: 512, type_vocab: 2, layer_norm_eps: 1e-12 };
    let t = expected_tensors(&cfg, "");
    // 5 embedding tensors + 16 per layer (the pooler and position_ids are not read).
    assert_eq!(t.len(), 5 + 16 * 6);
    let find = |n: &str| t.iter().find(|(k, _)| k == n).map(|(_, s)| s.clone());
    assert_eq!(find("encoder.layer.5.output.dense.weight"), Some(vec![384, 1536]));
    assert_eq!(find("encoder.layer.0.intermediate.dense.bias"), Some(vec![1536]));
    assert!(expected_tensors(&cfg, "bert.").iter().all(|(k, _)| k.starts_with("bert.")));
}
