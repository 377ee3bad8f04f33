//! The text side of a decoder: tokenizer access, the chat template, incremental detokenisation
//! with stop strings ([`TextStream`]) and text generation / chat on top of the token runtime.
//!
//! Chat turns with `reuse_kv` run only the tokens the resident KV does not hold yet when the
//! rendered conversation extends them (kv_reuse.rs); otherwise the whole prompt is prefilled.

use crate::error::Result;
use crate::models::tokenize;

use super::runtime::{GenerateOptions, Llm, Session};
use super::tokenizer::{self, Message};

/// Tokenizer, chat template and special tokens.
impl Llm {
    /// The tokenizer, or a Value error when the model came without one.
    pub fn tokenizer(&self) -> Result<&tokenizers::Tokenizer> {
        tokenize::require(self.tokenizer.as_ref(), "llm")
    }

    /// Token ids of `text` (special-token spellings such as `<|im_start|>` become their ids).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        tokenize::encode(self.tokenizer()?, text)
    }

    /// Token ids of a raw (not chat-rendered) prompt: BOS first when the model adds it
    /// (`add_bos_token` of the GGUF metadata or the folder's tokenizer post-processor).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>> {
        tokenize::encode_prompt(self.tokenizer()?, text)
    }

    /// The text of `ids` (special tokens skipped).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        tokenize::decode(self.tokenizer()?, ids, true)
    }

    /// The model's chat template rendered over `messages` (with the generation prompt when
    /// `add_generation_prompt`); a Value error when the model has no template.
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let template = self.info.chat_template.as_deref().ok_or_else(|| {
            crate::Error::value("chat_template", "this model has no chat template")
        })?;
        let name = |id: Option<u32>| {
            id.and_then(|i| self.tokenizer.as_ref()?.id_to_token(i))
                .unwrap_or_default()
        };
        tokenizer::render_chat(
            template,
            messages,
            add_generation_prompt,
            &name(self.info.bos),
            &name(self.info.eos),
        )
    }

    /// The end-of-sequence token id, when known.
    pub fn eos(&self) -> Option<u32> {
        self.info.eos
    }
}

/// Incremental detokenisation: the new text each token adds. Text is held back while it ends in
/// an incomplete UTF-8 sequence or in the beginning of a stop string, so a stop string is never
/// emitted, not even in part; [`TextStream::finish`] releases what is held at the end.
pub struct TextStream {
    ids: Vec<u32>,
    emitted: usize,
    stop: Vec<String>,
    text: String,
    /// Set once a stop string appeared (the text is cut before it).
    pub stopped: bool,
}

impl TextStream {
    /// A stream that stops at any of `stop` (empty strings are ignored).
    pub fn new(stop: &[String]) -> TextStream {
        TextStream {
            ids: Vec::new(),
            emitted: 0,
            stop: stop.iter().filter(|s| !s.is_empty()).cloned().collect(),
            text: String::new(),
            stopped: false,
        }
    }

    /// Add token `id`; returns the text that is now safe to show (may be empty).
    pub fn push(&mut self, llm: &Llm, id: u32) -> Result<String> {
        self.ids.push(id);
        let text = llm.decode(&self.ids)?;
        if text.ends_with('\u{fffd}') {
            return Ok(String::new());
        }
        Ok(self.accept(text))
    }

    /// Take the decoded `text` so far: cut it at the first stop string, and return the new
    /// part up to where a stop string could still begin.
    fn accept(&mut self, text: String) -> String {
        self.text = text;
        let cut = self
            .stop
            .iter()
            .filter_map(|s| self.text.find(s.as_str()))
            .min();
        let safe = match cut {
            Some(cut) => {
                self.text.truncate(cut);
                self.stopped = true;
                cut
            }
            None => self.text.len() - self.pending_stop_prefix(),
        };
        let piece = self
            .text
            .get(self.emitted.min(safe)..safe)
            .unwrap_or_default()
            .to_string();
        self.emitted = self.emitted.max(safe);
        piece
    }

