//! The decoder runtime: chunk programs per prompt-length bucket for prefill, one resident-KV
//! step program per chunk for decode, host embedding lookup, RoPE tables and masks, and the
//! generation loop with sampling (the text side is in `text.rs`).

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use half::f16;

use crate::compile::{CompileOptions, Compiled};
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::graph::build::attention::CAUSAL_MASK;
use crate::targets::{self, Limit};

use super::blocks::{chunks, Builder, Chunk, Mode};
use super::config::LlmConfig;
use super::progress::{LoadProgress, ProgressFn};
use super::sample::{SampleOptions, Sampler};
use super::source::{Role, Source};
use super::tokenizer::{self, TextInfo};

/// Fp16 weight bytes one program may hold (the reference design's per-program budget).
pub const PROGRAM_WEIGHT_BUDGET: u64 = 1_600_000_000;
/// The smallest prefill bucket; buckets double up to max_context.
const MIN_BUCKET: usize = 16;
/// max_context when the caller gives none and the model allows more.
pub const DEFAULT_MAX_CONTEXT: usize = 1024;

/// A loaded decoder ready to generate.
pub struct Llm {
    pub config: LlmConfig,
    /// Tokens the decode programs hold (prompt + generated).
    pub max_context: usize,
    /// Tokens in the KV cache since the last prefill.
    pub position: usize,
    pub(super) src: Source,
    opts: CompileOptions,
    chunks: Vec<Chunk>,
    tile: usize,
    /// Hugging Face folders: the embedding table (GGUF rows come from the memory map).
    embed: Option<Vec<f16>>,
    embed_scale: f32,
    /// Families without RoPE (gpt2): the learned position embeddings [max_context, D].
    pos_embed: Option<Vec<f16>>,
    pub(super) decode: Vec<Compiled>,
    prefill: HashMap<usize, Vec<Compiled>>,
    /// KV reuse (kv_reuse.rs): programs running rows after the resident ones, per bucket.
    pub(super) extend: HashMap<usize, Vec<Compiled>>,
    pub(super) tokenizer: Option<tokenizers::Tokenizer>,
    pub(super) info: TextInfo,
    /// KV reuse (kv_reuse.rs): the ids whose keys/values the decode caches hold, in order.
    pub(super) resident: Vec<u32>,
}

/// Generation settings: length, sampling and stop conditions.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_new_tokens: usize,
    pub sample: SampleOptions,
    /// Stop after the EOS token (it is not part of the text).
    pub stop_at_eos: bool,
    /// Stop when the text contains one of these (the text is cut before it).
    pub stop: Vec<String>,
    /// Keep the resident KV when the prompt extends the tokens it holds (see kv_reuse.rs).
    pub reuse_kv: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_new_tokens: 64,
            sample: SampleOptions::default(),
            stop_at_eos: true,
            stop: Vec::new(),
            reuse_kv: false,
        }
    }
}

/// An in-progress generation (see [`Llm::start`] / [`Llm::advance`]).
pub struct Session {
    sampler: Sampler,
    logits: Vec<f32>,
    max_new: usize,
    eos: Option<u32>,
    done: bool,
    /// Tokens produced so far.
    pub tokens: Vec<u32>,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Prompt tokens actually run (fewer than prompt_tokens when the KV was reused).
    pub prefilled_tokens: usize,
    /// Seconds spent in prefill and in decode steps.
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
}

/// The input port called `name`, if the program has one.
pub(super) fn port(c: &Compiled, name: &str) -> Option<usize> {
    c.inputs().iter().position(|p| p.name == name)
}

/// The output port called `name`, if the program has one.
pub(super) fn out_port(c: &Compiled, name: &str) -> Option<usize> {
    c.outputs().iter().position(|p| p.name == name)
}

