//! The decoder's graph: RMSNorm, RoPE, grouped-query attention, gated MLP and the tiled
//! lm_head, built from IR ops into the outputs of one program over a chunk of layers (gpt2:
//! LayerNorm, no RoPE — its positions are added to `x` on the host —, biased projections and a
//! plain GELU MLP).
//!
//! Ports of a chunk program (S = tokens per run, T = keys attended, M = max context):
//! inputs `x` [S, D] (embeddings or the previous chunk's hidden states), `cos`/`sin` [S, dh]
//! (RoPE of each row's position), `mask` [G·S, T] (additive, 0 or −1e4; rows repeat per query
//! head of a group); prefill with the head adds `last` [1, S] (one-hot of the row whose logits
//! are wanted); decode adds `pos` [M, 1] (one-hot of the position written) and per layer the
//! caches `k{l}` [Hkv, dh, M] (keys stored transposed, so a step's scores are one matmul with
//! no per-step transpose of the cache) and `v{l}` [Hkv, M, dh]; extend (KV reuse) has decode's
//! caches, `last` with the head, and `place` [M, S] (one-hot: row p takes new row r) with
//! `keep` [M, 1]. Outputs: `x_out` [S, D] (chunks before the head) or `logits{i}` [1, tile]
//! (the head, one port per vocabulary tile); prefill `k{l}_new`/`v{l}_new` [Hkv, S, dh]; decode
//! and extend `k{l}_next`/`v{l}_next` in the caches' layouts (aliased to the caches in decode).
//! A decode step writes its key and value by one `select` per cache on the one-hot position.

use std::ops::Range;

use crate::error::Result;
use crate::graph::Tensor;
use crate::ops::elementwise::Compare;
use crate::ops::io::HostArray;
use crate::{concat, constant, input_port, select, DType};

use super::config::LlmConfig;
use super::progress::LoadProgress;
use super::source::{Role, Source};

/// What one program computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `seq` prompt rows from position 0; keys are the rows themselves.
    Prefill { seq: usize },
    /// One token at a one-hot position; keys are the resident caches of `context` rows.
    Decode { context: usize },
    /// `seq` rows after the resident ones (KV reuse): the one-hot `place` [context, seq]
    /// scatters their keys/values into the caches, which are the keys.
    Extend { seq: usize, context: usize },
}

/// A contiguous run of layers, plus the final norm and lm_head when `head` is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub layers: Range<usize>,
    pub head: bool,
}

/// How the new keys/values enter the caches.
enum Write {
    /// Prefill: no caches; the keys are the rows themselves.
    None,
    /// Decode: the position as bool, [1, M] for the transposed keys and [M, 1] for the values.
    Select { k: Tensor, v: Tensor },
    /// Extend: `place` [M, S], its transpose [S, M], and `keep` as [1, M] and [M, 1].
    Place {
        place: Tensor,
        place_t: Tensor,
        keep_k: Tensor,
        keep_v: Tensor,
    },
}

/// The graph inputs shared by every layer of a chunk.
struct Inputs {
    cos: Tensor,
    sin: Tensor,
    mask: Tensor,
    write: Write,
}

/// A builder over one weight store.
pub struct Builder<'a> {
    pub cfg: &'a LlmConfig,
    pub src: &'a Source,
    /// Counts the projection weights as they are made (the load progress), when set.
    pub progress: Option<&'a LoadProgress<'a>>,
}

