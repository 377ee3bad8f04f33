//! `plan.json`: the versioned description of a segmented program directory, and the loader
//! that checks all of it — JSON, format, every region's files and ports, every host op's types,
//! and that each stage reads only values defined before it — before anything runs.
//!
//! ```text
//! <dir>/plan.json              {"format": "aneforge-plan-2", "aneforge_version", "inputs",
//!                               "outputs", "values": [{name, dtype, shape}], "stages": [...],
//!                               "routes": [{op, fused, cuts_removed, mode[, reason]}]}
//! <dir>/regions/<key>/         one ordinary program directory per fused region
//! ```
//! A region stage is `{"kind": "region", "program": "<key>", "ops": [...], "inputs": [...],
//! "outputs": [...]}` (its port names are plan value names); a host stage is `{"kind": "host",
//! "op": {"op": "<host op>", <fields>}, "inputs": [...], "outputs": [...]}`. `routes` records the
//! routing decision per routable host op (`net.routes`); format 1 (no `routes`) still loads.

use std::collections::HashSet;
use std::path::Path;

use super::route::RouteChoice;
use super::{CutValue, Plan, Stage};
use crate::error::{Error, Result};
use crate::ops::host::HostOp;
use crate::ops::{Family, TensorType};
use crate::options::Route;
use crate::program::{files, PortSpec, Program, KEY_LEN};

/// `format` value of the plan file.
pub const FORMAT: &str = "aneforge-plan-2";
/// The previous format (no `routes`), still read.
pub const FORMAT_1: &str = "aneforge-plan-1";
/// File name of the plan inside its directory.
pub const PLAN_FILE: &str = "plan.json";
/// Subdirectory holding the regions' program directories.
pub const REGIONS: &str = "regions";

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    format: String,
    aneforge_version: String,
    inputs: Vec<PortSpec>,
    outputs: Vec<PortSpec>,
    values: Vec<PortSpec>,
    stages: Vec<StageEntry>,
    #[serde(default)]
    routes: Vec<RouteEntry>,
}

/// One routing decision as stored (`mode` is the option spelling).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteEntry {
    op: String,
    fused: bool,
    cuts_removed: usize,
    mode: String,
    /// Why an op with a fused form for other shapes stays on the host (omitted when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    reason: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum StageEntry {
    Region {
        program: String,
        ops: Vec<String>,
        inputs: Vec<String>,
        outputs: Vec<String>,
    },
    Host {
        op: HostOp,
        inputs: Vec<String>,
        outputs: Vec<String>,
    },
}

fn spec(v: &CutValue) -> PortSpec {
    PortSpec {
        name: v.name.clone(),
        dtype: v.ty.dtype,
        shape: v.ty.shape.clone(),
    }
}

fn names(ports: &[PortSpec]) -> Vec<String> {
    ports.iter().map(|p| p.name.clone()).collect()
}

