//! The `aneforge` binary: `info`, and `run` on a program directory written from Rust, checked
//! against numbers computed here; failures exit 1 with one message naming the problem.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aneforge::cli::npy::{self, NpyData};
use aneforge::ops::io::HostArray;
use aneforge::{constant, input_port, DType, Graph, Program};

const X: [f32; 6] = [-1.5, 0.25, 3.0, -0.0, 7.5, -2.0];
const B: [f32; 6] = [0.5, 1.0, -1.0, 2.0, 0.125, 4.0];
const W: [f32; 6] = [0.5, -0.25, 1.0, 2.0, -3.0, 0.75];

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Program `y = relu(x) * 2 + W`, `d = x - b` (inputs x, b of shape [2, 3]) plus x.npy and b.npy.
fn setup(name: &str) -> PathBuf {
    let root = scratch(name);
    let x = input_port(&[2, 3], DType::Fp16, Some("x")).unwrap();
    let b = input_port(&[2, 3], DType::Fp16, Some("b")).unwrap();
    let w = constant("w", HostArray::f32(&[2, 3], &W)).unwrap();
    let y = x.relu().unwrap().mul_scalar(2.0).unwrap().add(&w).unwrap();
    let d = x.sub(&b).unwrap();
    let graph = Graph::from_outputs(&[(Some("y".into()), y), (Some("d".into()), d)]).unwrap();
    Program::lower(graph)
        .unwrap()
        .write_to(&root.join("prog"))
        .unwrap();
    npy::write_f32(&root.join("x.npy"), &[2, 3], &X).unwrap();
    npy::write_f32(&root.join("b.npy"), &[2, 3], &B).unwrap();
    root
}

fn aneforge(args: &[&str], root: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aneforge"))
        .args(args)
        .current_dir(root)
        .env("ANEFORGE_QUIET", "1")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run and expect exit code 1 with one `aneforge: error:` line on stderr; returns that stderr.
fn fails(args: &[&str], root: &Path) -> String {
    let out = aneforge(args, root);
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}\nstderr: {err}",
        text(&out.stdout)
    );
    assert!(err.starts_with("aneforge: error: "), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    err
}

fn read_f32(path: &Path) -> (Vec<usize>, Vec<f32>) {
    match npy::read(path).unwrap() {
        npy::Npy {
            shape,
            data: NpyData::F32(v),
        } => (shape, v),
        a => panic!(
            "{}: expected float32, got {}",
            path.display(),
            a.dtype_name()
        ),
    }
}

#[test]
fn info_reports_version_executors_and_cache() {
    let root = scratch("info");
    let out = Command::new(env!("CARGO_BIN_EXE_aneforge"))
        .arg("info")
        .env("ANEFORGE_CACHE_DIR", &root)
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = text(&out.stdout);
    assert!(
        s.starts_with(&format!("aneforge {}\n", env!("CARGO_PKG_VERSION"))),
        "{s}"
    );
    assert!(
        s.contains(&format!(
            "platform: {}/{}",
            std::env::consts::OS,
            std::env::consts::ARCH
        )),
        "{s}"
    );
    assert!(s.contains("  reference: available\n"), "{s}");
    assert!(
        s.contains(&format!("cache dir: {}\n", root.display())),
        "{s}"
    );
    assert!(s.contains("threads: "), "{s}");
    if cfg!(not(target_os = "macos")) {
        let want = format!(
            "  ane: unavailable: platform: not macOS (this is {}/{})\n",
            std::env::consts::OS,
            std::env::consts::ARCH
        );
        assert!(s.contains(&want), "{s}");
    }
}

