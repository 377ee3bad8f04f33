//! Decoder hyper-parameters and the per-architecture options, read from GGUF metadata
//! (`<arch>.block_count` ...) or a Hugging Face `config.json`.

use std::path::Path;

use aneforge_gguf::{Architecture, GgufFile};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::models::json::{
    json_file, json_layers, json_opt_positive, json_opt_usize, json_usize, require_field,
};

/// The decoder families one implementation covers; each differs only by the options below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Llama 2/3-style (SmolLM2, TinyLlama): RMSNorm, SwiGLU, RoPE, grouped-query attention.
    Llama,
    /// Llama with sliding-window attention.
    Mistral,
    /// Llama with biases on the Q/K/V projections.
    Qwen2,
    /// Llama with RMSNorm on each query/key head before RoPE and an explicit head_dim.
    Qwen3,
    /// (1 + w) RMSNorm, GeGLU (tanh GELU), embeddings scaled by √width, tied lm_head.
    Gemma,
    /// GPT-2: LayerNorm with bias, learned absolute positions instead of RoPE, fused QKV and
    /// every projection with bias, plain (ungated) tanh-GELU MLP, tied lm_head.
    Gpt2,
}

impl Family {
    /// The family's name (`llama`, `mistral`, `qwen2`, `qwen3`, `gemma`, `gpt2`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Mistral => "mistral",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Gemma => "gemma",
            Family::Gpt2 => "gpt2",
        }
    }

    /// The family of a Hugging Face `model_type`, or None.
    fn from_model_type(name: &str) -> Option<Family> {
        [
            Family::Llama,
            Family::Mistral,
            Family::Qwen2,
            Family::Qwen3,
            Family::Gemma,
            Family::Gpt2,
        ]
        .into_iter()
        .find(|f| f.name() == name)
    }

    /// Whether Q/K/V projections carry biases.
    pub fn qkv_bias(self) -> bool {
        matches!(self, Family::Qwen2 | Family::Gpt2)
    }

    /// Whether the attention output and MLP projections carry biases.
    pub fn proj_bias(self) -> bool {
        self == Family::Gpt2
    }

    /// Whether the norms are LayerNorm with a bias (else RMSNorm without one).
    pub fn layer_norm(self) -> bool {
        self == Family::Gpt2
    }

    /// Whether positions enter by RoPE on queries/keys (else learned absolute position
    /// embeddings are added to the token embeddings).
    pub fn rope(self) -> bool {
        self != Family::Gpt2
    }

    /// Whether the MLP is gated, down(act(gate(x)) · up(x)), else down(act(up(x))).
    pub fn gated_mlp(self) -> bool {
        self != Family::Gpt2
    }

    /// Whether each query/key head is RMS-normalised before RoPE.
    pub fn qk_norm(self) -> bool {
        self == Family::Qwen3
    }

    /// Whether the MLP activation is tanh GELU (GeGLU, GPT-2's gelu_new) instead of SiLU.
    pub fn gelu(self) -> bool {
        matches!(self, Family::Gemma | Family::Gpt2)
    }

    /// Whether token embeddings are multiplied by √width.
    pub fn scales_embeddings(self) -> bool {
        self == Family::Gemma
    }
}

/// Everything the graph builders need to know about a decoder.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    pub family: Family,
    pub layers: usize,
    pub width: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub vocab: usize,
    /// The longest context the model was trained for.
    pub max_positions: usize,
    /// RoPE base (unused by families without RoPE).
    pub rope_base: f64,
    /// The norms' epsilon (RMSNorm, or LayerNorm for gpt2).
    pub norm_eps: f64,
    /// Attend only to the last `w` positions (Mistral), else everything before.
    pub sliding_window: Option<usize>,
    /// RoPE scaling as one divisor per frequency (head_dim / 2 of them): llama3 or linear
    /// scaling from config.json, or a GGUF file's `rope_freqs.weight`; None = plain RoPE.
    pub rope_divisors: Option<Vec<f64>>,
}

