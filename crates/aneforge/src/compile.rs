//! `compile`: graph → lowered program → program directory → loaded on a device.

use std::path::{Path, PathBuf};
use std::sync::Once;

use crate::compress::{self, CompressOptions, CompressionEntry};
use crate::error::{Error, Result};
use crate::exec::{ane::Ane, reference::Reference, Executor, Loaded, PortData, Precision};
use crate::graph::{Graph, Tensor};
pub use crate::options::{CompileOptions, Device};
use crate::program::{cache_root, PortSpec, Program};
use crate::targets::Opset;
use crate::{passes, targets};

/// A compiled, loaded program.
pub struct Compiled {
    pub program: Program,
    pub dir: PathBuf,
    pub loaded: Box<dyn Loaded>,
    /// One entry per weight when compiled with `compress` (else empty).
    pub report: Vec<CompressionEntry>,
}

/// A program written to its directory, with its compression report (empty without `compress`).
pub struct Exported {
    pub program: Program,
    pub dir: PathBuf,
    pub report: Vec<CompressionEntry>,
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
/// program directory (`opts.build_dir`, else the cache) without loading it.
pub fn export(outputs: &[(Option<String>, Tensor)], opts: &CompileOptions) -> Result<Exported> {
    if opts.sum_via_matmul {
        let names: Vec<Option<String>> = outputs.iter().map(|(n, _)| n.clone()).collect();
        let ts: Vec<Tensor> = outputs.iter().map(|(_, t)| t.clone()).collect();
        let rewritten: Vec<(Option<String>, Tensor)> = names
            .into_iter()
            .zip(passes::reduce_sum_to_matmul(&ts)?)
            .collect();
        return write_program(Graph::from_outputs(&rewritten)?, opts);
    }
    write_program(Graph::from_outputs(outputs)?, opts)
}

/// Gate `graph` on the target (when there is one), compress it (when asked), lower it and write its directory.
fn write_program(graph: Graph, opts: &CompileOptions) -> Result<Exported> {
    opts.validate()?;
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
    let dir = match &opts.build_dir {
        Some(d) => program.write_to(d)?,
        None => program.write_cached(&cache_root())?,
    };
    Ok(Exported {
        program,
        dir,
        report,
    })
}

/// Load a written program on `opts.device`.
fn load_exported(e: Exported, opts: &CompileOptions) -> Result<Compiled> {
    let loaded = executor(opts.device, opts.precision)?.load(&e.program, &e.dir, opts.precision)?;
    Ok(Compiled {
        program: e.program,
        dir: e.dir,
        loaded,
        report: e.report,
    })
}

/// Compile outputs into a program directory (see [`export`]) and load it on the chosen device.
pub fn compile(outputs: &[(Option<String>, Tensor)], opts: &CompileOptions) -> Result<Compiled> {
    load_exported(export(outputs, opts)?, opts)
}

/// Compress a program directory's fp16 weights per `opts` into a new program directory (not loaded).
pub fn compress_dir(dir: &Path, opts: &CompileOptions) -> Result<Exported> {
    write_program(Program::load_dir(dir)?.graph, opts)
}

/// Load a program directory on `opts.device`; with `opts.compress`, through [`compress_dir`].
pub fn load_dir_with(dir: &Path, opts: &CompileOptions) -> Result<Compiled> {
    opts.validate()?;
    if opts.compress.is_none() {
        return load_dir(dir, opts.device, opts.precision);
    }
    load_exported(compress_dir(dir, opts)?, opts)
}

/// Load a program directory (written by us or in the same dialect) on `device`.
pub fn load_dir(dir: &Path, device: Device, precision: Precision) -> Result<Compiled> {
    let program = Program::load_dir(dir)?;
    let loaded = executor(device, precision)?.load(&program, dir, precision)?;
    Ok(Compiled {
        program,
        dir: dir.to_path_buf(),
        loaded,
        report: Vec::new(),
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
    pub fn save_mlpackage(&self, path: &Path) -> Result<PathBuf> {
        crate::mlpackage::write_mlpackage(&self.program, path)
    }
}
