//! `weights.bin` in the MILBlob v2 layout that coremltools' reader checks: a 64-byte header
//! (u32 count, u32 version = 2), then per payload a 64-byte descriptor at a 64-aligned offset
//! (u32 0xDEADBEEF, u32 dtype code, u64 byte length, u64 absolute data offset = descriptor + 64,
//! u64 padding bits of a sub-byte payload's last byte) followed by the data, zero-padded to the
//! next 64-byte boundary. MIL `BLOBFILE` offsets point at the descriptor.
//!
//! Payloads are typed: fp16 (code 1), int8 (4), uint4 (11) and uint1 (9). Sub-byte values form
//! a little-endian bit stream: element i occupies bits [i·n, (i+1)·n), so uint4 is two per byte
//! low nibble first and uint1 is LSB first; unused bits of the last byte are zero.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use half::f16;

use crate::error::{Error, Result};

/// Descriptor sentinel.
pub const SENTINEL: u32 = 0xDEAD_BEEF;
/// Container version written and required.
pub const VERSION: u32 = 2;
/// Every record starts at a multiple of this.
pub const ALIGN: usize = 64;

/// Element type of a payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobType {
    Fp16,
    Int8,
    Uint4,
    Uint1,
}

impl BlobType {
    /// The MILBlob dtype code written in the descriptor.
    pub fn code(self) -> u32 {
        match self {
            BlobType::Fp16 => 1,
            BlobType::Int8 => 4,
            BlobType::Uint4 => 11,
            BlobType::Uint1 => 9,
        }
    }

    /// The MIL dtype spelling.
    pub fn mil(self) -> &'static str {
        match self {
            BlobType::Fp16 => "fp16",
            BlobType::Int8 => "int8",
            BlobType::Uint4 => "uint4",
            BlobType::Uint1 => "uint1",
        }
    }

    /// Parse a MIL dtype spelling; `None` for types a payload cannot have.
    pub fn parse(s: &str) -> Option<BlobType> {
        [
            BlobType::Fp16,
            BlobType::Int8,
            BlobType::Uint4,
            BlobType::Uint1,
        ]
        .into_iter()
        .find(|t| t.mil() == s)
    }

    /// Bits per element.
    pub fn bits(self) -> usize {
        match self {
            BlobType::Fp16 => 16,
            BlobType::Int8 => 8,
            BlobType::Uint4 => 4,
            BlobType::Uint1 => 1,
        }
    }

    /// Data bytes of `n` elements (sub-byte types round up to whole bytes).
    pub fn data_len(self, n: usize) -> usize {
        (n * self.bits()).div_ceil(8)
    }

    /// Unused bits in the last data byte of `n` elements.
    pub fn padding_bits(self, n: usize) -> usize {
        self.data_len(n) * 8 - n * self.bits()
    }
}

/// Unsigned sub-byte values (uint1 or uint4) packed as a little-endian bit stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Packed {
    ty: BlobType,
    len: usize,
    bytes: Arc<Vec<u8>>,
}

impl Packed {
    /// Pack `values` (each masked to the type's width) of a uint1 or uint4 payload.
    pub fn pack(ty: BlobType, values: impl ExactSizeIterator<Item = u8>) -> Packed {
        let (bits, len) = (ty.bits(), values.len());
        let mut bytes = vec![0u8; ty.data_len(len)];
        let mask = ((1u16 << bits) - 1) as u8;
        for (i, v) in values.enumerate() {
            bytes[i * bits / 8] |= (v & mask) << (i * bits % 8);
        }
        Packed {
            ty,
            len,
            bytes: Arc::new(bytes),
        }
    }

    /// Element `i` (callers keep `i < len`).
    pub fn get(&self, i: usize) -> u8 {
        let bits = self.ty.bits();
        (self.bytes[i * bits / 8] >> (i * bits % 8)) & ((1u16 << bits) - 1) as u8
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The packed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Element type (uint1 or uint4).
    pub fn ty(&self) -> BlobType {
        self.ty
    }
}

/// One typed payload of the blob.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    Fp16(Arc<Vec<f16>>),
    Int8(Arc<Vec<i8>>),
    /// uint1 or uint4 values.
    Packed(Packed),
}

