//! Static capability gate: classify every op of a graph on a family and check every value's
//! extents against the family's limits, before anything is lowered.

use super::floors::{op_floor, op_status, Status};
use super::limits::{limit, Limit};
use super::Family;
use crate::error::{Error, Result};
use crate::graph::{Graph, NodeId};
use crate::ops::Op;

/// An op's classification: its node, MIL op name, first output shape and floor family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpEntry {
    pub node: NodeId,
    pub op: &'static str,
    pub shape: Vec<usize>,
    pub floor: Family,
}

/// A value or kernel over a limit: the node, op, shape, which limit, the measured value and the maximum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Oversize {
    pub node: NodeId,
    pub op: &'static str,
    pub shape: Vec<usize>,
    pub limit: Limit,
    pub value: usize,
    pub max: usize,
}

/// The result of [`preflight`]: compute ops by status, and the limits exceeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preflight {
    pub family: Family,
    pub native: Vec<OpEntry>,
    pub decompose: Vec<OpEntry>,
    pub reject: Vec<OpEntry>,
    pub oversize: Vec<Oversize>,
}

/// Walk `graph` for `family` (an error on OLDER, which has no MIL programs).
pub fn preflight(graph: &Graph, family: Family) -> Result<Preflight> {
    require_mil(family, None)?;
    let mut p = Preflight {
        family,
        native: Vec::new(),
        decompose: Vec::new(),
        reject: Vec::new(),
        oversize: Vec::new(),
    };
    for (node, n) in graph.nodes.iter().enumerate() {
        let op = n.op.family().name();
        let shape = n
            .outputs
            .first()
            .map(|t| t.shape.clone())
            .unwrap_or_default();
        let mut over = |limit_name: Limit, value: usize| {
            let max = limit(limit_name, family);
            if value > max {
                p.oversize.push(Oversize {
                    node,
                    op,
                    shape: shape.clone(),
                    limit: limit_name,
                    value,
                    max,
                });
            }
        };
        for t in &n.outputs {
            let channel = if t.shape.len() == 4 { Some(1) } else { None };
            let widest = |keep: &dyn Fn(usize) -> bool| {
                t.shape
                    .iter()
                    .enumerate()
                    .filter(|(a, _)| keep(*a))
                    .map(|(_, &d)| d)
                    .max()
                    .unwrap_or(0)
            };
            over(Limit::MaxTensorDim, widest(&|a| Some(a) != channel));
            over(Limit::ChannelExtent, widest(&|a| Some(a) == channel));
        }
        match &n.op {
            Op::Layout(_) if op == "transpose" => {
                over(Limit::TransposeExtent, shape.iter().product())
            }
            Op::Conv(_) | Op::ConvTranspose(_) => {
                over(Limit::ConvKwMax, graph.ty(n.inputs[1]).shape[3])
            }
            _ => {}
        }
        if matches!(n.op, Op::Input(_) | Op::Const(_) | Op::Constexpr(_)) {
            continue;
        }
        let entry = OpEntry {
            node,
            op,
            shape,
            floor: op_floor(op),
        };
        match op_status(op, family) {
            Status::Native => p.native.push(entry),
            Status::Decompose => p.decompose.push(entry),
            Status::Reject => p.reject.push(entry),
        }
    }
    Ok(p)
}

/// An error unless `family` can run MIL programs (H13 and newer); `arch` names the target string.
pub fn require_mil(family: Family, arch: Option<&str>) -> Result<()> {
    if family == Family::Older {
        let what = arch.map_or(String::new(), |a| format!("'{a}' is family OLDER; "));
        return Err(Error::Target {
            family: family.name(),
            msg: format!("{what}MIL is only supported for H13+ ANE architectures"),
        });
    }
    Ok(())
}

impl Preflight {
    /// No rejected op and no limit exceeded.
    pub fn ok(&self) -> bool {
        self.reject.is_empty() && self.oversize.is_empty()
    }

    /// An error naming every rejected op (with its floor) and every exceeded limit (name, value, maximum).
    pub fn check(&self) -> Result<()> {
        if self.ok() {
            return Ok(());
        }
        let rejected = self.reject.iter().map(|e| {
            format!(
                "{} (node {}, shape {:?}) needs family {} or newer",
                e.op, e.node, e.shape, e.floor
            )
        });
        let oversize = self.oversize.iter().map(|o| {
            format!(
                "{} (node {}, shape {:?}): {} = {} exceeds {} = {}",
                o.op,
                o.node,
                o.shape,
                what(o.limit),
                o.value,
                o.limit.name(),
                o.max
            )
        });
        let all: Vec<String> = rejected.chain(oversize).collect();
        Err(Error::Target {
            family: self.family.name(),
            msg: all.join("; "),
        })
    }
}

/// What a limit measures, as named in errors.
fn what(l: Limit) -> &'static str {
    match l {
        Limit::MaxTensorDim => "axis extent",
        Limit::ChannelExtent => "channel extent",
        Limit::TransposeExtent => "element count",
        Limit::ConvKwMax => "kernel width",
        Limit::ReductionTransposeExtent => "reduction extent",
    }
}
