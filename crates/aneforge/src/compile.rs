//! `compile`: graph → lowered program → program directory → loaded on a device.

use std::path::{Path, PathBuf};
use std::sync::Once;

use crate::compress::{self, CompressOptions, CompressionEntry};
use crate::error::{Error, Result};
use crate::exec::{ane::Ane, reference::Reference, Executor, Loaded, PortData, Precision};
use crate::graph::{Graph, Tensor};
pub use crate::options::{CompileOptions, Device};
use crate::plan::retile;
use crate::plan::route::{self, RouteChoice};
use crate::plan::{file as plan_file, run::PlanLoaded, segment, Plan, Stage};
use crate::program::{cache_root, PortSpec, Program};
use crate::targets::Opset;
use crate::{passes, targets};

/// A compiled, loaded program (or segmented plan).
pub struct Compiled {
    /// The program; for a plan, a summary whose graph is the whole graph (host ops included)
    /// and whose MIL text is every region's, in stage order.
    pub program: Program,
    pub dir: PathBuf,
    pub loaded: Box<dyn Loaded>,
    /// One entry per weight when compiled with `compress` (else empty).
    pub report: Vec<CompressionEntry>,
    /// The stages when the graph holds host ops (see [`crate::plan`]), else `None`.
    pub plan: Option<Plan>,
    /// The routing decision per routable host op (see [`crate::plan::route`]); from `plan.json` when loaded from a plan directory.
    pub routes: Vec<RouteChoice>,
}

/// A program (or plan) written to its directory, with its compression report (empty without `compress`).
pub struct Exported {
    pub program: Program,
    pub dir: PathBuf,
    pub report: Vec<CompressionEntry>,
    pub plan: Option<Plan>,
    /// The routing decision per routable host op.
    pub routes: Vec<RouteChoice>,
}

static NOTICE: Once = Once::new();

/// `ANEFORGE_DEVICE` (auto, ane, reference or cpu) when set and non-empty, else `Auto`.
fn device_from_env() -> Result<Device> {
    match std::env::var("ANEFORGE_DEVICE") {
        Ok(v) if !v.is_empty() => Device::parse(&v).map_err(|_| {
            Error::value(
                "ANEFORGE_DEVICE",
                format!("'{v}' is not a device (expected auto, ane, reference or cpu)"),
            )
        }),
        _ => Ok(Device::Auto),
    }
}

/// Pick the executor for `device`. An explicit `Ane` / `Reference` wins; `Auto` defers to
/// `ANEFORGE_DEVICE`, then takes the ANE when its check passes, else the reference executor
/// (with a one-time notice on stderr unless `ANEFORGE_QUIET` is set).
pub fn executor(device: Device, precision: Precision) -> Result<Box<dyn Executor>> {
    let device = if device == Device::Auto {
        device_from_env()?
    } else {
        device
    };
    match device {
        Device::Reference => Ok(Box::new(Reference)),
        Device::Ane => {
            let ane = Ane::from_env()?;
            ane.check()?;
            if precision == Precision::Fp32 {
                return Err(Error::value("compile", "precision='fp32' exists only on the reference executor (the ANE computes in fp16)"));
            }
            Ok(Box::new(ane))
        }
        Device::Auto if precision == Precision::Fp32 => Ok(Box::new(Reference)),
        Device::Auto => {
            let ane = Ane::from_env()?;
            match ane.check() {
                Ok(()) => Ok(Box::new(ane)),
                Err(e) => {
                    if std::env::var_os("ANEFORGE_QUIET").is_none() {
                        NOTICE.call_once(|| {
                            eprintln!("aneforge: {e}; running on the reference executor (CPU)")
                        });
                    }
                    Ok(Box::new(Reference))
                }
            }
        }
    }
}

