//! Pretrained-model loaders: read framework weights (safetensors state dicts, Hugging Face
//! folders) on the host, fold what folds (BatchNorm into conv), bake the rest as fp16
//! constants of one program per static input shape, and wrap it in a small runner.
//! Tokenisation, the word-embedding lookup and sampling stay on the host.

pub mod bert;
pub mod resnet;
pub mod weights;

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::io::{constant, HostArray};
pub use bert::{BertConfig, Encoder, Pooling};
pub use resnet::ResNet;
pub use weights::Weights;

/// Parse a JSON file; I/O and syntax errors name the file.
pub fn json_file(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::format(path, None, format!("not valid JSON: {e}")))
}

/// A required non-negative integer field of a JSON config, or a Format error naming it.
pub fn json_usize(v: &Value, key: &str, path: &Path) -> Result<usize> {
    v.get(key).and_then(Value::as_u64).map(|n| n as usize).ok_or_else(|| Error::format(path, None, format!("field '{key}' is missing or not a non-negative integer")))
}

/// Tensor `name` [n] of `w` as an fp16 constant.
pub fn vec_const(w: &Weights, name: &str, n: usize) -> Result<Tensor> {
    constant(name, HostArray::f32(&[n], &w.get(name, &[n])?))
}

/// PyTorch linear `{name}.weight` [out, inp] and `{name}.bias` [out] applied to `x`, both
/// scaled by `scale` on the host before baking (1.0 = as stored).
pub fn lin(w: &Weights, x: &Tensor, name: &str, out: usize, inp: usize, scale: f32) -> Result<Tensor> {
    let mut wt = w.get(&format!("{name}.weight"), &[out, inp])?;
    let mut b = w.get(&format!("{name}.bias"), &[out])?;
    if scale != 1.0 {
        wt.iter_mut().chain(b.iter_mut()).for_each(|v| *v *= scale);
    }
    x.linear(HostArray::f32(&[out, inp], &wt), Some(HostArray::f32(&[out], &b)))
}
