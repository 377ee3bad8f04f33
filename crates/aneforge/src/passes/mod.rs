//! Graph → Graph passes run by `compile` before lowering.

pub mod decompose;
pub mod legalize_opset;
pub mod precision;
pub mod quirks;
pub mod reduce_to_matmul;

use crate::error::{Error, Result};
use crate::exec::Precision;
use crate::graph::Graph;
use crate::targets::{preflight, require_mil, Target};
pub use decompose::decompose;
pub use legalize_opset::for_opset;
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

/// Rewrite around the ANE compiler's defects for `target` ([`quirks::quirks`]; without a target
/// only the target-independent rewrites) and print each hazard left as `aneforge: warning: ...`
/// on stderr unless `ANEFORGE_QUIET` is set. `Precision::Fp32` returns `graph` unchanged: fp32
/// programs run only on the reference executor, which has none of these defects.
pub fn work_around(graph: Graph, target: Option<Target>, precision: Precision) -> Result<Graph> {
    if precision == Precision::Fp32 {
        return Ok(graph);
    }
    let r = quirks::quirks(&graph, target.map(|t| t.family))?;
    if std::env::var_os("ANEFORGE_QUIET").is_none() {
        r.warnings
            .iter()
            .for_each(|w| eprintln!("aneforge: warning: {w}"));
    }
    Ok(r.graph)
}
