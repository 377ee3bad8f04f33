//! Bounds-checked little-endian reads over the mapped file: every read names what it reads
//! and fails with [`GgufError::Truncated`] instead of running past the end.

use crate::error::{GgufError, Result};

/// A read position in `bytes` (the whole file) that never reads past the end.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a str,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`, reporting errors against `path`.
    pub(crate) fn new(bytes: &'a [u8], path: &'a str) -> Self {
        Cursor {
            bytes,
            pos: 0,
            path,
        }
    }

    /// The file path errors name.
    pub(crate) fn path(&self) -> &'a str {
        self.path
    }

    /// The current byte offset.
    pub(crate) fn pos(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes left after the current offset.
    pub(crate) fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    /// The next `n` bytes, or `Truncated` naming `what()`.
    pub(crate) fn take(&mut self, n: u64, what: impl FnOnce() -> String) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                path: self.path.to_string(),
                what: what(),
                offset: self.pos(),
                needed: n,
                file_len: self.bytes.len() as u64,
            });
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(
        &mut self,
        what: impl FnOnce() -> String,
    ) -> Result<[u8; N]> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// A little-endian u32.
    pub(crate) fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    /// A little-endian u64.
    pub(crate) fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A GGUF string: u64 byte length, then that many UTF-8 bytes.
    pub(crate) fn string(&mut self, what: impl Fn() -> String) -> Result<&'a str> {
        let len = self.u64(|| format!("length of {}", what()))?;
        let offset = self.pos();
        let bytes = self.take(len, &what)?;
        std::str::from_utf8(bytes).map_err(|_| GgufError::InvalidUtf8 {
            path: self.path.to_string(),
            what: what(),
            offset,
        })
    }

    /// `count` as a usize once `count` entries of at least `min_entry_bytes` each fit in
    /// the bytes left; call before reserving room for `count` entries.
    pub(crate) fn check_count(
        &self,
        count: u64,
        min_entry_bytes: u64,
        what: impl FnOnce() -> String,
    ) -> Result<usize> {
        let fits = count
            .checked_mul(min_entry_bytes)
            .is_some_and(|total| total <= self.remaining());
        if !fits {
            return Err(GgufError::CountTooLarge {
                path: self.path.to_string(),
                what: what(),
                count,
                min_entry_bytes,
                remaining: self.remaining(),
            });
        }
        Ok(count as usize)
    }
}
