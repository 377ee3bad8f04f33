//! The ANE executor: Espresso's e5rt C API loaded with dlopen at run time (no framework
//! linking, no Objective-C), so it builds and is type-checked everywhere and reports the exact
//! step that stops it where it cannot run. `ANEFORGE_E5RT_LIBRARY` (tests only) points it at
//! another library, such as the fake e5rt the test suite builds, and skips the platform check.
//!
//! Process rules: at most [`max_programs`] programs live at once (aned refuses about 128 per
//! process); a program is used by one thread at a time; do not fork after the first program
//! is loaded (Espresso is not fork-safe).

pub mod cross;
pub mod e5rt;
pub mod handles;
pub mod program;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use self::e5rt::{Conventions, Ctx, E5rt};
use super::{Executor, Loaded, Precision};
use crate::error::{Error, Result};
use crate::program::Program;

/// Absolute path of the framework that exports the e5rt C API.
pub const ESPRESSO: &str = "/System/Library/PrivateFrameworks/Espresso.framework/Espresso";
/// Default of the live-program budget.
pub const DEFAULT_MAX_PROGRAMS: usize = 120;
/// ANE families `TargetArchitecture=` accepts (ane-dispatch §2.9); anything else silently compiles for the host.
pub const TARGETS: [&str; 25] = [
    "h11", "h12", "m9", "t0", "h13", "h13g", "t1", "h14", "h14g", "h14c", "h15", "h15g", "h15c",
    "h16", "h16g", "h16c", "h16s", "h17", "h17a", "h17g", "h17s", "h17c", "h17d", "h18", "m11",
];

/// The e5rt executor and its compile settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ane {
    /// Compute-device mask: 0x4 = ANE only (0x1 = CPU through BNNS, 0x2 = GPU).
    pub mask: u64,
    /// Compile for another ANE family (`TargetArchitecture=<arch>`, one of [`TARGETS`]).
    pub target: Option<String>,
    /// The uncertain ABI conventions in force.
    pub conventions: Conventions,
}

impl Default for Ane {
    fn default() -> Ane {
        Ane {
            mask: 0x4,
            target: None,
            conventions: Conventions::default(),
        }
    }
}

fn unavailable(step: &str, reason: impl Into<String>) -> Error {
    Error::Unavailable {
        executor: "ane",
        step: step.into(),
        reason: reason.into(),
    }
}

/// The e5rt library of this process, opened on first use: `ANEFORGE_E5RT_LIBRARY` when set
/// (tests; no platform check), else Espresso on Apple Silicon macOS. Errors name the step.
pub fn library() -> Result<&'static E5rt> {
    static LIB: OnceLock<std::result::Result<E5rt, (&'static str, String)>> = OnceLock::new();
    let path = match std::env::var_os("ANEFORGE_E5RT_LIBRARY").filter(|p| !p.is_empty()) {
        Some(p) => p.into(),
        None => {
            let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
            if os != "macos" {
                return Err(unavailable(
                    "platform",
                    format!("not macOS (this is {os}/{arch})"),
                ));
            }
            if arch != "aarch64" {
                return Err(unavailable(
                    "platform",
                    "not Apple Silicon (no Neural Engine on x86_64 Macs)",
                ));
            }
            // No file test: system frameworks live in the dyld shared cache, where dlopen finds them.
            std::path::PathBuf::from(ESPRESSO)
        }
    };
    LIB.get_or_init(|| E5rt::open(&path))
        .as_ref()
        .map_err(|(step, reason)| unavailable(step, reason.clone()))
}

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The live-program budget: `ANEFORGE_MAX_PROGRAMS` (a positive integer), else 120.
pub fn max_programs() -> Result<usize> {
    match std::env::var("ANEFORGE_MAX_PROGRAMS") {
        Ok(v) if !v.is_empty() => v.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
            Error::value(
                "ANEFORGE_MAX_PROGRAMS",
                format!("'{v}' is not a positive integer"),
            )
        }),
        _ => Ok(DEFAULT_MAX_PROGRAMS),
    }
}

/// Number of ANE programs loaded in this process right now.
pub fn live_programs() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// One live-program slot, returned when dropped.
pub struct Slot(());

impl Slot {
    /// Take a slot, or fail with a message saying how to get one back.
    pub fn acquire() -> Result<Slot> {
        let max = max_programs()?;
        let prev = LIVE.fetch_add(1, Ordering::SeqCst);
        if prev >= max {
            LIVE.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::Runtime {
                op: "ane load".into(),
                msg: format!("{prev} ANE programs are already loaded in this process, the budget (ANEFORGE_MAX_PROGRAMS={max}; aned refuses about 128 per process): release programs (drop models, Model.release()) or restart the process"),
            });
        }
        Ok(Slot(()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Ane {
    /// The default settings with the conventions from the environment (see [`Conventions::from_env`]).
    pub fn from_env() -> Result<Ane> {
        Ok(Ane {
            conventions: Conventions::from_env()?,
            ..Ane::default()
        })
    }
}

impl Executor for Ane {
    fn name(&self) -> &'static str {
        "ane"
    }

    fn check(&self) -> Result<()> {
        library().map(|_| ())
    }

    fn load(&self, program: &Program, dir: &Path, precision: Precision) -> Result<Box<dyn Loaded>> {
        if precision != Precision::Fp16 {
            return Err(Error::value(
                "ane load",
                "the ANE computes in fp16; precision='fp32' exists only on the reference executor",
            ));
        }
        if let Some(t) = self.target.as_deref().filter(|t| !TARGETS.contains(t)) {
            return Err(Error::value(
                "ane load",
                format!("unknown target '{t}' (known: {})", TARGETS.join(", ")),
            ));
        }
        let ctx = Ctx {
            e5: library()?,
            conv: self.conventions,
        };
        Ok(Box::new(program::AneProgram::load(
            ctx, self, program, dir,
        )?))
    }
}
