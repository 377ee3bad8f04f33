//! Text side of a decoder: the GGUF-embedded tokenizer rebuilt as a `tokenizers` tokenizer
//! (GPT-2-style byte-level BPE with merges, or a SentencePiece/llama vocabulary with scores and
//! byte fallback), `tokenizer.json` for folders, and the model's own Jinja chat template
//! rendered with minijinja.

use std::collections::HashMap;
use std::path::Path;

use aneforge_gguf::{Array, GgufFile};
use serde_json::{json, Value};

use crate::error::{Error, Result};

/// The GPT-2 split regex the byte-level pre-tokenizer applies when `use_regex` is set.
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Llama 3 split regex (digits in runs of up to three).
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Special token ids and the chat template that came with a tokenizer.
#[derive(Clone, Debug, Default)]
pub struct TextInfo {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub chat_template: Option<String>,
}

/// The byte-level pre-tokenizer for GGUF `tokenizer.ggml.pre` = `pre`.
fn pre_tokenizer(pre: &str, path: &str) -> Result<Value> {
    let byte_level = |regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": regex});
    let split = |re: &str| json!({"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated", "invert": false});
    Ok(match pre {
        "default" | "gpt2" | "gpt-2" => byte_level(true),
        "smollm" | "starcoder" | "refact" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
        "qwen2" => json!({"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), byte_level(false)]}),
        "llama-bpe" | "llama3" => json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), byte_level(false)]}),
        other => {
            return Err(Error::NotImplemented(format!(
                "{path}: tokenizer.ggml.pre '{other}' is not supported (gpt-2, smollm, starcoder, qwen2, llama-bpe are)"
            )))
        }
    })
}

/// GGUF token types: control and user-defined tokens become added tokens, bytes feed the
/// byte fallback.
const TYPE_UNKNOWN: i64 = 2;
const TYPE_CONTROL: i64 = 3;
const TYPE_USER: i64 = 4;
const TYPE_BYTE: i64 = 6;

/// Build the tokenizer embedded in a GGUF file: `tokenizer.ggml.model` = gpt2 (vocabulary,
/// merges, pre-tokenizer by `tokenizer.ggml.pre`) or llama (SentencePiece BPE: vocabulary and
/// scores, byte fallback); control and user-defined tokens become added tokens. Other models
/// are NotImplemented naming the file.
pub fn from_gguf(file: &GgufFile) -> Result<(tokenizers::Tokenizer, TextInfo)> {
    let path = file.path();
    let gg = super::config::gguf_error;
    let md = file.metadata();
    let model = md.get_str("tokenizer.ggml.model").map_err(gg)?;
    let tokens = md.get_str_array("tokenizer.ggml.tokens").map_err(gg)?;
    let types: Vec<i64> = match md.get_array("tokenizer.ggml.token_type") {
        Ok(Array::I32(v)) => v.iter().map(|&t| i64::from(t)).collect(),
        Ok(Array::U32(v)) => v.iter().map(|&t| i64::from(t)).collect(),
        _ => vec![1; tokens.len()],
    };
    let added: Vec<Value> = tokens
        .iter()
        .enumerate()
        .filter(|(i, _)| matches!(types.get(*i), Some(&TYPE_CONTROL) | Some(&TYPE_USER)))
        .map(|(i, t)| {
            json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": types[i] == TYPE_CONTROL})
        })
        .collect();
    let mut spec = match model {
        "gpt2" => byte_level_bpe(file, &tokens)?,
        "llama" => sentencepiece_bpe(file, &tokens, &types)?,
        other => {
            return Err(Error::NotImplemented(format!(
                "{path}: tokenizer.ggml.model '{other}' is not supported (gpt2 byte-level BPE and \
                 llama SentencePiece are)"
            )))
        }
    };
    spec["version"] = json!("1.0");
    spec["added_tokens"] = json!(added);
    let bos = md.get_u32("tokenizer.ggml.bos_token_id").ok();
    spec["post_processor"] = bos_processor(add_bos(file, model)?.then_some(bos).flatten(), &tokens);
    let tok: tokenizers::Tokenizer = spec
        .to_string()
        .parse()
        .map_err(|e| Error::format(path, None, format!("cannot build the tokenizer: {e}")))?;
    let id = |k: &str| md.get_u32(k).ok();
    let info = TextInfo {
        bos: id("tokenizer.ggml.bos_token_id"),
        eos: id("tokenizer.ggml.eos_token_id"),
        chat_template: md
            .get_str("tokenizer.chat_template")
            .ok()
            .map(str::to_string),
    };
    Ok((tok, info))
}

/// Whether raw prompts start with BOS: `tokenizer.ggml.add_bos_token` when present, else
/// llama.cpp's default (SentencePiece `llama` vocabularies yes, `gpt2` BPE no).
fn add_bos(file: &GgufFile, model: &str) -> Result<bool> {
    let key = "tokenizer.ggml.add_bos_token";
    match file.metadata().get(key) {
        Some(_) => file
            .metadata()
            .get_bool(key)
            .map_err(super::config::gguf_error),
        None => Ok(model == "llama"),
    }
}

/// The `tokenizers` post-processor that puts token `bos` (an id into `tokens`) before a
/// prompt encoded with special tokens (HF's rule for `add_bos_token`); null without one.
fn bos_processor(bos: Option<u32>, tokens: &[&str]) -> Value {
    let Some((id, name)) = bos.and_then(|i| Some((i, *tokens.get(i as usize)?))) else {
        return Value::Null;
    };
    let special = json!({"SpecialToken": {"id": name, "type_id": 0}});
    let seq = |s: &str, t: u32| json!({"Sequence": {"id": s, "type_id": t}});
    json!({"type": "TemplateProcessing", "single": [special, seq("A", 0)],
           "pair": [special, seq("A", 0), seq("B", 1)],
           "special_tokens": {name: {"id": name, "ids": [id], "tokens": [name]}}})
}

