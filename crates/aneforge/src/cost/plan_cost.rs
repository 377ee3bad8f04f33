//! Segmented plans costed with their cuts: one call floor per region (each region is its own
//! dispatch) and the hand-off of every host stage: a fixed µs per stage (measured by
//! `aneforge calibrate` on the host) plus the bytes of every value it reads or writes over the
//! costed machine's bandwidth.

use crate::error::Result;
use crate::graph::Graph;
use crate::plan::segment::{segment, Segment};
use crate::shape::numel;

/// The cut cost of a graph that holds host ops.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanCost {
    /// Fused regions (dispatches), each paying the per-call floor.
    pub regions: usize,
    pub host_stages: usize,
    /// Values handed to or from a host stage (counted once per host-stage port).
    pub cut_values: usize,
    pub cut_bytes: u64,
    /// `host_stages` × the per-stage µs + `cut_bytes` / bandwidth.
    pub cut_us: f64,
}

/// The cut cost of `graph` at `bytes_per_us` and `stage_us` per host stage, or `None` when it
/// has no host ops (one program).
pub fn plan_cost(graph: &Graph, bytes_per_us: f64, stage_us: f64) -> Result<Option<PlanCost>> {
    let Some(seg) = segment(graph, false)? else {
        return Ok(None);
    };
    let size = |name: &String| -> u64 {
        seg.values
            .iter()
            .find(|v| &v.name == name)
            .map_or(0, |v| (numel(&v.ty.shape) * v.ty.dtype.size()) as u64)
    };
    let mut c = PlanCost {
        regions: 0,
        host_stages: 0,
        cut_values: 0,
        cut_bytes: 0,
        cut_us: 0.0,
    };
    for stage in &seg.stages {
        match stage {
            Segment::Region(_) => c.regions += 1,
            Segment::Host {
                inputs, outputs, ..
            } => {
                c.host_stages += 1;
                for name in inputs.iter().chain(outputs) {
                    c.cut_values += 1;
                    c.cut_bytes += size(name);
                }
            }
        }
    }
    c.cut_us = c.host_stages as f64 * stage_us + c.cut_bytes as f64 / bytes_per_us;
    Ok(Some(c))
}
