//! Cross-compilation: e5rt's compile step for another ANE family (`TargetArchitecture=<arch>`)
//! without loading the result, with one compiler cache per arch (`cache-<arch>`).

use std::path::{Path, PathBuf};

use super::e5rt::Ctx;
use super::{library, program, Ane, TARGETS};
use crate::error::{Error, Result};

/// The compiler cache directory of a program dir for `target` (`cache` for the host's own).
pub fn cache_dir(dir: &Path, target: Option<&str>) -> PathBuf {
    dir.join(target.map_or("cache".to_string(), |a| format!("cache-{a}")))
}

/// `arch` if it is one of [`TARGETS`], else the value error listing them (checked before
/// anything is compiled).
pub fn known_arch(arch: &str) -> Result<&str> {
    if TARGETS.contains(&arch) {
        return Ok(arch);
    }
    Err(Error::value(
        "cross_compile",
        format!("unknown target '{arch}' (known: {})", TARGETS.join(", ")),
    ))
}

/// Compile `dir/model.mil` for `arch` with the e5rt compiler (compile only: nothing is loaded
/// or run) and return the arch's cache directory. Unknown arches are refused before the e5rt
/// library is opened; a missing library or a compiler failure is the executor's error.
pub fn compile_only(dir: &Path, arch: &str) -> Result<PathBuf> {
    let arch = known_arch(arch)?;
    let ane = Ane {
        target: Some(arch.to_string()),
        ..Ane::from_env()?
    };
    let ctx = Ctx {
        e5: library()?,
        conv: ane.conventions,
    };
    drop(program::compile(ctx, &ane, dir)?);
    Ok(cache_dir(dir, Some(arch)))
}
