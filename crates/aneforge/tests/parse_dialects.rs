//! The MIL parser on every dialect variant: every conformance program round-trips in every
//! opset, ios16/ios17 programs print their own headers (snapshots) and compute what the ios18
//! program computes, a handwritten foreign-dialect program directory (older literal spellings,
//! `weights/weight.bin`, inline literals, tuple outputs) runs through `load_dir` and
//! `aneforge run` and matches a computation written here, and malformed text is an error with
//! a line and a column, never a panic (proptest over mutated printed programs).

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use aneforge::exec::reference::Reference;
use aneforge::mil::blob::{Blob, Payload};
use aneforge::mil::parse::{parse, parse_program};
use aneforge::passes::for_opset;
use aneforge::targets::Opset;
use aneforge::{CompileOptions, Device, Error, Executor, Graph, PortData, Precision, Program};
use half::f16;
use proptest::prelude::*;

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dialects-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `g` legalized for and printed in `opset`.
fn lower(g: &Graph, opset: Opset) -> Program {
    Program::lower_for(for_opset(g.clone(), opset).unwrap(), opset).unwrap()
}

/// Every output of `p` on the reference executor for deterministic inputs.
fn run(p: &Program) -> Vec<Vec<f32>> {
    let mut l = Reference.load(p, Path::new("."), Precision::Fp16).unwrap();
    let feeds: Vec<Vec<f32>> = l
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, s)| common::data(s.numel(), 300 + i as u64))
        .collect();
    let u8s: Vec<Vec<u8>> = l
        .inputs()
        .iter()
        .map(|s| (0..s.numel()).map(|i| (i * 53 % 256) as u8).collect())
        .collect();
    for i in 0..feeds.len() {
        let d = if l.inputs()[i].dtype == aneforge::DType::Uint8 {
            PortData::U8(&u8s[i])
        } else {
            PortData::F32(&feeds[i])
        };
        l.set_input(i, d).unwrap();
    }
    l.execute().unwrap();
    l.read_outputs().unwrap()
}

fn parse_bytes(p: &Program) -> aneforge::Result<aneforge::mil::parse::Parsed> {
    let w = p.weights.to_bytes();
    parse_program(&p.mil, "model.mil".as_ref(), &mut |_| {
        Ok((std::borrow::Cow::Owned(w.clone()), "weights.bin".into()))
    })
}

#[test]
fn every_conformance_program_round_trips_in_every_opset() {
    for (name, t) in common::op_cases() {
        let g = Graph::from_outputs(&[(None, t)]).unwrap();
        let want = run(&lower(&g, Opset::Ios18));
        for opset in Opset::ALL {
            let p = lower(&g, opset);
            assert!(
                p.mil
                    .starts_with(&format!("program({})\n", opset.program_version())),
                "{name} {opset}"
            );
            assert!(
                p.mil.contains(&format!("    func main<{opset}>(")),
                "{name} {opset}"
            );
            let back = parse_bytes(&p).unwrap_or_else(|e| panic!("{name} {opset}: {e}"));
            assert_eq!(
                (back.opset, &back.graph),
                (opset, &p.graph),
                "{name} {opset}: parse(print(g)) != g"
            );
            let q = Program::lower_for(back.graph, opset).unwrap();
            assert_eq!(
                (&q.mil, &q.weights),
                (&p.mil, &p.weights),
                "{name} {opset}: print(parse(print(g))) differs"
            );
            let got = run(&p);
            assert!(
                got.iter()
                    .flatten()
                    .zip(want.iter().flatten())
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name} {opset}: outputs differ from ios18"
            );
        }
    }
}

/// Two compressed weights (int4 palette, blockwise int8) feeding matmuls: ios18 prints their constexpr ops,
/// ios16/ios17 fold them to fp16 BLOBFILE constants.
fn compressed_program() -> Graph {
    let cases = common::op_cases();
    let pick = |n: &str| cases.iter().find(|(c, _)| *c == n).unwrap().1.clone();
    Graph::from_outputs(&[
        (Some("lut".into()), pick("constexpr_lut_to_dense")),
        (
            Some("blockwise".into()),
            pick("constexpr_blockwise_shift_scale").relu().unwrap(),
        ),
    ])
    .unwrap()
}

#[test]
fn older_opsets_print_their_headers_and_fold_constexprs() {
    let g = compressed_program();
    let p18 = lower(&g, Opset::Ios18);
    assert!(
        p18.mil.contains("constexpr_lut_to_dense(")
            && p18.mil.contains("constexpr_blockwise_shift_scale(")
    );
    for opset in [Opset::Ios16, Opset::Ios17] {
        let p = lower(&g, opset);
        insta::assert_snapshot!(format!("opset_{opset}"), p.mil);
        assert!(!p.mil.contains("constexpr_"), "{opset}: {}", p.mil);
        assert_eq!(
            run(&p),
            run(&p18),
            "{opset}: folded weights compute differently"
        );
    }
    let e = Program::lower_for(g, Opset::Ios17).unwrap_err().to_string();
    assert!(
        e.contains("constexpr_lut_to_dense")
            && e.contains("opset ios17")
            && e.contains("first available: ios18"),
        "{e}"
    );
}

