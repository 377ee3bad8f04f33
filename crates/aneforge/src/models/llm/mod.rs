//! Language models: one decoder family (llama, mistral, qwen2, qwen3, gemma, gpt2 options)
//! loaded from GGUF files or Hugging Face folders, compiled into chunk programs (prefill per
//! prompt-length bucket, resident-KV decode steps, lm_head tiled inside the program), with the
//! tokenizer, chat template and sampling on the host.
//!
//! ```no_run
//! use aneforge::models::llm::{GenerateOptions, Llm};
//! let mut llm = Llm::load("model.gguf".as_ref(), Some(256), &Default::default())?;
//! let (_, text) = llm.generate_text("Hello", &GenerateOptions::default(), &mut |p| {
//!     print!("{p}");
//!     Ok(())
//! })?;
//! # Ok::<(), aneforge::Error>(())
//! ```

pub mod blocks;
pub mod config;
pub mod kv_reuse;
pub mod progress;
pub mod report;
pub mod runtime;
pub mod sample;
pub mod source;
pub mod text;
pub mod tokenizer;
pub mod weights;

pub use config::{Family, LlmConfig};
pub use runtime::{GenerateOptions, Llm, Session};
pub use sample::{SampleOptions, Sampler};
pub use text::TextStream;
pub use tokenizer::Message;
