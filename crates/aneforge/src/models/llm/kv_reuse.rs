//! KV reuse across generations (chat turns): when a prompt extends the tokens whose keys and
//! values the decode caches already hold (a token-prefix check), only the new tokens run, one
//! decode step each, on top of the resident cache; any other prompt is prefilled from position 0.

use crate::error::Result;

use super::runtime::Llm;

impl Llm {
    /// Logits [vocab] after the prompt `ids` and how many of its tokens were run: the suffix
    /// beyond the resident tokens when `ids` strictly extends them, else all of `ids`
    /// (a fresh prefill). Errors as in [`Llm::prefill`] / [`Llm::step`].
    pub fn extend_or_prefill(&mut self, ids: &[u32]) -> Result<(Vec<f32>, usize)> {
        let held = self.resident.len();
        let extends = held > 0 && ids.len() > held && ids[..held] == self.resident[..];
        if !extends {
            return Ok((self.prefill(ids)?, ids.len()));
        }
        let mut logits = Vec::new();
        for &id in &ids[held..] {
            logits = self.step(id)?;
        }
        Ok((logits, ids.len() - held))
    }

    /// The ids whose keys/values the decode caches hold (prompt and fed generated tokens).
    pub fn resident_tokens(&self) -> &[u32] {
        &self.resident
    }
}