impl Llm {
    /// Load a GGUF file or a Hugging Face folder (config.json, safetensors, tokenizer.json) and
    /// compile the decode programs for `max_context` tokens (default min(trained context,
    /// 1024)); `opts` carries device, compress, target, ... Unknown architectures, bad files
    /// and missing tensors are errors naming the file, key or tensor.
    pub fn load(path: &Path, max_context: Option<usize>, opts: &CompileOptions) -> Result<Llm> {
        Self::load_with_progress(path, max_context, opts, None)
    }

    /// [`Llm::load`], reporting (weight bytes made, total) to `progress` as the decode
    /// programs are built (see `progress.rs`).
    pub fn load_with_progress(
        path: &Path,
        max_context: Option<usize>,
        opts: &CompileOptions,
        progress: Option<ProgressFn>,
    ) -> Result<Llm> {
        let (config, src, tok) = if path.is_dir() {
            let (cfg, tied) = LlmConfig::from_hf(&path.join("config.json"))?;
            let src = Source::hf(path, cfg.family, tied)?;
            let tok = if path.join("tokenizer.json").exists() {
                Some(tokenizer::from_folder(path)?)
            } else {
                None
            };
            (cfg, src, tok)
        } else {
            let file = aneforge_gguf::GgufFile::open(path).map_err(super::config::gguf_error)?;
            let cfg = LlmConfig::from_gguf(&file)?;
            let has_tokenizer = file.metadata().get("tokenizer.ggml.model").is_some();
            let tok = has_tokenizer
                .then(|| tokenizer::from_gguf(&file))
                .transpose()?;
            (cfg.clone(), Source::gguf(file, cfg.family), tok)
        };
        let mut src = src;
        src.hf_fp16 &= opts.compress.is_none();
        let m = max_context.unwrap_or(config.max_positions.min(DEFAULT_MAX_CONTEXT));
        if m == 0 || m > config.max_positions {
            return Err(Error::value(
                "load_llm",
                format!("max_context {m} must be in 1..={}", config.max_positions),
            ));
        }
        let family = targets::compile_target(opts.target.as_deref())?
            .map_or(targets::Family::A13, |t| t.family);
        let embed = match src.gguf_file() {
            Some(_) => None,
            None => Some(src.get(Role::Embed, &[config.vocab, config.width], &config)?),
        };
        let scale = if config.family.scales_embeddings() {
            (config.width as f32).sqrt()
        } else {
            1.0
        };
        let pos_embed = match config.family.rope() {
            true => None,
            false => {
                let d = config.width;
                let p = src.get(Role::PosEmbed, &[config.max_positions, d], &config)?;
                Some(p[..m * d].iter().map(|&v| f16::from_f32(v)).collect())
            }
        };
        let (tokenizer, info) = match tok {
            Some((t, i)) => (Some(t), i),
            None => (None, TextInfo::default()),
        };
        let mut llm = Llm {
            chunks: chunks(&config, PROGRAM_WEIGHT_BUDGET),
            tile: targets::limit(Limit::MaxTensorDim, family),
            embed: embed.map(|e| e.iter().map(|&v| f16::from_f32(v * scale)).collect()),
            embed_scale: scale,
            pos_embed,
            config,
            max_context: m,
            position: 0,
            src,
            opts: opts.clone(),
            decode: Vec::new(),
            prefill: HashMap::new(),
            extend: HashMap::new(),
            tokenizer,
            info,
            resident: Vec::new(),
        };
        let counter = progress.map(|sink| LoadProgress::new(&llm.config, sink));
        llm.decode = llm.compile_mode(Mode::Decode { context: m }, counter.as_ref())?;
        llm.src.release_pages();
        Ok(llm)
    }

    /// Compile one program per chunk for `mode` (decode caches aliased to their outputs),
    /// counting the weights on `progress` when given.
    pub(super) fn compile_mode(
        &self,
        mode: Mode,
        progress: Option<&LoadProgress>,
    ) -> Result<Vec<Compiled>> {
        let b = Builder {
            cfg: &self.config,
            src: &self.src,
            progress,
        };
        self.chunks
            .iter()
            .map(|chunk| {
                let mut c = super::weights::compile_program(
                    &b.program(chunk, mode, self.tile)?,
                    &self.opts,
                )?;
                if let Mode::Decode { .. } = mode {
                    for l in chunk.layers.clone() {
                        for kv in ["k", "v"] {
                            c.loaded
                                .alias(&format!("{kv}{l}_next"), &format!("{kv}{l}"))?;
                        }
                    }
                }
                Ok(c)
            })
            .collect()
    }

