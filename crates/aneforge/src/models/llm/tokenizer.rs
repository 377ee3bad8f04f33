//! Text side of a decoder: the GGUF-embedded tokenizer rebuilt as a `tokenizers` tokenizer
//! (GPT-2-style byte-level BPE with merges), `tokenizer.json` for folders, and the model's
//! own Jinja chat template rendered with minijinja.

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
        "default" | "gpt2" => byte_level(true),
        "smollm" | "starcoder" | "refact" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
        "qwen2" => json!({"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), byte_level(false)]}),
        "llama-bpe" | "llama3" => json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), byte_level(false)]}),
        other => {
            return Err(Error::NotImplemented(format!(
                "{path}: tokenizer.ggml.pre '{other}' is not supported (gpt2, smollm, starcoder, qwen2, llama-bpe are)"
            )))
        }
    })
}

/// Build the tokenizer embedded in a GGUF file (`tokenizer.ggml.model` = gpt2: vocabulary,
/// merges, token types; control tokens become special added tokens).
pub fn from_gguf(file: &GgufFile) -> Result<(tokenizers::Tokenizer, TextInfo)> {
    let path = file.path();
    let gg = super::config::gguf_error;
    let md = file.metadata();
    let model = md.get_str("tokenizer.ggml.model").map_err(gg)?;
    if model != "gpt2" {
        return Err(Error::NotImplemented(format!(
            "{path}: tokenizer.ggml.model '{model}' is not supported yet (gpt2 byte-level BPE is)"
        )));
    }
    let tokens = md.get_str_array("tokenizer.ggml.tokens").map_err(gg)?;
    let merges = md.get_str_array("tokenizer.ggml.merges").map_err(gg)?;
    let types: Vec<i64> = match md.get_array("tokenizer.ggml.token_type") {
        Ok(Array::I32(v)) => v.iter().map(|&t| i64::from(t)).collect(),
        Ok(Array::U32(v)) => v.iter().map(|&t| i64::from(t)).collect(),
        _ => vec![1; tokens.len()],
    };
    let pre = md.get_str("tokenizer.ggml.pre").unwrap_or("default");
    let vocab: serde_json::Map<String, Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), json!(i)))
        .collect();
    let added: Vec<Value> = tokens
        .iter()
        .enumerate()
        .filter(|(i, _)| matches!(types.get(*i), Some(3) | Some(4)))
        .map(|(i, t)| {
            json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": types[i] == 3})
        })
        .collect();
    let spec = json!({
        "version": "1.0",
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer(pre, path)?,
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab, "merges": merges},
    });
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

/// A folder's `tokenizer.json` plus `tokenizer_config.json` (chat_template, bos/eos tokens)
/// when present.
pub fn from_folder(dir: &Path) -> Result<(tokenizers::Tokenizer, TextInfo)> {
    let file = dir.join("tokenizer.json");
    let tok = tokenizers::Tokenizer::from_file(&file)
        .map_err(|e| Error::format(&file, None, format!("cannot read the tokenizer: {e}")))?;
    let mut info = TextInfo::default();
    let cfg_file = dir.join("tokenizer_config.json");
    if cfg_file.exists() {
        let v = crate::models::json_file(&cfg_file)?;
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
