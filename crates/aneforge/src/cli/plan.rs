//! `aneforge plan DIR`: the stages of a segmented program directory (checked as `run` would):
//! per stage its kind, ops, executor and the values it reads and writes, then the routing
//! decisions and the values table.

use std::path::Path;

use super::emit;
use crate::error::Result;
use crate::ops::Family;
use crate::plan::{file, Stage};

/// Print the plan in `dir`, or say that `dir` is a single program.
pub(super) fn plan(dir: &Path) -> Result<()> {
    if !file::is_plan_dir(dir) {
        let p = crate::program::Program::load_dir(dir)?;
        emit(&format!(
            "{}: a single program ({} ops), no plan\n",
            dir.display(),
            p.graph.n_ops()
        ));
        return Ok(());
    }
    let plan = file::read(dir)?;
    let mut out = format!(
        "{}: plan with {} stages\n",
        dir.display(),
        plan.stages.len()
    );
    for (k, s) in plan.stages.iter().enumerate() {
        let (what, ins, outs) = match s {
            Stage::Region { program, ops } => (
                format!(
                    "region {} on the device [{}]",
                    &program.sha256[..crate::program::KEY_LEN],
                    ops.join(", ")
                ),
                program.inputs().into_iter().map(|p| p.name).collect(),
                program.outputs().into_iter().map(|p| p.name).collect(),
            ),
            Stage::Host {
                op,
                inputs,
                outputs,
            } => (
                format!("host {} in-process", op.name()),
                inputs.clone(),
                outputs.clone(),
            ),
        };
        out += &format!("  stage {k}: {what}: {ins:?} -> {outs:?}\n");
    }
    for r in &plan.routes {
        out += &format!("  route: {r}\n");
    }
    for v in &plan.values {
        out += &format!("  value {}: {} {:?}\n", v.name, v.ty.dtype, v.ty.shape);
    }
    emit(&out);
    Ok(())
}