impl LlmConfig {
    /// Check the head arithmetic (heads divisible by kv_heads, non-zero sizes, even head_dim
    /// for RoPE, heads · head_dim = width without RoPE).
    fn checked(self, source: &Path) -> Result<LlmConfig> {
        let bad = |msg: String| Error::format(source, None, msg);
        let sizes = [
            ("layers", self.layers),
            ("width", self.width),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("ffn", self.ffn),
            ("vocab", self.vocab),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(bad(format!("{name} must be positive")));
        }
        check_rope_table(self.head_dim)?;
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(bad(format!(
                "head count {} is not a multiple of the key/value head count {}",
                self.heads, self.kv_heads
            )));
        }
        if !self.family.rope() && self.heads * self.head_dim != self.width {
            return Err(bad(format!(
                "width {} is not divisible by the head count {}",
                self.width, self.heads
            )));
        }
        if self.family.rope() && !self.head_dim.is_multiple_of(2) {
            return Err(bad(format!(
                "head_dim {} must be even (RoPE)",
                self.head_dim
            )));
        }
        if !(self.rope_base.is_finite() && self.rope_base > 0.0) {
            return Err(bad(format!(
                "RoPE base {} must be positive",
                self.rope_base
            )));
        }
        if let Some(d) = &self.rope_divisors {
            if d.len() != self.head_dim / 2 || d.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(bad(format!(
                    "RoPE scaling needs {} positive finite frequency factors (head_dim / 2), got {d:?}",
                    self.head_dim / 2
                )));
            }
        }
        if !(self.norm_eps.is_finite() && self.norm_eps > 0.0) {
            return Err(bad(format!("norm eps {} must be positive", self.norm_eps)));
        }
        Ok(self)
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// RoPE inverse frequencies [head_dim / 2]: base^(−2i/head_dim), divided by the scaling
    /// divisors when the model has RoPE scaling.
    pub fn rope_inv_freq(&self) -> Vec<f64> {
        let dh = self.head_dim as f64;
        (0..self.head_dim / 2)
            .map(|i| {
                let plain = self.rope_base.powf(-2.0 * i as f64 / dh);
                plain / self.rope_divisors.as_ref().map_or(1.0, |d| d[i])
            })
            .collect()
    }

    /// Read the hyper-parameters of a GGUF file (llama — incl. Mistral's sliding window and
    /// llama3/linear RoPE scaling —, qwen2, qwen3, gemma, gpt2); Gemma 2/3, other RoPE scaling types
    /// and partial rotary embeddings are NotImplemented naming the file and key.
    pub fn from_gguf(file: &GgufFile) -> Result<LlmConfig> {
        let path = Path::new(file.path());
        let gg = gguf_error;
        let arch = file.architecture().map_err(gg)?;
        let family = match arch {
            Architecture::Llama => Family::Llama,
            Architecture::Qwen2 => Family::Qwen2,
            Architecture::Qwen3 => Family::Qwen3,
            Architecture::Gemma => Family::Gemma,
            Architecture::Gpt2 => Family::Gpt2,
            Architecture::Gemma2 | Architecture::Gemma3 => {
                return Err(gemma2_error(file.path(), arch.name()))
            }
        };
        let md = file.metadata();
        let key = |s: &str| arch.key(s);
        let usize_of = |s: &str| -> Result<usize> {
            let v = md.get_unsigned(&key(s)).map_err(gg)?;
            usize::try_from(v).map_err(|_| bad_value(path, &key(s), v))
        };
        let optional = |s: &str| md.get(&key(s)).is_some();
        let width = usize_of("embedding_length")?;
        let heads = usize_of("attention.head_count")?;
        let head_dim = if optional("attention.key_length") {
            usize_of("attention.key_length")?
        } else {
            width / heads.max(1)
        };
        let vocab = if optional("vocab_size") {
            usize_of("vocab_size")?
        } else {
            md.get_array("tokenizer.ggml.tokens").map_err(gg)?.len()
        };
        let cfg = LlmConfig {
            family,
            layers: usize_of("block_count")?,
            width,
            heads,
            kv_heads: if optional("attention.head_count_kv") {
                usize_of("attention.head_count_kv")?
            } else {
                heads
            },
            head_dim,
            ffn: usize_of("feed_forward_length")?,
            vocab,
            max_positions: usize_of("context_length")?,
            rope_base: if optional("rope.freq_base") {
                md.get_float(&key("rope.freq_base")).map_err(gg)?
            } else {
                10_000.0
            },
            norm_eps: md
                .get_float(&key(if family.layer_norm() {
                    "attention.layer_norm_epsilon"
                } else {
                    "attention.layer_norm_rms_epsilon"
                }))
                .map_err(gg)?,
            sliding_window: if optional("attention.sliding_window") {
                Some(usize_of("attention.sliding_window")?)
            } else {
                None
            },
            rope_divisors: gguf_rope_divisors(file, arch, head_dim)?,
        }
        .checked(path)?;
        if optional("rope.dimension_count") && usize_of("rope.dimension_count")? != cfg.head_dim {
            return Err(Error::NotImplemented(format!(
                "{}: {} = {} (partial rotary embedding) is not supported; RoPE must span head_dim {}",
                file.path(),
                key("rope.dimension_count"),
                usize_of("rope.dimension_count")?,
                cfg.head_dim
            )));
        }
        Ok(cfg)
    }

    /// Read a Hugging Face `config.json` (model_type llama, mistral, qwen2, qwen3, gemma, gpt2;
    /// `hidden_act` silu, or tanh GELU for gemma). Returns the config and `tie_word_embeddings`.
    pub fn from_hf(path: &Path) -> Result<(LlmConfig, bool)> {
        let v = json_file(path)?;
        let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
        if model_type == "gpt2" {
            return gpt2_from_hf(&v, path);
        }
        if model_type.starts_with("gemma2") || model_type.starts_with("gemma3") {
            return Err(gemma2_error(&path.display().to_string(), model_type));
        }
        let family = Family::from_model_type(model_type).ok_or_else(|| {
            Error::NotImplemented(format!(
                "{}: model_type '{model_type}' is not supported (llama, mistral, qwen2, qwen3, gemma, gpt2 are)",
                path.display()
            ))
        })?;
        let width = json_usize(&v, "hidden_size", path)?;
        let heads = json_usize(&v, "num_attention_heads", path)?;
        let head_dim = v
            .get("head_dim")
            .and_then(Value::as_u64)
            .map_or(width / heads.max(1), |n| n as usize);
        let rope_base = v
            .get("rope_theta")
            .and_then(Value::as_f64)
            .unwrap_or(10_000.0);
        let rope_divisors = match v.get("rope_scaling").filter(|r| !r.is_null()) {
            Some(r) => hf_rope_divisors(r, head_dim, rope_base, path)?,
            None => None,
        };
        let float = |k: &str, default: f64| v.get(k).and_then(Value::as_f64).unwrap_or(default);
        let opt_usize = |k: &str| v.get(k).and_then(Value::as_u64).map(|n| n as usize);
        let sliding = match family {
            Family::Mistral => opt_usize("sliding_window"),
            _ if v.get("use_sliding_window").and_then(Value::as_bool) == Some(true) => {
                return Err(Error::NotImplemented(format!(
                    "{}: use_sliding_window is only supported for mistral",
                    path.display()
                )))
            }
            _ => None,
        };
        let cfg = LlmConfig {
            family,
            layers: json_usize(&v, "num_hidden_layers", path)?,
            width,
            heads,
            kv_heads: opt_usize("num_key_value_heads").unwrap_or(heads),
            head_dim,
            ffn: json_usize(&v, "intermediate_size", path)?,
            vocab: json_usize(&v, "vocab_size", path)?,
            max_positions: opt_usize("max_position_embeddings").unwrap_or(2048),
            rope_base,
            norm_eps: float("rms_norm_eps", 1e-6),
            sliding_window: sliding,
            rope_divisors,
        }
        .checked(path)?;
        let tied_default = family == Family::Gemma;
        let tied = v
            .get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .unwrap_or(tied_default);
        Ok((cfg, tied))
    }
}