    /// The executor running the decode programs ("reference" or "ane").
    pub fn device(&self) -> &'static str {
        self.decode.first().map_or("reference", Compiled::device)
    }

    /// The embedding rows of `ids` at positions `first`.. (plus their position embeddings
    /// without RoPE), zero-padded to `rows` rows ([rows, D], host lookup).
    pub(super) fn embed_rows(&self, ids: &[u32], first: usize, rows: usize) -> Result<Vec<f32>> {
        let d = self.config.width;
        let mut x = vec![0f32; rows * d];
        for (i, &id) in ids.iter().enumerate() {
            let id = id as usize;
            if id >= self.config.vocab {
                return Err(Error::value(
                    "llm",
                    format!(
                        "token id {id} is outside the vocabulary (size {})",
                        self.config.vocab
                    ),
                ));
            }
            let row = &mut x[i * d..(i + 1) * d];
            match &self.embed {
                Some(e) => (row.iter_mut().zip(&e[id * d..(id + 1) * d]))
                    .for_each(|(o, v)| *o = v.to_f32()),
                None => {
                    self.src.gguf_embedding_row(id, row)?;
                    (row.iter_mut())
                        .for_each(|v| *v = f16::from_f32(*v * self.embed_scale).to_f32());
                }
            }
            if let Some(p) = &self.pos_embed {
                let at = p.get((first + i) * d..(first + i + 1) * d).ok_or_else(|| {
                    Error::value(
                        "llm",
                        format!("position {} is beyond max_context", first + i),
                    )
                })?;
                row.iter_mut().zip(at).for_each(|(o, v)| *o += v.to_f32());
            }
        }
        Ok(x)
    }

    /// RoPE tables cos, sin [rows, dh] for positions first.. (rotate-half layout).
    pub(super) fn rope_rows(&self, first: usize, rows: usize) -> (Vec<f32>, Vec<f32>) {
        let dh = self.config.head_dim;
        let half = dh / 2;
        let inv_freq = self.config.rope_inv_freq();
        let mut cos = vec![0f32; rows * dh];
        let mut sin = vec![0f32; rows * dh];
        for r in 0..rows {
            for i in 0..dh {
                let angle = (first + r) as f64 * inv_freq[i % half];
                cos[r * dh + i] = angle.cos() as f32;
                sin[r * dh + i] = angle.sin() as f32;
            }
        }
        (cos, sin)
    }

    /// Additive mask [G·rows, keys]: query row r at position first + r sees key t when
    /// t ≤ first + r (and within the sliding window).
    pub(super) fn mask(&self, first: usize, rows: usize, keys: usize) -> Vec<f32> {
        let window = self.config.sliding_window.unwrap_or(usize::MAX);
        let row: Vec<Vec<f32>> = (0..rows)
            .map(|r| {
                let p = first + r;
                (0..keys)
                    .map(|t| {
                        if t <= p && p - t < window {
                            0.0
                        } else {
                            CAUSAL_MASK
                        }
                    })
                    .collect()
            })
            .collect();
        (0..self.config.group())
            .flat_map(|_| row.iter().flatten().copied())
            .collect()
    }

    /// Run `programs` in order on x, feeding the named inputs each one has; returns the
    /// logits [vocab] of the head chunk.
    pub(super) fn run_chunks(
        programs: &mut [Compiled],
        mut x: Vec<f32>,
        feeds: &[(&str, &[f32])],
    ) -> Result<Vec<f32>> {
        let mut logits = Vec::new();
        for c in programs.iter_mut() {
            if let Some(i) = port(c, "x") {
                c.loaded.set_input(i, PortData::F32(&x))?;
            }
            for (name, data) in feeds {
                if let Some(i) = port(c, name) {
                    c.loaded.set_input(i, PortData::F32(data))?;
                }
            }
            c.loaded.execute()?;
            if let Some(i) = out_port(c, "x_out") {
                c.loaded.read_output(i, &mut x)?;
            }
            let mut t = 0;
            while let Some(i) = out_port(c, &format!("logits{t}")) {
                let mut tile = vec![0f32; c.outputs()[i].shape.iter().product()];
                c.loaded.read_output(i, &mut tile)?;
                logits.extend(tile);
                t += 1;
            }
        }
        Ok(logits)
    }

    /// The prefill bucket for a prompt of `n` tokens (a power of two ≥ 16, at most max_context).
    pub(super) fn bucket(&self, n: usize) -> usize {
        n.max(MIN_BUCKET).next_power_of_two().min(self.max_context)
    }

    /// Run the prompt `ids` from position 0 through the prefill programs of its bucket, load the
    /// keys/values into the decode caches and return the last position's logits [vocab].
    pub fn prefill(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        let n = ids.len();
        if n == 0 || n > self.max_context {
            return Err(Error::value(
                "llm",
                format!(
                    "a prompt needs 1..={} tokens (max_context), got {n}",
                    self.max_context
                ),
            ));
        }
        let s = self.bucket(n);
        if !self.prefill.contains_key(&s) {
            let programs = self.compile_mode(Mode::Prefill { seq: s }, None)?;
            self.prefill.insert(s, programs);
            self.src.release_pages();
        }
        let x = self.embed_rows(ids, 0, s)?;
        let (cos, sin) = self.rope_rows(0, s);
        let mask = self.mask(0, s, s);
        let last: Vec<f32> = (0..s).map(|i| f32::from(u8::from(i == n - 1))).collect();
        let feeds = [
            ("cos", &cos[..]),
            ("sin", &sin[..]),
            ("mask", &mask[..]),
            ("last", &last[..]),
        ];
        let programs = self
            .prefill
            .get_mut(&s)
            .ok_or_else(|| Error::value("llm", "bucket"))?;
        let logits = Self::run_chunks(programs, x, &feeds)?;
        let (kvh, dh, m) = (self.config.kv_heads, self.config.head_dim, self.max_context);
        let mut rows = vec![0f32; kvh * s * dh];
        let mut cache = vec![0f32; kvh * m * dh];
        for (pre, dec) in programs.iter().zip(self.decode.iter_mut()) {
            for l in dec_layers(dec) {
                for kv in ["k", "v"] {
                    let o = out_port(pre, &format!("{kv}{l}_new")).ok_or_else(|| missing(kv, l))?;
                    pre.loaded.read_output(o, &mut rows)?;
                    to_cache(&rows, &mut cache, (kvh, s, dh, m), n.min(m), kv == "k");
                    let i = port(dec, &format!("{kv}{l}")).ok_or_else(|| missing(kv, l))?;
                    dec.loaded.set_input(i, PortData::F32(&cache))?;
                }
            }
        }
        self.position = n;
        self.resident = ids.to_vec();
        Ok(logits)
    }

    /// Feed one token at the next position through the decode programs; returns its logits.
    pub fn step(&mut self, id: u32) -> Result<Vec<f32>> {
        let (t, m) = (self.position, self.max_context);
        if t >= m {
            return Err(Error::value(
                "llm",
                format!(
                    "the context is full ({m} tokens, max_context); load with a larger max_context"
                ),
            ));
        }
        let x = self.embed_rows(&[id], t, 1)?;
        let (cos, sin) = self.rope_rows(t, 1);
        let mask = self.mask(t, 1, m);
        let pos: Vec<f32> = (0..m).map(|i| f32::from(u8::from(i == t))).collect();
        let feeds = [
            ("cos", &cos[..]),
            ("sin", &sin[..]),
            ("mask", &mask[..]),
            ("pos", &pos[..]),
        ];
        let logits = Self::run_chunks(&mut self.decode, x, &feeds)?;
        self.position += 1;
        self.resident.push(id);
        Ok(logits)
    }

    /// Next-token logits [vocab] after the prompt `ids` (prefill; the cache then holds `ids`).
    pub fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        self.prefill(ids)
    }

    /// Prefill `ids` and prepare to generate up to `opts.max_new_tokens`; the prompt plus the new
    /// tokens must fit max_context (checked before anything runs); bad sampling parameters are
    /// Value errors naming the field.
    pub fn start(&mut self, ids: &[u32], opts: &GenerateOptions) -> Result<Session> {
        opts.sample.validate()?;
        if ids.len() + opts.max_new_tokens > self.max_context {
            return Err(Error::value(
                "generate",
                format!(
                    "prompt of {} tokens + max_new_tokens {} exceeds max_context {}",
                    ids.len(),
                    opts.max_new_tokens,
                    self.max_context
                ),
            ));
        }
        let t0 = Instant::now();
        let (logits, prefilled_tokens) = match opts.reuse_kv {
            true => self.extend_or_prefill(ids)?,
            false => (self.prefill(ids)?, ids.len()),
        };
        Ok(Session {
            sampler: Sampler::new(opts.sample.clone(), ids)?,
            logits,
            max_new: opts.max_new_tokens,
            eos: if opts.stop_at_eos {
                self.info.eos
            } else {
                None
            },
            done: false,
            tokens: Vec::new(),
            prompt_tokens: ids.len(),
            prefilled_tokens,
            prefill_seconds: t0.elapsed().as_secs_f64(),
            decode_seconds: 0.0,
        })
    }

    /// The next token of `session` (None when finished: max_new_tokens reached or EOS produced).
    pub fn advance(&mut self, session: &mut Session) -> Result<Option<u32>> {
        if session.done || session.tokens.len() >= session.max_new {
            return Ok(None);
        }
        let next = session.sampler.next(&session.logits)?;
        session.tokens.push(next);
        if Some(next) == session.eos {
            session.done = true;
            return Ok(None);
        }
        if session.tokens.len() < session.max_new {
            let t0 = Instant::now();
            session.logits = self.step(next)?;
            session.decode_seconds += t0.elapsed().as_secs_f64();
        }
        Ok(Some(next))
    }

    /// Generate from the prompt `ids`; returns the finished session (tokens, timings).
    pub fn generate(&mut self, ids: &[u32], opts: &GenerateOptions) -> Result<Session> {
        let mut s = self.start(ids, opts)?;
        while self.advance(&mut s)?.is_some() {}
        Ok(s)
    }
}

