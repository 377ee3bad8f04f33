//! The one error type of the reader: every variant names the file and the key, tensor or
//! byte offset involved, and the offending value.

/// `Result` with [`GgufError`].
pub type Result<T> = std::result::Result<T, GgufError>;

/// Everything that can go wrong opening, parsing or dequantizing a GGUF file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The OS refused to stat, open or map the file.
    #[error("GGUF {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The path is a directory, device, FIFO or socket rather than a regular file.
    #[error("GGUF {path}: not a regular file ({kind})")]
    NotRegularFile { path: String, kind: &'static str },
    /// The file ends inside `what`, which needs `needed` bytes at byte offset `offset`.
    #[error(
        "GGUF {path}: truncated at byte offset {offset}: {what} needs {needed} bytes, the file has {file_len}"
    )]
    Truncated {
        path: String,
        what: String,
        offset: u64,
        needed: u64,
        file_len: u64,
    },
    /// The first four bytes are not `GGUF`.
    #[error("GGUF {path}: bad magic {found:02x?} (expected \"GGUF\")")]
    BadMagic { path: String, found: [u8; 4] },
    /// A format version other than 2 or 3 (version 1 and big-endian files are refused).
    #[error("GGUF {path}: unsupported version {version} ({detail})")]
    UnsupportedVersion {
        path: String,
        version: u32,
        detail: &'static str,
    },
    /// A count read from the file cannot fit in the bytes that remain after it.
    #[error(
        "GGUF {path}: {what} claims {count} entries of at least {min_entry_bytes} bytes, which exceeds the remaining {remaining} bytes"
    )]
    CountTooLarge {
        path: String,
        what: String,
        count: u64,
        min_entry_bytes: u64,
        remaining: u64,
    },
    /// A metadata value type id outside 0..=12.
    #[error("GGUF {path}: metadata key '{key}' has unknown value type id {type_id}")]
    UnknownValueType {
        path: String,
        key: String,
        type_id: u32,
    },
    /// Arrays nested deeper than [`crate::MAX_ARRAY_NESTING`].
    #[error("GGUF {path}: metadata key '{key}' nests arrays deeper than {limit} levels")]
    NestingTooDeep {
        path: String,
        key: String,
        limit: usize,
    },
    /// A key, value or tensor name that is not valid UTF-8.
    #[error("GGUF {path}: {what} at byte offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        path: String,
        what: String,
        offset: u64,
    },
    /// The same metadata key or tensor name appears twice.
    #[error("GGUF {path}: duplicate {what} '{name}'")]
    Duplicate {
        path: String,
        what: &'static str,
        name: String,
    },
    /// `general.alignment` is not a u32 power of two.
    #[error("GGUF {path}: general.alignment {value} is not a non-zero u32 power of two")]
    BadAlignment { path: String, value: String },
    /// A metadata key that the file does not have.
    #[error("GGUF {path}: no metadata key '{key}'")]
    MissingKey { path: String, key: String },
    /// A metadata value of another type than the accessor asked for.
    #[error("GGUF {path}: metadata key '{key}' is {actual}, not {expected}")]
    WrongType {
        path: String,
        key: String,
        expected: &'static str,
        actual: String,
    },
    /// `general.architecture` names a model family this crate does not know.
    #[error("GGUF {path}: unknown architecture '{arch}' (known: {known})")]
    UnknownArchitecture {
        path: String,
        arch: String,
        known: String,
    },
    /// A tensor type id that ggml does not define.
    #[error("GGUF {path}: tensor '{tensor}' has unknown type id {type_id}")]
    UnknownTensorType {
        path: String,
        tensor: String,
        type_id: u32,
    },
    /// Bad dimensions: more than four, an element or byte count that overflows u64, or rows
    /// that are not whole quant blocks.
    #[error("GGUF {path}: tensor '{tensor}' dims {dims:?}: {reason}")]
    BadDims {
        path: String,
        tensor: String,
        dims: Vec<u64>,
        reason: String,
    },
    /// A tensor offset that is not a multiple of the file's alignment.
    #[error("GGUF {path}: tensor '{tensor}' offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        path: String,
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    /// A tensor whose data span runs past the end of the file.
    #[error(
        "GGUF {path}: tensor '{tensor}' data [{start}, {end}) runs past the file length {file_len}"
    )]
    TensorPastEnd {
        path: String,
        tensor: String,
        start: u64,
        end: u64,
        file_len: u64,
    },
    /// A tensor name the file does not have.
    #[error("GGUF {path}: no tensor '{tensor}'")]
    MissingTensor { path: String, tensor: String },
    /// A tensor type this crate cannot dequantize (e.g. the IQ and TQ families).
    #[error(
        "GGUF {path}: unsupported quant type {type_name} (id {type_id}) for tensor '{tensor}'"
    )]
    UnsupportedQuantType {
        path: String,
        tensor: String,
        type_name: &'static str,
        type_id: u32,
    },
    /// A caller buffer whose length is not the tensor's element count.
    #[error(
        "GGUF {path}: tensor '{tensor}' has {expected} elements, the output buffer holds {actual}"
    )]
    BufferLength {
        path: String,
        tensor: String,
        expected: usize,
        actual: usize,
    },
    /// The f32 buffer for a tensor's elements could not be allocated (Python: MemoryError).
    #[error("GGUF {path}: cannot allocate {elements} f32 values for tensor '{tensor}'")]
    OutOfMemory {
        path: String,
        tensor: String,
        elements: u64,
    },
}
