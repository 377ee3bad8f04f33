//! Decoder hyper-parameters and the per-architecture options, read from GGUF metadata
//! (`<arch>.block_count` ...) or a Hugging Face `config.json`.

use std::path::Path;

use aneforge_gguf::{Architecture, GgufFile};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::models::{json_file, json_usize};

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
}

impl Family {
    /// The family's name (`llama`, `mistral`, `qwen2`, `qwen3`, `gemma`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Mistral => "mistral",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Gemma => "gemma",
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
        ]
        .into_iter()
        .find(|f| f.name() == name)
    }

    /// Whether Q/K/V projections carry biases.
    pub fn qkv_bias(self) -> bool {
        self == Family::Qwen2
    }

    /// Whether each query/key head is RMS-normalised before RoPE.
    pub fn qk_norm(self) -> bool {
        self == Family::Qwen3
    }

    /// Whether the MLP gate uses tanh GELU (GeGLU) instead of SiLU (SwiGLU).
    pub fn gelu_gate(self) -> bool {
        self == Family::Gemma
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
    pub rope_base: f64,
    pub rms_eps: f64,
    /// Attend only to the last `w` positions (Mistral), else everything before.
    pub sliding_window: Option<usize>,
}

impl LlmConfig {
    /// Check the head arithmetic (heads divisible by kv_heads, non-zero sizes, even head_dim).
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
        if self.heads % self.kv_heads != 0 {
            return Err(bad(format!(
                "head count {} is not a multiple of the key/value head count {}",
                self.heads, self.kv_heads
            )));
        }
        if self.head_dim % 2 != 0 {
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
        if !(self.rms_eps.is_finite() && self.rms_eps > 0.0) {
            return Err(bad(format!(
                "RMSNorm eps {} must be positive",
                self.rms_eps
            )));
        }
        Ok(self)
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// Read the hyper-parameters of a GGUF file (llama, qwen2, qwen3, gemma); other
    /// architectures, and RoPE scaling, are NotImplemented naming the file and key.
    pub fn from_gguf(file: &GgufFile) -> Result<LlmConfig> {
        let path = Path::new(file.path());
        let gg = gguf_error;
        let arch = file.architecture().map_err(gg)?;
        let family = match arch {
            Architecture::Llama => Family::Llama,
            Architecture::Qwen2 => Family::Qwen2,
            Architecture::Qwen3 => Family::Qwen3,
            Architecture::Gemma => Family::Gemma,
            other => {
                return Err(Error::NotImplemented(format!(
                    "{}: architecture '{}' is not supported by the decoder family (llama, qwen2, qwen3, gemma are)",
                    file.path(),
                    other.name()
                )))
            }
        };
        let md = file.metadata();
        let key = |s: &str| arch.key(s);
        let usize_of = |s: &str| -> Result<usize> {
            let v = md.get_unsigned(&key(s)).map_err(gg)?;
            usize::try_from(v).map_err(|_| bad_value(path, &key(s), v))
        };
        let optional = |s: &str| md.get(&key(s)).is_some();
        if optional("rope.scaling.type") || file.tensor("rope_freqs.weight").is_ok() {
            return Err(Error::NotImplemented(format!(
                "{}: RoPE scaling ({} / rope_freqs.weight) is not supported yet",
                file.path(),
                key("rope.scaling.type")
            )));
        }
        let width = usize_of("embedding_length")?;
        let heads = usize_of("attention.head_count")?;
        let vocab = if optional("vocab_size") {
            usize_of("vocab_size")?
        } else {
            md.get_array("tokenizer.ggml.tokens").map_err(gg)?.len()
        };
        LlmConfig {
            family,
            layers: usize_of("block_count")?,
            width,
            heads,
            kv_heads: if optional("attention.head_count_kv") {
                usize_of("attention.head_count_kv")?
            } else {
                heads
            },
            head_dim: if optional("attention.key_length") {
                usize_of("attention.key_length")?
            } else {
                width / heads.max(1)
            },
            ffn: usize_of("feed_forward_length")?,
            vocab,
            max_positions: usize_of("context_length")?,
            rope_base: if optional("rope.freq_base") {
                md.get_float(&key("rope.freq_base")).map_err(gg)?
            } else {
                10_000.0
            },
            rms_eps: md
                .get_float(&key("attention.layer_norm_rms_epsilon"))
                .map_err(gg)?,
            sliding_window: if optional("attention.sliding_window") {
                Some(usize_of("attention.sliding_window")?)
            } else {
                None
            },
        }
        .checked(path)
    }

    /// Read a Hugging Face `config.json` (model_type llama, mistral, qwen2, qwen3, gemma;
    /// `hidden_act` silu, or tanh GELU for gemma). Returns the config and `tie_word_embeddings`.
    pub fn from_hf(path: &Path) -> Result<(LlmConfig, bool)> {
        let v = json_file(path)?;
        let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
        let family = Family::from_model_type(model_type).ok_or_else(|| {
            Error::NotImplemented(format!(
                "{}: model_type '{model_type}' is not supported (llama, mistral, qwen2, qwen3, gemma are)",
                path.display()
            ))
        })?;
        if v.get("rope_scaling").is_some_and(|r| !r.is_null()) {
            return Err(Error::NotImplemented(format!(
                "{}: rope_scaling is not supported yet",
                path.display()
            )));
        }
        let width = json_usize(&v, "hidden_size", path)?;
        let heads = json_usize(&v, "num_attention_heads", path)?;
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
            head_dim: opt_usize("head_dim").unwrap_or(width / heads.max(1)),
            ffn: json_usize(&v, "intermediate_size", path)?,
            vocab: json_usize(&v, "vocab_size", path)?,
            max_positions: opt_usize("max_position_embeddings").unwrap_or(2048),
            rope_base: float("rope_theta", 10_000.0),
            rms_eps: float("rms_norm_eps", 1e-6),
            sliding_window: sliding,
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
