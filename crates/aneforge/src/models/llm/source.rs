//! Where a decoder's weights come from: a GGUF file (dequantized from the memory map) or a
//! Hugging Face folder (one safetensors file or shards with an index). Every tensor is handed
//! out as f32 in the Hugging Face orientation ([out, in] for projections); GPT-2's fused QKV
//! and its Conv1D ([in, out]) weights are split and transposed here, so the graph builders see
//! the same roles for every family.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aneforge_gguf::GgufFile;
use half::f16;
use serde_json::Value;

use crate::compress::CompressionEntry;
use crate::error::{Error, Result};
use crate::models::json::json_file;
use crate::models::weights::Weights;

use super::config::{Family, LlmConfig};
use super::weights::{self, Request, Weight};

/// One weight of the decoder; `usize` fields are layer indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Embed,
    /// Learned absolute position embeddings [positions, width] (gpt2).
    PosEmbed,
    AttnNorm(usize),
    AttnNormBias(usize),
    Q(usize),
    K(usize),
    V(usize),
    QBias(usize),
    KBias(usize),
    VBias(usize),
    QNorm(usize),
    KNorm(usize),
    O(usize),
    OBias(usize),
    FfnNorm(usize),
    FfnNormBias(usize),
    Gate(usize),
    Up(usize),
    UpBias(usize),
    Down(usize),
    DownBias(usize),
    FinalNorm,
    FinalNormBias,
    LmHead,
}

impl Role {
    /// The tensor name in GGUF (llama.cpp) spelling.
    fn gguf_name(self) -> String {
        let blk = |l: usize, s: &str| format!("blk.{l}.{s}");
        match self {
            Role::Embed => "token_embd.weight".into(),
            Role::PosEmbed => "position_embd.weight".into(),
            Role::AttnNorm(l) => blk(l, "attn_norm.weight"),
            Role::AttnNormBias(l) => blk(l, "attn_norm.bias"),
            Role::Q(l) => blk(l, "attn_q.weight"),
            Role::K(l) => blk(l, "attn_k.weight"),
            Role::V(l) => blk(l, "attn_v.weight"),
            Role::QBias(l) => blk(l, "attn_q.bias"),
            Role::KBias(l) => blk(l, "attn_k.bias"),
            Role::VBias(l) => blk(l, "attn_v.bias"),
            Role::QNorm(l) => blk(l, "attn_q_norm.weight"),
            Role::KNorm(l) => blk(l, "attn_k_norm.weight"),
            Role::O(l) => blk(l, "attn_output.weight"),
            Role::OBias(l) => blk(l, "attn_output.bias"),
            Role::FfnNorm(l) => blk(l, "ffn_norm.weight"),
            Role::FfnNormBias(l) => blk(l, "ffn_norm.bias"),
            Role::Gate(l) => blk(l, "ffn_gate.weight"),
            Role::Up(l) => blk(l, "ffn_up.weight"),
            Role::UpBias(l) => blk(l, "ffn_up.bias"),
            Role::Down(l) => blk(l, "ffn_down.weight"),
            Role::DownBias(l) => blk(l, "ffn_down.bias"),
            Role::FinalNorm => "output_norm.weight".into(),
            Role::FinalNormBias => "output_norm.bias".into(),
            Role::LmHead => "output.weight".into(),
        }
    }

    /// The tensor name in Hugging Face (transformers) spelling.
    fn hf_name(self) -> String {
        let layer = |l: usize, s: &str| format!("model.layers.{l}.{s}");
        match self {
            Role::Embed => "model.embed_tokens.weight".into(),
            Role::PosEmbed => "model.embed_positions.weight".into(),
            Role::AttnNorm(l) => layer(l, "input_layernorm.weight"),
            Role::AttnNormBias(l) => layer(l, "input_layernorm.bias"),
            Role::Q(l) => layer(l, "self_attn.q_proj.weight"),
            Role::K(l) => layer(l, "self_attn.k_proj.weight"),
            Role::V(l) => layer(l, "self_attn.v_proj.weight"),
            Role::QBias(l) => layer(l, "self_attn.q_proj.bias"),
            Role::KBias(l) => layer(l, "self_attn.k_proj.bias"),
            Role::VBias(l) => layer(l, "self_attn.v_proj.bias"),
            Role::QNorm(l) => layer(l, "self_attn.q_norm.weight"),
            Role::KNorm(l) => layer(l, "self_attn.k_norm.weight"),
            Role::O(l) => layer(l, "self_attn.o_proj.weight"),
            Role::OBias(l) => layer(l, "self_attn.o_proj.bias"),
            Role::FfnNorm(l) => layer(l, "post_attention_layernorm.weight"),
            Role::FfnNormBias(l) => layer(l, "post_attention_layernorm.bias"),
            Role::Gate(l) => layer(l, "mlp.gate_proj.weight"),
            Role::Up(l) => layer(l, "mlp.up_proj.weight"),
            Role::UpBias(l) => layer(l, "mlp.up_proj.bias"),
            Role::Down(l) => layer(l, "mlp.down_proj.weight"),
            Role::DownBias(l) => layer(l, "mlp.down_proj.bias"),
            Role::FinalNorm => "model.norm.weight".into(),
            Role::FinalNormBias => "model.norm.bias".into(),
            Role::LmHead => "lm_head.weight".into(),
        }
    }

