//! The MIL text dialect: printer, parser, literals and the weights.bin (MILBlob v2) container.

pub mod blob;
pub mod literal;
pub mod parse;
pub mod print;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{Error, Result};
use blob::{BlobType, Payload};
pub use literal::Literal;

/// How an op's tensor arguments are spelled in MIL.
#[derive(Clone, Debug, PartialEq)]
pub enum MilInputs {
    /// Keyword arguments in input order; optional trailing ones may be absent (conv `bias`).
    Named(Vec<&'static str>),
    /// All inputs as one tuple argument (`concat(values = (a, b))`).
    Tuple(&'static str),
}

/// The MIL spelling of one op: its name, compile-time parameters and tensor arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct MilOp {
    pub op: &'static str,
    pub params: Vec<(&'static str, Literal)>,
    pub inputs: MilInputs,
    /// Arguments given inline as typed `BLOBFILE` tensors (constexpr ops): name, shape, payload.
    pub blobs: Vec<(&'static str, Vec<usize>, Payload)>,
}

impl MilOp {
    /// An op whose tensor arguments are the given keywords.
    pub fn new(op: &'static str, inputs: &[&'static str]) -> Self {
        MilOp {
            op,
            params: Vec::new(),
            inputs: MilInputs::Named(inputs.to_vec()),
            blobs: Vec::new(),
        }
    }

    /// Add a compile-time parameter.
    pub fn param(mut self, name: &'static str, value: Literal) -> Self {
        self.params.push((name, value));
        self
    }

    /// Add an inline blob tensor argument of `shape`.
    pub fn blob(mut self, name: &'static str, shape: &[usize], payload: Payload) -> Self {
        self.blobs.push((name, shape.to_vec(), payload));
        self
    }
}

/// The compile-time parameters of one parsed MIL statement, consumed by a family's `from_mil`.
pub struct MilArgs {
    /// File being parsed (for errors).
    pub file: PathBuf,
    /// Name of the statement (for errors).
    pub stmt: String,
    /// Parameters still unclaimed, by argument name.
    pub params: BTreeMap<String, Literal>,
    /// Inline blob tensor arguments still unclaimed: name → (shape, payload).
    pub blobs: BTreeMap<String, (Vec<usize>, Payload)>,
}

impl MilArgs {
    /// Arguments of statement `stmt` in `file` holding `params` and no blob arguments.
    pub fn new(
        file: impl Into<PathBuf>,
        stmt: impl Into<String>,
        params: BTreeMap<String, Literal>,
    ) -> Self {
        MilArgs {
            file: file.into(),
            stmt: stmt.into(),
            params,
            blobs: BTreeMap::new(),
        }
    }

    fn err(&self, msg: String) -> Error {
        Error::format(
            &self.file,
            None,
            format!("statement '{}': {msg}", self.stmt),
        )
    }

    /// Take parameter `name`.
    pub fn take(&mut self, name: &str) -> Result<Literal> {
        self.params
            .remove(name)
            .ok_or_else(|| self.err(format!("missing parameter '{name}'")))
    }

    /// Take an fp16 scalar parameter.
    pub fn fp16(&mut self, name: &str) -> Result<f32> {
        match self.take(name)? {
            Literal::Fp16(v) => Ok(v),
            other => Err(self.err(format!(
                "parameter '{name}' must be fp16, got {}",
                other.mil_value()
            ))),
        }
    }

    /// Take an fp32 scalar parameter.
    pub fn fp32(&mut self, name: &str) -> Result<f32> {
        match self.take(name)? {
            Literal::Fp32(v) => Ok(v),
            other => Err(self.err(format!(
                "parameter '{name}' must be fp32, got {}",
                other.mil_value()
            ))),
        }
    }

    /// Take an int32 (or uint32) scalar parameter.
    pub fn int(&mut self, name: &str) -> Result<i64> {
        match self.take(name)? {
            Literal::Int32(v) => Ok(v as i64),
            Literal::Uint32(v) => Ok(v as i64),
            other => Err(self.err(format!(
                "parameter '{name}' must be an integer, got {}",
                other.mil_value()
            ))),
        }
    }

    /// Take an int32 vector parameter.
    pub fn ints(&mut self, name: &str) -> Result<Vec<i64>> {
        match self.take(name)? {
            Literal::Ints(v) => Ok(v.into_iter().map(i64::from).collect()),
            other => Err(self.err(format!(
                "parameter '{name}' must be an int32 tensor, got {}",
                other.mil_value()
            ))),
        }
    }

    /// Take a non-negative int32 vector parameter (extents, strides).
    pub fn sizes(&mut self, name: &str) -> Result<Vec<usize>> {
        let v = self.ints(name)?;
        v.iter()
            .map(|&x| {
                usize::try_from(x).map_err(|_| {
                    self.err(format!(
                        "parameter '{name}' must be non-negative, got {v:?}"
                    ))
                })
            })
            .collect()
    }

    /// Take an int8 scalar parameter.
    pub fn int8(&mut self, name: &str) -> Result<i8> {
        match self.take(name)? {
            Literal::Int8(v) => Ok(v),
            other => Err(self.err(format!(
                "parameter '{name}' must be int8, got {}",
                other.mil_value()
            ))),
        }
    }

    /// Take an inline blob argument of element type `ty`: its shape and payload.
    pub fn blob(&mut self, name: &str, ty: BlobType) -> Result<(Vec<usize>, Payload)> {
        let (shape, p) = self
            .blobs
            .remove(name)
            .ok_or_else(|| self.err(format!("missing tensor argument '{name}'")))?;
        if p.ty() != ty {
            return Err(self.err(format!(
                "argument '{name}' must be a {} tensor, got {}",
                ty.mil(),
                p.ty().mil()
            )));
        }
        Ok((shape, p))
    }

    /// Take a bool parameter.
    pub fn bool(&mut self, name: &str) -> Result<bool> {
        match self.take(name)? {
            Literal::Bool(v) => Ok(v),
            other => Err(self.err(format!(
                "parameter '{name}' must be bool, got {}",
                other.mil_value()
            ))),
        }
    }

    /// Take a string parameter.
    pub fn string(&mut self, name: &str) -> Result<String> {
        match self.take(name)? {
            Literal::Str(v) => Ok(v),
            other => Err(self.err(format!(
                "parameter '{name}' must be a string, got {}",
                other.mil_value()
            ))),
        }
    }

    /// A format error about this statement.
    pub fn error(&self, msg: impl Into<String>) -> Error {
        self.err(msg.into())
    }
}
