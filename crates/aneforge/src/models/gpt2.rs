//! GPT-2 decoders in the Hugging Face layout (`config.json` + `model.safetensors`, names with or
//! without the `transformer.` prefix; Conv1D weights [in, out]) run one token per step with
//! the KV cache resident in the program.
//!
//! Decode program (compiled once for a maximum context M): inputs `x` [1, D] (the token's `wte`
//! row, looked up on the host), `pos` [M, 1] (one-hot of the position), `mask` [1, 1, M] (0 up to
//! the position, −1e4 after) and per layer the caches `k{l}` / `v{l}` [H, M, dh]; outputs
//! `hidden` [1, D] (after `ln_f`) and the updated caches, aliased back to their inputs. The new
//! K/V row is written with a masked update, cache·(1 − pos) + new·pos, so no dynamic indexing is
//! needed; the position embedding is `posᵀ @ wpe`. The tied `lm_head` (hidden @ wteᵀ) and the
//! sampling run on the host in f32.

use std::path::Path;

use super::tokenize;
use super::weights::Weights;
use super::{
    json_file, json_layers, json_opt_positive, json_opt_usize, json_usize, layer_norm,
    require_field,
};
use crate::compile::{compile, CompileOptions, Compiled};
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::graph::build::attention::CAUSAL_MASK;
use crate::graph::Tensor;
use crate::ops::io::HostArray;
use crate::DType;
use crate::{constant, input_port};

/// Inputs before the per-layer caches: x, pos, mask.
const FIXED_INPUTS: usize = 3;

/// GPT-2 hyper-parameters from `config.json` (n_embd, n_layer, n_head, n_positions, vocab_size,
/// n_inner (default 4·n_embd), layer_norm_epsilon).
#[derive(Clone, Debug, PartialEq)]
pub struct Gpt2Config {
    pub embd: usize,
    pub layers: usize,
    pub heads: usize,
    pub positions: usize,
    pub vocab: usize,
    pub inner: usize,
    pub layer_norm_eps: f32,
}

impl Gpt2Config {
    /// Read `config.json` (activation `gelu_new`; others are NotImplemented).
    pub fn from_file(path: &Path) -> Result<Gpt2Config> {
        let v = json_file(path)?;
        require_field(&v, "activation_function", "gelu_new", path)?;
        let embd = json_usize(&v, "n_embd", path)?;
        let cfg = Gpt2Config {
            embd,
            layers: json_layers(&v, "n_layer", path)?,
            heads: json_usize(&v, "n_head", path)?,
            positions: json_usize(&v, "n_positions", path)?,
            vocab: json_usize(&v, "vocab_size", path)?,
            inner: json_opt_usize(&v, "n_inner", embd.saturating_mul(4), path)?,
            layer_norm_eps: json_opt_positive(&v, "layer_norm_epsilon", 1e-5, path)? as f32,
        };
        if cfg.heads == 0 || embd % cfg.heads != 0 {
            return Err(Error::format(
                path,
                None,
                format!("n_embd {embd} is not divisible by n_head {}", cfg.heads),
            ));
        }
        Ok(cfg)
    }
}

/// A loaded GPT-2 decoder with a resident KV cache.
pub struct Gpt2 {
    pub config: Gpt2Config,
    /// Maximum context M (prompt + generated tokens).
    pub max_context: usize,
    /// Tokens fed since the last reset.
    pub position: usize,
    wte: Vec<f32>,
    /// `tokenizer.json` of the folder, when present (for the text helpers).
    tokenizer: Option<tokenizers::Tokenizer>,
    pub compiled: Compiled,
}

/// Tanh-approximated GELU (GPT-2 `gelu_new`): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
pub(crate) fn gelu_new(x: &Tensor) -> Result<Tensor> {
    let inner = x
        .mul(x)?
        .mul(x)?
        .mul_scalar(0.044715)?
        .add(x)?
        .mul_scalar((2.0 / std::f32::consts::PI).sqrt())?;
    x.mul(&inner.tanh()?.add_scalar(1.0)?)?.mul_scalar(0.5)
}

