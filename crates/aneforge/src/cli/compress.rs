//! `aneforge compress DIR --mode M`: compress a program directory's fp16 weights into a new
//! program and print the per-weight report.

use std::path::Path;

use super::emit;
use crate::compile::{compress_dir, CompileOptions};
use crate::error::Result;

/// Write the compressed program (to `output_dir` or the cache) and print its report; errors
/// name a bad mode, budget, block size or directory.
pub(super) fn compress(dir: &Path, opts: &CompileOptions) -> Result<()> {
    let e = compress_dir(dir, opts)?;
    let mut out = format!(
        "{:<8} {:<7} {:<20} {:<10} {:>12} {:>12} {:>10}\n",
        "weight", "site", "shape", "encoding", "fp16 bytes", "bytes", "rel error"
    );
    for r in &e.report {
        let shape = format!("{:?}", r.shape);
        out += &format!(
            "{:<8} {:<7} {shape:<20} {:<10} {:>12} {:>12} {:>10.3e}\n",
            r.name,
            r.site,
            r.encoding.name(),
            r.bytes_fp16,
            r.bytes_encoded,
            r.rel_error
        );
    }
    let (before, after) = e
        .report
        .iter()
        .fold((0, 0), |(b, a), r| (b + r.bytes_fp16, a + r.bytes_encoded));
    out += &format!(
        "{} weights: {before} -> {after} bytes ({:.3}x); weights.bin {} bytes\nwrote {}\n",
        e.report.len(),
        after as f64 / before.max(1) as f64,
        e.program.weights.len(),
        e.dir.display()
    );
    emit(&out);
    Ok(())
}