impl Payload {
    /// Element type.
    pub fn ty(&self) -> BlobType {
        match self {
            Payload::Fp16(_) => BlobType::Fp16,
            Payload::Int8(_) => BlobType::Int8,
            Payload::Packed(p) => p.ty,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Payload::Fp16(v) => v.len(),
            Payload::Int8(v) => v.len(),
            Payload::Packed(p) => p.len,
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Data bytes in the file (without descriptor or alignment padding).
    pub fn data_len(&self) -> usize {
        self.ty().data_len(self.len())
    }

    /// The data bytes, little-endian; borrowed except for fp16 on big-endian hosts.
    fn data(&self) -> Cow<'_, [u8]> {
        match self {
            Payload::Fp16(v) if cfg!(target_endian = "little") => {
                // SAFETY: f16 is a plain 2-byte value; on little-endian hosts its in-memory bytes are the file's bytes.
                Cow::Borrowed(unsafe {
                    std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len() * 2)
                })
            }
            Payload::Fp16(v) => {
                Cow::Owned(v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect())
            }
            // SAFETY: i8 and u8 have the same size, alignment and validity (every bit pattern).
            Payload::Int8(v) => Cow::Borrowed(unsafe {
                std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len())
            }),
            Payload::Packed(p) => Cow::Borrowed(&p.bytes),
        }
    }
}

/// A weights.bin layout over shared payloads: nothing is copied until it is hashed, written
/// or materialised, and all three stream the same byte sequence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Blob {
    payloads: Vec<Payload>,
    len: u64,
}

/// Bytes of a payload record: descriptor, data and padding to the next 64-byte boundary.
fn record_len(data_len: usize) -> u64 {
    (ALIGN + data_len.div_ceil(ALIGN) * ALIGN) as u64
}

impl Blob {
    /// An empty blob (header only).
    pub fn new() -> Self {
        Blob {
            payloads: Vec::new(),
            len: ALIGN as u64,
        }
    }

    /// Append a payload; returns the descriptor offset for `BLOBFILE(offset = ...)`.
    pub fn push(&mut self, payload: Payload) -> u64 {
        let desc = self.len;
        self.len += record_len(payload.data_len());
        self.payloads.push(payload);
        desc
    }

    /// Number of payloads.
    pub fn count(&self) -> usize {
        self.payloads.len()
    }

    /// Total file size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are no payloads.
    pub fn is_empty(&self) -> bool {
        self.payloads.is_empty()
    }

    /// Feed the file's bytes, in order, to `sink` (header, then per payload descriptor, data, padding).
    pub fn stream<E>(&self, mut sink: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        let mut header = [0u8; ALIGN];
        header[0..4].copy_from_slice(&(self.payloads.len() as u32).to_le_bytes());
        header[4..8].copy_from_slice(&VERSION.to_le_bytes());
        sink(&header)?;
        let zeros = [0u8; ALIGN];
        let mut desc = ALIGN as u64;
        for p in &self.payloads {
            let data_len = p.data_len();
            let mut rec = [0u8; ALIGN];
            rec[0..4].copy_from_slice(&SENTINEL.to_le_bytes());
            rec[4..8].copy_from_slice(&p.ty().code().to_le_bytes());
            rec[8..16].copy_from_slice(&(data_len as u64).to_le_bytes());
            rec[16..24].copy_from_slice(&(desc + ALIGN as u64).to_le_bytes());
            rec[24..32].copy_from_slice(&(p.ty().padding_bits(p.len()) as u64).to_le_bytes());
            sink(&rec)?;
            sink(&p.data())?;
            let rec_len = record_len(data_len);
            sink(&zeros[..(rec_len - ALIGN as u64) as usize - data_len])?;
            desc += rec_len;
        }
        Ok(())
    }

    /// The whole file image.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len as usize);
        self.stream::<()>(|b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .expect("infallible sink");
        out
    }
}

/// A parsed weights.bin image; reads are bounds-checked against the file.
#[derive(Debug)]
pub struct BlobReader<'a> {
    bytes: &'a [u8],
    file: &'a Path,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// fp16 values from little-endian bytes.
