//! Pretrained-model loaders: read framework weights (safetensors state dicts, Hugging Face
//! folders) on the host, fold what folds (BatchNorm into conv), bake the rest as fp16
//! constants of one program per static input shape, and wrap it in a small runner.
//! Tokenisation, the word-embedding lookup and sampling stay on the host.

#[cfg(feature = "tokenizers")]
pub mod bert;
pub mod espcn;
#[cfg(feature = "llm")]
pub mod gpt2;
pub mod json;
#[cfg(feature = "llm")]
pub mod llm;
pub mod resnet;
#[cfg(feature = "tokenizers")]
pub mod tokenize;
pub mod vit;
pub mod weights;

use std::path::Path;

use crate::constant;
use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::io::HostArray;
#[cfg(feature = "tokenizers")]
pub use bert::{BertConfig, Encoder, Pooling, DEFAULT_BATCH_SIZE};
pub use espcn::Espcn;
#[cfg(feature = "llm")]
pub use gpt2::Gpt2;
pub use json::{
    json_file, json_layers, json_opt_bool, json_opt_positive, json_opt_usize, json_usize,
    require_field,
};
pub use resnet::ResNet;
pub use vit::Vit;
pub use weights::Weights;

/// `tokenizer.json` with padding off and truncation at `max_len` tokens.
#[cfg(feature = "tokenizers")]
pub fn load_tokenizer(path: &Path, max_len: usize) -> Result<tokenizers::Tokenizer> {
    let mut tok = tokenizers::Tokenizer::from_file(path)
        .map_err(|e| Error::format(path, None, format!("cannot read the tokenizer: {e}")))?;
    tok.with_padding(None);
    let trunc = tokenizers::TruncationParams {
        max_length: max_len,
        ..Default::default()
    };
    tok.with_truncation(Some(trunc))
        .map_err(|e| Error::format(path, None, format!("cannot truncate at {max_len}: {e}")))?;
    Ok(tok)
}

/// Tensor `name` [n] of `w` as an fp16 constant.
pub fn vec_const(w: &Weights, name: &str, n: usize) -> Result<Tensor> {
    constant(name, HostArray::f32(&[n], &w.get(name, &[n])?))
}

/// PyTorch linear `{name}.weight` [out, inp] and `{name}.bias` [out] applied to `x`, both
/// scaled by `scale` on the host before baking (1.0 = as stored).
pub fn lin(
    w: &Weights,
    x: &Tensor,
    name: &str,
    out: usize,
    inp: usize,
    scale: f32,
) -> Result<Tensor> {
    let mut wt = w.get(&format!("{name}.weight"), &[out, inp])?;
    let mut b = w.get(&format!("{name}.bias"), &[out])?;
    if scale != 1.0 {
        wt.iter_mut().chain(b.iter_mut()).for_each(|v| *v *= scale);
    }
    x.linear(
        HostArray::f32(&[out, inp], &wt),
        Some(HostArray::f32(&[out], &b)),
    )
}

/// LayerNorm over the last axis (width `d`) with `{name}.weight` / `{name}.bias`.
pub fn layer_norm(w: &Weights, x: &Tensor, name: &str, d: usize, eps: f32) -> Result<Tensor> {
    let g = vec_const(w, &format!("{name}.weight"), d)?;
    let b = vec_const(w, &format!("{name}.bias"), d)?;
    x.layer_norm(Some(&g), Some(&b), eps)
}

/// Multi-head self-attention on x [S, D] (or `batch` sequences stacked as [batch·S, D]) with
/// `heads` heads: projections `{qkv}.query`, `{qkv}.key`, `{qkv}.value` and `{out}` (PyTorch
/// linear layout), 1/√dh folded into the query projection, and an optional additive mask
/// broadcast against the scores [H, S, S] ([batch, H, S, S] when `batch` > 1).
pub fn self_attention(
    w: &Weights,
    x: &Tensor,
    qkv: &str,
    out: &str,
    heads: usize,
    mask: Option<&Tensor>,
    batch: usize,
) -> Result<Tensor> {
    let (rows, d) = (x.shape()[0], x.shape()[1]);
    let (s, dh) = (rows / batch.max(1), d / heads);
    // One sequence keeps rank-3 [H, S, dh] heads; a batch adds a leading axis.
    let lead: Vec<i64> = if batch > 1 {
        vec![batch as i64]
    } else {
        vec![]
    };
    let o = lead.len();
    let perm = |tail: [usize; 3]| -> Vec<i64> {
        (0..o as i64)
            .chain(tail.iter().map(|&a| (a + o) as i64))
            .collect()
    };
    let split = |t: Tensor| {
        let shape: Vec<i64> = lead
            .iter()
            .copied()
            .chain([s as i64, heads as i64, dh as i64])
            .collect();
        t.reshape(&shape)?.transpose(&perm([1, 0, 2]))
    };
    let q = split(lin(
        w,
        x,
        &format!("{qkv}.query"),
        d,
        d,
        1.0 / (dh as f32).sqrt(),
    )?)?;
    let k = split(lin(w, x, &format!("{qkv}.key"), d, d, 1.0)?)?;
    let v = split(lin(w, x, &format!("{qkv}.value"), d, d, 1.0)?)?;
    let mut scores = q.matmul(&k.transpose(&perm([0, 2, 1]))?)?;
    if let Some(m) = mask {
        scores = scores.add(m)?;
    }
    let ctx = scores
        .softmax(-1)?
        .matmul(&v)?
        .transpose(&perm([1, 0, 2]))?
        .reshape(&[rows as i64, d as i64])?;
    lin(w, &ctx, out, d, d, 1.0)
}

/// The BERT/ViT feed-forward block: `{name}.intermediate.dense` [f, d] → exact GELU → `{name}.output.dense` [d, f].
pub fn gelu_mlp(w: &Weights, x: &Tensor, name: &str, d: usize, f: usize) -> Result<Tensor> {
    let h = lin(w, x, &format!("{name}.intermediate.dense"), f, d, 1.0)?.gelu()?;
    lin(w, &h, &format!("{name}.output.dense"), d, f, 1.0)
}

/// Conv `{name}.weight` [cout, cin, k, k] + `{name}.bias` with "same" padding k/2, stride 1.
pub fn conv_same(
    w: &Weights,
    x: &Tensor,
    name: &str,
    cout: usize,
    cin: usize,
    k: usize,
) -> Result<Tensor> {
    let wt = w.get(&format!("{name}.weight"), &[cout, cin, k, k])?;
    let b = w.get(&format!("{name}.bias"), &[cout])?;
    let p = k / 2;
    let opts = crate::ops::conv::ConvOptions {
        pad: [p, p, p, p],
        ..Default::default()
    };
    crate::conv2d(
        x,
        HostArray::f32(&[cout, cin, k, k], &wt),
        Some(HostArray::f32(&[cout], &b)),
        opts,
    )
}