#[test]
fn compile_takes_an_opset_and_load_dir_keeps_it() {
    let root = scratch("compile-opset");
    let x = aneforge::input(&[2, 3]).unwrap();
    for opset in Opset::ALL {
        let opts = CompileOptions {
            device: Device::Reference,
            build_dir: Some(root.join(opset.name())),
            opset: Some(opset.name().into()),
            ..Default::default()
        };
        let c = aneforge::compile(&[(None, x.relu().unwrap())], &opts).unwrap();
        assert_eq!(c.program.opset, opset);
        let text = std::fs::read_to_string(c.dir.join("model.mil")).unwrap();
        assert!(
            text.starts_with(&format!("program({})\n", opset.program_version()))
                && text.contains(&format!("main<{opset}>")),
            "{text}"
        );
        let manifest = std::fs::read_to_string(c.dir.join("program.json")).unwrap();
        assert!(
            manifest.contains(&format!("\"opset\": \"{opset}\"")),
            "{manifest}"
        );
        let back = Program::load_dir(&c.dir).unwrap();
        assert_eq!((back.opset, &back.mil), (opset, &text));
    }
    let opts = CompileOptions {
        device: Device::Reference,
        build_dir: Some(root.join("bad")),
        opset: Some("ios15".into()),
        ..Default::default()
    };
    let e = aneforge::compile(&[(None, x.relu().unwrap())], &opts)
        .err()
        .unwrap();
    assert!(
        matches!(e, Error::Value { .. }) && e.to_string().contains("unknown opset 'ios15'"),
        "{e}"
    );
}

/// Weights W [4, 3] of the foreign program.
const W: [f32; 12] = [
    0.5, -1.0, 0.25, 2.0, 0.75, -0.5, -1.5, 1.0, 0.125, 0.0, -0.25, 1.25,
];
const X: [f32; 6] = [1.0, -2.0, 0.5, 3.0, 0.25, -1.0];
const A: [f32; 3] = [0.5, 1.0, -0.75];

/// A program in the older spelling (program(1.0), ios16, `tensor<string, []>`, `tensor<uint64, []>`,
/// weights under `weights/weight.bin`, an inline fp16 literal and an inline bool, a tuple output).
const FOREIGN_OLD: &str = r#"program(1.0)
[buildInfo = dict<tensor<string, []>, tensor<string, []>>({{"coremlc-component-MIL", "5.33.5"}, {"coremlc-version", "1436.100.10"}})]
{
    func main<ios16>(tensor<fp16, [2, 3]> x, tensor<fp16, [1, 3]> a) {
            tensor<fp16, [4, 3]> w = const()[name = tensor<string, []>("w"), val = tensor<fp16, [4, 3]>(BLOBFILE(path = tensor<string, []>("@model_path/weights/weight.bin"), offset = tensor<uint64, []>(64)))];
            tensor<bool, []> tx = const()[name = tensor<string, []>("tx"), val = tensor<bool, []>(false)];
            tensor<bool, []> ty = const()[name = tensor<string, []>("ty"), val = tensor<bool, []>(true)];
            tensor<fp16, [2, 3]> s = add(x = x, y = a)[name = tensor<string, []>("s")];
            tensor<fp16, [2, 4]> m = matmul(x = s, y = w, transpose_x = tx, transpose_y = ty)[name = tensor<string, []>("m")];
            tensor<fp16, [2, 4]> r = relu(x = m)[name = tensor<string, []>("r")];
            tensor<fp16, [2, 4]> y = mul(x = r, y = tensor<fp16, []>(0x1p-1))[name = tensor<string, []>("y")];
            tensor<int32, []> ax = const()[name = tensor<string, []>("ax"), val = tensor<int32, []>(1)];
            tensor<fp16, [2, 7]> c = concat(values = (y, s), axis = ax, interleave = tensor<bool, []>(false))[name = tensor<string, []>("c")];
    } -> (y, c);
}
"#;