    /// Where GPT-2 stores the role: Hugging Face names (after `prefix`, `transformer.` or
    /// none; Conv1D weights [in, out]) or llama.cpp's (`gguf`); Q/K/V are thirds of the fused
    /// `c_attn` / `attn_qkv` tensors.
    fn gpt2_stored(self, gguf: bool, prefix: &str) -> Stored {
        let qkv = |l: usize, part, bias: bool| Stored {
            name: match (gguf, bias) {
                (true, false) => format!("blk.{l}.attn_qkv.weight"),
                (true, true) => format!("blk.{l}.attn_qkv.bias"),
                (false, false) => format!("{prefix}h.{l}.attn.c_attn.weight"),
                (false, true) => format!("{prefix}h.{l}.attn.c_attn.bias"),
            },
            part,
            parts: 3,
            conv1d: !gguf && !bias,
        };
        match self {
            Role::Q(l) => return qkv(l, 0, false),
            Role::K(l) => return qkv(l, 1, false),
            Role::V(l) => return qkv(l, 2, false),
            Role::QBias(l) => return qkv(l, 0, true),
            Role::KBias(l) => return qkv(l, 1, true),
            Role::VBias(l) => return qkv(l, 2, true),
            _ if gguf => return Stored::whole(self.gguf_name(), false),
            _ => {}
        }
        let h = |l: usize, s: &str| format!("{prefix}h.{l}.{s}");
        let (name, conv1d) = match self {
            Role::Embed => (format!("{prefix}wte.weight"), false),
            Role::PosEmbed => (format!("{prefix}wpe.weight"), false),
            Role::AttnNorm(l) => (h(l, "ln_1.weight"), false),
            Role::AttnNormBias(l) => (h(l, "ln_1.bias"), false),
            Role::O(l) => (h(l, "attn.c_proj.weight"), true),
            Role::OBias(l) => (h(l, "attn.c_proj.bias"), false),
            Role::FfnNorm(l) => (h(l, "ln_2.weight"), false),
            Role::FfnNormBias(l) => (h(l, "ln_2.bias"), false),
            Role::Up(l) => (h(l, "mlp.c_fc.weight"), true),
            Role::UpBias(l) => (h(l, "mlp.c_fc.bias"), false),
            Role::Down(l) => (h(l, "mlp.c_proj.weight"), true),
            Role::DownBias(l) => (h(l, "mlp.c_proj.bias"), false),
            Role::FinalNorm => (format!("{prefix}ln_f.weight"), false),
            Role::FinalNormBias => (format!("{prefix}ln_f.bias"), false),
            // lm_head (untied checkpoints) and the roles GPT-2 has no use for keep llama names.
            _ => (self.hf_name(), false),
        };
        Stored::whole(name, conv1d)
    }

    /// The bias paired with a norm or projection weight role (None for the others).
    pub fn bias(self) -> Option<Role> {
        match self {
            Role::AttnNorm(l) => Some(Role::AttnNormBias(l)),
            Role::FfnNorm(l) => Some(Role::FfnNormBias(l)),
            Role::FinalNorm => Some(Role::FinalNormBias),
            Role::Q(l) => Some(Role::QBias(l)),
            Role::K(l) => Some(Role::KBias(l)),
            Role::V(l) => Some(Role::VBias(l)),
            Role::O(l) => Some(Role::OBias(l)),
            Role::Up(l) => Some(Role::UpBias(l)),
            Role::Down(l) => Some(Role::DownBias(l)),
            _ => None,
        }
    }

