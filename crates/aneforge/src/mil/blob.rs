//! `weights.bin` in the MILBlob v2 layout that coremltools' reader checks: a 64-byte header
//! (u32 count, u32 version = 2), then per payload a 64-byte descriptor at a 64-aligned offset
//! (u32 0xDEADBEEF, u32 dtype code, u64 byte length, u64 absolute data offset = descriptor + 64,
//! u64 padding bits) followed by the data, zero-padded to the next 64-byte boundary.
//! MIL `BLOBFILE` offsets point at the descriptor.

use std::path::Path;

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

/// Builds a weights.bin image in memory.
#[derive(Debug, Default)]
pub struct BlobWriter {
    bytes: Vec<u8>,
    count: u32,
}

impl BlobWriter {
    /// An empty blob (header only).
    pub fn new() -> Self {
        let mut bytes = vec![0u8; ALIGN];
        bytes[4..8].copy_from_slice(&VERSION.to_le_bytes());
        BlobWriter { bytes, count: 0 }
    }

    /// Append an fp16 payload; returns the descriptor offset for `BLOBFILE(offset = ...)`.
    pub fn push_fp16(&mut self, values: &[f16]) -> u64 {
        let desc = self.bytes.len();
        let data_len = values.len() * 2;
        let mut rec = [0u8; ALIGN];
        rec[0..4].copy_from_slice(&SENTINEL.to_le_bytes());
        rec[4..8].copy_from_slice(&DTYPE_FP16.to_le_bytes());
        rec[8..16].copy_from_slice(&(data_len as u64).to_le_bytes());
        rec[16..24].copy_from_slice(&((desc + ALIGN) as u64).to_le_bytes());
        self.bytes.extend_from_slice(&rec);
        self.bytes.reserve(data_len + ALIGN);
        if cfg!(target_endian = "little") {
            // SAFETY: f16 is a plain 2-byte value; on little-endian hosts its in-memory bytes are the file's bytes.
            let raw = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), data_len) };
            self.bytes.extend_from_slice(raw);
        } else {
            values.iter().for_each(|v| self.bytes.extend_from_slice(&v.to_bits().to_le_bytes()));
        }
        let padded = self.bytes.len().div_ceil(ALIGN) * ALIGN;
        self.bytes.resize(padded, 0);
        self.count += 1;
        self.bytes[0..4].copy_from_slice(&self.count.to_le_bytes());
        desc as u64
    }

    /// Number of payloads.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The finished file image.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
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
        let mut w = BlobWriter::new();
        let a: Vec<f16> = [1.0f32, -2.0, 0.5].iter().map(|&v| f16::from_f32(v)).collect();
        let b: Vec<f16> = (0..40).map(|i| f16::from_f32(i as f32)).collect();
        assert_eq!(w.push_fp16(&a), 64);
        assert_eq!(w.push_fp16(&b), 192); // 64 + 64 (descriptor) + 6 bytes padded to 64
        let bytes = w.finish();
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
        let mut w = BlobWriter::new();
        w.push_fp16(&[f16::ONE; 4]);
        let good = w.finish();
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
