//! `aneforge ops`: the op census as a table, JSON or the Markdown of docs/op-catalog.md.

use std::path::Path;

use super::emit;
use crate::conformance::{census, selfcheck};
use crate::error::Result;

/// Print the census (with a note on where the hardware column comes from, for the table),
/// restricted to `target` when given; errors name a bad target or report file.
pub(super) fn ops(
    report: Option<&Path>,
    target: Option<&str>,
    json: bool,
    markdown: bool,
) -> Result<()> {
    let target = target.map(crate::targets::parse_target).transpose()?;
    let (r, head) = match report {
        Some(path) => {
            let r = selfcheck::read_hardware_report(path)?;
            let head = format!(
                "hardware column from {} ({}, macOS {})\n",
                path.display(),
                r.chip.as_deref().unwrap_or("unknown chip"),
                r.macos_version.as_deref().unwrap_or("unknown")
            );
            (Some(r), head)
        }
        None => (
            None,
            "no selfcheck report given: no op has been verified on ANE hardware\n".to_string(),
        ),
    };
    let caps = census::census(r.as_ref(), target)?;
    let out = if json {
        census::json(&caps)
    } else if markdown {
        census::markdown(&caps)
    } else {
        head + &census::table(&caps, target)
    };
    emit(&out);
    Ok(())
}
