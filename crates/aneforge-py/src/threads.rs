//! `set_num_threads` / `num_threads`: the reference executor's thread count.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::IntoPy;

/// Run the reference executor on `n` threads from now on (ValueError for n < 1).
#[pyfunction]
pub fn set_num_threads(n: i64) -> PyResult<()> {
    let n = usize::try_from(n)
        .map_err(|_| PyValueError::new_err(format!("set_num_threads: n must be >= 1 (got {n})")))?;
    aneforge::set_num_threads(n).py()
}

/// Threads the reference executor runs on (set_num_threads, else RAYON_NUM_THREADS, else cores).
#[pyfunction]
pub fn num_threads() -> usize {
    aneforge::num_threads()
}