/// The same program in the current spelling, program(1.3) / ios17, on two lines with almost no spaces.
const FOREIGN_NEW: &str = "program(1.3){func main<ios17>(tensor<fp16,[2,3]>x,tensor<fp16,[1,3]>a){tensor<fp16,[4,3]>w=const()[val=tensor<fp16,[4,3]>(BLOBFILE(offset=uint64(64),path=string(\"@model_path/weights/weight.bin\"))),name=string(\"w\")];bool tx=const()[name=string(\"tx\"),val=bool(false)];bool ty=const()[name=string(\"ty\"),val=bool(true)];tensor<fp16,[2,3]>s=add(x=x,y=a)[name=string(\"s\")];tensor<fp16,[2,4]>m=matmul(x=s,y=w,transpose_x=tx,transpose_y=ty)[name=string(\"m\")];\ntensor<fp16,[2,4]>r=relu(x=m)[name=string(\"r\")];fp16 h=const()[name=string(\"h\"),val=fp16(0.5)];tensor<fp16,[2,4]>y=mul(x=r,y=h)[name=string(\"y\")];int32 ax=const()[name=string(\"ax\"),val=int32(1)];tensor<fp16,[2,7]>c=concat(values=(y,s),axis=ax,interleave=bool(false))[name=string(\"c\")];}->(y,c);}";

/// Write a program directory holding `mil` and `weights/weight.bin` with W.
fn foreign_dir(name: &str, mil: &str) -> PathBuf {
    let dir = scratch(name);
    let mut blob = Blob::new();
    assert_eq!(
        blob.push(Payload::Fp16(Arc::new(
            W.iter().map(|&v| f16::from_f32(v)).collect()
        ))),
        64
    );
    std::fs::create_dir_all(dir.join("weights")).unwrap();
    std::fs::write(dir.join("weights/weight.bin"), blob.to_bytes()).unwrap();
    std::fs::write(dir.join("model.mil"), mil).unwrap();
    dir
}

/// y = relu((x + a) @ Wᵀ) / 2 and c = concat(y, x + a) in f64 (all values here are exact in fp16).
fn oracle() -> (Vec<f64>, Vec<f64>) {
    let s: Vec<f64> = (0..6).map(|i| X[i] as f64 + A[i % 3] as f64).collect();
    let y: Vec<f64> = (0..8)
        .map(|k| {
            (0..3)
                .map(|j| s[k / 4 * 3 + j] * W[k % 4 * 3 + j] as f64)
                .sum::<f64>()
                .max(0.0)
                * 0.5
        })
        .collect();
    let c = (0..2)
        .flat_map(|r| {
            y[r * 4..r * 4 + 4]
                .iter()
                .chain(&s[r * 3..r * 3 + 3])
                .copied()
                .collect::<Vec<_>>()
        })
        .collect();
    (y, c)
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let err = got
        .iter()
        .zip(want)
        .map(|(g, w)| (*g as f64 - w).abs())
        .fold(0.0, f64::max);
    assert_eq!(got.len(), want.len(), "{what}");
    assert!(
        err / scale <= 2e-3,
        "{what}: max error {err:e} vs {want:?} got {got:?}"
    );
}

#[test]
fn a_foreign_dialect_directory_loads_and_computes() {
    let (y, c) = oracle();
    let mut graphs = Vec::new();
    for (name, mil, opset) in [
        ("old", FOREIGN_OLD, Opset::Ios16),
        ("new", FOREIGN_NEW, Opset::Ios17),
    ] {
        let dir = foreign_dir(name, mil);
        let mut net = aneforge::load_dir(&dir, Device::Reference, Precision::Fp16)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(net.program.opset, opset);
        let names: Vec<&str> = net.outputs().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["y", "c"]);
        let out = net.run(&[PortData::F32(&X), PortData::F32(&A)]).unwrap();
        assert_close(&out[0], &y, name);
        assert_close(&out[1], &c, name);
        graphs.push(net.program.graph.clone());
    }
    assert_eq!(
        graphs[0], graphs[1],
        "both spellings parse to the same graph"
    );
}

