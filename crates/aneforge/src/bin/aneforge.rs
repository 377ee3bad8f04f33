//! The `aneforge` command line: `info` (version, platform, executors, cache) and `run` (run a
//! program directory on `.npy` inputs). Failures print one message on stderr and exit 1.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use aneforge::exec::{ane::Ane, reference::Reference};
use aneforge::{npy, Device, Error, Executor, PortSpec, Precision, Result};
use clap::{Parser, Subcommand};

/// Compile tensor graphs into one Apple Neural Engine program and run them.
#[derive(Parser)]
#[command(name = "aneforge", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the version, platform, each executor's availability and the cache directory.
    Info,
    /// Run a program directory (model.mil + weights.bin [+ program.json]) on .npy inputs.
    Run {
        /// The program directory.
        dir: PathBuf,
        /// An input port and its data: NAME=FILE.npy (once per input port).
        #[arg(short, long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Write each output as <OUTPUT_DIR>/<name>.npy (float32).
        #[arg(short, long)]
        output_dir: Option<PathBuf>,
        /// Executor: auto, ane or reference.
        #[arg(long, default_value = "auto")]
        device: String,
        /// Reference executor numerics: fp16 (the device contract) or fp32.
        #[arg(long, default_value = "fp16")]
        precision: String,
        /// Run this many more times and print the median time per call.
        #[arg(long, value_name = "N")]
        repeat: Option<usize>,
    },
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("aneforge: internal error (please report): {info}");
        std::process::exit(1);
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    let result = match cli.command {
        Command::Info => {
            info();
            Ok(())
        }
        Command::Run { dir, inputs, output_dir, device, precision, repeat } => run(&dir, &inputs, output_dir.as_deref(), &device, &precision, repeat),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("aneforge: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Availability line of one executor: `available` or `unavailable: <step>: <reason>`.
fn availability(ex: &dyn Executor) -> String {
    match ex.check() {
        Ok(()) => "available".into(),
        Err(Error::Unavailable { step, reason, .. }) => format!("unavailable: {step}: {reason}"),
        Err(e) => format!("unavailable: {e}"),
    }
}

fn info() {
    println!("aneforge {}", env!("CARGO_PKG_VERSION"));
    println!("platform: {}/{}", std::env::consts::OS, std::env::consts::ARCH);
    println!("executors:");
    for ex in [&Reference as &dyn Executor, &Ane] {
        println!("  {}: {}", ex.name(), availability(ex));
    }
    println!("cache dir: {}", aneforge::program::cache_root().display());
    println!("threads: {} (rayon; set RAYON_NUM_THREADS to change)", rayon::current_num_threads());
}

/// `name [shape] dtype` of every port, for error messages.
fn describe(ports: &[PortSpec]) -> String {
    ports.iter().map(|p| format!("{} {:?} {}", p.name, p.shape, p.dtype)).collect::<Vec<_>>().join(", ")
}

/// Read `NAME=FILE` arguments into one array per input port, in port order.
fn read_inputs(ports: &[PortSpec], args: &[String]) -> Result<Vec<npy::Npy>> {
    let expected = || format!("the program's inputs are: {}", describe(ports));
    let mut given: HashMap<&str, &Path> = HashMap::new();
    for arg in args {
        let (name, file) = arg.split_once('=').ok_or_else(|| Error::value("--input", format!("'{arg}' is not NAME=FILE.npy; {}", expected())))?;
        if !ports.iter().any(|p| p.name == name) {
            return Err(Error::value("--input", format!("the program has no input '{name}'; {}", expected())));
        }
        if given.insert(name, Path::new(file)).is_some() {
            return Err(Error::value("--input", format!("input '{name}' is given more than once")));
        }
    }
    ports
        .iter()
        .map(|p| {
            let file = given.get(p.name.as_str()).ok_or_else(|| Error::value("--input", format!("missing input '{}' ({:?} {}); {}", p.name, p.shape, p.dtype, expected())))?;
            let a = npy::read(file)?;
            if a.shape != p.shape {
                return Err(Error::shape(format!("input '{}'", p.name), format!("{} has shape {:?} ({}); the port expects {:?} {}", file.display(), a.shape, a.dtype_name(), p.shape, p.dtype)));
            }
            Ok(a)
        })
        .collect()
}

/// Up to 8 values, then `...` and the total count.
fn preview(v: &[f32]) -> String {
    let head: Vec<String> = v.iter().take(8).map(|x| format!("{x}")).collect();
    let more = if v.len() > 8 { format!(", ... ({} values)", v.len()) } else { String::new() };
    format!("[{}{more}]", head.join(", "))
}

fn run(dir: &Path, args: &[String], output_dir: Option<&Path>, device: &str, precision: &str, repeat: Option<usize>) -> Result<()> {
    let precision = match precision {
        "fp16" => Precision::Fp16,
        "fp32" => Precision::Fp32,
        p => return Err(Error::value("--precision", format!("unknown precision '{p}' (expected fp16 or fp32)"))),
    };
    let mut net = aneforge::load_dir(dir, Device::parse(device)?, precision)?;
    let arrays = read_inputs(net.inputs(), args)?;
    let feeds: Vec<_> = arrays.iter().map(npy::Npy::port_data).collect();
    let outputs = net.run(&feeds)?;
    println!("program: {}", dir.display());
    println!("device: {}", net.device());
    for (port, values) in net.outputs().iter().zip(&outputs) {
        println!("{} {:?}: {}", port.name, port.shape, preview(values));
    }
    if let Some(out) = output_dir {
        std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
        for (port, values) in net.outputs().iter().zip(&outputs) {
            let path = out.join(format!("{}.npy", port.name));
            npy::write_f32(&path, &port.shape, values)?;
            println!("wrote {}", path.display());
        }
    }
    if let Some(n) = repeat.filter(|&n| n > 0) {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            net.run(&feeds)?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        println!("median per call: {:.1} µs over {n} runs", times[n / 2] * 1e6);
    }
    Ok(())
}