impl Builder<'_> {
    /// Weight `role` of `shape` as f32 (HF orientation).
    fn weight(&self, role: Role, shape: &[usize]) -> Result<Vec<f32>> {
        self.src.get(role, shape, self.cfg)
    }

    /// HF RMSNorm over the last axis, x / √(mean(x²) + eps) · w, exact for any x: the norm is
    /// ‖[x, √(d·eps)]‖₂ (an fp16-safe reduction, no squares leave the kernel), times √d / ‖·‖.
    fn rms_norm(&self, x: &Tensor, role: Role, scale: f32) -> Result<Tensor> {
        let d = *x.shape().last().unwrap_or(&1);
        let w: Vec<f32> = self
            .weight(role, &[d])?
            .iter()
            .map(|v| v * (d as f32).sqrt() * scale)
            .collect();
        let mut col_shape = x.shape().to_vec();
        *col_shape.last_mut().unwrap_or(&mut 0) = 1;
        let fill = vec![(d as f64 * self.cfg.norm_eps).sqrt() as f32; col_shape.iter().product()];
        let col = constant("rms_norm", HostArray::f32(&col_shape, &fill))?;
        let norm = concat(&[x.clone(), col], -1)?.reduce_l2_norm(&[-1], true)?;
        x.div(&norm)?
            .mul(&constant("rms_norm", HostArray::f32(&[d], &w))?)
    }

    /// The family's norm at `role`: LayerNorm with the role's bias (gpt2) or RMSNorm.
    fn norm(&self, x: &Tensor, role: Role) -> Result<Tensor> {
        let (Some(bias), true) = (role.bias(), self.cfg.family.layer_norm()) else {
            return self.rms_norm(x, role, 1.0);
        };
        let d = *x.shape().last().unwrap_or(&1);
        let g = constant(
            "layer_norm",
            HostArray::f32(&[d], &self.weight(role, &[d])?),
        )?;
        let b = constant(
            "layer_norm",
            HostArray::f32(&[d], &self.weight(bias, &[d])?),
        )?;
        x.layer_norm(Some(&g), Some(&b), self.cfg.norm_eps as f32)
    }

    /// x [S, in] @ W.T for the [out, in] weight `role` (+ its bias when given), times `scale`.
    fn linear(
        &self,
        x: &Tensor,
        role: Role,
        bias: Option<Role>,
        out: usize,
        scale: f32,
    ) -> Result<Tensor> {
        let inp = x.shape()[1];
        if let Some(p) = self.progress {
            p.add(out * inp);
        }
        let mut b = bias.map(|r| self.weight(r, &[out])).transpose()?;
        b.iter_mut().flatten().for_each(|v| *v *= scale);
        if let Some(w) = self.src.encoded(role, out, inp, 0..out, self.cfg, scale)? {
            return super::weights::linear(x, w, b.as_deref());
        }
        let mut w = self.weight(role, &[out, inp])?;
        w.iter_mut().for_each(|v| *v *= scale);
        let bias_shape = [out];
        x.linear(
            HostArray::f32(&[out, inp], &w),
            b.as_ref().map(|b| HostArray::f32(&bias_shape, b)),
        )
    }

    /// [S, H·dh] → [H, S, dh].
    fn heads(&self, t: Tensor, heads: usize) -> Result<Tensor> {
        let s = t.shape()[0] as i64;
        t.reshape(&[s, heads as i64, self.cfg.head_dim as i64])?
            .transpose(&[1, 0, 2])
    }

    /// Rotate-half RoPE on t [H, S, dh]: t·cos + rotate_half(t)·sin, rotate_half as an exact
    /// ±1 permutation matmul.
    fn rope(&self, t: &Tensor, io: &Inputs) -> Result<Tensor> {
        let dh = self.cfg.head_dim;
        let half = dh / 2;
        let mut r = vec![0f32; dh * dh];
        for i in 0..half {
            r[(i + half) * dh + i] = -1.0; // out[i] = -t[i + half]
            r[i * dh + i + half] = 1.0; // out[i + half] = t[i]
        }
        let rotated = t.matmul(&constant("rope", HostArray::f32(&[dh, dh], &r))?)?;
        t.mul(&io.cos)?.add(&rotated.mul(&io.sin)?)
    }

    /// One attention block on the normed rows a [S, D]; returns the output projection and
    /// the keys/values as stored (prefill: the rows' own, decode: the updated caches).
    fn attention(
        &self,
        a: &Tensor,
        l: usize,
        io: &Inputs,
        cache: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let c = self.cfg;
        let (h, kvh, dh, s) = (c.heads, c.kv_heads, c.head_dim, a.shape()[0]);
        let bias = |r: Role| c.family.qkv_bias().then_some(r);
        let qk_norm = c.family.qk_norm();
        let q_scale = 1.0 / (dh as f32).sqrt();
        let (lin_scale, norm_scale) = if qk_norm {
            (1.0, q_scale)
        } else {
            (q_scale, 1.0)
        };
        let mut q = self.heads(
            self.linear(a, Role::Q(l), bias(Role::QBias(l)), h * dh, lin_scale)?,
            h,
        )?;
        let mut k = self.heads(
            self.linear(a, Role::K(l), bias(Role::KBias(l)), kvh * dh, 1.0)?,
            kvh,
        )?;
        let v = self.heads(
            self.linear(a, Role::V(l), bias(Role::VBias(l)), kvh * dh, 1.0)?,
            kvh,
        )?;
        if qk_norm {
            q = self.rms_norm(&q, Role::QNorm(l), norm_scale)?;
            k = self.rms_norm(&k, Role::KNorm(l), 1.0)?;
        }
        if c.family.rope() {
            q = self.rope(&q, io)?;
            k = self.rope(&k, io)?;
        }
        let k_t = k.transpose(&[0, 2, 1])?;
        let (k_t, v) = match (cache, &io.write) {
            (Some((kc, vc)), Write::Select { k: at_k, v: at_v }) => {
                (select(at_k, &k_t, kc)?, select(at_v, &v, vc)?)
            }
            (
                Some((kc, vc)),
                Write::Place {
                    place,
                    place_t,
                    keep_k,
                    keep_v,
                },
            ) => (
                kc.mul(keep_k)?.add(&k_t.matmul(place_t)?)?,
                vc.mul(keep_v)?.add(&place.matmul(&v)?)?,
            ),
            _ => (k_t, v),
        };
        let g = c.group() as i64;
        let ctx = q
            .reshape(&[kvh as i64, g * s as i64, dh as i64])?
            .matmul(&k_t)?
            .add(&io.mask)?
            .softmax(-1)?
            .matmul(&v)?
            .reshape(&[h as i64, s as i64, dh as i64])?
            .transpose(&[1, 0, 2])?
            .reshape(&[s as i64, (h * dh) as i64])?;
        let k = match cache {
            Some(_) => k_t,
            None => k,
        };
        let o_bias = c.family.proj_bias().then_some(Role::OBias(l));
        Ok((self.linear(&ctx, Role::O(l), o_bias, c.width, 1.0)?, k, v))
    }

    /// The gated MLP: down(act(gate(x)) · up(x)), act = SiLU or tanh GELU; without a gate
    /// (gpt2) down(gelu_new(up(x) + b) + b).
    fn mlp(&self, x: &Tensor, l: usize) -> Result<Tensor> {
        let (f, d) = (self.cfg.ffn, self.cfg.width);
        if !self.cfg.family.gated_mlp() {
            let h = gelu_new(&self.linear(x, Role::Up(l), Some(Role::UpBias(l)), f, 1.0)?)?;
            return self.linear(&h, Role::Down(l), Some(Role::DownBias(l)), d, 1.0);
        }
        let gate = self.linear(x, Role::Gate(l), None, f, 1.0)?;
        let gate = if self.cfg.family.gelu() {
            gelu_new(&gate)?
        } else {
            gate.silu()?
        };
        let up = self.linear(x, Role::Up(l), None, f, 1.0)?;
        self.linear(&gate.mul(&up)?, Role::Down(l), None, d, 1.0)
    }

    /// The outputs of the program for `chunk` in `mode`, lm_head tiles at most `tile` wide.
    pub fn program(
        &self,
        chunk: &Chunk,
        mode: Mode,
        tile: usize,
    ) -> Result<Vec<(Option<String>, Tensor)>> {
        let c = self.cfg;
        let (s, t) = match mode {
            Mode::Prefill { seq } => (seq, seq),
            Mode::Decode { context } => (1, context),
            Mode::Extend { seq, context } => (seq, context),
        };
        let fp16 = |shape: &[usize], name: &str| input_port(shape, DType::Fp16, Some(name));
        let mut x = fp16(&[s, c.width], "x")?;
        let write = match mode {
            Mode::Decode { context } => {
                let at = fp16(&[context, 1], "pos")?.compare_scalar(Compare::Greater, 0.5)?;
                Write::Select {
                    k: at.reshape(&[1, context as i64])?,
                    v: at,
                }
            }
            Mode::Extend { seq, context } => {
                let place = fp16(&[context, seq], "place")?;
                let keep = fp16(&[context, 1], "keep")?;
                Write::Place {
                    place_t: place.transpose(&[1, 0])?,
                    place,
                    keep_k: keep.reshape(&[1, context as i64])?,
                    keep_v: keep,
                }
            }
            Mode::Prefill { .. } => Write::None,
        };
        let io = Inputs {
            cos: fp16(&[s, c.head_dim], "cos")?,
            sin: fp16(&[s, c.head_dim], "sin")?,
            mask: fp16(&[c.group() * s, t], "mask")?,
            write,
        };
        let last = match mode {
            Mode::Prefill { seq } | Mode::Extend { seq, .. } if chunk.head => {
                Some(fp16(&[1, seq], "last")?)
            }
            _ => None,
        };
        let mut kv_outputs = Vec::new();
        for l in chunk.layers.clone() {
            let caches = match mode {
                Mode::Decode { context } | Mode::Extend { context, .. } => Some((
                    fp16(&[c.kv_heads, c.head_dim, context], &format!("k{l}"))?,
                    fp16(&[c.kv_heads, context, c.head_dim], &format!("v{l}"))?,
                )),
                Mode::Prefill { .. } => None,
            };
            let a = self.norm(&x, Role::AttnNorm(l))?;
            let (o, k, v) = self.attention(&a, l, &io, caches.as_ref().map(|(k, v)| (k, v)))?;
            x = x.add(&o)?;
            let f = self.norm(&x, Role::FfnNorm(l))?;
            x = x.add(&self.mlp(&f, l)?)?;
            let suffix = if caches.is_some() { "next" } else { "new" };
            kv_outputs.push((Some(format!("k{l}_{suffix}")), k));
            kv_outputs.push((Some(format!("v{l}_{suffix}")), v));
        }
        let mut outputs = if chunk.head {
            let x = match &last {
                Some(last) => last.matmul(&x)?,
                None => x,
            };
            self.lm_head(&x, tile)?
        } else {
            vec![(Some("x_out".into()), x)]
        };
        outputs.extend(kv_outputs);
        Ok(outputs)
    }

    /// Final norm and the lm_head on x [1, D], as `logits{i}` tiles of at most `tile` rows.
    fn lm_head(&self, x: &Tensor, tile: usize) -> Result<Vec<(Option<String>, Tensor)>> {
        let (v, d) = (self.cfg.vocab, self.cfg.width);
        let x = self.norm(x, Role::FinalNorm)?;
        let tiles = 0..v.div_ceil(tile);
        let rows_of = |i: usize| i * tile..((i + 1) * tile).min(v);
        if let Some(p) = self.progress {
            p.add(v * d);
        }
        let encoded = tiles
            .clone()
            .map(|i| (self.src).encoded(Role::LmHead, v, d, rows_of(i), self.cfg, 1.0))
            .collect::<Result<Vec<_>>>()?;
        if let Some(encoded) = encoded.into_iter().collect::<Option<Vec<_>>>() {
            return (encoded.into_iter().enumerate())
                .map(|(i, w)| {
                    let logits = super::weights::linear(&x, w, None)?;
                    Ok((Some(format!("logits{i}")), logits))
                })
                .collect();
        }
        let w = self.weight(Role::LmHead, &[v, d])?;
        tiles
            .map(|i| {
                let rows = rows_of(i);
                let n = rows.len();
                let logits = x.linear(
                    HostArray::f32(&[n, d], &w[rows.start * d..rows.end * d]),
                    None,
                )?;
                Ok((Some(format!("logits{i}")), logits))
            })
            .collect()
    }
}

