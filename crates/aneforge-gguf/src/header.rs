//! The fixed header: magic `GGUF`, format version (2 or 3), tensor count, metadata count.

use crate::cursor::Cursor;
use crate::error::{GgufError, Result};

/// The four magic bytes every GGUF file starts with.
pub(crate) const MAGIC: [u8; 4] = *b"GGUF";

/// Format versions this reader understands (little-endian only).
pub(crate) const SUPPORTED_VERSIONS: [u32; 2] = [2, 3];

/// The parsed fixed-size header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// Format version: 2 or 3 (identical layouts for little-endian files).
    pub version: u32,
    /// Number of tensor infos after the metadata.
    pub tensor_count: u64,
    /// Number of metadata key/value pairs.
    pub metadata_count: u64,
}

/// Read the header at the start of the file; wrong magic, version 1 (32-bit counts),
/// big-endian files and unknown versions are typed errors.
pub(crate) fn parse(cur: &mut Cursor<'_>) -> Result<Header> {
    let magic: [u8; 4] = cur.array(|| "magic".into())?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic {
            path: cur.path().into(),
            found: magic,
        });
    }
    let version = cur.u32(|| "version".into())?;
    if !SUPPORTED_VERSIONS.contains(&version) {
        let detail = match version {
            1 => "GGUF v1 used 32-bit counts and is not supported; re-convert the model",
            v if v & 0xFFFF == 0 && v != 0 => {
                "a byte-swapped version: big-endian GGUF is not supported"
            }
            _ => "this reader supports versions 2 and 3",
        };
        return Err(GgufError::UnsupportedVersion {
            path: cur.path().into(),
            version,
            detail,
        });
    }
    let tensor_count = cur.u64(|| "tensor count".into())?;
    let metadata_count = cur.u64(|| "metadata count".into())?;
    Ok(Header {
        version,
        tensor_count,
        metadata_count,
    })
}
