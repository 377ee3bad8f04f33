//! `aneforge selfcheck`: run the conformance selfcheck on the ANE, print one line per check and
//! write the JSON report.

use std::path::Path;

use super::emit;
use crate::conformance::selfcheck;
use crate::error::{Error, Result};

/// Run the checks and write `report`; `Ok(false)` (exit 1) without an ANE or when any check fails.
pub(super) fn selfcheck(report: &Path, repeat: usize) -> Result<bool> {
    if let Err(e) = crate::exec::ane::library() {
        match e {
            Error::Unavailable { step, reason, .. } => emit(&format!(
                "no Apple Neural Engine is present: {step}: {reason}\n"
            )),
            e => emit(&format!("no Apple Neural Engine is present: {e}\n")),
        }
        return Ok(false);
    }
    let work = std::env::temp_dir().join(format!("aneforge-selfcheck-{}", std::process::id()));
    let r = selfcheck::run(&work, repeat);
    let _ = std::fs::remove_dir_all(&work);
    let r = r?;
    let mut out = format!(
        "{:<38} {:<6} {:>10} {:>11}  backend\n",
        "check", "result", "max error", "latency µs"
    );
    for c in &r.checks {
        let err = c.max_abs_error.map_or("inf".into(), |e| format!("{e:.3e}"));
        let lat = c.latency_us.map_or("-".into(), |t| format!("{t:.1}"));
        let result = format!("{:?}", c.outcome).to_lowercase();
        out += &format!(
            "{:<38} {result:<6} {err:>10} {lat:>11}  {}\n",
            c.name,
            c.backend.as_deref().unwrap_or("-")
        );
        if let Some(e) = &c.error {
            out += &format!("    {e}\n");
        }
    }
    out += &format!(
        "status words: {}\nrelease: {}\n",
        r.conventions.status_verdict, r.conventions.release_verdict
    );
    if !r.hardware {
        out += &format!(
            "NOTE: {} is not Apple's Espresso framework: this is NOT a hardware result\n",
            r.library
        );
    }
    let json =
        serde_json::to_string_pretty(&r).map_err(|e| Error::value("selfcheck", e.to_string()))?;
    crate::program::write_atomic(report, |f| std::io::Write::write_all(f, json.as_bytes()))?;
    out += &format!(
        "{} passed, {} failed; wrote {}\n",
        r.passed,
        r.failed,
        report.display()
    );
    emit(&out);
    Ok(r.failed == 0)
}