/// Lower outputs (`None` name = `y0`, `y1`, ...), compressed per `opts.compress`, and write the
/// program directory (`opts.build_dir`, else the cache) without loading it. A graph holding host
/// ops is segmented: one program directory per fused region plus `plan.json` (see [`crate::plan`]).
pub fn export(outputs: &[(Option<String>, Tensor)], opts: &CompileOptions) -> Result<Exported> {
    opts.validate()?;
    let outputs = retile::retile(outputs, opts.attention_tiles)?;
    let (outputs, routes) = route::route(&outputs, opts.route)?;
    let mut e = if opts.sum_via_matmul {
        let names: Vec<Option<String>> = outputs.iter().map(|(n, _)| n.clone()).collect();
        let ts: Vec<Tensor> = outputs.iter().map(|(_, t)| t.clone()).collect();
        let rewritten: Vec<(Option<String>, Tensor)> = names
            .into_iter()
            .zip(passes::reduce_sum_to_matmul(&ts)?)
            .collect();
        write_graph(Graph::from_outputs(&rewritten)?, opts, &routes)?
    } else {
        write_graph(Graph::from_outputs(&outputs)?, opts, &routes)?
    };
    e.routes = routes;
    Ok(e)
}

/// Write `graph` as one program, or as a plan (recording `routes`) when it holds host ops or
/// had some routed (a plan of one region then, so the routes are saved).
fn write_graph(graph: Graph, opts: &CompileOptions, routes: &[RouteChoice]) -> Result<Exported> {
    opts.validate()?;
    match segment::segment(&graph, !routes.is_empty())? {
        None => write_program(graph, opts),
        Some(seg) => write_plan(graph, seg, opts, routes),
    }
}

/// Gate `graph` on the target (when there is one), compress it (when asked) and lower it.
fn lower(graph: Graph, opts: &CompileOptions) -> Result<(Program, Vec<CompressionEntry>)> {
    let opset = Opset::resolve(opts.opset.as_deref())?;
    let target = targets::compile_target(opts.target.as_deref())?;
    let graph = passes::work_around(graph, target, opts.precision)?;
    let graph = match target {
        Some(t) => passes::retarget(graph, t, opts.precision)?,
        None => graph,
    };
    let (graph, report) = match opts.compress {
        Some(mode) => compress::compress(
            graph,
            &CompressOptions {
                mode,
                atol: opts.compress_atol,
                block_size: opts.block_size,
                family: target.map(|t| t.family),
            },
        )?,
        None => (graph, Vec::new()),
    };
    let program = Program::lower_for(passes::for_opset(graph, opset)?, opset)?;
    Ok((program, report))
}

/// Lower `graph` and write its directory.
fn write_program(graph: Graph, opts: &CompileOptions) -> Result<Exported> {
    opts.validate()?;
    let (program, report) = lower(graph, opts)?;
    let dir = match &opts.build_dir {
        Some(d) => program.write_to(d)?,
        None => program.write_cached(&cache_root())?,
    };
    Ok(Exported {
        program,
        dir,
        report,
        plan: None,
        routes: Vec::new(),
    })
}

/// Lower every region of `seg`, write them under `<dir>/regions/` and `plan.json` last; `dir`
/// is `opts.build_dir`, else `<cache>/<first 32 hex digits of SHA-256(plan.json)>`.
fn write_plan(
    graph: Graph,
    seg: segment::Segmented,
    opts: &CompileOptions,
    routes: &[RouteChoice],
) -> Result<Exported> {
    let mut report = Vec::new();
    let mut stages = Vec::with_capacity(seg.stages.len());
    for s in seg.stages {
        stages.push(match s {
            segment::Segment::Region(g) => {
                let (program, r) = lower(g, opts)?;
                report.extend(r);
                let ops = plan_file::region_ops(&program);
                Stage::Region { program, ops }
            }
            segment::Segment::Host {
                op,
                inputs,
                outputs,
            } => Stage::Host {
                op,
                inputs,
                outputs,
            },
        });
    }
    let plan = Plan {
        inputs: seg.inputs,
        outputs: seg.outputs,
        stages,
        values: seg.values,
        routes: routes.to_vec(),
    };
    let json = plan_file::to_json(&plan);
    let summary = summary_program(graph, &plan, &json);
    let dir = match &opts.build_dir {
        Some(d) => d.clone(),
        None => cache_root().join(&summary.sha256[..crate::program::KEY_LEN]),
    };
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    for s in &plan.stages {
        if let Stage::Region { program, .. } = s {
            program.write_cached(&dir.join(plan_file::REGIONS))?;
        }
    }
    plan_file::write(&dir, &json)?;
    Ok(Exported {
        program: summary,
        dir,
        report,
        plan: Some(plan),
        routes: Vec::new(),
    })
}

