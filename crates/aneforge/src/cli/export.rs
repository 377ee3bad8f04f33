//! `aneforge export DIR -o OUT.mlpackage`: a program directory as a Core ML package.

use std::path::Path;

use crate::error::Result;
use crate::program::Program;

/// Write the program directory `dir` as the package `out` and print its path; errors name the
/// missing directory or the existing package.
pub(super) fn export(dir: &Path, out: &Path) -> Result<()> {
    let program = Program::load_dir(dir)?;
    let path = crate::mlpackage::write_mlpackage(&program, out)?;
    println!("{}", path.display());
    Ok(())
}
