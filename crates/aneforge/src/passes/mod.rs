//! Graph → Graph passes run by `compile` before lowering.

pub mod decompose;
pub mod precision;
pub mod reduce_to_matmul;

use crate::error::{Error, Result};
use crate::exec::Precision;
use crate::graph::Graph;
use crate::targets::{preflight, require_mil, Target};
pub use decompose::decompose;
pub use precision::precision_risk;
pub use reduce_to_matmul::reduce_sum_to_matmul;

/// Gate `graph` on `target` (reference stage "retarget"): OLDER, rejected ops and exceeded limits
/// are errors; ops below their floor with a decomposition are rewritten (fp16 only: the
/// decompositions round through fp16, which `Precision::Fp32` skips).
pub fn retarget(graph: Graph, target: Target, precision: Precision) -> Result<Graph> {
    require_mil(target.family, target.arch)?;
    let p = preflight(&graph, target.family)?;
    p.check()?;
    if p.decompose.is_empty() {
        return Ok(graph);
    }
    if precision == Precision::Fp32 {
        let ops: Vec<&str> = p.decompose.iter().map(|e| e.op).collect();
        return Err(Error::value("compile", format!("{ops:?} must be decomposed for target {target}, and the decomposition needs fp16 rounding; use precision='fp16' or a target of family {} or newer", p.decompose[0].floor)));
    }
    decompose(&graph, target.family)
}
