//! A minimal GGUF writer for the tests, written from the format description (independent of
//! the reader), and temporary-file helpers.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;

/// Metadata value type ids.
pub const U8: u32 = 0;
pub const I8: u32 = 1;
pub const U16: u32 = 2;
pub const I16: u32 = 3;
pub const U32: u32 = 4;
pub const I32: u32 = 5;
pub const F32: u32 = 6;
pub const BOOL: u32 = 7;
pub const STRING: u32 = 8;
pub const ARRAY: u32 = 9;
pub const U64: u32 = 10;
pub const I64: u32 = 11;
pub const F64: u32 = 12;

/// A GGUF string: u64 length + bytes.
pub fn gguf_str(s: &str) -> Vec<u8> {
    let mut out = (s.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

/// A tensor to write: name, ggml dims, type id, data offset, and its bytes.
pub struct TensorSpec {
    pub name: String,
    pub dims: Vec<u64>,
    pub type_id: u32,
    pub offset: u64,
    pub data: Vec<u8>,
}

/// Builds a GGUF file byte by byte; offsets of each section are recorded for truncation tests.
pub struct GgufBuilder {
    pub magic: [u8; 4],
    pub version: u32,
    pub alignment: u64,
    kv: Vec<u8>,
    kv_count: u64,
    pub tensors: Vec<TensorSpec>,
}

/// Byte offsets where each section of a built file starts.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub metadata_start: usize,
    pub tensor_infos_start: usize,
    pub data_start: usize,
    pub len: usize,
}

impl GgufBuilder {
    /// An empty version-3 file with the default alignment of 32.
    pub fn new() -> Self {
        GgufBuilder {
            magic: *b"GGUF",
            version: 3,
            alignment: 32,
            kv: Vec::new(),
            kv_count: 0,
            tensors: Vec::new(),
        }
    }

    /// Add key `key` with type id `type_id` and the already-encoded `value` bytes.
    pub fn kv_raw(mut self, key: &str, type_id: u32, value: &[u8]) -> Self {
        self.kv.extend(gguf_str(key));
        self.kv.extend(type_id.to_le_bytes());
        self.kv.extend_from_slice(value);
        self.kv_count += 1;
        self
    }

    /// Add a string value.
    pub fn kv_str(self, key: &str, value: &str) -> Self {
        self.kv_raw(key, STRING, &gguf_str(value))
    }

    /// Add a u32 value.
    pub fn kv_u32(self, key: &str, value: u32) -> Self {
        self.kv_raw(key, U32, &value.to_le_bytes())
    }

    /// Add a tensor whose data is placed at the next aligned offset after the previous one.
    pub fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, data: Vec<u8>) -> Self {
        let offset = self
            .tensors
            .last()
            .map(|t| (t.offset + t.data.len() as u64).next_multiple_of(self.alignment))
            .unwrap_or(0);
        self.tensors.push(TensorSpec {
            name: name.into(),
            dims: dims.to_vec(),
            type_id,
            offset,
            data,
        });
        self
    }

    /// The file bytes and where each section starts.
    pub fn build(&self) -> (Vec<u8>, Layout) {
        let (mut out, mut layout) = self.build_without_data();
        for t in &self.tensors {
            out.resize(layout.data_start + t.offset as usize, 0);
            out.extend_from_slice(&t.data);
        }
        layout.len = out.len();
        (out, layout)
    }

    /// Header, metadata, tensor infos and the padding up to the data section, no data.
    pub fn build_without_data(&self) -> (Vec<u8>, Layout) {
        let mut out = self.magic.to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend(self.kv_count.to_le_bytes());
        let metadata_start = out.len();
        out.extend_from_slice(&self.kv);
        let tensor_infos_start = out.len();
        for t in &self.tensors {
            out.extend(gguf_str(&t.name));
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.type_id.to_le_bytes());
            out.extend(t.offset.to_le_bytes());
        }
        out.resize(out.len().next_multiple_of(self.alignment as usize), 0);
        let data_start = out.len();
        (
            out,
            Layout {
                metadata_start,
                tensor_infos_start,
                data_start,
                len: data_start,
            },
        )
    }
}

/// A file in the temp directory, removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    /// Write `bytes` to a fresh temp file named after `tag`.
    pub fn new(tag: &str, bytes: &[u8]) -> TempFile {
        let path =
            std::env::temp_dir().join(format!("aneforge-gguf-{}-{tag}.gguf", std::process::id()));
        std::fs::write(&path, bytes).expect("write temp file");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Open `bytes` written to a temp file.
pub fn open_bytes(tag: &str, bytes: &[u8]) -> aneforge_gguf::Result<aneforge_gguf::GgufFile> {
    let file = TempFile::new(tag, bytes);
    aneforge_gguf::GgufFile::open(&file.0)
}
