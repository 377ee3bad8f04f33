//! `weights.bin` in the MILBlob v2 layout that coremltools' reader checks: a 64-byte header
//! (u32 count, u32 version = 2), then per payload a 64-byte descriptor at a 64-aligned offset
//! (u32 0xDEADBEEF, u32 dtype code, u64 byte length, u64 absolute data offset = descriptor + 64,
//! u64 padding bits) followed by the data, zero-padded to the next 64-byte boundary.
//! MIL `BLOBFILE` offsets point at the descriptor.

use std::path::Path;
use std::sync::Arc;

use half::f16;

use crate::error::{Error, Result};

/// Descriptor sentinel.
pub const SENTINEL: u32 = 0xDEAD_BEEF;
/// Container version written and required.
pub const VERSION: u32 = 2;
/// Blob dtype code of fp16 payloads.
pub const DTYPE_FP16: u32 = 1;
/// Every record starts at a multiple of this.
pub const ALIGN: usize = 64;

/// A weights.bin layout over shared fp16 payloads: nothing is copied until it is hashed,
/// written or materialised, and all three stream the same byte sequence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Blob {
    payloads: Vec<Arc<Vec<f16>>>,
    len: u64,
}

/// Bytes of a payload record: descriptor, data and padding to the next 64-byte boundary.
fn record_len(values: usize) -> u64 {
    (ALIGN + (values * 2).div_ceil(ALIGN) * ALIGN) as u64
}

impl Blob {
    /// An empty blob (header only).
    pub fn new() -> Self {
        Blob { payloads: Vec::new(), len: ALIGN as u64 }
    }

    /// Append an fp16 payload; returns the descriptor offset for `BLOBFILE(offset = ...)`.
    pub fn push_fp16(&mut self, values: Arc<Vec<f16>>) -> u64 {
        let desc = self.len;
        self.len += record_len(values.len());
        self.payloads.push(values);
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
        for values in &self.payloads {
            let data_len = values.len() * 2;
            let mut rec = [0u8; ALIGN];
            rec[0..4].copy_from_slice(&SENTINEL.to_le_bytes());
            rec[4..8].copy_from_slice(&DTYPE_FP16.to_le_bytes());
            rec[8..16].copy_from_slice(&(data_len as u64).to_le_bytes());
            rec[16..24].copy_from_slice(&(desc + ALIGN as u64).to_le_bytes());
            sink(&rec)?;
            if cfg!(target_endian = "little") {
                // SAFETY: f16 is a plain 2-byte value; on little-endian hosts its in-memory bytes are the file's bytes.
                sink(unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), data_len) })?;
            } else {
                let le: Vec<u8> = values.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
                sink(&le)?;
            }
            let rec_len = record_len(values.len());
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

impl<'a> BlobReader<'a> {
    /// Check the header; `file` is named in every error.
    pub fn new(bytes: &'a [u8], file: &'a Path) -> Result<Self> {
        if bytes.len() < ALIGN {
            return Err(Error::format(file, Some(0), format!("file is {} bytes, shorter than the 64-byte header", bytes.len())));
        }
        let version = u32_at(bytes, 4);
        if version != VERSION {
            return Err(Error::format(file, Some(4), format!("blob version is {version}, expected {VERSION}")));
        }
        Ok(BlobReader { bytes, file })
    }

    /// Payload count from the header.
    pub fn count(&self) -> u32 {
        u32_at(self.bytes, 0)
    }