#[test]
fn run_writes_outputs_matching_an_independent_computation() {
    let root = setup("run");
    let out = aneforge(
        &[
            "run",
            "prog",
            "--input",
            "b=b.npy",
            "--input",
            "x=x.npy",
            "--output-dir",
            "out",
            "--device",
            "reference",
            "--repeat",
            "3",
        ],
        &root,
    );
    let s = text(&out.stdout);
    assert!(out.status.success(), "{s}{}", text(&out.stderr));
    assert!(s.contains("device: reference\n"), "{s}");
    assert!(s.contains("y [2, 3]: [0.5, 0.25, 7, 2, 12, 0.75]\n"), "{s}");
    assert!(
        s.contains("median per call: ") && s.contains("over 3 runs"),
        "{s}"
    );
    let (shape, y) = read_f32(&root.join("out/y.npy"));
    assert_eq!(shape, [2, 3]);
    let want: Vec<f32> = X.iter().zip(W).map(|(x, w)| x.max(0.0) * 2.0 + w).collect();
    assert_eq!(y, want);
    let (shape, d) = read_f32(&root.join("out/d.npy"));
    assert_eq!(shape, [2, 3]);
    assert_eq!(d, X.iter().zip(B).map(|(x, b)| x - b).collect::<Vec<_>>());
}

#[test]
fn fp16_rounding_and_fp32_precision_differ_as_specified() {
    let root = setup("precision");
    let x = [0.1f32, 1000.3, -3.0, 2049.0, 0.5, 1.0 / 3.0];
    npy::write_f32(&root.join("x.npy"), &[2, 3], &x).unwrap();
    let d_of = |precision: &str| {
        let out = aneforge(
            &[
                "run",
                "prog",
                "-i",
                "x=x.npy",
                "-i",
                "b=b.npy",
                "-o",
                precision,
                "--precision",
                precision,
                "--device",
                "reference",
            ],
            &root,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        read_f32(&root.join(precision).join("d.npy")).1
    };
    let f16 = |v: f32| half::f16::from_f32(v).to_f32();
    let want16: Vec<f32> = x
        .iter()
        .zip(B)
        .map(|(x, b)| f16(f16(*x) - f16(b)))
        .collect();
    let want32: Vec<f32> = x.iter().zip(B).map(|(x, b)| x - b).collect();
    assert_eq!(d_of("fp16"), want16);
    assert_eq!(d_of("fp32"), want32);
}

#[test]
fn missing_unknown_and_repeated_inputs_list_the_ports() {
    let root = setup("inputs");
    let err = fails(&["run", "prog", "--input", "x=x.npy"], &root);
    assert!(
        err.contains("missing input 'b' ([2, 3] fp16)")
            && err.contains("x [2, 3] fp16, b [2, 3] fp16"),
        "{err}"
    );
    let err = fails(&["run", "prog", "-i", "x=x.npy", "-i", "q=b.npy"], &root);
    assert!(
        err.contains("no input 'q'") && err.contains("x [2, 3] fp16"),
        "{err}"
    );
    let err = fails(
        &[
            "run", "prog", "-i", "x=x.npy", "-i", "x=x.npy", "-i", "b=b.npy",
        ],
        &root,
    );
    assert!(err.contains("'x' is given more than once"), "{err}");
    let err = fails(&["run", "prog", "-i", "x.npy"], &root);
    assert!(err.contains("not NAME=FILE.npy"), "{err}");
    let err = fails(&["run", "prog", "-i", "x=nope.npy", "-i", "b=b.npy"], &root);
    assert!(err.contains("nope.npy"), "{err}");
}

#[test]
fn wrong_shape_and_bad_npy_are_rejected() {
    let root = setup("shape");
    npy::write_f32(&root.join("bad.npy"), &[3, 2], &X).unwrap();
    let err = fails(&["run", "prog", "-i", "x=bad.npy", "-i", "b=b.npy"], &root);
    assert!(
        err.contains("input 'x'")
            && err.contains("bad.npy has shape [3, 2]")
            && err.contains("expects [2, 3] fp16"),
        "{err}"
    );
    std::fs::write(root.join("junk.npy"), b"\x93NUMPY\x01\x00\xff\x00{").unwrap();
    let err = fails(&["run", "prog", "-i", "x=junk.npy", "-i", "b=b.npy"], &root);
    assert!(
        err.contains("junk.npy") && err.contains("past the end"),
        "{err}"
    );
    npy::write_f32(
        &root.join("inf.npy"),
        &[2, 3],
        &[1.0, 2.0, 1e6, 0.0, 0.0, 0.0],
    )
    .unwrap();
    let err = fails(&["run", "prog", "-i", "x=inf.npy", "-i", "b=b.npy"], &root);
    assert!(err.contains("element 2 = 1000000"), "{err}");
}

#[test]
fn corrupted_program_files_name_the_file() {
    let root = setup("corrupt");
    let args = ["run", "prog", "-i", "x=x.npy", "-i", "b=b.npy"];
    let w = root.join("prog/weights.bin");
    let mut bytes = std::fs::read(&w).unwrap();
    assert_eq!(
        bytes[64..68],
        0xDEAD_BEEFu32.to_le_bytes(),
        "first descriptor sentinel"
    );
    bytes[64] ^= 0xff;
    std::fs::write(&w, &bytes).unwrap();
    let err = fails(&args, &root);
    assert!(
        err.contains("weights.bin") && err.contains("sentinel"),
        "{err}"
    );

    let root = setup("truncated");
    let m = root.join("prog/model.mil");
    let mil = std::fs::read(&m).unwrap();
    std::fs::write(&m, &mil[..mil.len() / 2]).unwrap();
    let err = fails(&args, &root);
    assert!(err.contains("model.mil"), "{err}");

    let err = fails(&["run", "no-such-dir"], &root);
    assert!(err.contains("no-such-dir"), "{err}");
}

#[test]
fn bad_options_exit_1() {
    let root = setup("options");
    let err = fails(
        &[
            "run", "prog", "-i", "x=x.npy", "-i", "b=b.npy", "--device", "gpu",
        ],
        &root,
    );
    assert!(err.contains("unknown device 'gpu'"), "{err}");
    let err = fails(
        &[
            "run",
            "prog",
            "-i",
            "x=x.npy",
            "-i",
            "b=b.npy",
            "--precision",
            "int8",
        ],
        &root,
    );
    assert!(err.contains("unknown precision 'int8'"), "{err}");
    if cfg!(not(target_os = "macos")) {
        let err = fails(
            &[
                "run", "prog", "-i", "x=x.npy", "-i", "b=b.npy", "--device", "ane",
            ],
            &root,
        );
        assert!(
            err.contains("executor 'ane' is unavailable: platform: not macOS"),
            "{err}"
        );
    }
    let out = aneforge(&["frobnicate"], &root);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("frobnicate"));
}

