//! The ANE executor (Espresso e5rt over dlopen). This build only probes availability; the
//! dispatch itself is not implemented yet, so `check` always fails with the step that stops it.

use std::path::Path;

use super::{Executor, Loaded, Precision};
use crate::error::{Error, Result};
use crate::program::Program;

/// Absolute path of the framework that exports the e5rt C API.
pub const ESPRESSO: &str = "/System/Library/PrivateFrameworks/Espresso.framework/Espresso";

/// The e5rt executor.
#[derive(Debug, Default)]
pub struct Ane;

fn unavailable(step: &str, reason: impl Into<String>) -> Error {
    Error::Unavailable { executor: "ane", step: step.into(), reason: reason.into() }
}

impl Executor for Ane {
    fn name(&self) -> &'static str {
        "ane"
    }

    fn check(&self) -> Result<()> {
        if !cfg!(target_os = "macos") {
            return Err(unavailable("platform", format!("not macOS (this is {}/{})", std::env::consts::OS, std::env::consts::ARCH)));
        }
        if std::env::consts::ARCH != "aarch64" {
            return Err(unavailable("platform", "not Apple Silicon (no Neural Engine on x86_64 Macs)"));
        }
        if !Path::new(ESPRESSO).exists() {
            return Err(unavailable("framework", format!("{ESPRESSO} is missing")));
        }
        // SAFETY: loading a system framework by absolute path runs only its initialisers.
        unsafe { libloading::Library::new(ESPRESSO) }.map_err(|e| unavailable("framework", format!("dlopen {ESPRESSO}: {e}")))?;
        Err(unavailable("dispatch", "e5rt dispatch is not implemented in this version of aneforge"))
    }

    fn load(&self, _program: &Program, _precision: Precision) -> Result<Box<dyn Loaded>> {
        self.check()?;
        Err(unavailable("dispatch", "e5rt dispatch is not implemented in this version of aneforge"))
    }
}