impl Gpt2 {
    /// Load `dir` (config.json + model.safetensors) and compile the decode program for a context of
    /// `max_context` tokens (default n_positions). Bad tensors name the tensor and expected shape.
    pub fn load(dir: &Path, max_context: Option<usize>, opts: &CompileOptions) -> Result<Gpt2> {
        let c = Gpt2Config::from_file(&dir.join("config.json"))?;
        let w = Weights::open(&dir.join("model.safetensors"))?;
        let p = if w.has("transformer.wte.weight") {
            "transformer."
        } else {
            ""
        };
        let m = max_context.unwrap_or(c.positions);
        if m == 0 || m > c.positions {
            return Err(Error::value(
                "gpt2",
                format!("max_context {m} must be in 1..={}", c.positions),
            ));
        }
        let (d, h) = (c.embd, c.heads);
        let dh = d / h;
        let wte = w.get(&format!("{p}wte.weight"), &[c.vocab, d])?;
        let wpe = w.get(&format!("{p}wpe.weight"), &[c.positions, d])?;
        let x = input_port(&[1, d], DType::Fp16, Some("x"))?;
        let pos = input_port(&[m, 1], DType::Fp16, Some("pos"))?;
        let mask = input_port(&[1, 1, m], DType::Fp16, Some("mask"))?;
        let caches: Vec<(Tensor, Tensor)> = (0..c.layers)
            .map(|l| {
                Ok((
                    input_port(&[h, m, dh], DType::Fp16, Some(&format!("k{l}")))?,
                    input_port(&[h, m, dh], DType::Fp16, Some(&format!("v{l}")))?,
                ))
            })
            .collect::<Result<_>>()?;
        let keep = pos.rsub_scalar(1.0)?;
        let mut hs = x.add(
            &pos.transpose(&[1, 0])?
                .matmul(&constant("gpt2", HostArray::f32(&[m, d], &wpe[..m * d]))?)?,
        )?;
        let mut outputs = Vec::new();
        for (l, (kc, vc)) in caches.iter().enumerate() {
            let name = format!("{p}h.{l}");
            let a = layer_norm(&w, &hs, &format!("{name}.ln_1"), d, c.layer_norm_eps)?;
            let qkv_w = w.get(&format!("{name}.attn.c_attn.weight"), &[d, 3 * d])?;
            let qkv_b = w.get(&format!("{name}.attn.c_attn.bias"), &[3 * d])?;
            let part = |i: usize, scale: f32| -> Result<Tensor> {
                let wt: Vec<f32> = (0..d * d)
                    .map(|j| qkv_w[(j / d) * 3 * d + i * d + j % d] * scale)
                    .collect();
                let b: Vec<f32> = qkv_b[i * d..(i + 1) * d]
                    .iter()
                    .map(|v| v * scale)
                    .collect();
                a.matmul_weight(HostArray::f32(&[d, d], &wt))?
                    .add(&constant("gpt2", HostArray::f32(&[d], &b))?)?
                    .reshape(&[h as i64, 1, dh as i64])
            };
            let q = part(0, 1.0 / (dh as f32).sqrt())?;
            let k = kc.mul(&keep)?.add(&part(1, 1.0)?.mul(&pos)?)?;
            let v = vc.mul(&keep)?.add(&part(2, 1.0)?.mul(&pos)?)?;
            let ctx = q
                .matmul(&k.transpose(&[0, 2, 1])?)?
                .add(&mask)?
                .softmax(-1)?
                .matmul(&v)?
                .reshape(&[1, d as i64])?;
            hs = hs.add(&conv1d(&w, &ctx, &format!("{name}.attn.c_proj"), d, d)?)?;
            let f = layer_norm(&w, &hs, &format!("{name}.ln_2"), d, c.layer_norm_eps)?;
            let f = gelu_new(&conv1d(&w, &f, &format!("{name}.mlp.c_fc"), d, c.inner)?)?;
            hs = hs.add(&conv1d(&w, &f, &format!("{name}.mlp.c_proj"), c.inner, d)?)?;
            outputs.push((Some(format!("k{l}_next")), k));
            outputs.push((Some(format!("v{l}_next")), v));
        }
        outputs.insert(
            0,
            (
                Some("hidden".into()),
                layer_norm(&w, &hs, &format!("{p}ln_f"), d, c.layer_norm_eps)?,
            ),
        );
        let mut compiled = compile(&outputs, opts)?;
        for l in 0..c.layers {
            compiled
                .loaded
                .alias(&format!("k{l}_next"), &format!("k{l}"))?;
            compiled
                .loaded
                .alias(&format!("v{l}_next"), &format!("v{l}"))?;
        }
        let tok_file = dir.join("tokenizer.json");
        let tokenizer = if tok_file.exists() {
            Some(super::load_tokenizer(&tok_file, m)?)
        } else {
            None
        };
        Ok(Gpt2 {
            config: c,
            max_context: m,
            position: 0,
            wte,
            tokenizer,
            compiled,
        })
    }

    /// Empty the KV cache and start again at position 0.
    pub fn reset(&mut self) -> Result<()> {
        let zeros = vec![0f32; self.compiled.inputs()[FIXED_INPUTS].numel()];
        for i in FIXED_INPUTS..self.compiled.inputs().len() {
            self.compiled.loaded.set_input(i, PortData::F32(&zeros))?;
        }
        self.position = 0;
        Ok(())
    }

