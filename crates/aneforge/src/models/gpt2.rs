//! GPT-2 through the decoder family: [`Gpt2`] keeps the original GPT-2 API (logits after
//! every token, `generate` with temperature / top-k sampling, text helpers) as a thin layer
//! over [`Llm`] loaded with the `gpt2` architecture options (LayerNorm, learned positions,
//! fused QKV, tanh GELU; see `llm/config.rs`), so GPT-2 gets the family's chunked prefill,
//! resident-KV decode and on-program lm_head. `Llm::load` reads the same folders (and GGUF).

use std::path::Path;

use crate::compile::CompileOptions;
use crate::error::{Error, Result};

use super::llm::{Family, GenerateOptions, Llm, LlmConfig, SampleOptions};

/// A loaded GPT-2 decoder (the decoder family's `gpt2` architecture).
pub struct Gpt2 {
    pub llm: Llm,
}

impl Gpt2 {
    /// Load a Hugging Face GPT-2 folder (config.json with model_type gpt2, model.safetensors,
    /// optional tokenizer.json) with decode programs for `max_context` tokens (default
    /// min(n_positions, 1024)); another model type is a Value error naming it. Bad tensors
    /// name the tensor and the expected shape.
    pub fn load(dir: &Path, max_context: Option<usize>, opts: &CompileOptions) -> Result<Gpt2> {
        let llm = Llm::load(dir, max_context, opts)?;
        if llm.config.family != Family::Gpt2 {
            return Err(Error::value(
                "gpt2",
                format!(
                    "{} holds a '{}' model, not GPT-2 (use load_llm)",
                    dir.display(),
                    llm.config.family.name()
                ),
            ));
        }
        Ok(Gpt2 { llm })
    }

    /// The hyper-parameters.
    pub fn config(&self) -> &LlmConfig {
        &self.llm.config
    }

    /// Maximum context (prompt + generated tokens).
    pub fn max_context(&self) -> usize {
        self.llm.max_context
    }

    /// The executor running the decode programs.
    pub fn device(&self) -> &'static str {
        self.llm.device()
    }

    /// The next-token logits after each of `ids` ([len][vocab]): the first token is prefilled,
    /// the others run as decode steps on the resident cache (the cache then holds `ids`).
    pub fn logits(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>> {
        let Some((first, rest)) = ids.split_first() else {
            return Ok(Vec::new());
        };
        let mut out = vec![self.llm.prefill(&[*first])?];
        for &id in rest {
            out.push(self.llm.step(id)?);
        }
        Ok(out)
    }

    /// Feed the prompt `ids`, then produce `max_new_tokens` tokens (no EOS stop): greedy when
    /// `temperature` ≤ 0, else softmax(logits / temperature) over the `top_k` largest (0 = all)
    /// drawn from a generator seeded with `seed`. A non-finite temperature, an empty prompt or
    /// prompt + new tokens beyond max_context are Value errors.
    pub fn generate(
        &mut self,
        ids: &[u32],
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
    ) -> Result<Vec<u32>> {
        let opts = GenerateOptions {
            max_new_tokens,
            sample: SampleOptions {
                temperature: if temperature < 0.0 { 0.0 } else { temperature },
                top_k,
                seed,
                ..SampleOptions::default()
            },
            stop_at_eos: false,
            ..GenerateOptions::default()
        };
        Ok(self.llm.generate(ids, &opts)?.tokens)
    }

    /// Token ids of `text` (no special tokens added); a Value error without tokenizer.json.
    pub fn encode_text(&self, text: &str) -> Result<Vec<u32>> {
        self.llm.encode(text)
    }

    /// The text of token ids (special tokens skipped).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.llm.decode(ids)
    }

    /// [`Gpt2::generate`] from a text prompt; returns the generated text (prompt excluded).
    pub fn generate_text(
        &mut self,
        prompt: &str,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
    ) -> Result<String> {
        let ids = self.encode_text(prompt)?;
        let new = self.generate(&ids, max_new_tokens, temperature, top_k, seed)?;
        self.decode(&new)
    }
}
