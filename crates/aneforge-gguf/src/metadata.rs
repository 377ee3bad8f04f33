//! Metadata key/value pairs: the thirteen GGUF value types (arrays may nest), parsed with every
//! count checked against the bytes left, and typed accessors whose errors name the key.

use std::collections::HashMap;

use crate::cursor::Cursor;
use crate::error::{GgufError, Result};

/// Deepest array-of-array nesting accepted (deeper files are refused, not recursed into).
pub const MAX_ARRAY_NESTING: usize = 8;

/// Key of the data-section alignment (u32, power of two; 32 when absent).
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Alignment used when the file has no `general.alignment`.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// A metadata value type, with its on-disk id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type for on-disk id `id`, or `None` outside 0..=12.
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Lower-case name as errors print it (`u32`, `string`, `array`, ...).
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// The fewest bytes one value of this type occupies (strings: the length alone; arrays:
    /// element type + count), used to bound counts before allocating.
    fn min_bytes(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    /// Any non-zero byte reads as true (as ggml does).
    Bool(bool),
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A homogeneous array stored compactly by element type (so that memory stays within a few
/// times the bytes it was read from); empty arrays keep their element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<Array>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Array {
    /// Type of every element.
    pub fn elem_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Value {
    /// This value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The type as errors print it: `u32`, `string`, `array of string`, ...
    pub fn type_description(&self) -> String {
        match self {
            Value::Array(a) => format!("array of {}", a.elem_type().name()),
            other => other.value_type().name().to_string(),
        }
    }

    /// Any integer type holding a value >= 0, widened to u64 (hyper-parameters are written
    /// as u32 by some converters and u64 or i32 by others).
    pub fn as_unsigned(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// A float (f32 widened, or f64) as f64.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }
}

/// All key/value pairs of one file, in file order, with lookup by key.
#[derive(Debug, Clone)]
pub struct Metadata {
    path: String,
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

impl Metadata {
    /// Every pair in file order.
    pub fn entries(&self) -> &[(String, Value)] {
        &self.entries
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// Take `key` out (later lookups miss it), returning its value; file order is kept.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.index.remove(key)?;
        let (_, value) = self.entries.remove(i);
        for (k, _) in &self.entries[i..] {
            if let Some(j) = self.index.get_mut(k) {
                *j -= 1;
            }
        }
        Some(value)
    }

    /// The value of `key`, or `MissingKey` naming it.
    pub fn require(&self, key: &str) -> Result<&Value> {
        self.get(key).ok_or_else(|| GgufError::MissingKey {
            path: self.path.clone(),
            key: key.to_string(),
        })
    }

    /// `key` converted by `pick`, or `WrongType` naming the key, `expected` and the actual type.
    fn typed<'s, T>(
        &'s self,
        key: &str,
        expected: &'static str,
        pick: impl FnOnce(&'s Value) -> Option<T>,
    ) -> Result<T> {
        let value = self.require(key)?;
        pick(value).ok_or_else(|| GgufError::WrongType {
            path: self.path.clone(),
            key: key.to_string(),
            expected,
            actual: value.type_description(),
        })
    }

    /// A string value.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.typed(key, "string", |v| match v {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// A u32 value (exactly type u32).
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.typed(key, "u32", |v| match *v {
            Value::U32(x) => Some(x),
            _ => None,
        })
    }

    /// A u64 value (exactly type u64).
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.typed(key, "u64", |v| match *v {
            Value::U64(x) => Some(x),
            _ => None,
        })
    }

    /// An i32 value (exactly type i32).
    pub fn get_i32(&self, key: &str) -> Result<i32> {
        self.typed(key, "i32", |v| match *v {
            Value::I32(x) => Some(x),
            _ => None,
        })
    }

    /// An f32 value (exactly type f32).
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.typed(key, "f32", |v| match *v {
            Value::F32(x) => Some(x),
            _ => None,
        })
    }

    /// A bool value.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.typed(key, "bool", |v| match *v {
            Value::Bool(x) => Some(x),
            _ => None,
        })
    }

    /// Any non-negative integer value as u64 (see [`Value::as_unsigned`]).
    pub fn get_unsigned(&self, key: &str) -> Result<u64> {
        self.typed(key, "a non-negative integer", Value::as_unsigned)
    }

    /// An f32 or f64 value as f64.
    pub fn get_float(&self, key: &str) -> Result<f64> {
        self.typed(key, "a float", Value::as_float)
    }

    /// An array value of any element type.
    pub fn get_array(&self, key: &str) -> Result<&Array> {
        self.typed(key, "array", |v| match v {
            Value::Array(a) => Some(a),
            _ => None,
        })
    }

    /// An array of strings, borrowed.
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>> {
        self.typed(key, "array of string", |v| match v {
            Value::Array(Array::String(items)) => Some(items.iter().map(String::as_str).collect()),
            _ => None,
        })
    }

    /// The data-section alignment: `general.alignment` (a u32 power of two) or 32.
    pub fn alignment(&self) -> Result<u64> {
        match self.get(ALIGNMENT_KEY) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some(Value::U32(a)) if a.is_power_of_two() => Ok(u64::from(*a)),
            Some(other) => Err(GgufError::BadAlignment {
                path: self.path.clone(),
                value: format!("{other:?}"),
            }),
        }
    }
}

