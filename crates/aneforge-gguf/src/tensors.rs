//! Tensor infos: name, dims, ggml type and data offset, with element and byte counts computed
//! in checked arithmetic and validated against the alignment and the file length.

use std::collections::HashMap;

use crate::cursor::Cursor;
use crate::error::{GgufError, Result};

/// Most dimensions a ggml tensor has.
pub const MAX_DIMS: usize = 4;

macro_rules! ggml_types {
    ($($variant:ident = $id:literal, $name:literal, $block:literal, $bytes:literal;)*) => {
        /// A ggml tensor type (storage format), with its on-disk id.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types)]
        pub enum GgmlType {
            $($variant = $id,)*
        }

        impl GgmlType {
            /// The type for on-disk id `id`, or `None` for ids ggml does not define.
            pub fn from_id(id: u32) -> Option<GgmlType> {
                match id {
                    $($id => Some(GgmlType::$variant),)*
                    _ => None,
                }
            }

            /// ggml's name for the type (`Q4_K`, `BF16`, ...).
            pub fn name(self) -> &'static str {
                match self {
                    $(GgmlType::$variant => $name,)*
                }
            }

            /// Elements per block (1 for plain types).
            pub fn block_size(self) -> u64 {
                match self {
                    $(GgmlType::$variant => $block,)*
                }
            }

            /// Bytes per block.
            pub fn type_size(self) -> u64 {
                match self {
                    $(GgmlType::$variant => $bytes,)*
                }
            }
        }
    };
}

// Block sizes and byte sizes are ggml's (`ggml.c` type traits; the `gguf` package lists the
// same, except that it gives Q8_1 40 bytes where ggml's block_q8_1 is 2 + 2 + 32 = 36).
ggml_types! {
    F32 = 0, "F32", 1, 4;
    F16 = 1, "F16", 1, 2;
    Q4_0 = 2, "Q4_0", 32, 18;
    Q4_1 = 3, "Q4_1", 32, 20;
    Q5_0 = 6, "Q5_0", 32, 22;
    Q5_1 = 7, "Q5_1", 32, 24;
    Q8_0 = 8, "Q8_0", 32, 34;
    Q8_1 = 9, "Q8_1", 32, 36;
    Q2_K = 10, "Q2_K", 256, 84;
    Q3_K = 11, "Q3_K", 256, 110;
    Q4_K = 12, "Q4_K", 256, 144;
    Q5_K = 13, "Q5_K", 256, 176;
    Q6_K = 14, "Q6_K", 256, 210;
    Q8_K = 15, "Q8_K", 256, 292;
    IQ2_XXS = 16, "IQ2_XXS", 256, 66;
    IQ2_XS = 17, "IQ2_XS", 256, 74;
    IQ3_XXS = 18, "IQ3_XXS", 256, 98;
    IQ1_S = 19, "IQ1_S", 256, 50;
    IQ4_NL = 20, "IQ4_NL", 32, 18;
    IQ3_S = 21, "IQ3_S", 256, 110;
    IQ2_S = 22, "IQ2_S", 256, 82;
    IQ4_XS = 23, "IQ4_XS", 256, 136;
    I8 = 24, "I8", 1, 1;
    I16 = 25, "I16", 1, 2;
    I32 = 26, "I32", 1, 4;
    I64 = 27, "I64", 1, 8;
    F64 = 28, "F64", 1, 8;
    IQ1_M = 29, "IQ1_M", 256, 56;
    BF16 = 30, "BF16", 1, 2;
    TQ1_0 = 34, "TQ1_0", 256, 54;
    TQ2_0 = 35, "TQ2_0", 256, 66;
    MXFP4 = 39, "MXFP4", 32, 17;
    NVFP4 = 40, "NVFP4", 64, 36;
    Q1_0 = 41, "Q1_0", 128, 18;
}

