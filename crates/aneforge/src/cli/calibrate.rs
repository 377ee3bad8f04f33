//! `aneforge calibrate`: measure the reference executor (per-call floor; rate curves by size
//! for copies, permutes, elementwise ops as steps and inside fused runs, reductions, gemm,
//! conv and host ops; the per-cut µs of a plan) and store the constants atomically in the
//! cache dir, where `af.estimate(y)` (host mode) reads them.

use std::time::Duration;

use super::emit;
use crate::cost::{calibrate, host};
use crate::error::Result;

/// Run the probes (`budget_ms` each), print them and the constants, and write the calibration file.
pub(super) fn calibrate(budget_ms: u64, clock: &str) -> Result<()> {
    let clock = calibrate::Clock::parse(clock)?;
    if let Err(e) = host::load() {
        eprintln!(
            "aneforge: warning: ignoring the existing calibration ({e}); it is rewritten now"
        );
    }
    let (c, probes) = calibrate::calibrate(Duration::from_millis(budget_ms.max(1)), clock)?;
    let mut out = format!(
        "reference executor, {} rayon thread(s), {clock:?} clock\nprobe              median µs  work\n",
        rayon::current_num_threads()
    );
    for p in &probes {
        out += &format!("{:<18} {:>9.1}  {:.3e}\n", p.name, p.median_us, p.work);
    }
    let o = &c.op_us;
    out += &format!(
        "floor {:.1} µs; per op + rate: data {:.1} µs + {:.3e} B/µs, gemm {:.1} µs + {:.3e} flop/µs, conv {:.1} µs + {:.3e} flop/µs, elementwise {:.1} µs + {:.3e} /µs, reduce {:.1} µs + {:.3e} /µs\n",
        c.floor_us, o.data, c.bytes_per_us, o.gemm, c.gemm_flops_per_us, o.conv, c.conv_flops_per_us,
        o.elementwise, c.elementwise_per_us, o.reduce, c.reduce_per_us
    );
    let curve = |name: &str, k: &host::RateCurve| {
        let pts: Vec<String> = k
            .points
            .iter()
            .filter(|p| p[0] > 0.0)
            .map(|p| format!("{:.0}: {:.3e}", p[0], p[1]))
            .collect();
        format!("{name} rate by size [{}]\n", pts.join(", "))
    };
    for (name, k) in [
        ("gemm (min(K, N))", &c.gemm_curve),
        ("conv (min(K, Cout))", &c.conv_curve),
        ("permute (elements)", &c.permute_curve),
        ("elementwise step (elements)", &c.elementwise_curve),
        (
            "elementwise in a fused run (elements)",
            &c.fused_binary_curve,
        ),
        ("host op (elements)", &c.host_curve),
    ] {
        out += &curve(name, k);
    }
    out += &format!("cut: {:.1} µs per host stage\n", c.cut_us);
    let path = host::save(&c)?;
    out += &format!("wrote {}\n", path.display());
    emit(&out);
    Ok(())
}