/// Tanh-approximated GELU (GPT-2's `gelu_new`, Gemma's GeGLU):
/// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
pub fn gelu_new(x: &Tensor) -> Result<Tensor> {
    let inner = x
        .mul(x)?
        .mul(x)?
        .mul_scalar(0.044715)?
        .add(x)?
        .mul_scalar((2.0 / std::f32::consts::PI).sqrt())?;
    x.mul(&inner.tanh()?.add_scalar(1.0)?)?.mul_scalar(0.5)
}

/// fp16 bytes of the weights of layer `l` (for chunking by the per-program budget).
pub fn layer_bytes(cfg: &LlmConfig) -> u64 {
    let (d, dh) = (cfg.width as u64, cfg.head_dim as u64);
    let attn = d * dh * (2 * cfg.heads as u64 + 2 * cfg.kv_heads as u64);
    let mlp = if cfg.family.gated_mlp() { 3 } else { 2 } * d * cfg.ffn as u64;
    2 * (attn + mlp)
}

/// Split the layers into chunks whose fp16 weights stay under `budget` bytes; the lm_head
/// (vocab × width) rides with the last chunk when it fits, else gets a chunk of its own.
pub fn chunks(cfg: &LlmConfig, budget: u64) -> Vec<Chunk> {
    let per_layer = layer_bytes(cfg);
    let head = 2 * cfg.vocab as u64 * cfg.width as u64;
    let mut out: Vec<Chunk> = Vec::new();
    let (mut start, mut used) = (0, 0u64);
    for l in 0..cfg.layers {
        if used > 0 && used + per_layer > budget {
            out.push(Chunk {
                layers: start..l,
                head: false,
            });
            (start, used) = (l, 0);
        }
        used += per_layer;
    }
    if used + head <= budget {
        out.push(Chunk {
            layers: start..cfg.layers,
            head: true,
        });
    } else {
        out.push(Chunk {
            layers: start..cfg.layers,
            head: false,
        });
        out.push(Chunk {
            layers: cfg.layers..cfg.layers,
            head: true,
        });
    }
    out
}