    /// Whether the role is an RMSNorm weight (Gemma's HF checkpoints store w for (1 + w)).
    fn is_norm(self) -> bool {
        matches!(
            self,
            Role::AttnNorm(_)
                | Role::FfnNorm(_)
                | Role::QNorm(_)
                | Role::KNorm(_)
                | Role::FinalNorm
        )
    }
}

/// A Hugging Face folder's safetensors files and which file holds each tensor.
struct HfWeights {
    files: Vec<Weights>,
    by_name: HashMap<String, usize>,
    /// GPT-2: `transformer.` when the names carry it (GPT2LMHeadModel state dicts), else empty.
    prefix: &'static str,
}

/// Where a role's values are stored: tensor `name`, of which the role is row block `part` of
/// `parts` equal ones (GPT-2's fused QKV: 3), stored [in, out] when `conv1d` (Hugging Face
/// GPT-2's Conv1D) rather than [out, in].
struct Stored {
    name: String,
    part: usize,
    parts: usize,
    conv1d: bool,
}

impl Stored {
    /// A tensor that is the role itself.
    fn whole(name: String, conv1d: bool) -> Stored {
        Stored {
            name,
            part: 0,
            parts: 1,
            conv1d,
        }
    }

    /// The shape of the stored tensor when the role is `shape` ([out, ...] orientation).
    fn full_shape(&self, shape: &[usize]) -> Vec<usize> {
        let mut full = shape.to_vec();
        if let Some(out) = full.first_mut() {
            *out *= self.parts;
        }
        if self.conv1d {
            full.reverse();
        }
        full
    }

    /// The role's values ([out, ...], `shape`) out of the stored tensor's values `w`.
    fn take(&self, w: Vec<f32>, shape: &[usize]) -> Vec<f32> {
        let n: usize = shape.iter().product();
        match (self.conv1d, shape) {
            (true, &[out, cols]) => {
                let (width, first) = (out * self.parts, self.part * out);
                (0..out)
                    .flat_map(|o| (0..cols).map(move |c| (c, o)))
                    .map(|(c, o)| w[c * width + first + o])
                    .collect()
            }
            _ if self.parts == 1 => w,
            _ => w[self.part * n..(self.part + 1) * n].to_vec(),
        }
    }
}

/// GGUF metadata arrays only the tokenizer reads (vocabulary, merges, token types, scores).
pub const TOKENIZER_TABLES: [&str; 4] = [
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.scores",
];

/// The weight store of a decoder.
pub struct Source {
    kind: Kind,
    /// The file or folder, as errors name it.
    pub path: PathBuf,
    family: Family,
    /// Whether the lm_head is the embedding matrix.
    pub tied: bool,
    /// GGUF projections already encoded, by (tensor, rows, scale bits): every program gets
    /// the same payloads; and the compression report of each.
    encoded: Mutex<EncodedCache>,
    /// Hugging Face folders: hand projections out as shared fp16 constants (false when
    /// `compress` asks the compiler to encode the dense weights instead).
    pub hf_fp16: bool,
}

/// Encoded GGUF weights keyed by (tensor name, first row, end row, scale bits).
type EncodedCache = HashMap<(String, usize, usize, u32), (Weight, CompressionEntry)>;

enum Kind {
    Gguf(Box<GgufFile>),
    Hf(HfWeights),
}

impl Source {
    /// A GGUF file's weights (the lm_head is tied when `output.weight` is absent). The
    /// tokenizer tables ([`TOKENIZER_TABLES`], megabytes of strings) leave the metadata: build
    /// the tokenizer from `file` first.
    pub fn gguf(mut file: GgufFile, family: Family) -> Source {
        for key in TOKENIZER_TABLES {
            file.metadata_mut().remove(key);
        }
        let tied = file.tensor(&Role::LmHead.gguf_name()).is_err();
        Source {
            path: PathBuf::from(file.path()),
            kind: Kind::Gguf(Box::new(file)),
            family,
            tied,
            encoded: Mutex::new(HashMap::new()),
            hf_fp16: false,
        }
    }

