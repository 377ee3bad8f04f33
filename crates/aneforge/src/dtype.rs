//! Tensor element types: fp16 is the compute type, uint8 only enters through input ports,
//! bool only comes out of comparisons and never crosses a port, int32 holds indices (ports,
//! host-op outputs, `cast` to and from fp16).

use crate::error::{Error, Result};

/// Element type of a graph value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE binary16, the ANE's storage and compute type.
    Fp16,
    /// Unsigned 8-bit integers (image input ports only).
    Uint8,
    /// Booleans (comparison results; internal only).
    Bool,
    /// Signed 32-bit integers (index tensors: ports, host-op inputs/outputs, `cast`).
    Int32,
}

impl DType {
    /// The MIL spelling (`fp16`, `uint8`, `bool`, `int32`).
    pub fn mil(self) -> &'static str {
        match self {
            DType::Fp16 => "fp16",
            DType::Uint8 => "uint8",
            DType::Bool => "bool",
            DType::Int32 => "int32",
        }
    }

    /// Parse a user or MIL spelling; errors name the accepted spellings.
    pub fn parse(op: &str, s: &str) -> Result<DType> {
        match s {
            "fp16" | "float16" => Ok(DType::Fp16),
            "uint8" => Ok(DType::Uint8),
            "bool" => Ok(DType::Bool),
            "int32" => Ok(DType::Int32),
            _ => Err(Error::dtype(
                op,
                format!("unknown dtype '{s}' (expected fp16, uint8, bool or int32)"),
            )),
        }
    }

    /// Bytes per element on the wire.
    pub fn size(self) -> usize {
        match self {
            DType::Fp16 => 2,
            DType::Uint8 | DType::Bool => 1,
            DType::Int32 => 4,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mil())
    }
}
