//! `aneforge info`: version, platform, each executor's availability, cache directory, threads.

use super::emit;
use crate::error::{Error, Result};
use crate::exec::ane::Ane;
use crate::exec::reference::Reference;
use crate::exec::Executor;

/// Availability line of one executor: `available` or `unavailable: <step>: <reason>`.
fn availability(ex: &dyn Executor) -> String {
    match ex.check() {
        Ok(()) => "available".into(),
        Err(Error::Unavailable { step, reason, .. }) => format!("unavailable: {step}: {reason}"),
        Err(e) => format!("unavailable: {e}"),
    }
}

/// Print the report; never fails.
pub(super) fn info() -> Result<()> {
    let mut out = format!(
        "aneforge {}\nplatform: {}/{}\nexecutors:\n",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    for ex in [&Reference as &dyn Executor, &Ane::default()] {
        out += &format!("  {}: {}\n", ex.name(), availability(ex));
    }
    if let Some(lib) = std::env::var_os("ANEFORGE_E5RT_LIBRARY").filter(|p| !p.is_empty()) {
        out += &format!(
            "e5rt library: {} (ANEFORGE_E5RT_LIBRARY, for tests: not hardware)\n",
            lib.to_string_lossy()
        );
    }
    out += &format!(
        "cache dir: {}\nthreads: {} (rayon; set RAYON_NUM_THREADS to change)\n",
        crate::program::cache_root().display(),
        rayon::current_num_threads()
    );
    emit(&out);
    Ok(())
}
