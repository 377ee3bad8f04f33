//! `aneforge run DIR --input NAME=FILE.npy ...`: run a program directory on `.npy` inputs, print
//! a preview of each output, optionally write them as `.npy` (int32 outputs as `<i4`, exact;
//! the others as `<f4`) and time repeated calls. int32 ports read integer `.npy` files exactly.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use super::{npy, preview};
use crate::compile::{load_dir_with, CompileOptions};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::program::PortSpec;

/// `name [shape] dtype` of every port, for error messages.
fn describe(ports: &[PortSpec]) -> String {
    ports
        .iter()
        .map(|p| format!("{} {:?} {}", p.name, p.shape, p.dtype))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Read `NAME=FILE` arguments into one array per input port, in port order.
pub(super) fn read_inputs(ports: &[PortSpec], args: &[String]) -> Result<Vec<npy::Npy>> {
    let expected = || format!("the program's inputs are: {}", describe(ports));
    let mut given: HashMap<&str, &Path> = HashMap::new();
    for arg in args {
        let (name, file) = arg.split_once('=').ok_or_else(|| {
            Error::value(
                "--input",
                format!("'{arg}' is not NAME=FILE.npy; {}", expected()),
            )
        })?;
        if !ports.iter().any(|p| p.name == name) {
            return Err(Error::value(
                "--input",
                format!("the program has no input '{name}'; {}", expected()),
            ));
        }
        if given.insert(name, Path::new(file)).is_some() {
            return Err(Error::value(
                "--input",
                format!("input '{name}' is given more than once"),
            ));
        }
    }
    ports
        .iter()
        .map(|p| {
            let file = given.get(p.name.as_str()).ok_or_else(|| {
                Error::value(
                    "--input",
                    format!(
                        "missing input '{}' ({:?} {}); {}",
                        p.name,
                        p.shape,
                        p.dtype,
                        expected()
                    ),
                )
            })?;
            let a = if p.dtype == DType::Int32 {
                npy::read_int32(file)?
            } else {
                npy::read(file)?
            };
            if a.shape != p.shape {
                return Err(Error::shape(
                    format!("input '{}'", p.name),
                    format!(
                        "{} has shape {:?} ({}); the port expects {:?} {}",
                        file.display(),
                        a.shape,
                        a.dtype_name(),
                        p.shape,
                        p.dtype
                    ),
                ));
            }
            Ok(a)
        })
        .collect()
}

/// Most timed repetitions `--repeat` accepts (the timings are kept for the median).
const MAX_REPEAT: usize = 1_000_000;

/// Load `dir` on `device` with `precision` (fp16 or fp32), run it once on the `NAME=FILE`
/// inputs and print the outputs; errors name the flag or file at fault.
pub(super) fn run(
    dir: &Path,
    args: &[String],
    output_dir: Option<&Path>,
    opts: &CompileOptions,
    repeat: Option<usize>,
) -> Result<()> {
    if let Some(n) = repeat.filter(|&n| n > MAX_REPEAT) {
        return Err(Error::value(
            "--repeat",
            format!("{n} runs is more than the {MAX_REPEAT} allowed"),
        ));
    }
    let mut net = load_dir_with(dir, opts)?;
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
        for (k, (port, values)) in net.outputs().iter().zip(&outputs).enumerate() {
            let path = out.join(format!("{}.npy", port.name));
            if port.dtype == DType::Int32 {
                let mut ints = vec![0i32; port.numel()];
                net.loaded.read_output_i32(k, &mut ints)?;
                npy::write_i32(&path, &port.shape, &ints)?;
            } else {
                npy::write_f32(&path, &port.shape, values)?;
            }
            println!("wrote {}", path.display());
        }
    }
    if let Some(n) = repeat.filter(|&n| n > 0) {
        let mut times = Vec::new();
        times
            .try_reserve_exact(n)
            .map_err(|_| crate::limits::exceeded("--repeat", format!("cannot keep {n} timings")))?;
        for _ in 0..n {
            let t = Instant::now();
            net.run(&feeds)?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        println!(
            "median per call: {:.1} µs over {n} runs",
            times[n / 2] * 1e6
        );
    }
    Ok(())
}
