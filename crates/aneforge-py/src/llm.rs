//! Bindings of the language-model family (`aneforge.load_llm`): the core `Llm` behind a
//! mutex, with a stepping generation API that `python/aneforge/llm.py` turns into `generate`,
//! streaming and `chat`.

use std::path::PathBuf;
use std::sync::Mutex;

use aneforge::models::llm::{GenerateOptions, Llm, Message, SampleOptions, Session, TextStream};
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The decoder and the generation in progress, if any.
struct State {
    llm: Llm,
    run: Option<(Session, TextStream)>,
}

/// A loaded decoder (GGUF or Hugging Face folder); see `aneforge.LLM` for the public API.
#[pyclass(frozen, name = "_Llm", module = "aneforge")]
pub struct PyLlm {
    inner: Mutex<State>,
    vocab: usize,
    max_context: usize,
    family: &'static str,
}

impl PyLlm {
    /// Run `f` on the state with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut State) -> aneforge::Result<T> + Send,
    ) -> PyResult<T> {
        crate::models::with_locked(py, &self.inner, "llm", f)
    }
}

#[pymethods]
impl PyLlm {
    /// Next-token logits [vocab] (float32) after the prompt `ids`.
    fn logits<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let l = self.with(py, |s| s.llm.logits(&ids))?;
        Ok(PyArray1::from_vec(py, l))
    }

    /// Token ids of `text` (special-token spellings become their ids); with
    /// `add_special_tokens` the model's post-processor runs too (BOS first when it adds one).
    #[pyo3(signature = (text, add_special_tokens=false))]
    fn encode(&self, py: Python<'_>, text: String, add_special_tokens: bool) -> PyResult<Vec<u32>> {
        self.with(py, |s| match add_special_tokens {
            true => s.llm.encode_prompt(&text),
            false => s.llm.encode(&text),
        })
    }

    /// Text of `ids` (special tokens skipped).
    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        self.with(py, |s| s.llm.decode(&ids))
    }

    /// The chat template rendered over `messages` (dicts with "role" and "content").
    #[pyo3(signature = (messages, add_generation_prompt=true))]
    fn apply_chat_template(
        &self,
        py: Python<'_>,
        messages: Vec<Bound<'_, PyDict>>,
        add_generation_prompt: bool,
    ) -> PyResult<String> {
        let msgs = messages
            .iter()
            .map(|d| {
                let field = |k: &str| -> PyResult<String> {
                    d.get_item(k)?
                        .ok_or_else(|| {
                            PyValueError::new_err(format!("chat message is missing '{k}'"))
                        })?
                        .extract()
                };
                Ok(Message {
                    role: field("role")?,
                    content: field("content")?,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        self.with(py, |s| {
            s.llm.apply_chat_template(&msgs, add_generation_prompt)
        })
    }

    /// Prefill `ids` and start a generation (see `advance`); parameters as in `generate`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (ids, max_new_tokens, temperature, top_k, top_p, repetition_penalty, seed, stop, stop_at_eos, reuse_kv=false))]
    fn start(
        &self,
        py: Python<'_>,
        ids: Vec<u32>,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        repetition_penalty: f32,
        seed: u64,
        stop: Vec<String>,
        stop_at_eos: bool,
        reuse_kv: bool,
    ) -> PyResult<()> {
        let opts = GenerateOptions {
            max_new_tokens,
            sample: SampleOptions {
                temperature,
                top_k,
                top_p,
                repetition_penalty,
                seed,
            },
            stop_at_eos,
            stop,
            reuse_kv,
        };
        self.with(py, |s| {
            let session = s.llm.start(&ids, &opts)?;
            s.run = Some((session, TextStream::new(&opts.stop)));
            Ok(())
        })
    }

    /// The next token and the text it completes (`text=False`: empty text, no tokenizer
    /// needed), or None when the generation is finished (length, EOS or a stop string).
    #[pyo3(signature = (text=true))]
    fn advance(&self, py: Python<'_>, text: bool) -> PyResult<Option<(u32, String)>> {
        self.with(py, |s| {
            let Some((session, stream)) = s.run.as_mut() else {
                return Err(aneforge::Error::value(
                    "generate",
                    "no generation in progress",
                ));
            };
            if stream.stopped {
                return Ok(None);
            }
            let Some(id) = s.llm.advance(session)? else {
                return Ok(None);
            };
            let piece = if text {
                stream.push(&s.llm, id)?
            } else {
                String::new()
            };
            Ok(Some((id, piece)))
        })
    }

    /// The text still held back when a generation has ended (the start of a stop string that
    /// never completed); empty after a stop string.
    fn finish(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |s| {
            Ok(s.run
                .as_mut()
                .map(|(_, stream)| stream.finish())
                .unwrap_or_default())
        })
    }

    /// Statistics of the last generation: prompt tokens, new tokens, prefill and decode
    /// seconds, prompt tokens actually run (fewer when the resident KV was reused).
    fn stats(&self, py: Python<'_>) -> PyResult<(usize, usize, f64, f64, usize)> {
        self.with(py, |s| {
            Ok(s.run.as_ref().map_or((0, 0, 0.0, 0.0, 0), |(r, _)| {
                (
                    r.prompt_tokens,
                    r.tokens.len(),
                    r.prefill_seconds,
                    r.decode_seconds,
                    r.prefilled_tokens,
                )
            }))
        })
    }

    /// One dict per weight constant (name, site, shape, encoding, bytes_fp16, bytes_encoded,
    /// rel_error), sorted by name.
    fn compression_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = self.with(py, |s| Ok(s.llm.compression_report()))?;
        crate::model::report_dicts(py, &rows)
    }

    /// Vocabulary size.
    #[getter]
    fn vocab(&self) -> usize {
        self.vocab
    }

    /// Maximum context (prompt + generated tokens).
    #[getter]
    fn max_context(&self) -> usize {
        self.max_context
    }

    /// The decoder family (llama, mistral, qwen2, qwen3, gemma, gpt2).
    #[getter]
    fn family(&self) -> &'static str {
        self.family
    }

    /// The end-of-sequence token id, if known.
    #[getter]
    fn eos_token_id(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        self.with(py, |s| Ok(s.llm.eos()))
    }
}

/// Load a GGUF file or Hugging Face folder with decode programs for `max_context` tokens;
/// `**options` as in `compile` (device, compress, ...).
#[pyfunction]
#[pyo3(signature = (path, max_context=None, **options))]
pub fn load_llm(
    py: Python<'_>,
    path: PathBuf,
    max_context: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyLlm> {
    let llm =
        crate::models::load_detached(py, options, |opts| Llm::load(&path, max_context, opts))?;
    Ok(PyLlm {
        vocab: llm.config.vocab,
        max_context: llm.max_context,
        family: llm.config.family.name(),
        inner: Mutex::new(State { llm, run: None }),
    })
}

/// Register the class and the loader on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLlm>()?;
    m.add_function(wrap_pyfunction!(load_llm, m)?)
}
