//! The `aneforge` command line for the Python console script (`aneforge._cli:main`).

use std::ffi::OsString;

use pyo3::prelude::*;

/// Run the `aneforge` command line on `argv` (the program name first) with the GIL released;
/// returns the exit code (0 success, 1 failure). Output goes straight to the process's stdout
/// and stderr.
#[pyfunction]
pub fn cli_main(py: Python<'_>, argv: Vec<OsString>) -> i32 {
    py.detach(|| aneforge::cli::run_cli(argv))
}
