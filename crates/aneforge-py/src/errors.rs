//! Core error → Python exception, same message.

use aneforge::Error;
use pyo3::exceptions::{
    PyMemoryError, PyNotImplementedError, PyOSError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::PyErr;

/// Map a core error to the Python exception class documented for its variant.
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Shape { .. } | Error::Value { .. } | Error::Format { .. } => {
            PyValueError::new_err(msg)
        }
        Error::DType { .. } => PyTypeError::new_err(msg),
        Error::NotImplemented(_) | Error::Target { .. } => PyNotImplementedError::new_err(msg),
        Error::Unavailable { .. } | Error::E5rt { .. } | Error::Runtime { .. } => {
            PyRuntimeError::new_err(msg)
        }
        Error::Io { .. } => PyOSError::new_err(msg),
        Error::Resource { .. } => PyMemoryError::new_err(msg),
    }
}

/// `core_result.py()?` turns a core `Result` into a `PyResult`.
pub trait IntoPy<T> {
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPy<T> for aneforge::Result<T> {
    #[inline]
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(to_py)
    }
}