    /// A Hugging Face folder's weights: `model.safetensors`, or the shards listed in
    /// `model.safetensors.index.json` (`weight_map`).
    pub fn hf(dir: &Path, family: Family, tied: bool) -> Result<Source> {
        let index = dir.join("model.safetensors.index.json");
        let mut files = Vec::new();
        let mut by_name = HashMap::new();
        if index.exists() {
            let v = json_file(&index)?;
            let map = v
                .get("weight_map")
                .and_then(Value::as_object)
                .ok_or_else(|| {
                    Error::format(
                        &index,
                        None,
                        "field 'weight_map' is missing or not an object",
                    )
                })?;
            let mut shard_of: HashMap<&str, usize> = HashMap::new();
            for (name, shard) in map {
                let shard = shard.as_str().ok_or_else(|| {
                    Error::format(
                        &index,
                        None,
                        format!("weight_map['{name}'] is not a file name"),
                    )
                })?;
                if shard.contains('/') || shard.contains('\\') || shard.starts_with('.') {
                    return Err(Error::format(
                        &index,
                        None,
                        format!("shard name '{shard}' must be a plain file name"),
                    ));
                }
                let i = match shard_of.get(shard) {
                    Some(&i) => i,
                    None => {
                        files.push(Weights::open(&dir.join(shard))?);
                        shard_of.insert(shard, files.len() - 1);
                        files.len() - 1
                    }
                };
                by_name.insert(name.clone(), i);
            }
        } else {
            let w = Weights::open(&dir.join("model.safetensors"))?;
            by_name = w.shapes().into_keys().map(|n| (n, 0)).collect();
            files.push(w);
        }
        let prefix = match family {
            Family::Gpt2 if by_name.contains_key("transformer.wte.weight") => "transformer.",
            _ => "",
        };
        Ok(Source {
            path: dir.to_path_buf(),
            kind: Kind::Hf(HfWeights {
                files,
                by_name,
                prefix,
            }),
            family,
            tied,
            encoded: Mutex::new(HashMap::new()),
            hf_fp16: true,
        })
    }

    /// The GGUF file, when the weights come from one (for its tokenizer and template).
    pub fn gguf_file(&self) -> Option<&GgufFile> {
        match &self.kind {
            Kind::Gguf(f) => Some(f),
            Kind::Hf(_) => None,
        }
    }

    /// Where `role` is stored (the lm_head of a tied model is the embedding).
    fn stored(&self, role: Role) -> Stored {
        let role = if role == Role::LmHead && self.tied {
            Role::Embed
        } else {
            role
        };
        match (&self.kind, self.family) {
            (Kind::Gguf(_), Family::Gpt2) => role.gpt2_stored(true, ""),
            (Kind::Hf(hf), Family::Gpt2) => role.gpt2_stored(false, hf.prefix),
            (Kind::Gguf(_), _) => Stored::whole(role.gguf_name(), false),
            (Kind::Hf(_), _) => Stored::whole(role.hf_name(), false),
        }
    }

    /// Tensor `role` as f32 in HF orientation, checked to be `shape`; Gemma norm weights come
    /// back as (1 + w); llama GGUF Q/K rows are un-permuted from llama.cpp's interleaved RoPE
    /// order back to the rotate-half order; GPT-2's Q/K/V come out of the fused tensor and its
    /// Conv1D weights are transposed. Missing tensors or other shapes are Format errors naming
    /// the file, the tensor and both shapes (of the tensor as stored).
    pub fn get(&self, role: Role, shape: &[usize], cfg: &LlmConfig) -> Result<Vec<f32>> {
        let s = self.stored(role);
        let full = s.full_shape(shape);
        let w = match &self.kind {
            Kind::Gguf(file) => {
                let err = super::config::gguf_error;
                let t = file.tensor(&s.name).map_err(err)?;
                self.check_shape(&s.name, &t.info().shape(), &full)?;
                t.dequantize().map_err(err)?
            }
            Kind::Hf(hf) => {
                let i = *hf.by_name.get(&s.name).ok_or_else(|| {
                    Error::format(
                        &self.path,
                        None,
                        format!("tensor '{}' {full:?} is missing", s.name),
                    )
                })?;
                hf.files[i].get(&s.name, &full)?
            }
        };
        let mut w = s.take(w, shape);
        let gguf = matches!(self.kind, Kind::Gguf(_));
        Ok(match role {
            Role::Q(_) if gguf && self.family == Family::Llama => {
                unpermute(&w, cfg.heads, shape[1])
            }
            Role::K(_) if gguf && self.family == Family::Llama => {
                unpermute(&w, cfg.kv_heads, shape[1])
            }
            _ if !gguf && self.family == Family::Gemma && role.is_norm() => {
                w.iter_mut().for_each(|v| *v += 1.0);
                w
            }
            _ => w,
        })
    }