    /// Read the fp16 payload whose descriptor is at `offset`, expecting exactly `n` values.
    pub fn read_fp16(&self, offset: u64, n: usize) -> Result<Vec<f16>> {
        let err = |at: u64, msg: String| Error::format(self.file, Some(at), msg);
        let len = self.bytes.len() as u64;
        if offset < ALIGN as u64 || offset % ALIGN as u64 != 0 || offset.checked_add(ALIGN as u64).is_none_or(|e| e > len) {
            return Err(err(offset, format!("descriptor offset {offset} is not a 64-aligned record inside the {len}-byte file")));
        }
        let d = offset as usize;
        if u32_at(self.bytes, d) != SENTINEL {
            return Err(err(offset, format!("bad descriptor sentinel {:#010x} (expected 0xdeadbeef)", u32_at(self.bytes, d))));
        }
        let dtype = u32_at(self.bytes, d + 4);
        if dtype != DTYPE_FP16 {
            return Err(err(offset + 4, format!("payload dtype code {dtype}, expected {DTYPE_FP16} (fp16)")));
        }
        let size = u64_at(self.bytes, d + 8);
        let data = u64_at(self.bytes, d + 16);
        if data != offset + ALIGN as u64 {
            return Err(err(offset + 16, format!("data offset {data} does not follow its descriptor (expected {})", offset + ALIGN as u64)));
        }
        if size != (n as u64) * 2 {
            return Err(err(offset + 8, format!("payload is {size} bytes but the MIL type needs {n} fp16 values ({} bytes)", n * 2)));
        }
        if data.checked_add(size).is_none_or(|e| e > len) {
            return Err(err(data, format!("payload of {size} bytes runs past the end of the {len}-byte file")));
        }
        let start = data as usize;
        Ok(self.bytes[start..start + n * 2].chunks_exact(2).map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]]))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_milblob_v2() {
        let mut w = Blob::new();
        let a: Vec<f16> = [1.0f32, -2.0, 0.5].iter().map(|&v| f16::from_f32(v)).collect();
        let b: Vec<f16> = (0..40).map(|i| f16::from_f32(i as f32)).collect();
        assert_eq!(w.push_fp16(Arc::new(a)), 64);
        assert_eq!(w.push_fp16(Arc::new(b.clone())), 192); // 64 + 64 (descriptor) + 6 bytes padded to 64
        let bytes = w.to_bytes();
        assert_eq!(bytes.len() as u64, w.len());
        assert_eq!(bytes.len(), 192 + 64 + 128);
        assert_eq!(&bytes[0..8], &[2, 0, 0, 0, 2, 0, 0, 0]);
        assert!(bytes[8..64].iter().all(|&x| x == 0));
        assert_eq!(&bytes[64..68], &[0xEF, 0xBE, 0xAD, 0xDE]);
        assert_eq!(u32_at(&bytes, 68), 1);
        assert_eq!(u64_at(&bytes, 72), 6);
        assert_eq!(u64_at(&bytes, 80), 128);
        assert_eq!(&bytes[128..134], &[0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38]); // 1.0, -2.0, 0.5 in fp16 LE
        assert!(bytes[134..192].iter().all(|&x| x == 0));
        assert_eq!(u64_at(&bytes, 192 + 16), 256);
        let r = BlobReader::new(&bytes, Path::new("w.bin")).unwrap();
        assert_eq!(r.count(), 2);
        assert_eq!(r.read_fp16(192, 40).unwrap(), b);
    }

    #[test]
    fn reader_rejects_corruption_with_offsets() {
        let mut w = Blob::new();
        w.push_fp16(Arc::new(vec![f16::ONE; 4]));
        let good = w.to_bytes();
        let p = Path::new("w.bin");
        let r = BlobReader::new(&good, p).unwrap();
        for (off, n, needle) in [(0u64, 4, "not a 64-aligned"), (65, 4, "not a 64-aligned"), (64, 5, "needs 5 fp16"), (4096, 4, "inside the")] {
            let e = r.read_fp16(off, n).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("w.bin"), "{e}");
        }
        let mut bad = good.clone();
        bad[64] = 0;
        assert!(BlobReader::new(&bad, p).unwrap().read_fp16(64, 4).unwrap_err().to_string().contains("sentinel"));
        let mut bad = good.clone();
        bad[72] = 200; // length larger than the file
        assert!(BlobReader::new(&bad, p).unwrap().read_fp16(64, 100).unwrap_err().to_string().contains("past the end"));
        assert!(BlobReader::new(&good[..10], p).is_err());
        let mut bad = good;
        bad[4] = 1;
        assert!(BlobReader::new(&bad, p).unwrap_err().to_string().contains("version"));
    }
}