/// Rows 0..n of the prefill keys/values `rows` [H, S, dh] into a decode cache, zero beyond:
/// `cache` is [H, dh, M] when `transposed` (keys), else [H, M, dh].
fn to_cache(
    rows: &[f32],
    cache: &mut [f32],
    (h, s, dh, m): (usize, usize, usize, usize),
    n: usize,
    transposed: bool,
) {
    cache.iter_mut().for_each(|v| *v = 0.0);
    for (src, dst) in rows
        .chunks_exact(s * dh)
        .zip(cache.chunks_exact_mut(m * dh))
        .take(h)
    {
        for (t, row) in src.chunks_exact(dh).take(n).enumerate() {
            for (d, &v) in row.iter().enumerate() {
                dst[if transposed { d * m + t } else { t * dh + d }] = v;
            }
        }
    }
}

/// The layers whose caches decode program `c` holds (from its `k{l}` input ports).
pub(super) fn dec_layers(c: &Compiled) -> Vec<usize> {
    c.inputs()
        .iter()
        .filter_map(|p| p.name.strip_prefix('k')?.parse().ok())
        .collect()
}

/// A Runtime error for a missing cache port (a program/chunk mismatch).
pub(super) fn missing(kv: &str, l: usize) -> Error {
    Error::Runtime {
        op: "llm".into(),
        msg: format!("no port for the {kv} cache of layer {l}"),
    }
}