fn decode_fp16(raw: &[u8]) -> Arc<Vec<f16>> {
    Arc::new(
        raw.chunks_exact(2)
            .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
    )
}

impl<'a> BlobReader<'a> {
    /// Check the header; `file` is named in every error.
    pub fn new(bytes: &'a [u8], file: &'a Path) -> Result<Self> {
        if bytes.len() < ALIGN {
            return Err(Error::format(
                file,
                Some(0),
                format!(
                    "file is {} bytes, shorter than the 64-byte header",
                    bytes.len()
                ),
            ));
        }
        let version = u32_at(bytes, 4);
        if version != VERSION {
            return Err(Error::format(
                file,
                Some(4),
                format!("blob version is {version}, expected {VERSION}"),
            ));
        }
        Ok(BlobReader { bytes, file })
    }

    /// Payload count from the header.
    pub fn count(&self) -> u32 {
        u32_at(self.bytes, 0)
    }

    /// The checked data bytes of the payload whose descriptor is at `offset`, of type `ty` with `n` elements.
    fn data(&self, offset: u64, ty: BlobType, n: usize) -> Result<&'a [u8]> {
        let err = |at: u64, msg: String| Error::format(self.file, Some(at), msg);
        let len = self.bytes.len() as u64;
        if offset < ALIGN as u64
            || !offset.is_multiple_of(ALIGN as u64)
            || offset.checked_add(ALIGN as u64).is_none_or(|e| e > len)
        {
            return Err(err(offset, format!("descriptor offset {offset} is not a 64-aligned record inside the {len}-byte file")));
        }
        let d = offset as usize;
        if u32_at(self.bytes, d) != SENTINEL {
            return Err(err(
                offset,
                format!(
                    "bad descriptor sentinel {:#010x} (expected 0xdeadbeef)",
                    u32_at(self.bytes, d)
                ),
            ));
        }
        let code = u32_at(self.bytes, d + 4);
        if code != ty.code() {
            return Err(err(
                offset + 4,
                format!(
                    "payload dtype code {code}, expected {} ({})",
                    ty.code(),
                    ty.mil()
                ),
            ));
        }
        let size = u64_at(self.bytes, d + 8);
        let data = u64_at(self.bytes, d + 16);
        if data != offset + ALIGN as u64 {
            return Err(err(
                offset + 16,
                format!(
                    "data offset {data} does not follow its descriptor (expected {})",
                    offset + ALIGN as u64
                ),
            ));
        }
        let want = ty.data_len(n);
        if size != want as u64 {
            return Err(err(
                offset + 8,
                format!(
                    "payload is {size} bytes but the MIL type needs {n} {} values ({want} bytes)",
                    ty.mil()
                ),
            ));
        }
        if data.checked_add(size).is_none_or(|e| e > len) {
            return Err(err(
                data,
                format!("payload of {size} bytes runs past the end of the {len}-byte file"),
            ));
        }
        let pad = u64_at(self.bytes, d + 24);
        if ty.bits() < 8 && pad != ty.padding_bits(n) as u64 {
            return Err(err(
                offset + 24,
                format!(
                    "padding_size_in_bits is {pad}, but {n} {} values leave {}",
                    ty.mil(),
                    ty.padding_bits(n)
                ),
            ));
        }
        Ok(&self.bytes[data as usize..data as usize + want])
    }

    /// Read the payload whose descriptor is at `offset`, expecting type `ty` and exactly `n` elements.
    pub fn read(&self, offset: u64, ty: BlobType, n: usize) -> Result<Payload> {
        let raw = self.data(offset, ty, n)?;
        Ok(match ty {
            BlobType::Fp16 => Payload::Fp16(decode_fp16(raw)),
            BlobType::Int8 => Payload::Int8(Arc::new(raw.iter().map(|&b| b as i8).collect())),
            BlobType::Uint4 | BlobType::Uint1 => {
                let mut bytes = raw.to_vec();
                if let Some(last) = bytes.last_mut() {
                    *last &= (0xFFu16 >> ty.padding_bits(n)) as u8; // unused bits read as zero
                }
                Payload::Packed(Packed {
                    ty,
                    len: n,
                    bytes: Arc::new(bytes),
                })
            }
        })
    }

    /// Read an fp16 payload of exactly `n` values.
    pub fn read_fp16(&self, offset: u64, n: usize) -> Result<Arc<Vec<f16>>> {
        Ok(decode_fp16(self.data(offset, BlobType::Fp16, n)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16s(v: &[f32]) -> Arc<Vec<f16>> {
        Arc::new(v.iter().map(|&x| f16::from_f32(x)).collect())
    }

    /// (code, size, data offset, padding bits) of the descriptor at `at`.
    fn desc(bytes: &[u8], at: usize) -> (u32, u64, u64, u64) {
        assert_eq!(u32_at(bytes, at), SENTINEL);
        assert!(bytes[at + 32..at + 64].iter().all(|&x| x == 0));
        (
            u32_at(bytes, at + 4),
            u64_at(bytes, at + 8),
            u64_at(bytes, at + 16),
            u64_at(bytes, at + 24),
        )
    }

    #[test]
    fn layout_matches_milblob_v2() {
        let mut w = Blob::new();
        let b = f16s(&(0..40).map(|i| i as f32).collect::<Vec<_>>());
        assert_eq!(w.push(Payload::Fp16(f16s(&[1.0, -2.0, 0.5]))), 64);
        assert_eq!(w.push(Payload::Fp16(b.clone())), 192); // 64 + 64 (descriptor) + 6 bytes padded to 64
        let bytes = w.to_bytes();
        assert_eq!(bytes.len() as u64, w.len());
        assert_eq!(bytes.len(), 192 + 64 + 128);
        assert_eq!(&bytes[0..8], &[2, 0, 0, 0, 2, 0, 0, 0]);
        assert!(bytes[8..64].iter().all(|&x| x == 0));
        assert_eq!(&bytes[64..68], &[0xEF, 0xBE, 0xAD, 0xDE]);
        assert_eq!(desc(&bytes, 64), (1, 6, 128, 0));
        assert_eq!(&bytes[128..134], &[0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38]); // 1.0, -2.0, 0.5 in fp16 LE
        assert!(bytes[134..192].iter().all(|&x| x == 0));
        assert_eq!(desc(&bytes, 192), (1, 80, 256, 0));
        let r = BlobReader::new(&bytes, Path::new("w.bin")).unwrap();
        assert_eq!(r.count(), 2);
        assert_eq!(r.read_fp16(192, 40).unwrap(), b);
    }

    #[test]
    fn typed_payloads_have_coremltools_codes_packing_and_padding() {
        // Odd element counts for every sub-byte type; expected bytes written out by hand.
        let int8 = Payload::Int8(Arc::new(vec![-127, -1, 0, 1, 127]));
        let uint4 = Payload::Packed(Packed::pack(
            BlobType::Uint4,
            [1u8, 2, 15, 0, 9].into_iter(),
        ));
        let uint1 = Payload::Packed(Packed::pack(
            BlobType::Uint1,
            [1u8, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0].into_iter(),
        ));
        let mut w = Blob::new();
        let offs: Vec<u64> = [int8.clone(), uint4.clone(), uint1.clone()]
            .into_iter()
            .map(|p| w.push(p))
            .collect();
        assert_eq!(offs, [64, 192, 320], "every record starts 64-byte aligned");
        let bytes = w.to_bytes();
        assert_eq!(bytes.len(), 448);
        assert_eq!(u32_at(&bytes, 0), 3);
        assert_eq!(desc(&bytes, 64), (4, 5, 128, 0));
        assert_eq!(&bytes[128..133], &[0x81, 0xFF, 0x00, 0x01, 0x7F]);
        assert_eq!(desc(&bytes, 192), (11, 3, 256, 4)); // 5 nibbles in 3 bytes: 4 unused bits
        assert_eq!(&bytes[256..259], &[0x21, 0x0F, 0x09]); // low nibble = even element
        assert_eq!(desc(&bytes, 320), (9, 2, 384, 5)); // 11 bits in 2 bytes: 5 unused bits
        assert_eq!(&bytes[384..386], &[0b0101_1001, 0b0000_0011]); // element i = bit i % 8 of byte i / 8
        assert!(bytes[386..448].iter().all(|&x| x == 0));
        let r = BlobReader::new(&bytes, Path::new("w.bin")).unwrap();
        assert_eq!(r.read(64, BlobType::Int8, 5).unwrap(), int8);
        assert_eq!(r.read(192, BlobType::Uint4, 5).unwrap(), uint4);
        assert_eq!(r.read(320, BlobType::Uint1, 11).unwrap(), uint1);
        let Payload::Packed(p) = &uint4 else {
            unreachable!()
        };
        assert_eq!(
            (0..5).map(|i| p.get(i)).collect::<Vec<_>>(),
            [1, 2, 15, 0, 9]
        );
        assert_eq!(
            (
                BlobType::Uint4.padding_bits(21),
                BlobType::Uint1.padding_bits(70)
            ),
            (4, 2)
        );
        // coremltools' examples
    }

    #[test]
    fn reader_checks_types_counts_and_padding_and_zeroes_unused_bits() {
        let mut w = Blob::new();
        w.push(Payload::Packed(Packed::pack(
            BlobType::Uint4,
            [3u8, 4, 5].into_iter(),
        )));
        let good = w.to_bytes();
        let p = Path::new("w.bin");
        let r = BlobReader::new(&good, p).unwrap();
        let e = r.read(64, BlobType::Int8, 3).unwrap_err().to_string();
        assert!(
            e.contains("dtype code 11, expected 4 (int8)") && e.contains("at byte 68"),
            "{e}"
        );
        assert!(r
            .read(64, BlobType::Uint4, 5)
            .unwrap_err()
            .to_string()
            .contains("needs 5 uint4 values (3 bytes)"));
        // 4 values fill the same 2 bytes: only padding_size_in_bits tells them apart.
        assert!(r
            .read(64, BlobType::Uint4, 4)
            .unwrap_err()
            .to_string()
            .contains("padding_size_in_bits is 4, but 4 uint4 values leave 0"));
        let mut bad = good.clone();
        bad[88] = 0; // padding_size_in_bits
        assert!(BlobReader::new(&bad, p)
            .unwrap()
            .read(64, BlobType::Uint4, 3)
            .unwrap_err()
            .to_string()
            .contains("padding_size_in_bits is 0"));
        let mut dirty = good.clone();
        dirty[129] |= 0xA0; // garbage in the unused high nibble
        assert_eq!(
            BlobReader::new(&dirty, p)
                .unwrap()
                .read(64, BlobType::Uint4, 3)
                .unwrap(),
            r.read(64, BlobType::Uint4, 3).unwrap()
        );
    }

    #[test]
    fn reader_rejects_corruption_with_offsets() {
        let mut w = Blob::new();
        w.push(Payload::Fp16(Arc::new(vec![f16::ONE; 4])));
        let good = w.to_bytes();
        let p = Path::new("w.bin");
        let r = BlobReader::new(&good, p).unwrap();
        for (off, n, needle) in [
            (0u64, 4, "not a 64-aligned"),
            (65, 4, "not a 64-aligned"),
            (64, 5, "needs 5 fp16"),
            (4096, 4, "inside the"),
        ] {
            let e = r.read_fp16(off, n).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("w.bin"), "{e}");
        }
        let mut bad = good.clone();
        bad[64] = 0;
        assert!(BlobReader::new(&bad, p)
            .unwrap()
            .read_fp16(64, 4)
            .unwrap_err()
            .to_string()
            .contains("sentinel"));
        let mut bad = good.clone();
        bad[72] = 200; // length larger than the file
        assert!(BlobReader::new(&bad, p)
            .unwrap()
            .read_fp16(64, 100)
            .unwrap_err()
            .to_string()
            .contains("past the end"));
        assert!(BlobReader::new(&good[..10], p).is_err());
        let mut bad = good;
        bad[4] = 1;
        assert!(BlobReader::new(&bad, p)
            .unwrap_err()
            .to_string()
            .contains("version"));
    }
}