/// A GPT-2 `config.json` (n_embd, n_layer, n_head, n_positions, vocab_size, n_inner (default
/// 4·n_embd), layer_norm_epsilon (default 1e-5), activation_function gelu_new; another
/// activation is NotImplemented, malformed fields Format errors naming them). Returns the
/// config and `tie_word_embeddings` (default true).
fn gpt2_from_hf(v: &Value, path: &Path) -> Result<(LlmConfig, bool)> {
    require_field(v, "activation_function", "gelu_new", path)?;
    let width = json_usize(v, "n_embd", path)?;
    let layers = json_layers(v, "n_layer", path)?;
    let heads = json_usize(v, "n_head", path)?;
    let cfg = LlmConfig {
        family: Family::Gpt2,
        layers,
        width,
        heads,
        kv_heads: heads,
        head_dim: width / heads.max(1),
        ffn: json_opt_usize(v, "n_inner", width.saturating_mul(4), path)?,
        vocab: json_usize(v, "vocab_size", path)?,
        max_positions: json_usize(v, "n_positions", path)?,
        rope_base: 10_000.0,
        norm_eps: json_opt_positive(v, "layer_norm_epsilon", 1e-5, path)?,
        sliding_window: None,
        rope_divisors: None,
    }
    .checked(path)?;
    let tied = v.get("tie_word_embeddings").and_then(Value::as_bool);
    Ok((cfg, tied.unwrap_or(true)))
}

