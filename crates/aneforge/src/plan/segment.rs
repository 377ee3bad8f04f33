//! Cutting a graph at its host ops. Every node gets a level: the number of host ops on the
//! longest path to it (a host op's own output counts from the next level). Stages run region 0,
//! the host ops of level 0, region 1, the host ops of level 1, ... Constants are copied into
//! each region that uses them. Values computed from constants alone that leave region 0 (a
//! weight a host op gathers from, a parameter reshaped for a later region) come from a first
//! region of constants, which reads no input and so runs once per loaded plan; a constant
//! itself leaves it through `x * 1` (like an input returned as an output). Values crossing a
//! cut keep the port name they had (plan inputs and outputs) or get `cut<node>_<port>`. A
//! `sort` whose permutation nothing reads runs as `sort_values` (the same values, no
//! permutation).

use std::collections::{HashMap, HashSet};

use super::CutValue;
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::build::io::input_port;
use crate::graph::{Graph, Tensor, Value};
use crate::ops::host::sort::SortValues;
use crate::ops::host::HostOp;
use crate::ops::Op;

/// A stage before lowering: a region's graph, or a host op over named values.
#[derive(Clone, Debug)]
pub enum Segment {
    Region(Graph),
    Host {
        op: HostOp,
        inputs: Vec<String>,
        outputs: Vec<String>,
    },
}

/// A graph cut into stages, with the plan's ports and every named value.
#[derive(Clone, Debug)]
pub struct Segmented {
    pub inputs: Vec<CutValue>,
    pub outputs: Vec<CutValue>,
    pub stages: Vec<Segment>,
    pub values: Vec<CutValue>,
}

fn is_host(op: &Op) -> bool {
    matches!(op, Op::Host(_))
}

fn is_const(op: &Op) -> bool {
    matches!(op, Op::Const(_) | Op::Constexpr(_))
}

/// Names of the values that cross a stage boundary.
struct Names<'g> {
    g: &'g Graph,
    names: HashMap<Value, String>,
    taken: HashSet<String>,
    values: Vec<CutValue>,
}

