//! `aneforge generate MODEL "prompt"`: stream a continuation from a GGUF file or Hugging Face
//! folder, then print prefill and decode tokens/s (on stderr, so stdout is only the text).

use std::io::Write;
use std::path::Path;

use super::emit;
use crate::compile::CompileOptions;
use crate::error::Result;
use crate::models::llm::{GenerateOptions, Llm, SampleOptions, Session};

/// Sampling and length flags shared by `generate` and `chat`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenerateFlags {
    /// Tokens to generate at most.
    #[arg(long, default_value_t = 128)]
    pub max_new_tokens: usize,
    /// 0 = greedy; otherwise the softmax temperature.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = all).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Nucleus probability (1 = off).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Penalty on tokens already seen (1 = off).
    #[arg(long, default_value_t = 1.0)]
    pub repetition_penalty: f32,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Maximum context (prompt + generated tokens; default min(trained, 1024)).
    #[arg(long)]
    pub max_context: Option<usize>,
}

impl GenerateFlags {
    /// The generation options these flags spell.
    pub fn options(&self) -> GenerateOptions {
        GenerateOptions {
            max_new_tokens: self.max_new_tokens,
            sample: SampleOptions {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                repetition_penalty: self.repetition_penalty,
                seed: self.seed,
            },
            ..Default::default()
        }
    }
}

/// A load bar on stderr (weights made, as a percentage, and the elapsed time); hidden when
/// stderr is not a terminal or `ANEFORGE_QUIET` is set.
fn load_bar(what: String) -> indicatif::ProgressBar {
    if std::env::var_os("ANEFORGE_QUIET").is_some() {
        return indicatif::ProgressBar::hidden();
    }
    indicatif::ProgressBar::new(1)
        .with_style(
            indicatif::ProgressStyle::with_template("{msg} {percent:>3}% [{bar:30}] {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
        .with_message(what)
}

/// Load `model` (weights and program compilation) with a percentage bar on stderr, then a
/// summary line unless `ANEFORGE_QUIET` is set.
pub(super) fn load(model: &Path, flags: &GenerateFlags, opts: &CompileOptions) -> Result<Llm> {
    let bar = load_bar(format!("loading {}", model.display()));
    let t = std::time::Instant::now();
    let show = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let llm = Llm::load_with_progress(model, flags.max_context, opts, Some(&show));
    bar.finish_and_clear();
    let llm = llm?;
    if std::env::var_os("ANEFORGE_QUIET").is_none() {
        eprintln!(
            "loaded {} ({} layers, width {}, vocab {}) in {:.1} s",
            llm.config.family.name(),
            llm.config.layers,
            llm.config.width,
            llm.config.vocab,
            t.elapsed().as_secs_f64()
        );
    }
    Ok(llm)
}

/// Write a text piece to stdout at once.
pub(super) fn stream_piece(piece: &str) -> Result<()> {
    emit(piece);
    let _ = std::io::stdout().flush();
    Ok(())
}

/// The speed line: prefill and decode tokens per second.
pub(super) fn speed(s: &Session) -> String {
    let rate = |n: usize, secs: f64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let decoded = s.tokens.len().saturating_sub(1);
    format!(
        "prefill: {} tokens, {:.1} tok/s; decode: {} tokens, {:.1} tok/s",
        s.prefilled_tokens,
        rate(s.prefilled_tokens, s.prefill_seconds),
        decoded,
        rate(decoded, s.decode_seconds)
    )
}

/// Stream the continuation of `prompt`, then the speeds on stderr.
pub(super) fn generate(
    model: &Path,
    prompt: &str,
    flags: &GenerateFlags,
    opts: &CompileOptions,
) -> Result<()> {
    let mut llm = load(model, flags, opts)?;
    let (session, _) = llm.generate_text(prompt, &flags.options(), &mut stream_piece)?;
    emit("\n");
    eprintln!("{}", speed(&session));
    Ok(())
}
