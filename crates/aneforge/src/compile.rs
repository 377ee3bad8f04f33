//! `compile`: graph → lowered program → program directory → loaded on a device.

use std::path::{Path, PathBuf};
use std::sync::Once;

use crate::error::{Error, Result};
use crate::exec::{ane::Ane, reference::Reference, Executor, Loaded, PortData, Precision};
use crate::graph::{Graph, Tensor};
use crate::program::{cache_root, PortSpec, Program};

/// Where to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Device {
    /// The ANE when its executor's check passes, else the reference executor (with a one-time notice).
    #[default]
    Auto,
    /// The ANE or an error naming the step that failed.
    Ane,
    /// The CPU reference executor.
    Reference,
}

impl Device {
    /// Parse `auto`, `ane`, `reference` (alias `cpu`).
    pub fn parse(s: &str) -> Result<Device> {
        match s {
            "auto" => Ok(Device::Auto),
            "ane" => Ok(Device::Ane),
            "reference" | "cpu" => Ok(Device::Reference),
            _ => Err(Error::value("compile", format!("unknown device '{s}' (expected auto, ane, reference or cpu)"))),
        }
    }
}

/// Options of [`compile`].
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    pub device: Device,
    pub precision: Precision,
    /// Write the program here instead of the content-addressed cache.
    pub build_dir: Option<PathBuf>,
}

/// A compiled, loaded program.
pub struct Compiled {
    pub program: Program,
    pub dir: PathBuf,
    pub loaded: Box<dyn Loaded>,
}

static NOTICE: Once = Once::new();

/// Pick the executor for `device`; `Auto` falls back to the reference executor with a one-time notice.
pub fn executor(device: Device, precision: Precision) -> Result<Box<dyn Executor>> {
    let ane = Ane;
    match device {
        Device::Reference => Ok(Box::new(Reference)),
        Device::Ane => {
            ane.check()?;
            if precision == Precision::Fp32 {
                return Err(Error::value("compile", "precision='fp32' exists only on the reference executor (the ANE computes in fp16)"));
            }
            Ok(Box::new(ane))
        }
        Device::Auto => match ane.check() {
            Ok(()) if precision == Precision::Fp16 => Ok(Box::new(ane)),
            Ok(()) => Ok(Box::new(Reference)),
            Err(e) => {
                if std::env::var_os("ANEFORGE_QUIET").is_none() {
                    NOTICE.call_once(|| eprintln!("aneforge: {e}; running on the reference executor (CPU)"));
                }
                Ok(Box::new(Reference))
            }
        },
    }
}

/// Lower outputs (`None` name = automatic `y0`, `y1`, ...) and write the program directory
/// (into `build_dir`, else the content-addressed cache) without loading it on any executor.
pub fn export(outputs: &[(Option<String>, Tensor)], build_dir: Option<&Path>) -> Result<(Program, PathBuf)> {
    let program = Program::lower(Graph::from_outputs(outputs)?)?;
    let dir = match build_dir {
        Some(d) => program.write_to(d)?,
        None => program.write_cached(&cache_root())?,
    };
    Ok((program, dir))
}

/// Compile outputs into a program directory (see [`export`]) and load it on the chosen device.
pub fn compile(outputs: &[(Option<String>, Tensor)], opts: &CompileOptions) -> Result<Compiled> {
    let (program, dir) = export(outputs, opts.build_dir.as_deref())?;
    let loaded = executor(opts.device, opts.precision)?.load(&program, opts.precision)?;
    Ok(Compiled { program, dir, loaded })
}

/// Load a program directory (written by us or in the same dialect) on `device`.
pub fn load_dir(dir: &Path, device: Device, precision: Precision) -> Result<Compiled> {
    let program = Program::load_dir(dir)?;
    let loaded = executor(device, precision)?.load(&program, precision)?;
    Ok(Compiled { program, dir: dir.to_path_buf(), loaded })
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
            return Err(Error::value("run", format!("expects {} inputs {names:?}, got {}", names.len(), inputs.len())));
        }
        for (i, d) in inputs.iter().enumerate() {
            self.loaded.set_input(i, *d)?;
        }
        self.loaded.execute()?;
        (0..self.outputs().len())
            .map(|i| {
                let mut out = vec![0.0; self.outputs()[i].numel()];
                self.loaded.read_output(i, &mut out)?;
                Ok(out)
            })
            .collect()
    }
}
