//! Pretrained-model loaders: the BERT-family sentence `Encoder`, `Vision` models (ResNet, ViT, ESPCN) and the `Gpt2` decoder
//! (thin wrappers over `aneforge::models`).

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use aneforge::models::{Encoder, Espcn, Gpt2, Pooling, ResNet, Vit, DEFAULT_BATCH_SIZE};
use aneforge::{Compiled, PortData};
use numpy::{PyArray2, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList, PyString};

use crate::convert::{asarray, borrow, fmt_shape, type_name};
use crate::errors::IntoPy;
use crate::options::compile_options;

/// Rows of `data` (n × d, C order) as a float32 array [n, d].
fn rows<'py>(
    py: Python<'py>,
    data: Vec<Vec<f32>>,
    d: usize,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let n = data.len();
    let flat: Vec<f32> = data.into_iter().flatten().collect();
    numpy::PyArray1::from_vec(py, flat).reshape([n, d])
}

/// A BERT-family sentence encoder: `enc(texts)` or `enc(token_ids)` → float32 [N, D] embeddings.
#[pyclass(frozen, name = "Encoder", module = "aneforge")]
pub struct PyEncoder {
    inner: Mutex<Encoder>,
    dim: usize,
}

#[pymethods]
impl PyEncoder {
    /// Embed a string, a list of strings, or token ids (a list of int lists or a 2-D int
    /// array), `batch_size` sequences per program call (1 = one call per sequence).
    #[pyo3(signature = (inputs, batch_size=DEFAULT_BATCH_SIZE))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
        batch_size: usize,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let out = if let Ok(s) = inputs.cast::<PyString>() {
            let t = s.to_str()?.to_string();
            self.with(py, |e| e.encode(&[t.as_str()], batch_size))?
        } else if inputs
            .cast::<PyList>()
            .is_ok_and(|l| !l.is_empty() && l.iter().all(|x| x.is_instance_of::<PyString>()))
        {
            let texts: Vec<String> = inputs.extract()?;
            self.with(py, |e| {
                e.encode(
                    &texts.iter().map(String::as_str).collect::<Vec<_>>(),
                    batch_size,
                )
            })?
        } else {
            let ids = token_ids(inputs)?;
            self.with(py, |e| e.encode_ids(&ids, batch_size))?
        };
        rows(py, out, self.dim)
    }

    /// Same as calling the encoder (sentence-transformers' `encode(texts, batch_size=32)`).
    #[pyo3(signature = (inputs, batch_size=DEFAULT_BATCH_SIZE))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
        batch_size: usize,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        self.__call__(py, inputs, batch_size)
    }

    /// Token ids of each text (special tokens added, truncated to `max_len`, unpadded).
    fn tokenize(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<u32>>> {
        self.with(py, |e| {
            e.tokenize(&texts.iter().map(String::as_str).collect::<Vec<_>>())
        })
    }

    /// The executor running the programs ("ane" or "reference").
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |e| e.device())
    }

    /// Embedding width D.
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    /// Longest accepted token sequence.
    #[getter]
    fn max_len(&self, py: Python<'_>) -> usize {
        self.inner
            .lock_py_attached(py)
            .map(|e| e.max_len)
            .unwrap_or(0)
    }

    /// "mean" or "cls".
    #[getter]
    fn pooling(&self, py: Python<'_>) -> &'static str {
        match self.inner.lock_py_attached(py).map(|e| e.pooling) {
            Ok(Pooling::Cls) => "cls",
            _ => "mean",
        }
    }

    /// Whether embeddings are L2-normalised.
    #[getter]
    fn normalize(&self, py: Python<'_>) -> bool {
        self.inner
            .lock_py_attached(py)
            .map(|e| e.normalize)
            .unwrap_or(false)
    }

    fn __repr__(&self) -> String {
        format!("Encoder(dim={})", self.dim)
    }
}

/// Lock `m` while attached to Python; a lock poisoned by a panicked call is a ValueError naming `what`.
fn lock<'a, T>(py: Python<'_>, m: &'a Mutex<T>, what: &str) -> PyResult<MutexGuard<'a, T>> {
    m.lock_py_attached(py)
        .map_err(|_| PyValueError::new_err(format!("{what}: a previous call panicked")))
}

/// Run `f` on the value behind `m` with the GIL released (lock errors as in [`lock`]).
pub(crate) fn with_locked<M: Send, T: Send>(
    py: Python<'_>,
    m: &Mutex<M>,
    what: &str,
    f: impl FnOnce(&mut M) -> aneforge::Result<T> + Send,
) -> PyResult<T> {
    let mut g = lock(py, m, what)?;
    let v = &mut *g;
    py.detach(|| f(v)).py()
}

