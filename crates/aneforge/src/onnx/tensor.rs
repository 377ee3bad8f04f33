//! ONNX tensors on the host: element types, and initializers decoded from every storage form
//! (raw_data, the typed repeated fields, external data files) with each length checked before
//! anything is allocated.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use half::{bf16, f16};

use super::proto::TensorProto;
use crate::error::{Error, Result};

/// Most elements one host tensor may hold (2^31): bounds every allocation sized by file data.
pub const MAX_ELEMENTS: usize = 1 << 31;

/// ONNX `TensorProto.DataType` codes the importer understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    U8,
    I8,
    U16,
    I16,
    I32,
    I64,
    Bool,
    F16,
    F64,
    U32,
    U64,
    Bf16,
}

impl Elem {
    /// The element type of ONNX code `code`; errors (naming `what`) for strings, complex and the
    /// sub-byte/float8 types.
    pub fn from_code(code: i32, what: &str) -> Result<Elem> {
        Ok(match code {
            1 => Elem::F32,
            2 => Elem::U8,
            3 => Elem::I8,
            4 => Elem::U16,
            5 => Elem::I16,
            6 => Elem::I32,
            7 => Elem::I64,
            9 => Elem::Bool,
            10 => Elem::F16,
            11 => Elem::F64,
            12 => Elem::U32,
            13 => Elem::U64,
            16 => Elem::Bf16,
            8 => return Err(unsupported(what, "string tensors")),
            14 | 15 => return Err(unsupported(what, "complex tensors")),
            17..=26 => {
                return Err(unsupported(
                    what,
                    &format!("element type {code} (float8/4-bit/2-bit)"),
                ))
            }
            _ => {
                return Err(Error::value(
                    what,
                    format!("unknown ONNX element type {code}"),
                ))
            }
        })
    }

    /// The ONNX code.
    pub fn code(self) -> i32 {
        match self {
            Elem::F32 => 1,
            Elem::U8 => 2,
            Elem::I8 => 3,
            Elem::U16 => 4,
            Elem::I16 => 5,
            Elem::I32 => 6,
            Elem::I64 => 7,
            Elem::Bool => 9,
            Elem::F16 => 10,
            Elem::F64 => 11,
            Elem::U32 => 12,
            Elem::U64 => 13,
            Elem::Bf16 => 16,
        }
    }

    /// Bytes per element in raw_data.
    pub fn size(self) -> usize {
        match self {
            Elem::U8 | Elem::I8 | Elem::Bool => 1,
            Elem::U16 | Elem::I16 | Elem::F16 | Elem::Bf16 => 2,
            Elem::F32 | Elem::I32 | Elem::U32 => 4,
            Elem::I64 | Elem::F64 | Elem::U64 => 8,
        }
    }

    /// Whether values are floating point (they become fp16 in the graph).
    pub fn is_float(self) -> bool {
        matches!(self, Elem::F32 | Elem::F16 | Elem::F64 | Elem::Bf16)
    }

    /// `v` converted to this type as ONNX `Cast` does (integers truncate toward zero and wrap;
    /// bool is v != 0; floats round to their precision).
    pub fn convert(self, v: f64) -> f64 {
        let wrap = |bits: u32, signed: bool| -> f64 {
            if !v.is_finite() {
                return 0.0;
            }
            let t = v.trunc() as i128;
            let m = 1i128 << bits;
            let mut r = t.rem_euclid(m);
            if signed && r >= m / 2 {
                r -= m;
            }
            r as f64
        };
        match self {
            Elem::F32 => v as f32 as f64,
            Elem::F16 => f16::from_f64(v).to_f64(),
            Elem::Bf16 => bf16::from_f64(v).to_f64(),
            Elem::F64 => v,
            Elem::Bool => f64::from(u8::from(v != 0.0)),
            Elem::U8 => wrap(8, false),
            Elem::I8 => wrap(8, true),
            Elem::U16 => wrap(16, false),
            Elem::I16 => wrap(16, true),
            Elem::I32 => wrap(32, true),
            Elem::U32 => wrap(32, false),
            Elem::I64 => v.trunc().clamp(i64::MIN as f64, i64::MAX as f64),
            Elem::U64 => v.trunc().clamp(0.0, u64::MAX as f64),
        }
    }
}

/// The error for a genuine limit of the importer (NotImplemented: Python NotImplementedError).
pub fn unsupported(what: &str, reason: &str) -> Error {
    Error::NotImplemented(format!("{what}: unsupported: {reason}"))
}

/// A tensor held on the host (initializers, Constant nodes, folded shape arithmetic): ONNX
/// element type, dims (rank 0 allowed) and values as f64 in C order.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub elem: Elem,
    pub dims: Vec<usize>,
    pub data: Vec<f64>,
}