#[cfg(feature = "cli")]
#[test]
fn aneforge_run_runs_a_foreign_directory() {
    use aneforge::cli::npy;
    let dir = foreign_dir("cli", FOREIGN_OLD);
    npy::write_f32(&dir.join("x.npy"), &[2, 3], &X).unwrap();
    npy::write_f32(&dir.join("a.npy"), &[1, 3], &A).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aneforge"))
        .args([
            "run",
            ".",
            "-i",
            "x=x.npy",
            "-i",
            "a=a.npy",
            "-o",
            "out",
            "--device",
            "reference",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (y, c) = oracle();
    for (port, want) in [("y", y), ("c", c)] {
        match npy::read(&dir.join(format!("out/{port}.npy"))).unwrap() {
            npy::Npy {
                data: npy::NpyData::F32(v),
                ..
            } => assert_close(&v, &want, port),
            a => panic!("{port}: {}", a.dtype_name()),
        }
    }
}

/// The error of parsing `mil` (no weights needed unless it references them).
fn error_of(mil: &str) -> String {
    let dir = foreign_dir("errors", mil);
    aneforge::load_dir(&dir, Device::Reference, Precision::Fp16)
        .err()
        .expect("must fail")
        .to_string()
}

#[test]
fn malformed_text_names_line_and_column() {
    let e = error_of(&FOREIGN_OLD.replace("program(1.0)", "program(2.0)"));
    assert!(
        e.contains("model.mil: line 1, column 9: program version")
            && e.contains("expected 1.0 to 1.5"),
        "{e}"
    );
    let e = error_of(&FOREIGN_OLD.replace("main<ios16>", "main<ios15>"));
    assert!(
        e.contains("line 4, column 15: opset 'ios15' is not supported"),
        "{e}"
    );
    let e = error_of(&FOREIGN_OLD.replace(r#"("r")];"#, r#"("r")]"#));
    assert!(
        e.contains("line 11, column 13: expected ';', found 'tensor'"),
        "{e}"
    );
    let e = error_of(&FOREIGN_OLD.replace("relu(x = m)", "relu(x = q)"));
    assert!(
        e.contains("line 10, column 13: 'q' is not defined before use"),
        "{e}"
    );
    let e = error_of(&FOREIGN_OLD.replace("[2, 4]> r", "[2, 5]> r"));
    assert!(
        e.contains("line 10, column 13: declared output types"),
        "{e}"
    );
    let e = error_of(&FOREIGN_OLD.replace(
        "@model_path/weights/weight.bin",
        "@model_path/../weight.bin",
    ));
    assert!(
        e.contains("BLOBFILE path '@model_path/../weight.bin' is not a file under @model_path/"),
        "{e}"
    );
    let e = error_of(&FOREIGN_OLD[..FOREIGN_OLD.len() - 5]);
    assert!(
        e.contains("line 14, column 15: unexpected end of file"),
        "{e}"
    );
    let e = error_of(&FOREIGN_OLD.replace("\"y\")]", "\"y\"), val = tensor<bool, []>(true)]"));
    assert!(e.contains("mul: unexpected attribute 'val'"), "{e}");
}

#[test]
fn ops_outside_the_declared_opset_are_rejected_with_the_first_opset() {
    let mil = "program(1.0)\n{\n    func main<ios16>(tensor<fp16, [7, 3]> q) {\n        tensor<fp16, [7, 3]> w = constexpr_blockwise_shift_scale(data = q)[name = string(\"w\")];\n    } -> (w);\n}\n";
    let e = error_of(mil);
    assert!(
        e.contains(
            "line 4, column 9: constexpr_blockwise_shift_scale: not available in opset ios16"
        ) && e.contains("first available: ios18"),
        "{e}"
    );
}

/// Printed conformance programs (text, weights) to mutate.
fn printed() -> &'static [(String, Vec<u8>)] {
    static P: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    P.get_or_init(|| {
        let mut v: Vec<(String, Vec<u8>)> = common::op_cases()
            .into_iter()
            .map(|(_, t)| lower(&Graph::from_outputs(&[(None, t)]).unwrap(), Opset::Ios18))
            .map(|p| (p.mil.clone(), p.weights.to_bytes()))
            .collect();
        v.push((FOREIGN_OLD.to_string(), Vec::new()));
        v
    })
}

/// Bytes spliced into the text: MIL punctuation, digits, letters that start keywords and numbers.
const ALPHABET: &[u8] = b"()[]{}<>,=;\"-+.0123456789abefinptx_ \n";

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Truncating, deleting, inserting, replacing or duplicating text, or corrupting a weight
    /// byte, yields a graph or a format error with a line and column, never a panic.
    #[test]
    fn mutated_programs_fail_cleanly(case in any::<prop::sample::Index>(), kind in 0u8..6, at in any::<prop::sample::Index>(), len in 1usize..40, byte in any::<prop::sample::Index>()) {
        let (text, weights) = &printed()[case.index(printed().len())];
        let (mut t, mut w) = (text.as_bytes().to_vec(), weights.clone());
        let i = at.index(t.len());
        let c = ALPHABET[byte.index(ALPHABET.len())];
        match kind {
            0 => t.truncate(i),
            1 => drop(t.drain(i..(i + len).min(t.len()))),
            2 => t.insert(i, c),
            3 => t[i] = c,
            4 => { let dup = t[i..(i + len).min(t.len())].to_vec(); t.splice(i..i, dup); }
            _ => if !w.is_empty() { let j = at.index(w.len()); w[j] = w[j].wrapping_add(c); },
        }
        let t = String::from_utf8(t).expect("ASCII in, ASCII out");
        if let Err(e) = parse(&t, "model.mil".as_ref(), &w, "weights.bin".as_ref()) {
            match &e {
                Error::Format { file, msg, .. } if file.as_path() == Path::new("model.mil") => prop_assert!(msg.starts_with("line "), "{e}"),
                Error::Format { .. } => {}
                _ => prop_assert!(false, "not a format error: {e}"),
            }
        }
    }
}