#[test]
fn compress_writes_a_smaller_program_and_prints_the_report() {
    let root = scratch("compress");
    let x = input_port(&[2, 64], DType::Fp16, Some("x")).unwrap();
    let w: Vec<f32> = (0..64 * 32)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
        .collect();
    let y = x.matmul_weight(HostArray::f32(&[64, 32], &w)).unwrap();
    Program::lower(Graph::from_outputs(&[(Some("y".into()), y)]).unwrap())
        .unwrap()
        .write_to(&root.join("prog"))
        .unwrap();
    let out = aneforge(
        &["compress", "prog", "--mode", "int8", "-o", "small"],
        &root,
    );
    let s = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let row: Vec<&str> = s
        .lines()
        .find(|l| l.starts_with("t1 "))
        .unwrap_or_else(|| panic!("{s}"))
        .split_whitespace()
        .collect();
    // [32, 64] as baked: 4096 fp16 bytes → 2048 int8 codes + 32 fp16 scales
    assert_eq!(
        row[..7],
        ["t1", "matmul", "[32,", "64]", "int8", "4096", "2112"],
        "{s}"
    );
    assert!(row[7].parse::<f64>().unwrap() < 0.01, "{s}");
    assert!(s.contains("wrote small"), "{s}");
    let size = |d: &str| {
        std::fs::metadata(root.join(d).join("weights.bin"))
            .unwrap()
            .len()
    };
    assert!(
        size("small") * 100 <= size("prog") * 55,
        "{} vs {}",
        size("small"),
        size("prog")
    );
    npy::write_f32(&root.join("x.npy"), &[2, 64], &[0.5; 128]).unwrap();
    let run = aneforge(&["run", "small", "-i", "x=x.npy", "-o", "outs"], &root);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let err = fails(&["compress", "prog", "--mode", "int3"], &root);
    assert!(err.contains("unknown compress mode 'int3'"), "{err}");
    let err = fails(
        &[
            "compress",
            "prog",
            "--mode",
            "blockwise",
            "--block-size",
            "48",
        ],
        &root,
    );
    assert!(
        err.contains("block_size 48 does not divide the inner axis (64) of weight t1 [32, 64]"),
        "{err}"
    );
}