/// The NotImplemented error for Gemma 2/3 (`what` = architecture or model_type) naming the
/// options the family lacks.
fn gemma2_error(file: &str, what: &str) -> Error {
    Error::NotImplemented(format!(
        "{file}: '{what}' is not supported: its options (attention and final logit softcapping, \
         pre- and post-feed-forward norms, query_pre_attn_scalar, alternating sliding-window \
         layers) are not implemented; Gemma 1 ('gemma') is"
    ))
}

/// RoPE divisors of a GGUF file: the `rope_freqs.weight` tensor (llama3-style per-frequency
/// factors, as llama.cpp's converter writes them) or `rope.scaling.type` linear with
/// `rope.scaling.factor` (`head_dim / 2` copies); other scaling types (yarn, ...) are
/// NotImplemented naming the key.
fn gguf_rope_divisors(
    file: &GgufFile,
    arch: Architecture,
    head_dim: usize,
) -> Result<Option<Vec<f64>>> {
    check_rope_table(head_dim)?;
    let md = file.metadata();
    let type_key = arch.key("rope.scaling.type");
    let kind = match md.get(&type_key) {
        Some(_) => md.get_str(&type_key).map_err(gguf_error)?,
        None => "none",
    };
    let freqs = file.tensor("rope_freqs.weight").ok();
    match (kind, freqs) {
        ("none", None) => Ok(None),
        ("none", Some(t)) => {
            let d = t.dequantize().map_err(gguf_error)?;
            Ok(Some(d.iter().map(|&v| f64::from(v)).collect()))
        }
        ("linear", None) => {
            let factor_key = arch.key("rope.scaling.factor");
            let factor = md.get_float(&factor_key).map_err(gguf_error)?;
            if !(factor.is_finite() && factor > 0.0) {
                return Err(Error::format(
                    file.path(),
                    None,
                    format!("{factor_key} = {factor} must be positive"),
                ));
            }
            Ok(Some(vec![factor; head_dim / 2]))
        }
        (other, _) => Err(Error::NotImplemented(format!(
            "{}: {type_key} = '{other}' is not supported (none, linear, and llama3 factors in \
             rope_freqs.weight are)",
            file.path()
        ))),
    }
}

