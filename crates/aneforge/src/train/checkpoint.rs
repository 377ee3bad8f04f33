//! Checkpoints through the `safetensors` crate: raw tensors of any supported dtype
//! ([`save_tensors`] / [`load_tensors`], behind `af.save_safetensors` / `af.load_safetensors`)
//! and the Trainer's fp32 state dict ([`save_state`] / [`load_state`], [`Trainer::save`] /
//! [`Trainer::load`]). The only file of `train/` that uses the `safetensors` crate.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensorError, SafeTensors, TensorView};

use super::state::StateDict;
use super::trainer::Trainer;
use crate::error::{Error, Result};

/// Element types a checkpoint tensor may have (the safetensors names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StDType {
    F32,
    F16,
    F64,
    I64,
    I32,
    U8,
}

impl StDType {
    const ALL: [(StDType, Dtype, &'static str); 6] = [
        (StDType::F32, Dtype::F32, "F32"),
        (StDType::F16, Dtype::F16, "F16"),
        (StDType::F64, Dtype::F64, "F64"),
        (StDType::I64, Dtype::I64, "I64"),
        (StDType::I32, Dtype::I32, "I32"),
        (StDType::U8, Dtype::U8, "U8"),
    ];

    /// The safetensors name (`F32`, `F16`, `F64`, `I64`, `I32`, `U8`).
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|e| e.0 == self).expect("listed").2
    }

    /// Parse a safetensors dtype name; a Value error names an unsupported one.
    pub fn parse(s: &str) -> Result<StDType> {
        Self::ALL
            .iter()
            .find(|e| e.2 == s)
            .map(|e| e.0)
            .ok_or_else(|| {
                Error::value(
                    "safetensors",
                    format!("unsupported dtype '{s}' (expected F32, F16, F64, I64, I32 or U8)"),
                )
            })
    }

    fn st(self) -> Dtype {
        Self::ALL.iter().find(|e| e.0 == self).expect("listed").1
    }

    fn from_st(d: Dtype) -> Option<StDType> {
        Self::ALL.iter().find(|e| e.1 == d).map(|e| e.0)
    }
}

/// One tensor of a checkpoint: name, dtype, shape and little-endian row-major bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct RawTensor {
    pub name: String,
    pub dtype: StDType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

/// Write `tensors` and string `metadata` to `path` in the safetensors layout. Errors: a
/// tensor whose byte count does not match its shape and dtype (Value, naming it), I/O (naming `path`).
pub fn save_tensors(
    path: &Path,
    tensors: &[RawTensor],
    metadata: &BTreeMap<String, String>,
) -> Result<()> {
    let views = tensors
        .iter()
        .map(|t| {
            TensorView::new(t.dtype.st(), t.shape.clone(), &t.data)
                .map(|v| (t.name.as_str(), v))
                .map_err(|e| {
                    Error::value(
                        "save_safetensors",
                        format!(
                            "tensor '{}': {} bytes do not hold {} {:?} ({e})",
                            t.name,
                            t.data.len(),
                            t.dtype.name(),
                            t.shape
                        ),
                    )
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let meta = (!metadata.is_empty()).then(|| {
        metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>()
    });
    let bytes = safetensors::serialize(views, meta)
        .map_err(|e| Error::format(path, None, format!("cannot serialize: {e}")))?;
    crate::program::write_atomic(path, |w| std::io::Write::write_all(w, &bytes))
}

/// Read every tensor (in file order) and the metadata of the safetensors file at `path`.
/// Errors (Format, naming the file): a header length beyond the file, a header that is not
/// JSON, offsets that do not fit the shapes and the data, an unsupported dtype; I/O errors name `path`.
pub fn load_tensors(path: &Path) -> Result<(Vec<RawTensor>, BTreeMap<String, String>)> {
    let raw = crate::program::files::read_regular(path)?;
    let st = SafeTensors::deserialize(&raw).map_err(|e| explain(path, &raw, e))?;
    let (_, meta) = SafeTensors::read_metadata(&raw).map_err(|e| explain(path, &raw, e))?;
    let mut named = st.tensors();
    named.sort_by_key(|(_, v)| v.data().as_ptr() as usize);
    let tensors = named
        .into_iter()
        .map(|(name, v)| {
            let dtype = StDType::from_st(v.dtype()).ok_or_else(|| {
                Error::format(
                    path,
                    None,
                    format!("tensor '{name}' has unsupported dtype {:?}", v.dtype()),
                )
            })?;
            Ok(RawTensor {
                name,
                dtype,
                shape: v.shape().to_vec(),
                data: v.data().to_vec(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let metadata = meta
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    Ok((tensors, metadata))
}

/// A Format error for a safetensors parse failure, stating what is wrong in the file's terms.
fn explain(path: &Path, raw: &[u8], e: SafeTensorError) -> Error {
    let header_len = raw
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let msg = match (&e, header_len) {
        (SafeTensorError::HeaderTooSmall, None) => {
            format!("too short for a safetensors header ({} bytes)", raw.len())
        }
        (
            SafeTensorError::HeaderTooSmall
            | SafeTensorError::HeaderTooLarge
            | SafeTensorError::InvalidHeaderLength,
            Some(n),
        ) => format!(
            "header length {n} does not fit the file ({} bytes)",
            raw.len()
        ),
        (
            SafeTensorError::InvalidOffset(_)
            | SafeTensorError::TensorInvalidInfo
            | SafeTensorError::MetadataIncompleteBuffer
            | SafeTensorError::ValidationOverflow,
            Some(n),
        ) => format!(
            "tensor data offsets do not fit the shapes and dtypes in {} data bytes ({e})",
            (raw.len() as u64).saturating_sub(8 + n)
        ),
        _ => format!("malformed safetensors header: {e}"),
    };
    Error::format(path, None, msg)
}

/// Write `state` as F32 tensors to `path` (errors as [`save_tensors`]).
pub fn save_state(path: &Path, state: &StateDict) -> Result<()> {
    let raw: Vec<RawTensor> = state
        .tensors
        .iter()
        .map(|(name, (shape, v))| RawTensor {
            name: name.clone(),
            dtype: StDType::F32,
            shape: shape.clone(),
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        })
        .collect();
    save_tensors(path, &raw, &state.metadata)
}

/// Read a state dict written by [`save_state`]: errors as [`load_tensors`], plus a Format error
/// naming a tensor that is not F32.
pub fn load_state(path: &Path) -> Result<StateDict> {
    let (raw, metadata) = load_tensors(path)?;
    let tensors = raw
        .into_iter()
        .map(|t| {
            if t.dtype != StDType::F32 {
                return Err(Error::format(
                    path,
                    None,
                    format!("tensor '{}' is {}, expected F32", t.name, t.dtype.name()),
                ));
            }
            let v = t
                .data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect();
            Ok((t.name, (t.shape, v)))
        })
        .collect::<Result<_>>()?;
    Ok(StateDict { tensors, metadata })
}

impl Trainer {
    /// Write [`Trainer::state_dict`] to a safetensors file at `path` (errors as [`save_state`]).
    pub fn save(&mut self, path: &Path) -> Result<()> {
        save_state(path, &self.state_dict()?)
    }

    /// Restore a checkpoint written by [`Trainer::save`]: errors as [`load_state`] and
    /// [`Trainer::load_state_dict`] (which names `path`).
    pub fn load(&mut self, path: &Path) -> Result<()> {
        let sd = load_state(path)?;
        self.load_state_dict(sd, path)
    }
}