/// The summary program of a plan: the whole graph, every region's MIL under a `// stage k`
/// line, no weights, and the SHA-256 of the plan file.
fn summary_program(graph: Graph, plan: &Plan, json: &str) -> Program {
    use sha2::{Digest, Sha256};
    let mut mil = String::new();
    for (k, s) in plan.stages.iter().enumerate() {
        match s {
            Stage::Region { program, .. } => {
                mil.push_str(&format!(
                    "// stage {k}: region {}\n",
                    &program.sha256[..crate::program::KEY_LEN]
                ));
                mil.push_str(&program.mil);
            }
            Stage::Host { op, .. } => {
                mil.push_str(&format!(
                    "// stage {k}: host {}\n",
                    crate::ops::Family::name(op)
                ));
            }
        }
    }
    let sha256 = Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let opset = plan
        .stages
        .iter()
        .find_map(|s| match s {
            Stage::Region { program, .. } => Some(program.opset),
            Stage::Host { .. } => None,
        })
        .unwrap_or(Opset::LATEST);
    Program {
        graph,
        mil,
        weights: crate::mil::blob::Blob::new(),
        sha256,
        opset,
    }
}

/// Load a written program (or plan) on `device`.
pub fn load_exported(e: Exported, device: Device, precision: Precision) -> Result<Compiled> {
    let exec = executor(device, precision)?;
    let loaded: Box<dyn Loaded> = match &e.plan {
        Some(plan) => Box::new(PlanLoaded::load(plan, &e.dir, exec.as_ref(), precision)?),
        None => exec.load(&e.program, &e.dir, precision)?,
    };
    let loaded = crate::cost::profile::wrap_from_env(loaded);
    Ok(Compiled {
        program: e.program,
        dir: e.dir,
        loaded,
        report: e.report,
        plan: e.plan,
        routes: e.routes,
    })
}

/// Compile outputs into a program directory (see [`export`]) and load it on the chosen device.
pub fn compile(outputs: &[(Option<String>, Tensor)], opts: &CompileOptions) -> Result<Compiled> {
    load_exported(export(outputs, opts)?, opts.device, opts.precision)
}

/// Compress a program directory's fp16 weights per `opts` into a new program directory (not
/// loaded). A plan directory is NotImplemented.
pub fn compress_dir(dir: &Path, opts: &CompileOptions) -> Result<Exported> {
    if plan_file::is_plan_dir(dir) {
        return Err(Error::NotImplemented(format!(
            "compress: {} is a segmented plan; compress the graph at compile time instead",
            dir.display()
        )));
    }
    write_program(Program::load_dir(dir)?.graph, opts)
}

/// Load a program directory on `opts.device`; with `opts.compress`, through [`compress_dir`].
pub fn load_dir_with(dir: &Path, opts: &CompileOptions) -> Result<Compiled> {
    opts.validate()?;
    if opts.compress.is_none() {
        return load_dir(dir, opts.device, opts.precision);
    }
    load_exported(compress_dir(dir, opts)?, opts.device, opts.precision)
}