    /// Rows `rows` of projection `role` ([out, cols] in HF orientation) times `scale` as a
    /// shared constant (blockwise int8 or fp16), made once and shared by every later call (see
    /// [`weights::encode`]); `None` for Hugging Face folders, whose weights stay dense. A
    /// tensor that is missing or not [out, cols] is a Format error naming it.
    pub fn encoded(
        &self,
        role: Role,
        out: usize,
        cols: usize,
        rows: Range<usize>,
        cfg: &LlmConfig,
        scale: f32,
    ) -> Result<Option<Weight>> {
        let Kind::Gguf(file) = &self.kind else {
            return self.hf_fp16_rows(role, [out, cols], rows, cfg, scale);
        };
        let s = self.stored(role);
        let first = s.part * out;
        let key = (
            s.name.clone(),
            first + rows.start,
            first + rows.end,
            scale.to_bits(),
        );
        let mut cache = self.encoded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((c, _)) = cache.get(&key) {
            return Ok(Some(c.clone()));
        }
        let t = file.tensor(&s.name).map_err(super::config::gguf_error)?;
        self.check_shape(&s.name, &t.info().shape(), &s.full_shape(&[out, cols]))?;
        let rows = first + rows.start..first + rows.end;
        let heads = match role {
            Role::Q(_) if self.family == Family::Llama => Some(cfg.heads),
            Role::K(_) if self.family == Family::Llama => Some(cfg.kv_heads),
            _ => None,
        };
        let perm = heads.map(|h| rope_perm(h, out));
        let req = Request {
            cols,
            rows,
            perm: perm.as_deref(),
            scale,
        };
        let (c, entry) = weights::encode(&self.path, &t, &req)?;
        // The encoded copy is what programs hold: the mapped bytes leave the resident set now,
        // not after the whole model is encoded (the peak would be the file plus its copy).
        file.release_tensor_pages(&t);
        cache.insert(key, (c.clone(), entry));
        Ok(Some(c))
    }

    /// Hugging Face folders: rows `rows` of projection `role` ([out, cols]) times `scale` as one
    /// shared fp16 constant (made once), its report row carrying the fp16 rounding error; None
    /// when `hf_fp16` is off.
    fn hf_fp16_rows(
        &self,
        role: Role,
        shape: [usize; 2],
        rows: Range<usize>,
        cfg: &LlmConfig,
        scale: f32,
    ) -> Result<Option<Weight>> {
        if !self.hf_fp16 {
            return Ok(None);
        }
        let s = self.stored(role);
        let first = s.part * shape[0];
        let key = (
            s.name,
            first + rows.start,
            first + rows.end,
            scale.to_bits(),
        );
        if let Some((c, _)) = self.lock_encoded().get(&key) {
            return Ok(Some(c.clone()));
        }
        let dense = self.get(role, &shape, cfg)?;
        let dense = &dense[rows.start * shape[1]..rows.end * shape[1]];
        let values: Vec<f16> = dense.iter().map(|&v| f16::from_f32(v * scale)).collect();
        let (mut err, mut norm) = (0f64, 0f64);
        for (&v, h) in dense.iter().zip(&values) {
            let want = f64::from(v * scale);
            err += (want - f64::from(h.to_f32())).powi(2);
            norm += want * want;
        }
        let shape = vec![rows.len(), shape[1]];
        let entry = CompressionEntry {
            name: key.0.clone(),
            site: "matmul",
            shape: shape.clone(),
            encoding: crate::ops::constexpr::Encoding::Fp16,
            bytes_fp16: 2 * values.len(),
            bytes_encoded: 2 * values.len(),
            rel_error: if norm > 0.0 { (err / norm).sqrt() } else { 0.0 },
        };
        let c = Weight::Fp16(crate::ops::io::Const {
            shape,
            values: std::sync::Arc::new(values),
        });
        self.lock_encoded().insert(key, (c.clone(), entry));
        Ok(Some(c))
    }

    /// The encoded-weight cache (a poisoned lock still holds valid entries).
    fn lock_encoded(&self) -> std::sync::MutexGuard<'_, EncodedCache> {
        self.encoded.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The compression report of the GGUF weights encoded so far (one row per constant).
    pub fn report(&self) -> Vec<CompressionEntry> {
        let cache = self.encoded.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<CompressionEntry> = cache.values().map(|(_, e)| e.clone()).collect();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }

