//! BERT-family sentence encoders from a Hugging Face / sentence-transformers folder
//! (`config.json`, `model.safetensors`, `tokenizer.json`, optional `modules.json` and
//! `1_Pooling/config.json`), e.g. all-MiniLM-L6-v2.
//!
//! Design: tokenisation runs on the host (`tokenizers`), and so does the word-embedding
//! lookup: the ids select rows of the [vocab, D] table on the host (a gather on runtime ids
//! has no fp16 program form short of a one-hot matmul over the whole vocabulary, which would
//! cost more than the encoder itself at seq 128). Everything after that is one program per
//! sequence-length bucket: position + token-type embeddings, the embedding LayerNorm, every
//! encoder layer (attention with an additive key-mask input, GELU MLP, post-norms), pooling as
//! a [1, S] weight-row matmul (mean or CLS) and the optional L2 normalisation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::weights::Weights;
use super::{
    gelu_mlp, json_file, json_layers, json_opt_bool, json_opt_positive, json_opt_usize, json_usize,
    layer_norm, load_tokenizer, require_field, self_attention,
};
use crate::compile::{compile, CompileOptions, Compiled};
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::graph::build::attention::CAUSAL_MASK;
use crate::graph::Tensor;
use crate::input_port;
use crate::DType;

/// Sequences per program call when the caller does not say (sentence-transformers' default).
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// Sequence-length buckets are multiples of this many tokens.
pub const BUCKET_STEP: usize = 8;

/// Tokens (batch × bucket length) per program call at most, unless one sequence is longer:
/// larger calls run the GEMMs out of cache and cost more per token.
pub const TOKENS_PER_CALL: usize = 512;

/// How token states become one sentence vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// Average over the real (unpadded) tokens.
    Mean,
    /// The first token's ([CLS]) state.
    Cls,
}

impl Pooling {
    /// Parse `mean` or `cls` (`max` and the others are NotImplemented).
    pub fn parse(s: &str) -> Result<Pooling> {
        match s {
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            "max" | "mean_sqrt_len" | "weightedmean" | "lasttoken" => Err(Error::NotImplemented(
                format!("bert: pooling '{s}' is not implemented (mean and cls are)"),
            )),
            _ => Err(Error::value(
                "bert",
                format!("unknown pooling '{s}' (expected mean or cls)"),
            )),
        }
    }
}

/// The encoder hyper-parameters read from `config.json` (hidden_size, num_hidden_layers,
/// num_attention_heads, intermediate_size, vocab_size, max_position_embeddings, type_vocab_size,
/// layer_norm_eps).
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub vocab: usize,
    pub max_positions: usize,
    pub type_vocab: usize,
    pub layer_norm_eps: f32,
}

impl BertConfig {
    /// Read `config.json` of a BERT model (model_type `bert`, hidden_act `gelu`); other
    /// architectures or activations are NotImplemented, missing fields are Format errors.
    pub fn from_file(path: &Path) -> Result<BertConfig> {
        let v = json_file(path)?;
        require_field(&v, "model_type", "bert", path)?;
        require_field(&v, "hidden_act", "gelu", path)?;
        require_field(&v, "position_embedding_type", "absolute", path)?;
        let cfg = BertConfig {
            hidden: json_usize(&v, "hidden_size", path)?,
            layers: json_layers(&v, "num_hidden_layers", path)?,
            heads: json_usize(&v, "num_attention_heads", path)?,
            intermediate: json_usize(&v, "intermediate_size", path)?,
            vocab: json_usize(&v, "vocab_size", path)?,
            max_positions: json_usize(&v, "max_position_embeddings", path)?,
            type_vocab: json_opt_usize(&v, "type_vocab_size", 2, path)?,
            layer_norm_eps: json_opt_positive(&v, "layer_norm_eps", 1e-12, path)? as f32,
        };
        if cfg.heads == 0 || !cfg.hidden.is_multiple_of(cfg.heads) || cfg.type_vocab == 0 {
            return Err(Error::format(path, None, format!("hidden_size {} is not divisible by num_attention_heads {} (or type_vocab_size is 0)", cfg.hidden, cfg.heads)));
        }
        Ok(cfg)
    }
}

