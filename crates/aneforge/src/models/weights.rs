//! A safetensors state dict read into memory: tensors fetched by name with their expected
//! shape, converted to f32 (F32, F16 and BF16 files are accepted).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use safetensors::tensor::{Dtype, Metadata, SafeTensors};

use crate::error::{Error, Result};

/// A validated safetensors file held in memory.
pub struct Weights {
    path: PathBuf,
    bytes: Vec<u8>,
    /// Byte offset of the data section (8 + header length).
    data_start: usize,
    metadata: Metadata,
}

impl Weights {
    /// Read and validate `path` (a regular file only: header, offsets and total length); a
    /// truncated or malformed file is a Format error naming the file.
    pub fn open(path: &Path) -> Result<Weights> {
        let bytes = crate::program::files::read_regular(path)?;
        Weights::from_bytes(path, bytes)
    }

    /// Validate in-memory safetensors `bytes` (`path` only names the source in errors).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Weights> {
        let (n, metadata) = SafeTensors::read_metadata(&bytes).map_err(|e| {
            let why = match e {
                safetensors::SafeTensorError::MetadataIncompleteBuffer => {
                    "the tensor data does not end where the file ends (truncated or padded file)"
                        .to_string()
                }
                safetensors::SafeTensorError::InvalidHeaderLength
                | safetensors::SafeTensorError::HeaderTooSmall => {
                    "the header length runs past the end of the file (truncated file)".to_string()
                }
                other => format!("{other:?}"),
            };
            Error::format(
                path,
                None,
                format!(
                    "not a valid safetensors file ({} bytes): {why}",
                    bytes.len()
                ),
            )
        })?;
        Ok(Weights {
            path: path.to_path_buf(),
            bytes,
            data_start: 8 + n,
            metadata,
        })
    }

    /// The file these weights came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a tensor called `name` exists.
    pub fn has(&self, name: &str) -> bool {
        self.metadata.info(name).is_some()
    }

    /// Every tensor name with its shape.
    pub fn shapes(&self) -> HashMap<String, Vec<usize>> {
        self.metadata
            .tensors()
            .into_iter()
            .map(|(k, v)| (k, v.shape.clone()))
            .collect()
    }

    /// The shape of tensor `name`, or a Format error naming it.
    pub fn shape(&self, name: &str) -> Result<&[usize]> {
        match self.metadata.info(name) {
            Some(i) => Ok(&i.shape),
            None => Err(self.error(format!("tensor '{name}' is missing"))),
        }
    }

    /// Tensor `name` as f32 in C order, checked against `shape`; missing tensors, other shapes
    /// and non-float dtypes are Format errors naming the tensor and the expected shape.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let Some(info) = self.metadata.info(name) else {
            return Err(self.error(format!(
                "tensor '{name}' is missing (expected shape {shape:?})"
            )));
        };
        if info.shape != shape {
            return Err(self.error(format!(
                "tensor '{name}' has shape {:?}, expected {shape:?}",
                info.shape
            )));
        }
        let raw = &self.bytes
            [self.data_start + info.data_offsets.0..self.data_start + info.data_offsets.1];
        let out: Vec<f32> = match info.dtype {
            Dtype::F32 => raw
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => raw
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::BF16 => raw
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            d => {
                return Err(self.error(format!(
                    "tensor '{name}' (shape {shape:?}) has dtype {d:?}; expected F32, F16 or BF16"
                )))
            }
        };
        if let Some(i) = out.iter().position(|v| !v.is_finite()) {
            return Err(self.error(format!(
                "tensor '{name}' (shape {shape:?}) has a non-finite element at index {i}"
            )));
        }
        Ok(out)
    }

    /// A Format error on this file.
    pub fn error(&self, msg: impl Into<String>) -> Error {
        Error::format(&self.path, None, msg)
    }
}
