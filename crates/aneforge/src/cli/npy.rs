//! NumPy `.npy` files (format versions 1, 2 and 3): read little-endian `<f2 <f4 <f8 |u1`
//! arrays (integer `|i1 <i4 <i8` arrays are read as uint8 when every value is in 0..=255) in
//! C order, and write f32 arrays. Malformed files are rejected with [`Error::Format`] naming
//! the file and byte offset; nothing is read out of bounds.

use std::path::Path;

use half::f16;

use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::program::write_atomic;

const MAGIC: &[u8] = b"\x93NUMPY";

/// Element data of a `.npy` array.
#[derive(Clone, Debug, PartialEq)]
pub enum NpyData {
    F16(Vec<f16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    U8(Vec<u8>),
    /// Integers read for an int32 port (see [`read_int32`]).
    I32(Vec<i32>),
}

/// An array read from a `.npy` file: shape (C order) and data.
#[derive(Clone, Debug, PartialEq)]
pub struct Npy {
    pub shape: Vec<usize>,
    pub data: NpyData,
}

impl Npy {
    /// NumPy's spelling of the data's dtype (`float16`, `float32`, `float64`, `uint8`).
    pub fn dtype_name(&self) -> &'static str {
        match self.data {
            NpyData::F16(_) => "float16",
            NpyData::F32(_) => "float32",
            NpyData::F64(_) => "float64",
            NpyData::U8(_) => "uint8",
            NpyData::I32(_) => "int32",
        }
    }

    /// The data as executor input.
    pub fn port_data(&self) -> PortData<'_> {
        match &self.data {
            NpyData::F16(d) => PortData::F16(d),
            NpyData::F32(d) => PortData::F32(d),
            NpyData::F64(d) => PortData::F64(d),
            NpyData::U8(d) => PortData::U8(d),
            NpyData::I32(d) => PortData::I32(d),
        }
    }
}

/// Read a `.npy` file (a regular file only: devices and FIFOs are refused before reading).
pub fn read(path: &Path) -> Result<Npy> {
    let bytes = crate::program::files::read_regular(path)?;
    parse(&bytes, path)
}

/// Read a `.npy` file for an int32 port: integer arrays (`|i1`, `|u1`, `<i4`, `<i8`) become
/// int32 (an element outside int32's range is an error naming it); float arrays as [`read`].
pub fn read_int32(path: &Path) -> Result<Npy> {
    let bytes = crate::program::files::read_regular(path)?;
    parse_with(&bytes, path, true)
}

/// Parse `.npy` bytes; `file` only names the source in errors. Integer arrays are read as uint8.
pub fn parse(bytes: &[u8], file: &Path) -> Result<Npy> {
    parse_with(bytes, file, false)
}