/// Parse `**options` as in `compile`, then run the loader `load` with the GIL released.
pub(crate) fn load_detached<T: Send>(
    py: Python<'_>,
    options: Option<&Bound<'_, PyDict>>,
    load: impl FnOnce(&aneforge::CompileOptions) -> aneforge::Result<T> + Send,
) -> PyResult<T> {
    let opts = compile_options(options)?;
    py.detach(|| load(&opts)).py()
}

impl PyEncoder {
    /// Run `f` on the encoder with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Encoder) -> aneforge::Result<T> + Send,
    ) -> PyResult<T> {
        with_locked(py, &self.inner, "encoder", f)
    }
}

/// Token-id sequences from a list of int lists or a 2-D integer array (ids must be >= 0).
fn token_ids(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u32>>> {
    let bad = || {
        PyTypeError::new_err(format!("encoder: expected a str, a list of str, or token ids (list of int lists / 2-D int array), got {}", type_name(obj)))
    };
    let seqs: Vec<Vec<i64>> = obj.extract().map_err(|_| bad())?;
    seqs.into_iter()
        .map(|s| {
            s.into_iter()
                .map(|v| {
                    u32::try_from(v).map_err(|_| {
                        PyValueError::new_err(format!(
                            "encoder: token id {v} is negative or too large"
                        ))
                    })
                })
                .collect()
        })
        .collect()
}

/// Load a Hugging Face BERT-family encoder folder (config.json, model.safetensors,
/// tokenizer.json, sentence-transformers pooling config); `**options` as in `compile`.
#[pyfunction]
#[pyo3(signature = (path, pooling=None, normalize=None, **options))]
pub fn load_encoder(
    py: Python<'_>,
    path: PathBuf,
    pooling: Option<&str>,
    normalize: Option<bool>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyEncoder> {
    let opts = compile_options(options)?;
    let pooling = pooling.map(Pooling::parse).transpose().py()?;
    let enc = py
        .detach(|| Encoder::load(&path, pooling, normalize, opts))
        .py()?;
    let dim = enc.config.hidden;
    Ok(PyEncoder {
        inner: Mutex::new(enc),
        dim,
    })
}

/// A compiled vision model (ResNet, ViT, ESPCN): `net(image)` → float32 output (logits [1, classes] or an image).
#[pyclass(frozen, name = "Vision", module = "aneforge")]
pub struct PyVision {
    inner: Mutex<Compiled>,
    shape: Vec<usize>,
    out_shape: Vec<usize>,
    uint8: bool,
    device: &'static str,
}

impl PyVision {
    fn new(c: Compiled, uint8: bool) -> PyVision {
        let shape = c.inputs()[0].shape.clone();
        let out_shape = c.outputs()[0].shape.clone();
        PyVision {
            shape,
            out_shape,
            uint8,
            device: c.device(),
            inner: Mutex::new(c),
        }
    }
}

#[pymethods]
impl PyVision {
    /// Run one image [1, C, H, W]: float (already normalised) or, for a uint8 model, uint8 RGB 0..255.
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        image: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let arr = asarray(image, (!self.uint8).then_some("float32"))?;
        if arr.shape() != self.shape.as_slice() {
            return Err(PyValueError::new_err(format!(
                "vision: image must have shape {}, got {}",
                fmt_shape(&self.shape),
                fmt_shape(arr.shape())
            )));
        }
        let mut g = lock(py, &self.inner, "vision")?;
        let net = &mut *g;
        let mut out = if self.uint8 {
            let bytes = crate::model::uint8_bytes(&arr, "image", &self.shape)?;
            let s = bytes.as_slice()?;
            py.detach(|| net.run(&[PortData::U8(s)])).py()?
        } else {
            let a = borrow::<f32>(&arr, "float32")?;
            let s = a
                .as_slice()
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            py.detach(|| net.run(&[PortData::F32(s)])).py()?
        };
        numpy::PyArray1::from_vec(py, out.swap_remove(0)).reshape(self.out_shape.clone())
    }

    /// The executor running the program.
    #[getter]
    fn device(&self) -> &'static str {
        self.device
    }

    /// Input shape [1, C, H, W].
    #[getter]
    fn input_shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    /// Output shape.
    #[getter]
    fn output_shape(&self) -> Vec<usize> {
        self.out_shape.clone()
    }

    /// The program directory.
    #[getter]
    fn program_dir(&self, py: Python<'_>) -> PyResult<String> {
        let g = lock(py, &self.inner, "vision")?;
        Ok(g.dir.display().to_string())
    }
}