/// Pooling and normalisation of a sentence-transformers folder: `1_Pooling/config.json`
/// (default mean) and whether `modules.json` lists a Normalize module (default: normalise).
fn sentence_config(dir: &Path) -> Result<(Pooling, bool)> {
    let pool_file = dir.join("1_Pooling").join("config.json");
    let pooling = if pool_file.exists() {
        let v = json_file(&pool_file)?;
        let mut modes: Vec<&str> = Vec::new();
        for (k, m) in [
            ("pooling_mode_mean_tokens", "mean"),
            ("pooling_mode_cls_token", "cls"),
            ("pooling_mode_max_tokens", "max"),
            ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
        ] {
            if json_opt_bool(&v, k, &pool_file)? {
                modes.push(m);
            }
        }
        match modes.as_slice() {
            [m] => Pooling::parse(m)?,
            [] => {
                return Err(Error::format(
                    &pool_file,
                    None,
                    "no pooling_mode_* flag is true",
                ))
            }
            _ => {
                return Err(Error::NotImplemented(format!(
                    "{}: concatenated pooling modes {modes:?} are not supported (one mode is)",
                    pool_file.display()
                )))
            }
        }
    } else {
        Pooling::Mean
    };
    let modules = dir.join("modules.json");
    let normalize = if modules.exists() {
        let v = json_file(&modules)?;
        v.as_array().is_some_and(|m| {
            m.iter().any(|e| {
                e.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.ends_with("Normalize"))
            })
        })
    } else {
        true
    };
    Ok((pooling, normalize))
}

/// Whether `dir` looks like a Hugging Face encoder folder (config.json + model.safetensors).
pub fn is_encoder_dir(dir: &Path) -> bool {
    dir.join("config.json").is_file() && dir.join("model.safetensors").is_file()
}

/// A loaded sentence encoder: call [`Encoder::encode`] with texts or [`Encoder::encode_ids`]
/// with token ids; programs are compiled per (batch, sequence-length) bucket on first use and
/// kept.
pub struct Encoder {
    /// The model's config.json.
    pub config: BertConfig,
    /// Token pooling (from 1_Pooling/config.json unless overridden).
    pub pooling: Pooling,
    /// Whether embeddings are L2-normalised in the program.
    pub normalize: bool,
    /// Longest accepted sequence (tokens, specials included).
    pub max_len: usize,
    weights: Weights,
    prefix: String,
    word_embeddings: Vec<f32>,
    tokenizer: Option<tokenizers::Tokenizer>,
    opts: CompileOptions,
    programs: HashMap<(usize, usize), Compiled>,
}

impl Encoder {
    /// Load `dir`; `pooling` / `normalize` override the sentence-transformers config. Weight
    /// names may carry a `bert.` prefix. Missing files, tensors or wrong shapes are errors
    /// naming the file and tensor.
    pub fn load(
        dir: &Path,
        pooling: Option<Pooling>,
        normalize: Option<bool>,
        opts: CompileOptions,
    ) -> Result<Encoder> {
        let config = BertConfig::from_file(&dir.join("config.json"))?;
        let weights = Weights::open(&dir.join("model.safetensors"))?;
        let prefix = if weights.has("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            ""
        }
        .to_string();
        for (name, shape) in expected_tensors(&config, &prefix) {
            let found = weights.shape(&name).map_err(|_| {
                weights.error(format!(
                    "tensor '{name}' is missing (expected shape {shape:?})"
                ))
            })?;
            if found != shape.as_slice() {
                return Err(weights.error(format!(
                    "tensor '{name}' has shape {found:?}, expected {shape:?}"
                )));
            }
        }
        let word_embeddings = weights.get(
            &format!("{prefix}embeddings.word_embeddings.weight"),
            &[config.vocab, config.hidden],
        )?;
        let (st_pooling, st_normalize) = sentence_config(dir)?;
        let mut max_len = config.max_positions;
        let st = dir.join("sentence_bert_config.json");
        if st.exists() {
            let m = json_opt_usize(&json_file(&st)?, "max_seq_length", max_len, &st)?;
            max_len = max_len.min(m);
        }
        let tok_file = dir.join("tokenizer.json");
        let tokenizer = if tok_file.exists() {
            Some(load_tokenizer(&tok_file, max_len)?)
        } else {
            None
        };
        Ok(Encoder {
            config,
            pooling: pooling.unwrap_or(st_pooling),
            normalize: normalize.unwrap_or(st_normalize),
            max_len,
            weights,
            prefix,
            word_embeddings,
            tokenizer,
            opts,
            programs: HashMap::new(),
        })
    }

