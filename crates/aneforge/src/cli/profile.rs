//! `aneforge profile DIR --input NAME=FILE.npy ... [--repeat N] [--trace out.json] [--clock cpu]`: time N
//! calls of a program directory per op (reference executor), per stage (segmented plans) or per
//! program (ANE), print the table and optionally write Chrome trace JSON.

use std::path::Path;

use super::npy;
use super::run::read_inputs;
use crate::compile::{load_dir_with, CompileOptions};
use crate::cost::profile::profile_calls;
use crate::error::Result;
use crate::exec::clock::Clock;

/// Load `dir`, feed the inputs, run one warm-up call, profile `repeat` calls timed by `clock`
/// (`wall` or `cpu`), print the table and write the trace to `trace` when given.
pub(super) fn profile(
    dir: &Path,
    args: &[String],
    repeat: usize,
    trace: Option<&Path>,
    clock: &str,
    opts: &CompileOptions,
) -> Result<()> {
    let clock = Clock::parse(clock)?;
    let mut net = load_dir_with(dir, opts)?;
    let arrays = read_inputs(net.inputs(), args)?;
    let feeds: Vec<_> = arrays.iter().map(npy::Npy::port_data).collect();
    net.run(&feeds)?;
    let report = profile_calls(net.loaded.as_mut(), repeat, clock)?;
    println!("program: {}", dir.display());
    print!("{}", report.table());
    if let Some(path) = trace {
        report.write_trace(path)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