    /// Bytes at the end of the text that are a proper prefix of some stop string.
    fn pending_stop_prefix(&self) -> usize {
        self.stop
            .iter()
            .flat_map(|s| {
                s.char_indices()
                    .skip(1)
                    .map(|(k, _)| k)
                    .filter(|&k| self.text.ends_with(&s[..k]))
            })
            .max()
            .unwrap_or(0)
    }

    /// The text still held back (an unfinished stop-string prefix) once generation has ended;
    /// empty after a stop string.
    pub fn finish(&mut self) -> String {
        if self.stopped {
            return String::new();
        }
        let rest = self
            .text
            .get(self.emitted..)
            .unwrap_or_default()
            .to_string();
        self.emitted = self.text.len();
        rest
    }

    /// All text so far (cut before a stop string).
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Text generation and chat.
impl Llm {
    /// Generate text from the raw prompt `prompt` (BOS added as the model asks), calling
    /// `on_piece` with each new piece of text as it is produced; returns the session (tokens,
    /// timings) and the whole text.
    pub fn generate_text(
        &mut self,
        prompt: &str,
        opts: &GenerateOptions,
        on_piece: &mut dyn FnMut(&str) -> Result<()>,
    ) -> Result<(Session, String)> {
        let ids = self.encode_prompt(prompt)?;
        self.generate_streamed(&ids, opts, on_piece)
    }

    /// Generate from the prompt `ids`, streaming text pieces to `on_piece`.
    fn generate_streamed(
        &mut self,
        ids: &[u32],
        opts: &GenerateOptions,
        on_piece: &mut dyn FnMut(&str) -> Result<()>,
    ) -> Result<(Session, String)> {
        let mut session = self.start(ids, opts)?;
        let mut stream = TextStream::new(&opts.stop);
        while let Some(id) = self.advance(&mut session)? {
            let piece = stream.push(self, id)?;
            if !piece.is_empty() {
                on_piece(&piece)?;
            }
            if stream.stopped {
                break;
            }
        }
        let rest = stream.finish();
        if !rest.is_empty() {
            on_piece(&rest)?;
        }
        Ok((session, stream.text().to_string()))
    }

    /// Render `messages` with the chat template (plus the generation prompt) and generate the
    /// assistant's answer (with `opts.reuse_kv`, only the tokens beyond the resident KV run).
    pub fn chat(
        &mut self,
        messages: &[Message],
        opts: &GenerateOptions,
        on_piece: &mut dyn FnMut(&str) -> Result<()>,
    ) -> Result<(Session, String)> {
        let prompt = self.apply_chat_template(messages, true)?;
        let ids = self.encode(&prompt)?;
        self.generate_streamed(&ids, opts, on_piece)
    }
}

#[cfg(test)]
mod tests {
    use super::TextStream;

    /// Feed whole decoded texts (as `push` would) and collect what is shown.
    fn shown(stop: &[&str], texts: &[&str]) -> (Vec<String>, String, bool) {
        let stop: Vec<String> = stop.iter().map(|s| s.to_string()).collect();
        let mut s = TextStream::new(&stop);
        let mut pieces: Vec<String> = texts.iter().map(|t| s.accept(t.to_string())).collect();
        pieces.push(s.finish());
        (pieces, s.text().to_string(), s.stopped)
    }

    #[test]
    fn a_partial_stop_string_is_held_back_and_never_shown() {
        let (p, text, stopped) = shown(&["</s>"], &["Hi", "Hi <", "Hi </", "Hi </s>", "Hi </s>x"]);
        assert_eq!(p, ["Hi", " ", "", "", "", ""]);
        assert_eq!(text, "Hi ");
        assert!(stopped);
    }

    #[test]
    fn a_prefix_that_does_not_become_a_stop_string_is_released() {
        let (p, text, stopped) = shown(&["STOP"], &["a S", "a ST", "a STa", "a STaS"]);
        assert_eq!(p, ["a ", "", "STa", "", "S"]);
        assert_eq!(text, "a STaS");
        assert!(!stopped);
    }

    #[test]
    fn multibyte_stop_strings_cut_on_char_boundaries() {
        let (p, _, stopped) = shown(&["→end"], &["x→", "x→e", "x→en", "x→end"]);
        assert_eq!(p, ["x", "", "", "", ""]);
        assert!(stopped);
    }
}