/// Load a torchvision-layout ResNet state dict (safetensors) of `depth` 18/34/50/101/152;
/// `**options` as in `compile`.
#[pyfunction]
#[pyo3(signature = (path, depth=18, image_size=224, uint8=false, **options))]
pub fn load_resnet(
    py: Python<'_>,
    path: PathBuf,
    depth: usize,
    image_size: usize,
    uint8: bool,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyVision> {
    let opts = compile_options(options)?;
    let net = py
        .detach(|| ResNet::load(&path, depth, image_size, uint8, &opts))
        .py()?;
    Ok(PyVision::new(net.compiled, uint8))
}

/// Load a Hugging Face ViTForImageClassification folder (config.json + model.safetensors);
/// `**options` as in `compile`.
#[pyfunction]
#[pyo3(signature = (path, **options))]
pub fn load_vit(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyVision> {
    let opts = compile_options(options)?;
    let net = py.detach(|| Vit::load(&path, &opts)).py()?;
    Ok(PyVision::new(net.compiled, false))
}

/// Load an ESPCN state dict (safetensors, PyTorch examples layout) for [1, C, height, width]
/// inputs; `**options` as in `compile`.
#[pyfunction]
#[pyo3(signature = (path, height, width, **options))]
pub fn load_espcn(
    py: Python<'_>,
    path: PathBuf,
    height: usize,
    width: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyVision> {
    let opts = compile_options(options)?;
    let net = py
        .detach(|| Espcn::load(&path, height, width, &opts))
        .py()?;
    Ok(PyVision::new(net.compiled, false))
}

/// A GPT-2 decoder (the decoder family's gpt2 architecture, resident KV cache): `lm(ids)` →
/// logits [len, vocab]; `generate(...)`.
#[pyclass(frozen, name = "Gpt2", module = "aneforge")]
pub struct PyGpt2 {
    inner: Mutex<Gpt2>,
    vocab: usize,
    device: &'static str,
}

#[pymethods]
impl PyGpt2 {
    /// Run `ids` from position 0 (the first prefilled, the rest as decode steps) and return the next-token logits after each ([len, vocab]).
    fn __call__<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let out = self.with(py, |g| g.logits(&ids))?;
        rows(py, out, self.vocab)
    }

    /// Feed the prompt, then sample `max_new_tokens` tokens (greedy when temperature <= 0, else
    /// top-k (0 = all) temperature sampling seeded by `seed`); returns the new token ids.
    #[pyo3(signature = (ids, max_new_tokens=20, temperature=1.0, top_k=0, seed=0))]
    fn generate(
        &self,
        py: Python<'_>,
        ids: Vec<u32>,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
    ) -> PyResult<Vec<u32>> {
        self.with(py, |g| {
            g.generate(&ids, max_new_tokens, temperature, top_k, seed)
        })
    }

    /// Text continuation of `prompt` (needs tokenizer.json in the folder): `generate` on its ids, decoded.
    #[pyo3(signature = (prompt, max_new_tokens=20, temperature=1.0, top_k=0, seed=0))]
    fn generate_text(
        &self,
        py: Python<'_>,
        prompt: String,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
    ) -> PyResult<String> {
        self.with(py, |g| {
            g.generate_text(&prompt, max_new_tokens, temperature, top_k, seed)
        })
    }

    /// The executor running the decode program.
    #[getter]
    fn device(&self) -> &'static str {
        self.device
    }

    /// Maximum context (prompt + generated tokens).
    #[getter]
    fn max_context(&self, py: Python<'_>) -> usize {
        self.inner
            .lock_py_attached(py)
            .map(|g| g.max_context())
            .unwrap_or(0)
    }
}

impl PyGpt2 {
    /// Run `f` on the decoder with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Gpt2) -> aneforge::Result<T> + Send,
    ) -> PyResult<T> {
        with_locked(py, &self.inner, "gpt2", f)
    }
}

/// Load a Hugging Face GPT-2 folder (config.json + model.safetensors) with a decode program for
/// `max_context` tokens; `**options` as in `compile`.
#[pyfunction]
#[pyo3(signature = (path, max_context=None, **options))]
pub fn load_gpt2(
    py: Python<'_>,
    path: PathBuf,
    max_context: Option<usize>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyGpt2> {
    let g = load_detached(py, options, |opts| Gpt2::load(&path, max_context, opts))?;
    Ok(PyGpt2 {
        vocab: g.config().vocab,
        device: g.device(),
        inner: Mutex::new(g),
    })
}