    /// Feed one token at the next position and return the next-token logits [vocab].
    pub fn step(&mut self, id: u32) -> Result<Vec<f32>> {
        let (d, m, t) = (self.config.embd, self.max_context, self.position);
        let id = id as usize;
        if id >= self.config.vocab {
            return Err(Error::value(
                "gpt2",
                format!(
                    "token id {id} is outside the vocabulary (size {})",
                    self.config.vocab
                ),
            ));
        }
        if t >= m {
            return Err(Error::value("gpt2", format!("the context is full ({m} tokens, max_context); reset() or load with a larger max_context")));
        }
        let pos: Vec<f32> = (0..m).map(|i| f32::from(u8::from(i == t))).collect();
        let mask: Vec<f32> = (0..m)
            .map(|i| if i <= t { 0.0 } else { CAUSAL_MASK })
            .collect();
        let l = &mut self.compiled.loaded;
        l.set_input(0, PortData::F32(&self.wte[id * d..(id + 1) * d]))?;
        l.set_input(1, PortData::F32(&pos))?;
        l.set_input(2, PortData::F32(&mask))?;
        l.execute()?;
        let mut hidden = vec![0f32; d];
        l.read_output(0, &mut hidden)?;
        self.position += 1;
        use rayon::prelude::*;
        Ok(self
            .wte
            .par_chunks_exact(d)
            .map(|row| row.iter().zip(&hidden).map(|(a, b)| a * b).sum())
            .collect())
    }

    /// Reset, feed `ids` and return the logits after each of them ([len][vocab]).
    pub fn logits(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>> {
        self.reset()?;
        ids.iter().map(|&id| self.step(id)).collect()
    }

    /// Reset, feed the prompt `ids`, then sample `max_new_tokens` tokens: greedy when
    /// `temperature` ≤ 0, else softmax(logits / temperature) over the `top_k` largest (0 = all),
    /// drawn from a generator seeded with `seed`. Returns the new tokens; a non-finite
    /// temperature is a value error.
    pub fn generate(
        &mut self,
        ids: &[u32],
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
    ) -> Result<Vec<u32>> {
        if ids.is_empty() {
            return Err(Error::value(
                "gpt2",
                "generate needs at least one prompt token",
            ));
        }
        if !temperature.is_finite() {
            return Err(Error::value(
                "gpt2",
                format!("temperature must be a finite number, got {temperature}"),
            ));
        }
        let mut logits = self.logits(ids)?.pop().unwrap_or_default();
        let mut rng = SplitMix(seed);
        // Each token takes a context slot, so the context bounds what is reserved up front.
        let mut out = Vec::with_capacity(max_new_tokens.min(self.max_context));
        for i in 0..max_new_tokens {
            let next = sample(&logits, temperature, top_k, &mut rng);
            out.push(next);
            if i + 1 < max_new_tokens {
                logits = self.step(next)?;
            }
        }
        Ok(out)
    }
}

impl Gpt2 {
    /// Token ids of `text` (no special tokens added; not truncated: a prompt longer than
    /// `max_context` fails at the step that overflows); a Value error without tokenizer.json.
    pub fn encode_text(&self, text: &str) -> Result<Vec<u32>> {
        tokenize::encode(tokenize::require(self.tokenizer.as_ref(), "gpt2")?, text)
    }

    /// The text of token ids (special tokens kept).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        tokenize::decode(
            tokenize::require(self.tokenizer.as_ref(), "gpt2")?,
            ids,
            false,
        )
    }

    /// [`Gpt2::generate`] from a text prompt; returns the generated text (prompt excluded).
    pub fn generate_text(
        &mut self,
        prompt: &str,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
    ) -> Result<String> {
        let ids = self.encode_text(prompt)?;
        let new = self.generate(&ids, max_new_tokens, temperature, top_k, seed)?;
        self.decode(&new)
    }
}

/// HF Conv1D `{name}.weight` [inp, out] + `{name}.bias` [out] on x [1, inp].
fn conv1d(w: &Weights, x: &Tensor, name: &str, inp: usize, out: usize) -> Result<Tensor> {
    let wt = w.get(&format!("{name}.weight"), &[inp, out])?;
    let b = w.get(&format!("{name}.bias"), &[out])?;
    x.matmul_weight(HostArray::f32(&[inp, out], &wt))?
        .add(&constant(name, HostArray::f32(&[out], &b))?)
}

/// SplitMix64: a small, seedable generator for sampling.
struct SplitMix(u64);

impl SplitMix {
    /// A uniform draw in [0, 1).
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Greedy (temperature ≤ 0) or top-k temperature sampling from `logits`.
fn sample(logits: &[f32], temperature: f32, top_k: usize, rng: &mut SplitMix) -> u32 {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    if temperature <= 0.0 {
        return order[0] as u32;
    }
    let k = if top_k == 0 {
        order.len()
    } else {
        top_k.min(order.len())
    };
    let top = f64::from(logits[order[0]]);
    let weights: Vec<f64> = order[..k]
        .iter()
        .map(|&i| ((f64::from(logits[i]) - top) / f64::from(temperature)).exp())
        .collect();
    let mut u = rng.next_f64() * weights.iter().sum::<f64>();
    for (j, wt) in weights.iter().enumerate() {
        if u < *wt {
            return order[j] as u32;
        }
        u -= wt;
    }
    order[k - 1] as u32
}
