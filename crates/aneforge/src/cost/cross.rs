//! `cross_compile_check`'s compile step: after the static preflight, the graph is lowered for
//! the target and, where an e5rt library is available (macOS, or the fake in tests), compiled
//! with `TargetArchitecture=<arch>` without loading; elsewhere the step is reported as not run.

use std::path::PathBuf;

use super::anchors;
use crate::compile::{export, CompileOptions};
use crate::error::Result;
use crate::exec::ane::{self, cross};
use crate::graph::{Graph, Tensor};
use crate::plan::Stage;
use crate::program::KEY_LEN;
use crate::targets;

/// The compile step's outcome for one target.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossCompile {
    /// The arch compiled for (a family name resolves to its representative arch).
    pub arch: &'static str,
    /// `Some(true)` compiled, `Some(false)` the compiler refused it, `None` the step was not run.
    pub compiled: Option<bool>,
    /// The per-arch compiler caches written (one per program region).
    pub caches: Vec<PathBuf>,
    /// Why the step was not run, or the compiler's error, or what was compiled.
    pub note: String,
}

/// Run the compile step of a cross-compile check of `outputs` for `target` (arch or family
/// name). Unknown targets, pre-MIL families and arches e5rt does not accept are errors raised
/// before anything is compiled; a failed static preflight or a missing e5rt library skips the
/// step (`compiled: None`, the note says why); a compiler error is `compiled: Some(false)`.
pub fn cross_compile(outputs: &[(Option<String>, Tensor)], target: &str) -> Result<CrossCompile> {
    let (arch, family) = anchors::resolve(target)?;
    cross::known_arch(arch)?;
    let not_run = |note: String| CrossCompile {
        arch,
        compiled: None,
        caches: Vec::new(),
        note,
    };
    let pre = targets::preflight(&Graph::from_outputs(outputs)?, family)?;
    if !pre.ok() {
        return Ok(not_run(format!(
            "compile step not run: the static preflight for {} failed",
            family.name()
        )));
    }
    if let Err(e) = ane::library() {
        return Ok(not_run(format!("compile step not run ({e})")));
    }
    let opts = CompileOptions {
        target: Some(target.to_string()),
        ..CompileOptions::default()
    };
    let exported = export(outputs, &opts)?;
    let dirs: Vec<PathBuf> = match &exported.plan {
        None => vec![exported.dir.clone()],
        Some(plan) => plan
            .stages
            .iter()
            .filter_map(|s| match s {
                Stage::Region { program, .. } => Some(
                    exported
                        .dir
                        .join(crate::plan::file::REGIONS)
                        .join(&program.sha256[..KEY_LEN]),
                ),
                Stage::Host { .. } => None,
            })
            .collect(),
    };
    let mut caches = Vec::new();
    for dir in &dirs {
        match cross::compile_only(dir, arch) {
            Ok(c) => caches.push(c),
            Err(e) => {
                return Ok(CrossCompile {
                    arch,
                    compiled: Some(false),
                    caches,
                    note: format!("e5rt refused to compile {} for {arch}: {e}", dir.display()),
                })
            }
        }
    }
    Ok(CrossCompile {
        arch,
        compiled: Some(true),
        note: format!(
            "compiled {} program(s) for {arch} with TargetArchitecture={arch} (compile only; not run)",
            caches.len()
        ),
        caches,
    })
}