/// [`parse`], integer arrays read as int32 when `int32`.
fn parse_with(bytes: &[u8], file: &Path, int32: bool) -> Result<Npy> {
    let err = |offset: usize, msg: String| Error::format(file, Some(offset as u64), msg);
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(err(
            0,
            "not a .npy file (missing the \\x93NUMPY magic)".into(),
        ));
    }
    let (len_size, utf8) = match bytes[6] {
        1 => (2, false),
        2 => (4, false),
        3 => (4, true),
        v => {
            return Err(err(
                6,
                format!(
                    "unsupported .npy format version {v}.{} (expected 1, 2 or 3)",
                    bytes[7]
                ),
            ))
        }
    };
    let start = 8 + len_size;
    if bytes.len() < start {
        return Err(err(8, "truncated header length".into()));
    }
    let header_len = if len_size == 2 {
        u16::from_le_bytes([bytes[8], bytes[9]]) as usize
    } else {
        u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
    };
    let data_start = start + header_len;
    if data_start > bytes.len() {
        return Err(err(
            8,
            format!(
                "header length {header_len} runs past the end of the file ({} bytes)",
                bytes.len()
            ),
        ));
    }
    let raw = &bytes[start..data_start];
    let text = match std::str::from_utf8(raw) {
        Ok(t) if utf8 || t.is_ascii() => t,
        _ => {
            return Err(err(
                start,
                format!(
                    "header is not {} text",
                    if utf8 { "UTF-8" } else { "ASCII" }
                ),
            ))
        }
    };
    let header = Header::parse(text).map_err(|(at, msg)| err(start + at, msg))?;
    if header.fortran_order {
        return Err(err(start, "fortran_order is True; only C-order arrays are supported (save np.ascontiguousarray(a))".into()));
    }
    let kind = Kind::from_descr(&header.descr).map_err(|msg| err(start, msg))?;
    let numel = header
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d));
    let Some(nbytes) = numel.and_then(|n| n.checked_mul(kind.size())) else {
        return Err(err(
            start,
            format!("shape {:?} has too many bytes", header.shape),
        ));
    };
    let data = &bytes[data_start..];
    if data.len() != nbytes {
        let what = if data.len() < nbytes {
            "truncated"
        } else {
            "has trailing bytes"
        };
        return Err(err(
            data_start,
            format!(
                "{what}: shape {:?} of {} needs {nbytes} data bytes, the file has {}",
                header.shape,
                header.descr,
                data.len()
            ),
        ));
    }
    let words = |n: usize| data.chunks_exact(n);
    let at = |offset: usize, msg: String| err(data_start + offset, msg);
    let data = match kind {
        Kind::F16 => NpyData::F16(
            words(2)
                .map(|w| f16::from_bits(u16::from_le_bytes([w[0], w[1]])))
                .collect(),
        ),
        Kind::F32 => NpyData::F32(
            words(4)
                .map(|w| f32::from_le_bytes(w.try_into().expect("4 bytes")))
                .collect(),
        ),
        Kind::F64 => NpyData::F64(
            words(8)
                .map(|w| f64::from_le_bytes(w.try_into().expect("8 bytes")))
                .collect(),
        ),
        Kind::U8 if int32 => NpyData::I32(data.iter().map(|&b| b as i32).collect()),
        Kind::U8 => NpyData::U8(data.to_vec()),
        Kind::Int(size) if int32 => NpyData::I32(narrow(data, size, "int32's range", &at)?),
        Kind::Int(size) => NpyData::U8(narrow(
            data,
            size,
            "uint8's range 0..=255 (integer arrays are read as uint8)",
            &at,
        )?),
    };
    Ok(Npy {
        shape: header.shape,
        data,
    })
}