    /// A Format error naming the file and tensor unless `got` is `shape`.
    fn check_shape(&self, name: &str, got: &[u64], shape: &[usize]) -> Result<()> {
        if got.len() != shape.len() || got.iter().zip(shape).any(|(&g, &s)| g != s as u64) {
            return Err(Error::format(
                &self.path,
                None,
                format!("tensor '{name}' has shape {got:?}, expected {shape:?}"),
            ));
        }
        Ok(())
    }

    /// Row `id` of the GGUF embedding [vocab, width] into `out` (width values, dequantized from
    /// the memory map: no dense table is held), or `None` for Hugging Face folders.
    pub fn gguf_embedding_row(&self, id: usize, out: &mut [f32]) -> Result<Option<()>> {
        let Kind::Gguf(file) = &self.kind else {
            return Ok(None);
        };
        let name = Role::Embed.gguf_name();
        let t = file.tensor(&name).map_err(super::config::gguf_error)?;
        let ty = t.info().ggml_type;
        let row_bytes = out.len() / ty.block_size() as usize * ty.type_size() as usize;
        let kernel = aneforge_gguf::quant::kernel(ty);
        let row = t.data().get(id * row_bytes..(id + 1) * row_bytes);
        match (kernel, row) {
            (Some(k), Some(row)) => {
                k(row, out);
                Ok(Some(()))
            }
            _ => Err(Error::format(
                &self.path,
                None,
                format!(
                    "tensor '{name}' ({}) has no row {id} to dequantize",
                    ty.name()
                ),
            )),
        }
    }

    /// Drop the GGUF memory map's pages from the resident set once the weights are encoded, and
    /// hand the heap freed while building programs back to the OS (glibc keeps it otherwise).
    pub fn release_pages(&self) {
        if let Kind::Gguf(file) = &self.kind {
            file.release_pages();
        }
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only returns free heap pages to the kernel; it is thread-safe.
        unsafe {
            libc::malloc_trim(0);
        }
    }

    /// Whether the store has tensor `role` (for optional weights).
    pub fn has(&self, role: Role) -> bool {
        let name = self.stored(role).name;
        match &self.kind {
            Kind::Gguf(file) => file.tensor(&name).is_ok(),
            Kind::Hf(hf) => hf.by_name.contains_key(&name),
        }
    }
}

/// llama.cpp's Q/K row order: HF row h·dh + j·dh/2 + i is GGUF row h·dh + 2i + j, so
/// `perm[hf_row]` is the GGUF row of `rows` rows over `heads` heads.
fn rope_perm(heads: usize, rows: usize) -> Vec<usize> {
    let dh = rows / heads.max(1);
    let mut perm: Vec<usize> = (0..rows).collect();
    for h in 0..heads {
        for i in 0..dh / 2 {
            for j in 0..2 {
                perm[h * dh + j * dh / 2 + i] = h * dh + 2 * i + j;
            }
        }
    }
    perm
}

/// Undo llama.cpp's Q/K row permutation on the dense rows of `w` (see [`rope_perm`]).
fn unpermute(w: &[f32], heads: usize, cols: usize) -> Vec<f32> {
    rope_perm(heads, w.len() / cols)
        .iter()
        .flat_map(|&src| &w[src * cols..(src + 1) * cols])
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GPT-2's fused Conv1D `c_attn` [in = 2, out = 3·2]: the K third, as [out, in], is the
    /// transpose of columns 2..4.
    #[test]
    fn fused_conv1d_thirds_come_out_transposed() {
        let k = Role::K(0).gpt2_stored(false, "transformer.");
        assert_eq!(k.name, "transformer.h.0.attn.c_attn.weight");
        assert_eq!(k.full_shape(&[2, 2]), [2, 6]);
        // row c of the stored tensor holds input c's contribution to the 6 outputs
        let stored: Vec<f32> = (0..12).map(|v| v as f32).collect();
        assert_eq!(k.take(stored, &[2, 2]), [2.0, 8.0, 3.0, 9.0]);
        let bias = Role::VBias(0).gpt2_stored(true, "");
        assert_eq!(
            (bias.name.as_str(), bias.full_shape(&[2])),
            ("blk.0.attn_qkv.bias", vec![6])
        );
        assert_eq!(
            bias.take((0..6).map(|v| v as f32).collect(), &[2]),
            [4.0, 5.0]
        );
        let up = Role::Up(1).gpt2_stored(true, "");
        assert_eq!(
            (up.name.as_str(), up.full_shape(&[8, 2])),
            ("blk.1.ffn_up.weight", vec![8, 2])
        );
    }
}