/// Read `count` key/value pairs; duplicate keys are refused.
pub(crate) fn parse(cur: &mut Cursor<'_>, count: u64) -> Result<Metadata> {
    // A pair is at least an 8-byte key length, a 4-byte type and a 1-byte value.
    let n = cur.check_count(count, 13, || "the metadata count".into())?;
    let mut entries = Vec::with_capacity(n);
    let mut index = HashMap::with_capacity(n);
    for i in 0..n {
        let key = cur.string(|| format!("metadata key #{i}"))?.to_string();
        let type_id = cur.u32(|| format!("value type of metadata key '{key}'"))?;
        let value = parse_value(cur, &key, type_id, 0)?;
        if index.insert(key.clone(), entries.len()).is_some() {
            return Err(GgufError::Duplicate {
                path: cur.path().into(),
                what: "metadata key",
                name: key,
            });
        }
        entries.push((key, value));
    }
    Ok(Metadata {
        path: cur.path().into(),
        entries,
        index,
    })
}

/// The type for `type_id`, or `UnknownValueType` naming `key`.
fn value_type(cur: &Cursor<'_>, key: &str, type_id: u32) -> Result<ValueType> {
    ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        path: cur.path().into(),
        key: key.to_string(),
        type_id,
    })
}

/// One value of type `type_id` for `key`, at array nesting `depth`.
fn parse_value(cur: &mut Cursor<'_>, key: &str, type_id: u32, depth: usize) -> Result<Value> {
    let what = || format!("value of metadata key '{key}'");
    Ok(match value_type(cur, key, type_id)? {
        ValueType::U8 => Value::U8(u8::from_le_bytes(cur.array(what)?)),
        ValueType::I8 => Value::I8(i8::from_le_bytes(cur.array(what)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(cur.array(what)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(cur.array(what)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(cur.array(what)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(cur.array(what)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(cur.array(what)?)),
        ValueType::Bool => Value::Bool(cur.array::<1>(what)?[0] != 0),
        ValueType::String => Value::String(cur.string(what)?.to_string()),
        ValueType::U64 => Value::U64(u64::from_le_bytes(cur.array(what)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(cur.array(what)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(cur.array(what)?)),
        ValueType::Array => Value::Array(parse_array(cur, key, depth)?),
    })
}

/// `n` fixed-size little-endian elements (`n` already checked against the bytes left).
fn read_elems<T, const N: usize>(
    cur: &mut Cursor<'_>,
    n: usize,
    key: &str,
    decode: fn([u8; N]) -> T,
) -> Result<Vec<T>> {
    let bytes = cur.take((n * N) as u64, || format!("elements of array '{key}'"))?;
    Ok(bytes
        .chunks_exact(N)
        .map(|chunk| {
            let mut raw = [0u8; N];
            raw.copy_from_slice(chunk);
            decode(raw)
        })
        .collect())
}

/// An array body (element type, count, elements) for `key`.
fn parse_array(cur: &mut Cursor<'_>, key: &str, depth: usize) -> Result<Array> {
    if depth >= MAX_ARRAY_NESTING {
        return Err(GgufError::NestingTooDeep {
            path: cur.path().into(),
            key: key.to_string(),
            limit: MAX_ARRAY_NESTING,
        });
    }
    let elem_id = cur.u32(|| format!("element type of array '{key}'"))?;
    let elem_type = value_type(cur, key, elem_id)?;
    let count = cur.u64(|| format!("length of array '{key}'"))?;
    let n = cur.check_count(count, elem_type.min_bytes(), || {
        format!("array '{key}' of {}", elem_type.name())
    })?;
    Ok(match elem_type {
        ValueType::U8 => Array::U8(read_elems(cur, n, key, u8::from_le_bytes)?),
        ValueType::I8 => Array::I8(read_elems(cur, n, key, i8::from_le_bytes)?),
        ValueType::U16 => Array::U16(read_elems(cur, n, key, u16::from_le_bytes)?),
        ValueType::I16 => Array::I16(read_elems(cur, n, key, i16::from_le_bytes)?),
        ValueType::U32 => Array::U32(read_elems(cur, n, key, u32::from_le_bytes)?),
        ValueType::I32 => Array::I32(read_elems(cur, n, key, i32::from_le_bytes)?),
        ValueType::F32 => Array::F32(read_elems(cur, n, key, f32::from_le_bytes)?),
        ValueType::Bool => Array::Bool(read_elems(cur, n, key, |[b]: [u8; 1]| b != 0)?),
        ValueType::U64 => Array::U64(read_elems(cur, n, key, u64::from_le_bytes)?),
        ValueType::I64 => Array::I64(read_elems(cur, n, key, i64::from_le_bytes)?),
        ValueType::F64 => Array::F64(read_elems(cur, n, key, f64::from_le_bytes)?),
        ValueType::String => {
            let mut items = Vec::with_capacity(n);
            for i in 0..n {
                items.push(
                    cur.string(|| format!("element {i} of array '{key}'"))?
                        .to_string(),
                );
            }
            Array::String(items)
        }
        ValueType::Array => {
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(parse_array(cur, key, depth + 1)?);
            }
            Array::Array(items)
        }
    })
}