/// One tensor's description; its data is `n_bytes` at `offset` within the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name (unique in the file).
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the contiguous (fastest-varying) one.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ggml_type: GgmlType,
    /// Byte offset from the start of the data section (a multiple of the alignment).
    pub offset: u64,
    /// Number of elements (product of `dims`; 1 for zero dims).
    pub n_elements: u64,
    /// Number of data bytes.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Row-major (NumPy) shape: `dims` reversed, so the last axis is the contiguous one.
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().rev().copied().collect()
    }
}

/// Read `count` tensor infos (names unique, types known, at most four dims, rows made of
/// whole blocks, counts that fit in u64).
pub(crate) fn parse(cur: &mut Cursor<'_>, count: u64) -> Result<Vec<TensorInfo>> {
    // An info is at least an 8-byte name length, 4-byte n_dims, 4-byte type, 8-byte offset.
    let n = cur.check_count(count, 24, || "the tensor count".into())?;
    let mut infos = Vec::with_capacity(n);
    let mut seen = HashMap::with_capacity(n);
    for i in 0..n {
        let info = parse_one(cur, i)?;
        if seen.insert(info.name.clone(), i).is_some() {
            return Err(GgufError::Duplicate {
                path: cur.path().into(),
                what: "tensor name",
                name: info.name,
            });
        }
        infos.push(info);
    }
    Ok(infos)
}

/// Tensor info number `i`.
fn parse_one(cur: &mut Cursor<'_>, i: usize) -> Result<TensorInfo> {
    let name = cur.string(|| format!("name of tensor #{i}"))?.to_string();
    let n_dims = cur.u32(|| format!("dimension count of tensor '{name}'"))?;
    let path = cur.path();
    let bad_dims = |dims: Vec<u64>, reason: String| GgufError::BadDims {
        path: path.into(),
        tensor: name.clone(),
        dims,
        reason,
    };
    if n_dims as usize > MAX_DIMS {
        return Err(bad_dims(
            vec![],
            format!("{n_dims} dimensions, at most {MAX_DIMS} are allowed"),
        ));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        dims.push(cur.u64(|| format!("dimension {d} of tensor '{name}'"))?);
    }
    let type_id = cur.u32(|| format!("type of tensor '{name}'"))?;
    let offset = cur.u64(|| format!("data offset of tensor '{name}'"))?;
    let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
        path: path.into(),
        tensor: name.clone(),
        type_id,
    })?;
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad_dims(dims.clone(), "the element count overflows u64".into()))?;
    let row = dims.first().copied().unwrap_or(1);
    if row % ggml_type.block_size() != 0 {
        return Err(bad_dims(
            dims,
            format!(
                "rows of {row} elements are not whole {} blocks of {}",
                ggml_type.name(),
                ggml_type.block_size()
            ),
        ));
    }
    let n_bytes = (n_elements / ggml_type.block_size())
        .checked_mul(ggml_type.type_size())
        .ok_or_else(|| bad_dims(dims.clone(), "the byte count overflows u64".into()))?;
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
        n_elements,
        n_bytes,
    })
}

/// Check that every tensor's offset is aligned and its data `[data_start + offset, + n_bytes)`
/// lies inside a file of `file_len` bytes.
pub(crate) fn validate_spans(
    path: &str,
    infos: &[TensorInfo],
    data_start: u64,
    alignment: u64,
    file_len: u64,
) -> Result<()> {
    for info in infos {
        if info.offset % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                path: path.into(),
                tensor: info.name.clone(),
                offset: info.offset,
                alignment,
            });
        }
        let start = data_start.checked_add(info.offset);
        let end = start.and_then(|s| s.checked_add(info.n_bytes));
        match (start, end) {
            (Some(_), Some(end)) if end <= file_len => {}
            _ => {
                return Err(GgufError::TensorPastEnd {
                    path: path.into(),
                    tensor: info.name.clone(),
                    start: start.unwrap_or(u64::MAX),
                    end: end.unwrap_or(u64::MAX),
                    file_len,
                })
            }
        }
    }
    Ok(())
}
