//! Segmented programs. A graph holding host ops (`ops/host`) compiles to a **plan**: fused
//! regions (each an ordinary content-addressed program directory under `regions/`) and host
//! stages between them, listed in `plan.json`. [`segment`] cuts the graph, [`file`] is the
//! versioned plan file (written, read and checked before anything runs), [`run`] executes a
//! loaded plan on either executor.

pub mod file;
pub mod retile;
pub mod route;
pub mod run;
pub mod segment;

use crate::ops::host::HostOp;
use crate::ops::TensorType;

/// One value crossing a cut (or a plan port): its name in the plan and its type.
#[derive(Clone, Debug, PartialEq)]
pub struct CutValue {
    pub name: String,
    pub ty: TensorType,
}

/// One stage of a plan, in execution order.
#[derive(Clone, Debug)]
pub enum Stage {
    /// A fused region: a lowered program whose ports are plan values of the same names.
    Region {
        program: crate::program::Program,
        /// Compute ops of the region (MIL names, in program order).
        ops: Vec<String>,
    },
    /// A host op reading and writing plan values by name.
    Host {
        op: HostOp,
        inputs: Vec<String>,
        outputs: Vec<String>,
    },
}

impl Stage {
    /// `region` or `host`.
    pub fn kind(&self) -> &'static str {
        match self {
            Stage::Region { .. } => "region",
            Stage::Host { .. } => "host",
        }
    }
}

/// A whole plan: ports, stages, and the type of every named value.
#[derive(Clone, Debug)]
pub struct Plan {
    pub inputs: Vec<CutValue>,
    pub outputs: Vec<CutValue>,
    pub stages: Vec<Stage>,
    /// Every value a stage reads or writes (plan ports included), by name.
    pub values: Vec<CutValue>,
    /// The routing decision per routable host op (saved in the plan file).
    pub routes: Vec<route::RouteChoice>,
}

impl Plan {
    /// Each stage's kind in run order (`region` or `host`).
    pub fn stage_kinds(&self) -> Vec<&'static str> {
        self.stages.iter().map(Stage::kind).collect()
    }
}

impl Plan {
    /// The type of value `name`.
    pub fn value(&self, name: &str) -> Option<&TensorType> {
        self.values.iter().find(|v| v.name == name).map(|v| &v.ty)
    }

    /// Number of compute ops over every stage (host ops count one each).
    pub fn n_ops(&self) -> usize {
        self.stages
            .iter()
            .map(|s| match s {
                Stage::Region { program, .. } => program.graph.n_ops(),
                Stage::Host { .. } => 1,
            })
            .sum()
    }
}