impl HostTensor {
    /// A tensor from parts; errors (naming `what`) when the value count differs from the dims.
    pub fn new(elem: Elem, dims: Vec<usize>, data: Vec<f64>, what: &str) -> Result<HostTensor> {
        let n = checked_numel(&dims, what)?;
        if n != data.len() {
            return Err(Error::shape(
                what,
                format!("{} values for dims {dims:?} ({n} elements)", data.len()),
            ));
        }
        Ok(HostTensor { elem, dims, data })
    }

    /// A rank-1 int64 tensor.
    pub fn ints(values: &[i64]) -> HostTensor {
        HostTensor {
            elem: Elem::I64,
            dims: vec![values.len()],
            data: values.iter().map(|&v| v as f64).collect(),
        }
    }

    /// Values as i64 (truncated), e.g. shapes, axes, pads.
    pub fn to_i64(&self) -> Vec<i64> {
        self.data.iter().map(|&v| v as i64).collect()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len()
    }
}

/// Product of `dims`, erroring (naming `what`) above [`MAX_ELEMENTS`].
pub fn checked_numel(dims: &[usize], what: &str) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |n, &d| {
            n.checked_mul(d).filter(|&n| n <= MAX_ELEMENTS)
        })
        .ok_or_else(|| {
            Error::shape(
                what,
                format!("dims {dims:?} hold more than {MAX_ELEMENTS} elements"),
            )
        })
}

/// ONNX dims (int64) as extents: negative or absurd values are errors naming `what`.
pub fn checked_dims(dims: &[i64], what: &str) -> Result<Vec<usize>> {
    let out = dims
        .iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| Error::shape(what, format!("negative dim {d} in {dims:?}")))
        })
        .collect::<Result<Vec<_>>>()?;
    checked_numel(&out, what)?;
    Ok(out)
}

/// Decode initializer / Constant value `t`; external data is read relative to `base_dir`
/// (paths must stay inside it). Errors name the tensor and the values that disagree.
pub fn decode(t: &TensorProto, base_dir: Option<&Path>) -> Result<HostTensor> {
    let what = format!("tensor '{}'", t.name());
    let elem = Elem::from_code(t.data_type(), &what)?;
    if t.segment.is_some() {
        return Err(unsupported(&what, "segmented tensors"));
    }
    let dims = checked_dims(&t.dims, &what)?;
    let n = checked_numel(&dims, &what)?;
    let external = t.data_location() == super::proto::tensor_proto::DataLocation::External;
    let bytes_needed = n
        .checked_mul(elem.size())
        .ok_or_else(|| Error::shape(&what, "byte size overflows"))?;
    let data = if external {
        let raw = read_external(t, base_dir, bytes_needed, &what)?;
        from_raw(&raw, elem)
    } else if let Some(raw) = &t.raw_data {
        if raw.len() != bytes_needed {
            return Err(Error::shape(
                &what,
                format!(
                    "raw_data has {} bytes but dims {dims:?} of {elem:?} need {bytes_needed}",
                    raw.len()
                ),
            ));
        }
        from_raw(raw, elem)
    } else {
        let typed: Vec<f64> = match elem {
            Elem::F32 => t.float_data.iter().map(|&v| v as f64).collect(),
            Elem::F64 => t.double_data.clone(),
            Elem::I64 => t.int64_data.iter().map(|&v| v as f64).collect(),
            Elem::U32 | Elem::U64 => t.uint64_data.iter().map(|&v| v as f64).collect(),
            // int32_data carries every type of 32 bits or fewer; f16/bf16 as their bit patterns.
            Elem::F16 => t
                .int32_data
                .iter()
                .map(|&v| f16::from_bits(v as u16).to_f64())
                .collect(),
            Elem::Bf16 => t
                .int32_data
                .iter()
                .map(|&v| bf16::from_bits(v as u16).to_f64())
                .collect(),
            _ => t
                .int32_data
                .iter()
                .map(|&v| elem.convert(v as f64))
                .collect(),
        };
        if typed.len() != n {
            return Err(Error::shape(
                &what,
                format!(
                    "has {} stored values but dims {dims:?} need {n}",
                    typed.len()
                ),
            ));
        }
        typed
    };
    Ok(HostTensor { elem, dims, data })
}

/// Little-endian raw bytes (length already checked) as f64 values.
fn from_raw(raw: &[u8], elem: Elem) -> Vec<f64> {
    if elem == Elem::F32 {
        // The bulk of every model's bytes: one branch-free loop the compiler vectorises.
        return raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect();
    }
    let s = elem.size();
    raw.chunks_exact(s)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..s].copy_from_slice(c);
            match elem {
                Elem::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                Elem::F64 => f64::from_le_bytes(b),
                Elem::F16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
                Elem::Bf16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
                Elem::U8 | Elem::Bool => b[0] as f64,
                Elem::I8 => b[0] as i8 as f64,
                Elem::U16 => u16::from_le_bytes([b[0], b[1]]) as f64,
                Elem::I16 => i16::from_le_bytes([b[0], b[1]]) as f64,
                Elem::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                Elem::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                Elem::I64 => i64::from_le_bytes(b) as f64,
                Elem::U64 => u64::from_le_bytes(b) as f64,
            }
        })
        .collect()
}