/// Load a program directory (written by us or in the same dialect) or a plan directory (one
/// with `plan.json`, checked entirely before anything loads) on `device`.
pub fn load_dir(dir: &Path, device: Device, precision: Precision) -> Result<Compiled> {
    if plan_file::is_plan_dir(dir) {
        let plan = plan_file::read(dir)?;
        let json = plan_file::to_json(&plan);
        let e = Exported {
            program: summary_program(plan_graph(&plan), &plan, &json),
            dir: dir.to_path_buf(),
            report: Vec::new(),
            routes: plan.routes.clone(),
            plan: Some(plan),
        };
        return load_exported(e, device, precision);
    }
    let program = Program::load_dir(dir)?;
    let loaded = executor(device, precision)?.load(&program, dir, precision)?;
    let loaded = crate::cost::profile::wrap_from_env(loaded);
    Ok(Compiled {
        program,
        dir: dir.to_path_buf(),
        loaded,
        report: Vec::new(),
        plan: None,
        routes: Vec::new(),
    })
}

/// The graph of a loaded plan for its summary: the regions' graphs are not re-joined, so it is
/// the first region's graph (or an empty graph for a plan of host stages only).
fn plan_graph(plan: &Plan) -> Graph {
    plan.stages
        .iter()
        .find_map(|s| match s {
            Stage::Region { program, .. } => Some(program.graph.clone()),
            Stage::Host { .. } => None,
        })
        .unwrap_or(Graph {
            nodes: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        })
}

impl Compiled {
    /// The executor running the program.
    pub fn device(&self) -> &'static str {
        self.loaded.device()
    }
    /// Input ports in feeding order.
    pub fn inputs(&self) -> &[PortSpec] {
        self.loaded.inputs()
    }
    /// Output ports.
    pub fn outputs(&self) -> &[PortSpec] {
        self.loaded.outputs()
    }
    /// The planned host memory of the program (reference executor only; NotImplemented on the
    /// ANE, whose memory the driver plans, and for segmented plans).
    pub fn memory(&self) -> Result<crate::exec::reference::MemoryReport> {
        self.loaded.memory().ok_or_else(|| {
            Error::NotImplemented(format!(
                "memory(): the {} executor does not report a memory plan (only a program on the reference executor does)",
                self.device()
            ))
        })
    }
    /// Feed every input in order, execute, and return every output as f32.
    pub fn run(&mut self, inputs: &[PortData]) -> Result<Vec<Vec<f32>>> {
        if inputs.len() != self.inputs().len() {
            let names: Vec<&str> = self.inputs().iter().map(|p| p.name.as_str()).collect();
            return Err(Error::value(
                "run",
                format!(
                    "expects {} inputs {names:?}, got {}",
                    names.len(),
                    inputs.len()
                ),
            ));
        }
        for (i, d) in inputs.iter().enumerate() {
            self.loaded.set_input(i, *d)?;
        }
        self.loaded.execute()?;
        self.loaded.read_outputs()
    }
}

impl Compiled {
    /// Write the program as a Core ML `.mlpackage` at `path` (see [`crate::mlpackage::write_mlpackage`]).
    /// A plan of one region (its host ops all routed fused) writes that region; a segmented
    /// plan is NotImplemented (the error names its host ops).
    pub fn save_mlpackage(&self, path: &Path) -> Result<PathBuf> {
        if let Some(plan) = &self.plan {
            if let [Stage::Region { program, .. }] = &plan.stages[..] {
                return crate::mlpackage::write_mlpackage(program, path);
            }
            let hosts: Vec<&str> = plan
                .stages
                .iter()
                .filter_map(|s| match s {
                    Stage::Host { op, .. } => Some(crate::ops::Family::name(op)),
                    Stage::Region { .. } => None,
                })
                .collect();
            return Err(Error::NotImplemented(format!("save_mlpackage: the program is a segmented plan with host ops {hosts:?}, which Core ML packages cannot hold; export a graph without host ops")));
        }
        crate::mlpackage::write_mlpackage(&self.program, path)
    }
}
