//! The one error type of the core: every variant names the op or file involved and the values.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong building, lowering, loading or running a program.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Shapes, ranks, extents or axes that an op cannot accept (Python: ValueError).
    #[error("{op}: {msg}")]
    Shape { op: String, msg: String },
    /// A dtype an op or port cannot accept (Python: TypeError).
    #[error("{op}: {msg}")]
    DType { op: String, msg: String },
    /// A bad value: non-finite numbers, out-of-range arguments, bad names (Python: ValueError).
    #[error("{op}: {msg}")]
    Value { op: String, msg: String },
    /// A file that is not what it claims to be: MIL text, weights.bin, program.json, .npy.
    #[error("{}: {msg}{}", file.display(), offset.map(|o| format!(" (at byte {o})")).unwrap_or_default())]
    Format {
        file: PathBuf,
        offset: Option<u64>,
        msg: String,
    },
    /// An executor that cannot run here, with the exact step that failed (Python: RuntimeError).
    #[error("executor '{executor}' is unavailable: {step}: {reason}")]
    Unavailable {
        executor: &'static str,
        step: String,
        reason: String,
    },
    /// An option or feature that exists in the API but is not implemented yet (Python: NotImplementedError).
    #[error("{0}")]
    NotImplemented(String),
    /// Ops or shapes the target family cannot run: names each op, limit and value (Python: NotImplementedError).
    #[error("target family {family}: {msg}")]
    Target { family: &'static str, msg: String },
    /// An e5rt call that returned a non-zero status, with e5rt's last error message (Python: RuntimeError).
    #[error("{function} failed with status {status}: {message}")]
    E5rt {
        function: &'static str,
        status: i64,
        message: String,
    },
    /// A runtime failure while executing a loaded program (Python: RuntimeError).
    #[error("{op}: {msg}")]
    Runtime { op: String, msg: String },
    /// A size beyond a cap of [`crate::limits::Limits`] or an allocation that failed, naming the
    /// tensor, field or file, the size and the cap (Python: MemoryError).
    #[error("{what}: {msg}")]
    Resource { what: String, msg: String },
    /// An I/O failure, with the path involved (Python: OSError).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Error {
    /// A shape error for `op`.
    pub fn shape(op: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Shape {
            op: op.into(),
            msg: msg.into(),
        }
    }
    /// A dtype error for `op`.
    pub fn dtype(op: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::DType {
            op: op.into(),
            msg: msg.into(),
        }
    }
    /// A value error for `op`.
    pub fn value(op: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Value {
            op: op.into(),
            msg: msg.into(),
        }
    }
    /// A format error in `file` at an optional byte offset.
    pub fn format(file: impl Into<PathBuf>, offset: Option<u64>, msg: impl Into<String>) -> Self {
        Error::Format {
            file: file.into(),
            offset,
            msg: msg.into(),
        }
    }
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