/// Checks that the `head_dim / 2` RoPE frequency table fits the tensor caps (`crate::limits`)
/// before anything is allocated from a file's head_dim.
fn check_rope_table(head_dim: usize) -> Result<()> {
    crate::limits::Limits::current()?.tensor(
        "RoPE frequencies (head_dim / 2)",
        &[head_dim / 2],
        8,
    )?;
    Ok(())
}

/// RoPE divisors of a config.json `rope_scaling` object: `rope_type` (or `type`) llama3
/// (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings, as in
/// transformers' llama3 rule) or linear (factor); other types are NotImplemented naming them.
fn hf_rope_divisors(
    r: &Value,
    head_dim: usize,
    base: f64,
    path: &Path,
) -> Result<Option<Vec<f64>>> {
    check_rope_table(head_dim)?;
    let kind = r
        .get("rope_type")
        .or_else(|| r.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let num = |k: &str| -> Result<f64> {
        r.get(k)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| {
                Error::format(
                    path,
                    None,
                    format!("rope_scaling.{k} must be a positive number for rope_type '{kind}'"),
                )
            })
    };
    let half = head_dim / 2;
    match kind {
        "default" => Ok(None),
        "linear" => Ok(Some(vec![num("factor")?; half])),
        "llama3" => {
            let (factor, low, high) = (
                num("factor")?,
                num("low_freq_factor")?,
                num("high_freq_factor")?,
            );
            let original = num("original_max_position_embeddings")?;
            if high <= low {
                return Err(Error::format(
                    path,
                    None,
                    format!(
                        "rope_scaling.high_freq_factor {high} must exceed low_freq_factor {low}"
                    ),
                ));
            }
            let (low_wavelen, high_wavelen) = (original / low, original / high);
            Ok(Some(
                (0..half)
                    .map(|i| {
                        let inv = base.powf(-2.0 * i as f64 / head_dim as f64);
                        let wavelen = 2.0 * std::f64::consts::PI / inv;
                        if wavelen < high_wavelen {
                            1.0
                        } else if wavelen > low_wavelen {
                            factor
                        } else {
                            let smooth = (original / wavelen - low) / (high - low);
                            1.0 / ((1.0 - smooth) / factor + smooth)
                        }
                    })
                    .collect(),
            ))
        }
        other => Err(Error::NotImplemented(format!(
            "{}: rope_scaling type '{other}' is not supported (llama3, linear are)",
            path.display()
        ))),
    }
}

/// A Format error for metadata `key` whose value `v` does not fit the platform's usize.
fn bad_value(path: &Path, key: &str, v: u64) -> Error {
    Error::format(path, None, format!("metadata {key} = {v} is too large"))
}

/// A GGUF reader error as a core error: I/O stays I/O, an unknown architecture or quant type
/// is NotImplemented, everything else a Format error (all name the file and key/tensor).
pub fn gguf_error(e: aneforge_gguf::GgufError) -> Error {
    use aneforge_gguf::GgufError as G;
    match e {
        G::Io { path, source } => Error::io(path, source),
        e @ (G::UnknownArchitecture { .. } | G::UnsupportedQuantType { .. }) => {
            Error::NotImplemented(e.to_string())
        }
        e => Error::format(path_of(&e), None, e.to_string()),
    }
}

/// The file a GGUF error names.
fn path_of(e: &aneforge_gguf::GgufError) -> String {
    e.to_string()
        .strip_prefix("GGUF ")
        .and_then(|s| s.split(": ").next())
        .unwrap_or("")
        .to_string()
}