    /// Token ids of each text (special tokens added, truncated to `max_len`, no padding).
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let Some(tok) = &self.tokenizer else {
            return Err(Error::value(
                "bert",
                "this model folder has no tokenizer.json; pass token ids instead of texts",
            ));
        };
        texts
            .iter()
            .map(|t| {
                tok.encode(*t, true)
                    .map(|e| e.get_ids().to_vec())
                    .map_err(|e| Error::value("tokenizer", format!("cannot encode {t:?}: {e}")))
            })
            .collect()
    }

    /// Embeddings ([D] each) of `texts`, run `batch_size` at a time (see [`Encoder::encode_ids`]).
    pub fn encode(&mut self, texts: &[&str], batch_size: usize) -> Result<Vec<Vec<f32>>> {
        let ids = self.tokenize(texts)?;
        self.encode_ids(&ids, batch_size)
    }

    /// Embeddings ([D] each, in input order) of token-id sequences (1..=max_len ids below the
    /// vocabulary size), run in the batches of [`plan_batches`] (`batch_size` 1 = one program
    /// call per sequence): each batch holds sequences of one length bucket, masked past their
    /// own length, and no padded rows. `batch_size` 0 is a value error.
    pub fn encode_ids(&mut self, ids: &[Vec<u32>], batch_size: usize) -> Result<Vec<Vec<f32>>> {
        if batch_size == 0 {
            return Err(Error::value("bert", "batch_size must be at least 1, got 0"));
        }
        let buckets = ids
            .iter()
            .map(|q| self.bucket(q.len()))
            .collect::<Result<Vec<_>>>()?;
        let mut out = vec![Vec::new(); ids.len()];
        for batch in plan_batches(&buckets, batch_size) {
            let seqs: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
            for (&i, e) in batch
                .iter()
                .zip(self.encode_batch(&seqs, buckets[batch[0]])?)
            {
                out[i] = e;
            }
        }
        Ok(out)
    }

    /// Which executor runs the programs (compiles the smallest bucket if none exists yet).
    pub fn device(&mut self) -> Result<&'static str> {
        let s = self.bucket(1)?;
        Ok(self.program(1, s)?.device())
    }

    /// The bucket length for `n` tokens: the next multiple of [`BUCKET_STEP`], capped at
    /// `max_len` (finer than powers of two: a 70-token batch pads to 80, not 128).
    pub fn bucket(&self, n: usize) -> Result<usize> {
        if n == 0 || n > self.max_len {
            return Err(Error::shape(
                "bert",
                format!("a sequence has {n} tokens; expected 1..={}", self.max_len),
            ));
        }
        Ok(n.div_ceil(BUCKET_STEP)
            .saturating_mul(BUCKET_STEP)
            .min(self.max_len))
    }

    /// Embeddings of `seqs` (each at most `s` tokens, `s` their length bucket from
    /// [`Encoder::bucket`]) through the (`seqs.len()`, `s`) program.
    fn encode_batch(&mut self, seqs: &[&[u32]], s: usize) -> Result<Vec<Vec<f32>>> {
        let b = seqs.len();
        let d = self.config.hidden;
        let mut tokens = vec![0f32; b * s * d];
        let mut mask = vec![CAUSAL_MASK; b * s];
        let mut pool = vec![0f32; b * s];
        for (r, seq) in seqs.iter().enumerate() {
            for (i, &id) in seq.iter().enumerate() {
                let id = id as usize;
                if id >= self.config.vocab {
                    return Err(Error::value(
                        "bert",
                        format!(
                            "token id {id} at position {i} is outside the vocabulary (size {})",
                            self.config.vocab
                        ),
                    ));
                }
                let row = (r * s + i) * d;
                tokens[row..row + d].copy_from_slice(&self.word_embeddings[id * d..(id + 1) * d]);
            }
            let n = seq.len();
            mask[r * s..r * s + n].fill(0.0);
            match self.pooling {
                Pooling::Mean => pool[r * s..r * s + n].fill(1.0 / n as f32),
                Pooling::Cls => pool[r * s] = 1.0,
            }
        }
        let out = self.program(b, s)?.run(&[
            PortData::F32(&tokens),
            PortData::F32(&mask),
            PortData::F32(&pool),
        ])?;
        let flat = out.into_iter().next().unwrap_or_default();
        Ok(flat.chunks(d).map(<[f32]>::to_vec).collect())
    }

    /// The compiled program of bucket (`b` sequences, length `s`), built on first use.
    fn program(&mut self, b: usize, s: usize) -> Result<&mut Compiled> {
        if !self.programs.contains_key(&(b, s)) {
            let out = self.graph(b, s)?;
            let mut opts = self.opts.clone();
            let name = if b == 1 {
                format!("seq{s}")
            } else {
                format!("b{b}_seq{s}")
            };
            opts.build_dir = opts.build_dir.map(|d: PathBuf| d.join(name));
            let c = compile(&[(Some("embedding".into()), out)], &opts)?;
            self.programs.insert((b, s), c);
        }
        Ok(self.programs.get_mut(&(b, s)).expect("inserted above"))
    }

    /// The bucket graph for `b` sequences of length `s`: inputs `tokens` [b·S, D], `mask`
    /// (0 or −1e4 per key; [1, 1, S] for one sequence, else [b, 1, 1, S]), `pool` (pooling
    /// weights; [1, S], else [b, 1, S]); output [b, D].
    fn graph(&self, b: usize, s: usize) -> Result<Tensor> {
        let c = &self.config;
        let (d, w, p) = (c.hidden, &self.weights, self.prefix.as_str());
        let batched = |shape: &[usize]| -> Vec<usize> {
            if b == 1 {
                shape.to_vec()
            } else {
                [b].iter().chain(shape).copied().collect()
            }
        };
        let tokens = input_port(&[b * s, d], DType::Fp16, Some("tokens"))?;
        let mask = input_port(&batched(&[1, 1, s]), DType::Fp16, Some("mask"))?;
        let pool = input_port(&batched(&[1, s]), DType::Fp16, Some("pool"))?;
        let pos = w.get(
            &format!("{p}embeddings.position_embeddings.weight"),
            &[c.max_positions, d],
        )?;
        let typ = w.get(
            &format!("{p}embeddings.token_type_embeddings.weight"),
            &[c.type_vocab, d],
        )?;
        let added: Vec<f32> = (0..s * d).map(|i| pos[i] + typ[i % d]).collect();
        let added = crate::constant("bert", crate::ops::io::HostArray::f32(&[s, d], &added))?;
        let mut x = if b == 1 {
            tokens.add(&added)?
        } else {
            let rows = [(b * s) as i64, d as i64];
            tokens
                .reshape(&[b as i64, s as i64, d as i64])?
                .add(&added)?
                .reshape(&rows)?
        };
        x = self.layer_norm(&x, &format!("{p}embeddings.LayerNorm"))?;
        for l in 0..c.layers {
            x = self.layer(&x, &mask, &format!("{p}encoder.layer.{l}"), b)?;
        }
        let pooled = if b == 1 {
            pool.matmul(&x)?
        } else {
            pool.matmul(&x.reshape(&[b as i64, s as i64, d as i64])?)?
                .reshape(&[b as i64, d as i64])?
        };
        if self.normalize {
            pooled.l2_norm(-1, 1e-6)
        } else {
            Ok(pooled)
        }
    }

    /// LayerNorm `{name}.weight` / `{name}.bias` over the last axis.
    fn layer_norm(&self, x: &Tensor, name: &str) -> Result<Tensor> {
        layer_norm(
            &self.weights,
            x,
            name,
            self.config.hidden,
            self.config.layer_norm_eps,
        )
    }

    /// One post-norm encoder layer on x [b·S, D] (`b` sequences).
    fn layer(&self, x: &Tensor, mask: &Tensor, name: &str, b: usize) -> Result<Tensor> {
        let c = &self.config;
        let a = self_attention(
            &self.weights,
            x,
            &format!("{name}.attention.self"),
            &format!("{name}.attention.output.dense"),
            c.heads,
            Some(mask),
            b,
        )?;
        let x = self.layer_norm(&x.add(&a)?, &format!("{name}.attention.output.LayerNorm"))?;
        let m = gelu_mlp(&self.weights, &x, name, c.hidden, c.intermediate)?;
        self.layer_norm(&x.add(&m)?, &format!("{name}.output.LayerNorm"))
    }
}