impl<'g> Names<'g> {
    fn new(g: &'g Graph) -> Names<'g> {
        let mut n = Names {
            g,
            names: HashMap::new(),
            taken: HashSet::new(),
            values: Vec::new(),
        };
        for &i in &g.inputs {
            n.bind(Value { node: i, port: 0 }, g.input_name(i).to_string());
        }
        for (name, v) in &g.outputs {
            n.bind(*v, name.clone());
        }
        n
    }

    fn bind(&mut self, v: Value, name: String) {
        self.taken.insert(name.clone());
        self.values.push(CutValue {
            name: name.clone(),
            ty: self.g.ty(v).clone(),
        });
        self.names.insert(v, name);
    }

    /// The value's plan name, assigning `cut<node>_<port>` (made unique) on first use.
    fn of(&mut self, v: Value) -> String {
        if let Some(n) = self.names.get(&v) {
            return n.clone();
        }
        let mut name = format!("cut{}_{}", v.node, v.port);
        while self.taken.contains(&name) {
            name.push('_');
        }
        self.bind(v, name.clone());
        name
    }
}

/// Each node's level: the number of host ops (nodes for which `host` holds) on its longest
/// input path, a host op's own output counting from the next level.
pub fn levels(g: &Graph, host: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut level = vec![0usize; g.nodes.len()];
    for i in 0..g.nodes.len() {
        level[i] = g.nodes[i]
            .inputs
            .iter()
            .map(|v| level[v.node] + usize::from(host(v.node)))
            .max()
            .unwrap_or(0);
    }
    level
}

/// Move each fused node producing a bool value (a compare) into the region of its earliest
/// consumer: bool values cannot cross a cut, but their fp16 inputs can (a gradient rule may
/// compare a value from region 0 to feed a select after a host op). Reverse topological order
/// carries chains of bool ops along.
fn sink_bool_nodes(g: &Graph, consumers: &[Vec<usize>], level: &mut [usize]) {
    for i in (0..g.nodes.len()).rev() {
        let node = &g.nodes[i];
        let bool_out = node.outputs.iter().any(|t| t.dtype == crate::DType::Bool);
        if !bool_out || is_host(&node.op) || consumers[i].is_empty() {
            continue;
        }
        let earliest = consumers[i]
            .iter()
            .map(|&c| level[c])
            .min()
            .unwrap_or(level[i]);
        level[i] = level[i].max(earliest);
    }
}

/// For each bool node, the highest level that reads it (through chains of bool nodes): the
/// regions that recompute it (see [`RegionBuilder::source`]) need its non-bool inputs.
fn bool_reach(g: &Graph, consumers: &[Vec<usize>], level: &[usize]) -> Vec<usize> {
    let mut reach = level.to_vec();
    for i in (0..g.nodes.len()).rev() {
        if g.nodes[i].outputs.iter().any(|t| t.dtype == DType::Bool) {
            for &c in &consumers[i] {
                reach[i] = reach[i].max(reach[c]);
            }
        }
    }
    reach
}

/// Cut `g` at its host ops; `None` when it has none (it compiles to one program as before)
/// unless `always` (then a plan of one region: a graph whose host ops were all routed fused,
/// so its plan file keeps the routes).
pub fn segment(g: &Graph, always: bool) -> Result<Option<Segmented>> {
    if !always && !g.nodes.iter().any(|n| is_host(&n.op)) {
        return Ok(None);
    }
    let n = g.nodes.len();
    let mut level = levels(g, |i| is_host(&g.nodes[i].op));
    // Consumers per node, and the values that must leave the stage producing them.
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in g.nodes.iter().enumerate() {
        for v in &node.inputs {
            consumers[v.node].push(i);
        }
    }
    sink_bool_nodes(g, &consumers, &mut level);
    let reach = bool_reach(g, &consumers, &level);
    let plan_outputs: HashSet<Value> = g.outputs.iter().map(|(_, v)| *v).collect();
    let mut names = Names::new(g);
    let const_only = const_only(g);
    let top = (0..n).map(|i| level[i]).max().unwrap_or(0);
    let mut stages = Vec::new();
    for r in 0..=top {
        let members: Vec<usize> = (0..n)
            .filter(|&i| {
                let op = &g.nodes[i].op;
                level[i] == r && !is_host(op) && !is_const(op) && !matches!(op, Op::Input(_))
            })
            .collect();
        // Constants read outside any region (by a host op, or returned) leave region 0.
        let exported_consts: Vec<usize> = if r == 0 {
            (0..n)
                .filter(|&i| is_const(&g.nodes[i].op))
                .filter(|&i| {
                    consumers[i].iter().any(|&c| is_host(&g.nodes[c].op))
                        || plan_outputs.contains(&Value { node: i, port: 0 })
                })
                .collect()
        } else {
            Vec::new()
        };
        let leaves = |v: Value| {
            let i = v.node;
            plan_outputs.contains(&v)
                || consumers[i].iter().any(|&c| {
                    g.nodes[c].inputs.contains(&v)
                        && ((!is_member(&members, c) && level[c] >= level[i])
                            || reach[c] > level[i])
                })
        };
        if r == 0 {
            // What region 0 exports that is computed from constants alone comes from a region
            // of its own, which reads no input and so runs on the first call only (`plan::run`).
            let (own, constants) = split_constants(g, &members, &consumers, &const_only, leaves);
            if !constants.is_empty() || !exported_consts.is_empty() {
                let region = build_region(g, &mut names, &constants, &exported_consts, leaves)?;
                stages.push(Segment::Region(region));
            }
            if !own.is_empty() {
                let leaves = |v: Value| leaves(v) && !const_only[v.node];
                stages.push(Segment::Region(build_region(
                    g,
                    &mut names,
                    &own,
                    &[],
                    leaves,
                )?));
            }
        } else if !members.is_empty() {
            stages.push(Segment::Region(build_region(
                g,
                &mut names,
                &members,
                &[],
                leaves,
            )?));
        }
        for i in (0..n).filter(|&i| level[i] == r && is_host(&g.nodes[i].op)) {
            let Op::Host(op) = &g.nodes[i].op else {
                continue;
            };
            let inputs = g.nodes[i].inputs.iter().map(|&v| names.of(v)).collect();
            let read = |port| {
                let v = Value { node: i, port };
                plan_outputs.contains(&v)
                    || consumers[i].iter().any(|&c| g.nodes[c].inputs.contains(&v))
            };
            let (op, n_out) = match op {
                HostOp::Sort(s) if !read(1) => {
                    let (axis, descending) = (s.axis, s.descending);
                    (HostOp::SortValues(SortValues { axis, descending }), 1)
                }
                op => (op.clone(), g.nodes[i].outputs.len()),
            };
            let outputs = (0..n_out)
                .map(|port| names.of(Value { node: i, port }))
                .collect();
            stages.push(Segment::Host {
                op,
                inputs,
                outputs,
            });
        }
    }
    let port = |v: Value, names: &mut Names| CutValue {
        name: names.of(v),
        ty: g.ty(v).clone(),
    };
    let inputs = g
        .inputs
        .iter()
        .map(|&i| port(Value { node: i, port: 0 }, &mut names))
        .collect();
    let outputs = g
        .outputs
        .iter()
        .map(|(_, v)| port(*v, &mut names))
        .collect();
    Ok(Some(Segmented {
        inputs,
        outputs,
        stages,
        values: names.values,
    }))
}

/// Build region `members` (plus `exported_consts`, see [`RegionBuilder::region`]).
fn build_region<'g>(
    g: &'g Graph,
    names: &mut Names<'g>,
    members: &[usize],
    exported_consts: &[usize],
    leaves: impl Fn(Value) -> bool,
) -> Result<Graph> {
    let mut builder = RegionBuilder {
        g,
        built: HashMap::new(),
        names,
    };
    builder.region(members, exported_consts, leaves)
}

