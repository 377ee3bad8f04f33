//! Text ↔ token ids through a `tokenizers` tokenizer, shared by the text models (GPT-2 and the
//! decoder family): one error spelling for a model without a tokenizer and for failed
//! encodes/decodes.

use crate::error::{Error, Result};

/// The tokenizer `tok`, or a Value error naming `model` when it came without one.
pub fn require<'a>(
    tok: Option<&'a tokenizers::Tokenizer>,
    model: &str,
) -> Result<&'a tokenizers::Tokenizer> {
    tok.ok_or_else(|| {
        Error::value(
            model,
            "this model has no tokenizer.json or embedded tokenizer; use token ids",
        )
    })
}

/// Token ids of `text`, nothing added (special-token spellings such as `<|im_start|>` become
/// their ids); a tokenizer failure is a Value error quoting the text.
pub fn encode(tok: &tokenizers::Tokenizer, text: &str) -> Result<Vec<u32>> {
    encode_with(tok, text, false)
}

/// Token ids of a raw prompt `text` with the tokenizer's post-processor applied (e.g. BOS
/// first when the model adds it, HF's `add_special_tokens=True`); errors as in [`encode`].
pub fn encode_prompt(tok: &tokenizers::Tokenizer, text: &str) -> Result<Vec<u32>> {
    encode_with(tok, text, true)
}

/// Token ids of `text`, with the post-processor's special tokens when `add_special`.
fn encode_with(tok: &tokenizers::Tokenizer, text: &str, add_special: bool) -> Result<Vec<u32>> {
    let e = tok
        .encode(text, add_special)
        .map_err(|e| Error::value("tokenizer", format!("cannot encode {text:?}: {e}")))?;
    Ok(e.get_ids().to_vec())
}

/// The text of `ids` (special tokens dropped when `skip_special`); a tokenizer failure (e.g. an
/// id outside the vocabulary) is a Value error quoting the ids.
pub fn decode(tok: &tokenizers::Tokenizer, ids: &[u32], skip_special: bool) -> Result<String> {
    tok.decode(ids, skip_special)
        .map_err(|e| Error::value("tokenizer", format!("cannot decode {ids:?}: {e}")))
}