/// Read `need` bytes of external data: `location` must be a relative path inside `base_dir`
/// (no `..`, no absolute path), `offset`/`length` within the file.
fn read_external(
    t: &TensorProto,
    base_dir: Option<&Path>,
    need: usize,
    what: &str,
) -> Result<Vec<u8>> {
    let (mut location, mut offset, mut length) = (None, 0u64, None);
    for kv in &t.external_data {
        let bad = |v: &str| {
            Error::value(
                what,
                format!("external_data {} = '{v}' is not a byte count", kv.key()),
            )
        };
        match kv.key() {
            "location" => location = Some(kv.value().to_string()),
            "offset" => offset = kv.value().parse().map_err(|_| bad(kv.value()))?,
            "length" => length = Some(kv.value().parse::<u64>().map_err(|_| bad(kv.value()))?),
            _ => {}
        }
    }
    let location =
        location.ok_or_else(|| Error::value(what, "external data without a location"))?;
    let Some(base) = base_dir else {
        return Err(Error::value(
            what,
            format!(
                "external data '{location}' needs the model's folder (load the model from a path)"
            ),
        ));
    };
    let rel = Path::new(&location);
    if !rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(Error::value(
            what,
            format!("external data path '{location}' escapes the model's folder"),
        ));
    }
    let path: PathBuf = base.join(rel);
    if let Some(l) = length {
        if l != need as u64 {
            return Err(Error::shape(
                what,
                format!("external data length {l} but dims need {need} bytes"),
            ));
        }
    }
    let io = |e| Error::Io {
        path: path.clone(),
        source: e,
    };
    // A symlink inside the folder may point anywhere: the resolved file must stay inside.
    let real = path.canonicalize().map_err(io)?;
    let real_base = base.canonicalize().map_err(|e| Error::Io {
        path: base.to_path_buf(),
        source: e,
    })?;
    if !real.starts_with(&real_base) {
        return Err(Error::value(
            what,
            format!(
                "external data path '{location}' resolves outside the model's folder (to {})",
                real.display()
            ),
        ));
    }
    // A FIFO would block the open and a device never ends: regular files only.
    if !std::fs::metadata(&real).map_err(io)?.is_file() {
        return Err(Error::format(
            &real,
            None,
            format!("{what}: external data is not a regular file"),
        ));
    }
    let mut f = std::fs::File::open(&real).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    if offset.checked_add(need as u64).is_none_or(|end| end > size) {
        return Err(Error::Format {
            file: path.clone(),
            offset: Some(offset),
            msg: format!("{what}: needs {need} bytes at offset {offset} but the file has {size}"),
        });
    }
    f.seek(SeekFrom::Start(offset)).map_err(io)?;
    let mut buf = vec![0u8; need];
    f.read_exact(&mut buf).map_err(io)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::proto::TensorProto;

    /// Casts follow ONNX/C semantics: truncation toward zero, two's-complement wrap.
    #[test]
    fn casts_truncate_and_wrap_like_onnx() {
        assert_eq!(Elem::I8.convert(130.0), -126.0);
        assert_eq!(Elem::U8.convert(-1.0), 255.0);
        assert_eq!(Elem::I32.convert(-2.7), -2.0);
        assert_eq!(Elem::Bool.convert(0.5), 1.0);
        assert_eq!(Elem::F16.convert(1.0 + 1.0 / 4096.0), 1.0);
    }

    /// Every storage form decodes to the same values; length mismatches name the tensor.
    #[test]
    fn initializers_decode_from_raw_and_typed_fields() {
        let raw: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let t = TensorProto {
            name: Some("w".into()),
            dims: vec![2],
            data_type: Some(1),
            raw_data: Some(raw.into()),
            ..Default::default()
        };
        assert_eq!(decode(&t, None).unwrap().data, vec![1.5, -2.0]);
        let t = TensorProto {
            name: Some("h".into()),
            dims: vec![2],
            data_type: Some(10),
            int32_data: vec![0x3c00, 0xc000],
            ..Default::default()
        };
        assert_eq!(decode(&t, None).unwrap().data, vec![1.0, -2.0]);
        let t = TensorProto {
            name: Some("i".into()),
            dims: vec![3],
            data_type: Some(7),
            int64_data: vec![1, -2],
            ..Default::default()
        };
        let msg = decode(&t, None).unwrap_err().to_string();
        assert!(
            msg.contains("tensor 'i'") && msg.contains("2 stored values") && msg.contains("need 3"),
            "{msg}"
        );
        let t = TensorProto {
            name: Some("n".into()),
            dims: vec![-1],
            data_type: Some(1),
            ..Default::default()
        };
        assert!(decode(&t, None)
            .unwrap_err()
            .to_string()
            .contains("negative dim -1"));
    }
}