/// Per node, whether its value follows from constants alone: a constant, or a fused op (no
/// bool output: bool values never cross a cut) whose inputs all do.
fn const_only(g: &Graph) -> Vec<bool> {
    let mut only = vec![false; g.nodes.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        only[i] = is_const(&node.op)
            || (!is_host(&node.op)
                && !matches!(node.op, Op::Input(_))
                && !node.inputs.is_empty()
                && node.outputs.iter().all(|t| t.dtype != DType::Bool)
                && node.inputs.iter().all(|v| only[v.node]));
    }
    only
}

/// Split region 0's `members` (sorted) into the nodes region 0 itself computes (those reading an
/// input and the constant-only nodes they read) and the constant-only nodes whose values
/// `leaves` region 0 with the constant-only nodes these read (a node may be in both).
fn split_constants(
    g: &Graph,
    members: &[usize],
    consumers: &[Vec<usize>],
    const_only: &[bool],
    leaves: impl Fn(Value) -> bool,
) -> (Vec<usize>, Vec<usize>) {
    let n = g.nodes.len();
    let (mut own, mut constant) = (vec![false; n], vec![false; n]);
    for &i in members.iter().rev() {
        let read_by = |set: &[bool]| consumers[i].iter().any(|&c| set[c]);
        own[i] = !const_only[i] || read_by(&own);
        let leaving = (0..g.nodes[i].outputs.len()).any(|port| leaves(Value { node: i, port }));
        constant[i] = const_only[i] && (leaving || read_by(&constant));
    }
    let pick = |set: &[bool]| members.iter().copied().filter(|&i| set[i]).collect();
    (pick(&own), pick(&constant))
}

/// Whether node `c` is one of a region's `members` (sorted node indices).
fn is_member(members: &[usize], c: usize) -> bool {
    members.binary_search(&c).is_ok()
}

/// Builds one region's graph from the whole graph's nodes.
struct RegionBuilder<'g, 'n> {
    g: &'g Graph,
    built: HashMap<Value, Tensor>,
    names: &'n mut Names<'g>,
}

impl RegionBuilder<'_, '_> {
    /// The region's tensor for `v`: built here, a constant copied in, a bool value recomputed
    /// here from its sources (bool values never cross a cut), else an input port named after
    /// the value.
    fn source(&mut self, v: Value) -> Result<Tensor> {
        if let Some(t) = self.built.get(&v) {
            return Ok(t.clone());
        }
        let (g, node) = (self.g, &self.g.nodes[v.node]);
        let ty = g.ty(v);
        let t = if is_const(&node.op) {
            Tensor::apply1(node.op.clone(), vec![])?
        } else if ty.dtype == DType::Bool && !is_host(&node.op) {
            let srcs = node
                .inputs
                .iter()
                .map(|&u| self.source(u))
                .collect::<Result<Vec<_>>>()?;
            Tensor::apply(node.op.clone(), srcs)?.swap_remove(v.port)
        } else {
            input_port(&ty.shape, ty.dtype, Some(&self.names.of(v)))?
        };
        self.built.insert(v, t.clone());
        Ok(t)
    }

    /// Build region `members` (plus `exported_consts`) as its own graph: values from other
    /// stages become input ports, values for which `leaves` holds become output ports (bool
    /// values never do: later regions recompute them).
    fn region(
        &mut self,
        members: &[usize],
        exported_consts: &[usize],
        leaves: impl Fn(Value) -> bool,
    ) -> Result<Graph> {
        let mut outs: Vec<(Option<String>, Tensor)> = Vec::new();
        for &i in members {
            let node = &self.g.nodes[i];
            let srcs = node
                .inputs
                .iter()
                .map(|&v| self.source(v))
                .collect::<Result<Vec<_>>>()?;
            let ts = Tensor::apply(node.op.clone(), srcs)?;
            for (port, t) in ts.into_iter().enumerate() {
                let v = Value { node: i, port };
                if t.dtype() != DType::Bool && leaves(v) {
                    outs.push((Some(self.names.of(v)), t.clone()));
                }
                self.built.insert(v, t);
            }
        }
        for &i in exported_consts {
            let t = self.source(Value { node: i, port: 0 })?.mul_scalar(1.0)?;
            outs.push((Some(self.names.of(Value { node: i, port: 0 })), t));
        }
        Graph::from_outputs(&outs)
    }
}