/// The plan file text of `plan` (regions named by the first 32 hex digits of their sha256).
pub fn to_json(plan: &Plan) -> String {
    let stages = plan
        .stages
        .iter()
        .map(|s| match s {
            Stage::Region { program, ops } => StageEntry::Region {
                program: program.sha256[..KEY_LEN].to_string(),
                ops: ops.clone(),
                inputs: names(&program.inputs()),
                outputs: names(&program.outputs()),
            },
            Stage::Host {
                op,
                inputs,
                outputs,
            } => StageEntry::Host {
                op: op.clone(),
                inputs: inputs.clone(),
                outputs: outputs.clone(),
            },
        })
        .collect();
    let file = PlanFile {
        format: FORMAT.into(),
        aneforge_version: env!("CARGO_PKG_VERSION").into(),
        inputs: plan.inputs.iter().map(spec).collect(),
        outputs: plan.outputs.iter().map(spec).collect(),
        values: plan.values.iter().map(spec).collect(),
        stages,
        routes: plan
            .routes
            .iter()
            .map(|r| RouteEntry {
                op: r.op.clone(),
                fused: r.fused,
                cuts_removed: r.cuts_removed,
                mode: r.mode.name().into(),
                reason: r.reason.clone(),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&file).expect("plan serialises")
}

/// Write `json` as the plan file of `dir` (atomically, synced), unless the file already holds
/// exactly these bytes: a recompile of a cached plan writes nothing, like a cached program
/// directory (no sync, so the first call does not follow a sleep in `fdatasync`).
pub fn write(dir: &Path, json: &str) -> Result<()> {
    let path = dir.join(PLAN_FILE);
    if files::read_regular(&path).is_ok_and(|old| old == json.as_bytes()) {
        return Ok(());
    }
    crate::program::write_atomic(&path, |f| std::io::Write::write_all(f, json.as_bytes()))
}

/// Whether `dir` holds a plan (a `plan.json`).
pub fn is_plan_dir(dir: &Path) -> bool {
    dir.join(PLAN_FILE).is_file()
}

/// Read and check the plan in `dir`: every error names `plan.json` (or the region's file) and
/// the stage, value, dtype or shape at fault. Nothing is loaded on an executor here.
pub fn read(dir: &Path) -> Result<Plan> {
    let path = dir.join(PLAN_FILE);
    let text = files::read_regular_text(&path)?;
    let bad = |msg: String| Error::format(&path, None, msg);
    let file: PlanFile =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a valid plan: {e}")))?;
    if file.format != FORMAT && file.format != FORMAT_1 {
        return Err(bad(format!(
            "format '{}' is not '{FORMAT}' (or '{FORMAT_1}')",
            file.format
        )));
    }
    if file.format == FORMAT_1 && !file.routes.is_empty() {
        return Err(bad(format!("format '{FORMAT_1}' has no routes")));
    }
    let routes = file
        .routes
        .iter()
        .map(|r| {
            let mode =
                Route::parse(&r.mode).map_err(|e| bad(format!("route of '{}': {e}", r.op)))?;
            Ok(RouteChoice {
                op: r.op.clone(),
                fused: r.fused,
                cuts_removed: r.cuts_removed,
                mode,
                reason: r.reason.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut values: Vec<CutValue> = Vec::with_capacity(file.values.len());
    for p in &file.values {
        crate::shape::check(&p.name, &p.shape)
            .map_err(|e| bad(format!("value '{}': {e}", p.name)))?;
        if values.iter().any(|v| v.name == p.name) {
            return Err(bad(format!("value '{}' is listed twice", p.name)));
        }
        values.push(CutValue {
            name: p.name.clone(),
            ty: TensorType {
                dtype: p.dtype,
                shape: p.shape.clone(),
            },
        });
    }
    let lookup = |name: &str, what: &str| -> Result<CutValue> {
        values
            .iter()
            .find(|v| v.name == name)
            .cloned()
            .ok_or_else(|| bad(format!("{what} '{name}' is not in the values table")))
    };
    let ports = |ps: &[PortSpec], what: &str| -> Result<Vec<CutValue>> {
        ps.iter()
            .map(|p| {
                let v = lookup(&p.name, what)?;
                if v.ty.dtype != p.dtype || v.ty.shape != p.shape {
                    return Err(bad(format!(
                        "{what} '{}' is {} {:?} but the values table says {} {:?}",
                        p.name, p.dtype, p.shape, v.ty.dtype, v.ty.shape
                    )));
                }
                Ok(v)
            })
            .collect()
    };
    let inputs = ports(&file.inputs, "input")?;
    let outputs = ports(&file.outputs, "output")?;
    let mut defined: HashSet<String> = inputs.iter().map(|v| v.name.clone()).collect();
    let mut stages = Vec::with_capacity(file.stages.len());
    for (k, entry) in file.stages.into_iter().enumerate() {
        let (ins, outs) = match &entry {
            StageEntry::Region {
                inputs, outputs, ..
            }
            | StageEntry::Host {
                inputs, outputs, ..
            } => (inputs.clone(), outputs.clone()),
        };
        for name in &ins {
            if !defined.contains(name) {
                return Err(bad(format!(
                    "stage {k} reads '{name}' before any stage writes it"
                )));
            }
        }
        for name in &outs {
            lookup(name, &format!("stage {k} output"))?;
            if !defined.insert(name.clone()) {
                return Err(bad(format!(
                    "stage {k} writes '{name}', which is already defined"
                )));
            }
        }
        let types = |list: &[String]| -> Result<Vec<TensorType>> {
            list.iter().map(|n| Ok(lookup(n, "value")?.ty)).collect()
        };
        stages.push(match entry {
            StageEntry::Region { program, .. } => {
                let key_ok = program.len() == KEY_LEN
                    && program.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
                if !key_ok {
                    return Err(bad(format!("stage {k}: region '{program}' is not a {KEY_LEN}-digit hex key")));
                }
                let rdir = dir.join(REGIONS).join(&program);
                let prog = Program::load_dir(&rdir)?;
                if prog.sha256[..KEY_LEN] != program {
                    return Err(bad(format!("stage {k}: region '{program}' holds a program whose sha256 is {}", prog.sha256)));
                }
                let want = |list: &[String]| -> Result<Vec<PortSpec>> {
                    Ok(list.iter().zip(types(list)?).map(|(n, t)| PortSpec { name: n.clone(), dtype: t.dtype, shape: t.shape }).collect())
                };
                if prog.inputs() != want(&ins)? || prog.outputs() != want(&outs)? {
                    return Err(bad(format!("stage {k}: region '{program}' ports differ from the plan's (inputs {ins:?}, outputs {outs:?})")));
                }
                let ops = region_ops(&prog);
                Stage::Region { program: prog, ops }
            }
            StageEntry::Host { op, .. } => {
                let got = op.infer(&types(&ins)?).map_err(|e| bad(format!("stage {k}: {e}")))?;
                if got != types(&outs)? {
                    return Err(bad(format!("stage {k}: {} produces {got:?}, the plan lists {outs:?}", op.name())));
                }
                Stage::Host { op, inputs: ins, outputs: outs }
            }
        });
    }
    for o in &outputs {
        if !defined.contains(&o.name) {
            return Err(bad(format!("output '{}' is written by no stage", o.name)));
        }
    }
    Ok(Plan {
        inputs,
        outputs,
        stages,
        values,
        routes,
    })
}

/// MIL names of a region's compute ops, in program order.
pub fn region_ops(p: &Program) -> Vec<String> {
    use crate::ops::Op;
    p.graph
        .nodes
        .iter()
        .filter(|n| !matches!(n.op, Op::Input(_) | Op::Const(_) | Op::Constexpr(_)))
        .map(|n| n.op.family().mil().op.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn an_identical_plan_file_is_kept_and_a_different_one_replaced() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("aneforge-planfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(PLAN_FILE);
        let inode = || std::fs::metadata(&path).unwrap().ino();
        write(&dir, "{\"a\": 1}").unwrap();
        let first = inode();
        write(&dir, "{\"a\": 1}").unwrap();
        let kept = inode() == first;
        std::fs::write(&path, "{\"a\": 2").unwrap();
        write(&dir, "{\"a\": 1}").unwrap();
        let restored = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(kept, "same bytes: the file is not rewritten (same inode)");
        assert_eq!(restored, "{\"a\": 1}");
    }
}