/// Batches of sequence indices for sequences of bucket lengths `buckets`, longest first:
/// one bucket per batch, power-of-two batch sizes of at most `batch_size` and
/// [`TOKENS_PER_CALL`] / bucket (at least 1); a bucket's remainder splits into its binary
/// parts (7 = 4 + 2 + 1), so no batch is padded with empty rows.
pub fn plan_batches(buckets: &[usize], batch_size: usize) -> Vec<Vec<usize>> {
    let floor_pow2 = |n: usize| 1usize << (usize::BITS - 1 - n.max(1).leading_zeros());
    let mut order: Vec<usize> = (0..buckets.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(buckets[i]));
    let mut out = Vec::new();
    for group in order.chunk_by(|&a, &b| buckets[a] == buckets[b]) {
        let cap = floor_pow2(batch_size.min(TOKENS_PER_CALL / buckets[group[0]].max(1)));
        let mut rest = group;
        while !rest.is_empty() {
            let (batch, tail) = rest.split_at(floor_pow2(rest.len()).min(cap));
            out.push(batch.to_vec());
            rest = tail;
        }
    }
    out
}

/// Every tensor the encoder reads, with its shape (checked when loading).
pub fn expected_tensors(c: &BertConfig, prefix: &str) -> Vec<(String, Vec<usize>)> {
    let (d, f) = (c.hidden, c.intermediate);
    let mut v = vec![
        (
            format!("{prefix}embeddings.word_embeddings.weight"),
            vec![c.vocab, d],
        ),
        (
            format!("{prefix}embeddings.position_embeddings.weight"),
            vec![c.max_positions, d],
        ),
        (
            format!("{prefix}embeddings.token_type_embeddings.weight"),
            vec![c.type_vocab, d],
        ),
        (format!("{prefix}embeddings.LayerNorm.weight"), vec![d]),
        (format!("{prefix}embeddings.LayerNorm.bias"), vec![d]),
    ];
    for l in 0..c.layers {
        let p = format!("{prefix}encoder.layer.{l}");
        for (name, out, inp) in [
            ("attention.self.query", d, d),
            ("attention.self.key", d, d),
            ("attention.self.value", d, d),
            ("attention.output.dense", d, d),
            ("intermediate.dense", f, d),
            ("output.dense", d, f),
        ] {
            v.push((format!("{p}.{name}.weight"), vec![out, inp]));
            v.push((format!("{p}.{name}.bias"), vec![out]));
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            v.push((format!("{p}.{name}.weight"), vec![d]));
            v.push((format!("{p}.{name}.bias"), vec![d]));
        }
    }
    v
}