/// Python-style tuple text of a shape, as `.npy` headers and NumPy write it: `(1, 16)`, `(64,)`, `()`.
pub fn shape_tuple(shape: &[usize]) -> String {
    match shape {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Encode a 4-byte-element array (C order) as `.npy` version 1 bytes with dtype `descr`;
/// `data.len()` must equal the shape's product.
fn to_bytes<T: Copy>(shape: &[usize], descr: &str, data: &[T], le: fn(T) -> [u8; 4]) -> Vec<u8> {
    assert_eq!(
        shape.iter().product::<usize>(),
        data.len(),
        "npy::to_bytes: data length does not match shape {shape:?}"
    );
    let dims = shape_tuple(shape);
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in data {
        out.extend_from_slice(&le(v));
    }
    out
}

/// Write a 4-byte-element array as a `.npy` file with dtype `descr`, atomically (temp file + rename).
fn write_array<T: Copy>(
    path: &Path,
    shape: &[usize],
    descr: &str,
    data: &[T],
    le: fn(T) -> [u8; 4],
) -> Result<()> {
    if shape.iter().product::<usize>() != data.len() {
        return Err(Error::shape(
            "npy write",
            format!(
                "{} values do not fill shape {shape:?} ({})",
                data.len(),
                path.display()
            ),
        ));
    }
    let bytes = to_bytes(shape, descr, data, le);
    write_atomic(path, |f| std::io::Write::write_all(f, &bytes))
}

/// Write an f32 array as a `.npy` file (`<f4`), atomically (temp file + rename).
pub fn write_f32(path: &Path, shape: &[usize], data: &[f32]) -> Result<()> {
    write_array(path, shape, "<f4", data, f32::to_le_bytes)
}

/// Write an int32 array as a `.npy` file (`<i4`), atomically (temp file + rename).
pub fn write_i32(path: &Path, shape: &[usize], data: &[i32]) -> Result<()> {
    write_array(path, shape, "<i4", data, i32::to_le_bytes)
}

/// Signed little-endian integers of `size` bytes (1, 4 or 8) narrowed to `T`; an element
/// outside `T`'s range is `at(byte offset, message)` naming the element, its value and `range`.
fn narrow<T: TryFrom<i64>>(
    data: &[u8],
    size: usize,
    range: &str,
    at: &dyn Fn(usize, String) -> Error,
) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(data.len() / size);
    for (i, w) in data.chunks_exact(size).enumerate() {
        let v = match size {
            1 => w[0] as i8 as i64,
            4 => i32::from_le_bytes(w.try_into().expect("4 bytes")) as i64,
            _ => i64::from_le_bytes(w.try_into().expect("8 bytes")),
        };
        let x = T::try_from(v).map_err(|_| {
            at(
                i * size,
                format!("integer element {i} = {v} is outside {range}"),
            )
        })?;
        out.push(x);
    }
    Ok(out)
}

/// Element kinds accepted on read.
#[derive(Clone, Copy, Debug)]
enum Kind {
    F16,
    F32,
    F64,
    U8,
    /// Signed integers of this many bytes, converted to uint8.
    Int(usize),
}

impl Kind {
    fn from_descr(d: &str) -> std::result::Result<Kind, String> {
        match d {
            "<f2" => Ok(Kind::F16),
            "<f4" => Ok(Kind::F32),
            "<f8" => Ok(Kind::F64),
            "|u1" => Ok(Kind::U8),
            "|i1" => Ok(Kind::Int(1)),
            "<i4" => Ok(Kind::Int(4)),
            "<i8" => Ok(Kind::Int(8)),
            _ if d.starts_with('>') => Err(format!(
                "dtype '{d}' is big-endian; save little-endian data (arr.astype('<f4'))"
            )),
            _ => Err(format!(
                "unsupported dtype '{d}' (expected <f2, <f4, <f8, |u1, |i1, <i4 or <i8)"
            )),
        }
    }

    fn size(self) -> usize {
        match self {
            Kind::F16 => 2,
            Kind::F32 => 4,
            Kind::F64 => 8,
            Kind::U8 => 1,
            Kind::Int(n) => n,
        }
    }
}

/// The header dictionary: `{'descr': ..., 'fortran_order': ..., 'shape': (...), }`.
#[derive(Debug)]
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// A header parse error: byte offset within the header text and message.
type HeaderError = (usize, String);

impl Header {
    fn parse(text: &str) -> std::result::Result<Header, HeaderError> {
        let mut p = Cursor {
            s: text.as_bytes(),
            i: 0,
        };
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        p.expect(b'{')?;
        while !p.eat(b'}') {
            let key = p.string()?;
            p.expect(b':')?;
            match key.as_str() {
                "descr" if p.peek() == Some(b'[') => {
                    return Err(p.fail("structured dtypes are not supported"))
                }
                "descr" => descr = Some(p.string()?),
                "fortran_order" => fortran = Some(p.boolean()?),
                "shape" => shape = Some(p.tuple()?),
                _ => return Err(p.fail(format!("unknown header key '{key}'"))),
            }
            if !p.eat(b',') {
                p.expect(b'}')?;
                break;
            }
        }
        p.skip_ws();
        if p.i != p.s.len() {
            return Err(p.fail("unexpected text after the header dictionary"));
        }
        match (descr, fortran, shape) {
            (Some(descr), Some(fortran_order), Some(shape)) => Ok(Header {
                descr,
                fortran_order,
                shape,
            }),
            _ => Err((
                0,
                "header lacks one of 'descr', 'fortran_order', 'shape'".into(),
            )),
        }
    }
}

/// A byte cursor over the header's Python-literal text.
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn fail(&self, msg: impl Into<String>) -> HeaderError {
        (self.i, format!("bad header: {}", msg.into()))
    }

    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.i += hit as usize;
        hit
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), HeaderError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.fail(format!("expected '{}'", c as char)))
        }
    }

    fn string(&mut self) -> std::result::Result<String, HeaderError> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(self.fail("expected a quoted string")),
        };
        let start = self.i + 1;
        let len = self.s[start..]
            .iter()
            .position(|&c| c == q)
            .ok_or_else(|| self.fail("unterminated string"))?;
        self.i = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }

    fn boolean(&mut self) -> std::result::Result<bool, HeaderError> {
        self.skip_ws();
        for (word, v) in [(&b"True"[..], true), (&b"False"[..], false)] {
            if self.s[self.i..].starts_with(word) {
                self.i += word.len();
                return Ok(v);
            }
        }
        Err(self.fail("expected True or False"))
    }

    fn tuple(&mut self) -> std::result::Result<Vec<usize>, HeaderError> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        while !self.eat(b')') {
            let start = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).expect("ASCII digits");
            let found = if digits.is_empty() {
                self.s
                    .get(start)
                    .map_or("end of header".into(), |&c| (c as char).to_string())
            } else {
                digits.to_string()
            };
            let d = digits.parse::<usize>().map_err(|_| {
                (
                    start,
                    format!(
                        "bad header: expected a dimension (an integer below 2^64), found '{found}'"
                    ),
                )
            })?;
            dims.push(d);
            if !self.eat(b',') {
                self.expect(b')')?;
                break;
            }
        }
        Ok(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(data);
        b
    }

    fn parse_err(bytes: &[u8]) -> (Option<u64>, String) {
        match parse(bytes, Path::new("t.npy")).unwrap_err() {
            Error::Format { file, offset, msg } => {
                assert_eq!(file, Path::new("t.npy"));
                (offset, msg)
            }
            e => panic!("expected a format error, got {e}"),
        }
    }

    #[test]
    fn round_trips_f32_with_aligned_header() {
        for shape in [vec![], vec![3], vec![2, 3], vec![1, 2, 0]] {
            let data: Vec<f32> = (0..shape.iter().product::<usize>())
                .map(|i| i as f32 * -1.5)
                .collect();
            let bytes = to_bytes(&shape, "<f4", &data, f32::to_le_bytes);
            let header_end = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!(header_end % 64, 0);
            assert_eq!(bytes[header_end - 1], b'\n');
            let a = parse(&bytes, Path::new("t.npy")).unwrap();
            assert_eq!(
                a,
                Npy {
                    shape,
                    data: NpyData::F32(data)
                }
            );
        }
    }

    #[test]
    fn reads_each_dtype_and_versions_2_and_3() {
        let h = |d: &str| format!("{{'descr': '{d}', 'fortran_order': False, 'shape': (2,), }}\n");
        let a = parse(&file(&h("<f2"), &[0x00, 0x3c, 0x00, 0xc0]), Path::new("t")).unwrap();
        assert_eq!(
            a.data,
            NpyData::F16(vec![f16::from_f32(1.0), f16::from_f32(-2.0)])
        );
        let a = parse(
            &file(
                &h("<f8"),
                &[0.5f64.to_le_bytes(), 3.0f64.to_le_bytes()].concat(),
            ),
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(a.data, NpyData::F64(vec![0.5, 3.0]));
        let a = parse(&file(&h("|u1"), &[7, 255]), Path::new("t")).unwrap();
        assert_eq!(a.data, NpyData::U8(vec![7, 255]));
        let a = parse(
            &file(
                &h("<i8"),
                &[3i64.to_le_bytes(), 200i64.to_le_bytes()].concat(),
            ),
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(a.data, NpyData::U8(vec![3, 200]));
        let a = parse(&file(&h("|i1"), &[1, 2]), Path::new("t")).unwrap();
        assert_eq!(a.data, NpyData::U8(vec![1, 2]));
        for v in [2u8, 3] {
            let hd = "{\"descr\": \"<i4\", \"shape\": (1, 2), \"fortran_order\": False}";
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&[v, 0]);
            b.extend_from_slice(&(hd.len() as u32).to_le_bytes());
            b.extend_from_slice(hd.as_bytes());
            b.extend_from_slice(&[9i32.to_le_bytes(), 0i32.to_le_bytes()].concat());
            let a = parse(&b, Path::new("t")).unwrap();
            assert_eq!((a.shape, a.data), (vec![1, 2], NpyData::U8(vec![9, 0])));
        }
    }

    #[test]
    fn rejects_bad_magic_and_version() {
        assert_eq!(parse_err(b"PK\x03\x04 not npy at all").0, Some(0));
        assert_eq!(parse_err(b"\x93NUMP").0, Some(0));
        let mut b = file("{}", &[]);
        b[6] = 9;
        let (off, msg) = parse_err(&b);
        assert_eq!(off, Some(6));
        assert!(msg.contains("version 9"), "{msg}");
    }

    #[test]
    fn rejects_header_length_past_eof() {
        let mut b = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
            &[0; 4],
        );
        b[8..10].copy_from_slice(&60000u16.to_le_bytes());
        let (off, msg) = parse_err(&b);
        assert_eq!(off, Some(8));
        assert!(msg.contains("past the end"), "{msg}");
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[2, 0, 0xff, 0xff, 0xff, 0xff]);
        assert!(parse_err(&b).1.contains("past the end"));
    }

    #[test]
    fn rejects_shapes_whose_size_overflows_or_exceeds_the_file() {
        let (_, msg) = parse_err(&file(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            &[0; 8],
        ));
        assert!(msg.contains("too many bytes"), "{msg}");
        let (_, msg) = parse_err(&file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
            &[],
        ));
        assert!(msg.contains("expected a dimension"), "{msg}");
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 1000), }";
        let (off, msg) = parse_err(&file(h, &[0; 16]));
        assert_eq!(off, Some(10 + h.len() as u64));
        assert!(
            msg.contains("truncated") && msg.contains("4000000"),
            "{msg}"
        );
        assert!(parse_err(&file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
            &[0; 5]
        ))
        .1
        .contains("trailing"));
    }

    #[test]
    fn rejects_fortran_order_and_unknown_or_big_endian_dtypes() {
        let h = |d: &str, f: &str| {
            file(
                &format!("{{'descr': '{d}', 'fortran_order': {f}, 'shape': (1,), }}"),
                &[0; 4],
            )
        };
        assert!(parse_err(&h("<f4", "True")).1.contains("fortran_order"));
        assert!(parse_err(&h(">f4", "False")).1.contains("big-endian"));
        assert!(parse_err(&h("<c8", "False"))
            .1
            .contains("unsupported dtype '<c8'"));
        assert!(parse_err(&h("<f4", "Maybe")).1.contains("True or False"));
        assert!(parse_err(&file(
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
            &[0; 4]
        ))
        .1
        .contains("structured"));
    }

    #[test]
    fn rejects_malformed_headers() {
        for (h, needle) in [
            ("{'descr': '<f4', 'shape': (1,), }", "lacks"),
            (
                "{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}",
                "expected '}'",
            ),
            ("{'descr' '<f4'}", "expected ':'"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                "unknown header key",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing",
                "after the header",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
                "expected a dimension",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1",
                "expected ')'",
            ),
            ("{'descr': '<f4", "unterminated"),
            ("", "expected '{'"),
        ] {
            let (_, msg) = parse_err(&file(h, &[0; 4]));
            assert!(msg.contains(needle), "{h}: {msg}");
        }
        let mut b = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
            &[0; 4],
        );
        b[12] = 0xc3;
        assert!(parse_err(&b).1.contains("not ASCII"));
    }

    #[test]
    fn rejects_integers_outside_uint8() {
        let h = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
        let (off, msg) = parse_err(&file(
            h,
            &[5i32.to_le_bytes(), (-1i32).to_le_bytes()].concat(),
        ));
        assert_eq!(off, Some(10 + h.len() as u64 + 4));
        assert!(msg.contains("element 1 = -1"), "{msg}");
    }

    #[test]
    fn write_is_atomic_and_checks_length() {
        let dir = std::env::temp_dir().join(format!("aneforge-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        write_f32(&p, &[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(
            read(&p).unwrap().data,
            NpyData::F32(vec![1.0, 2.0, 3.0, 4.0])
        );
        assert!(write_f32(&p, &[3], &[1.0]).is_err());
        // int32 written as <i4 and read back exactly for an int32 port (values beyond fp16's
        // and f32's exact integers included); the same bytes read for another port are uint8.
        let q = dir.join("i.npy");
        let ints = [-7, 0, 16_777_217, i32::MAX];
        write_i32(&q, &[2, 2], &ints).unwrap();
        let back = read_int32(&q).unwrap();
        assert_eq!(
            (back.shape, back.data),
            (vec![2, 2], NpyData::I32(ints.to_vec()))
        );
        assert!(read(&q).unwrap_err().to_string().contains("uint8"));
        assert!(write_i32(&q, &[3], &[1]).is_err());
        std::fs::remove_file(&q).unwrap();
        let leftovers = std::fs::read_dir(&dir).unwrap().count();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(leftovers, 1);
    }
}