/// The vocabulary as a token → id map.
fn vocab_map(tokens: &[&str]) -> serde_json::Map<String, Value> {
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), json!(i)))
        .collect()
}

/// A GPT-2-style byte-level BPE (`tokenizer.ggml.merges`, pre-tokenizer by
/// `tokenizer.ggml.pre`) as `tokenizers` JSON (model, normalizer, pre-tokenizer, decoder).
fn byte_level_bpe(file: &GgufFile, tokens: &[&str]) -> Result<Value> {
    let md = file.metadata();
    let merges = md
        .get_str_array("tokenizer.ggml.merges")
        .map_err(super::config::gguf_error)?;
    let pre = md.get_str("tokenizer.ggml.pre").unwrap_or("default");
    Ok(json!({
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer(pre, file.path())?,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab_map(tokens), "merges": merges},
    }))
}

/// A SentencePiece BPE vocabulary (GGUF `llama` tokenizer: pieces with `▁` for spaces, scores,
/// byte tokens `<0xNN>`) as `tokenizers` JSON: merges derived from the scores (a pair merges
/// when both halves and their concatenation are pieces; higher-scoring results first — the
/// SentencePiece BPE rule), `▁` prepended unless `tokenizer.ggml.add_space_prefix` is false,
/// spaces as `▁`, byte fallback when the vocabulary has byte tokens.
fn sentencepiece_bpe(file: &GgufFile, tokens: &[&str], types: &[i64]) -> Result<Value> {
    let md = file.metadata();
    let path = file.path();
    let scores: Vec<f32> = match md.get_array("tokenizer.ggml.scores") {
        Ok(Array::F32(v)) if v.len() == tokens.len() => v.clone(),
        Ok(_) => {
            return Err(Error::format(
                path,
                None,
                format!(
                    "tokenizer.ggml.scores must be {} float32 values (one per token)",
                    tokens.len()
                ),
            ))
        }
        Err(e) => return Err(super::config::gguf_error(e)),
    };
    let ids: HashMap<&str, usize> = tokens.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    let mut merges: Vec<(f32, usize, usize, usize)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        if types.get(id).is_some_and(|&t| t != 1) {
            continue;
        }
        for (k, _) in piece.char_indices().skip(1) {
            if let (Some(&l), Some(&r)) = (ids.get(&piece[..k]), ids.get(&piece[k..])) {
                merges.push((scores[id], id, l, r));
            }
        }
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let merges: Vec<[&str; 2]> = merges.iter().map(|m| [tokens[m.2], tokens[m.3]]).collect();
    let unk = md
        .get_u32("tokenizer.ggml.unknown_token_id")
        .ok()
        .map(|i| i as usize)
        .or_else(|| types.iter().position(|&t| t == TYPE_UNKNOWN))
        .and_then(|i| tokens.get(i));
    let prefix = md
        .get_bool("tokenizer.ggml.add_space_prefix")
        .unwrap_or(true);
    let replace = json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"});
    let normalizer = if prefix {
        json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u{2581}"}, replace]})
    } else {
        replace
    };
    let strip = if prefix { 1 } else { 0 };
    Ok(json!({
        "normalizer": normalizer,
        "pre_tokenizer": null,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": strip, "stop": 0}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": true,
                  "byte_fallback": types.contains(&TYPE_BYTE),
                  "ignore_merges": false, "vocab": vocab_map(tokens), "merges": merges},
    }))
}

/// A folder's `tokenizer.json` plus `tokenizer_config.json` (chat_template, bos/eos tokens)
/// when present.
pub fn from_folder(dir: &Path) -> Result<(tokenizers::Tokenizer, TextInfo)> {
    let file = dir.join("tokenizer.json");
    let tok = tokenizers::Tokenizer::from_file(&file)
        .map_err(|e| Error::format(&file, None, format!("cannot read the tokenizer: {e}")))?;
    let mut info = TextInfo::default();
    let cfg_file = dir.join("tokenizer_config.json");
    if cfg_file.exists() {
        let v = crate::models::json::json_file(&cfg_file)?;
        let token_id = |k: &str| {
            let name = match v.get(k)? {
                Value::String(s) => s.clone(),
                other => other.get("content")?.as_str()?.to_string(),
            };
            tok.token_to_id(&name)
        };
        info.bos = token_id("bos_token");
        info.eos = token_id("eos_token");
        info.chat_template = v
            .get("chat_template")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    Ok((tok, info))
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// Render `template` (Jinja) over `messages` with `add_generation_prompt` and the
/// `bos_token`/`eos_token` strings, as transformers' `apply_chat_template` does.
pub fn render_chat(
    template: &str,
    messages: &[Message],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                msg,
            ))
        },
    );
    let err = |e: minijinja::Error| Error::value("chat_template", format!("{e:#}"));
    env.add_template("chat", template).map_err(err)?;
    env.get_template("chat")
        .map_err(err)?
        .render(minijinja::context! {
            messages => messages
                .iter()
                .map(|m| minijinja::Value::from_pairs([("role", m.role.as_str()), ("content", m.content.as_str())]))
                .collect::<Vec<_>>(),
            add_generation_prompt => add_generation_prompt,
            bos_token => bos_token,
            eos_token => eos_token,
        })
        .map_err(err)
}
