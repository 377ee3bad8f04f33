//! Program directories: content addressing, atomic reuse, manifest, corruption detection,
//! and resident state through `alias` on the reference executor.

mod common;

use std::path::PathBuf;

use aneforge::exec::reference::Reference;
use aneforge::{
    compile, input, load_dir, CompileOptions, Device, Executor, Graph, PortData, Precision, Program,
};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aneforge-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn program() -> Program {
    let x = input(&[1, 8]).unwrap();
    let y = x
        .linear(
            common::W::new(&[4, 8], 1).arr(),
            Some(common::W::new(&[4], 2).arr()),
        )
        .unwrap()
        .relu()
        .unwrap();
    Program::lower(Graph::from_outputs(&[(Some("out".into()), y)]).unwrap()).unwrap()
}

#[test]
fn cache_directory_is_content_addressed_and_reused() {
    let root = tmp("cache");
    let p = program();
    let d1 = p.write_cached(&root).unwrap();
    assert_eq!(d1.file_name().unwrap().to_str().unwrap(), &p.sha256[..32]);
    for f in ["model.mil", "weights.bin", "program.json"] {
        assert!(d1.join(f).is_file(), "{f}");
    }
    let mtime = std::fs::metadata(d1.join("weights.bin"))
        .unwrap()
        .modified()
        .unwrap();
    let d2 = program().write_cached(&root).unwrap();
    assert_eq!(d1, d2);
    assert_eq!(
        std::fs::metadata(d2.join("weights.bin"))
            .unwrap()
            .modified()
            .unwrap(),
        mtime,
        "a cache hit must not rewrite"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary directories left behind");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d1.join("program.json")).unwrap()).unwrap();
    assert_eq!(m["inputs"][0]["name"], "x0");
    assert_eq!(m["inputs"][0]["shape"], serde_json::json!([1, 8]));
    assert_eq!(m["outputs"][0]["name"], "out");
    assert_eq!(m["sha256"], p.sha256.as_str());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn concurrent_writers_leave_one_complete_directory() {
    let root = tmp("race");
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let r = root.clone();
            std::thread::spawn(move || program().write_cached(&r).unwrap())
        })
        .collect();
    let dirs: Vec<PathBuf> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(dirs.windows(2).all(|w| w[0] == w[1]));
    let back = Program::load_dir(&dirs[0]).unwrap();
    assert_eq!(back.graph, program().graph);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn load_dir_detects_corruption_and_names_the_file() {
    let root = tmp("corrupt");
    let dir = program().write_to(&root).unwrap();
    let w = dir.join("weights.bin");
    let good = std::fs::read(&w).unwrap();
    let mut bad = good.clone();
    bad[64] ^= 0xff; // descriptor sentinel
    std::fs::write(&w, &bad).unwrap();
    let e = Program::load_dir(&dir).unwrap_err().to_string();
    assert!(e.contains("weights.bin") && e.contains("sentinel"), "{e}");
    std::fs::write(&w, &good[..100]).unwrap();
    let e = Program::load_dir(&dir).unwrap_err().to_string();
    assert!(e.contains("weights.bin"), "{e}");
    std::fs::write(&w, &good).unwrap();
    let mil = std::fs::read_to_string(dir.join("model.mil")).unwrap();
    std::fs::write(dir.join("model.mil"), &mil[..mil.len() / 2]).unwrap();
    let e = Program::load_dir(&dir).unwrap_err().to_string();
    assert!(e.contains("model.mil"), "{e}");
    std::fs::write(dir.join("model.mil"), mil.replace("relu(", "relu_typo(")).unwrap();
    let e = Program::load_dir(&dir).unwrap_err().to_string();
    assert!(e.contains("unknown op 'relu_typo'"), "{e}");
    std::fs::write(
        dir.join("model.mil"),
        mil.replace("tensor<fp16, [1, 4]> out", "tensor<fp16, [1, 5]> out"),
    )
    .unwrap();
    let e = Program::load_dir(&dir).unwrap_err().to_string();
    assert!(e.contains("differ from the inferred"), "{e}");
    std::fs::write(dir.join("model.mil"), &mil).unwrap();
    let json = std::fs::read_to_string(dir.join("program.json")).unwrap();
    std::fs::write(dir.join("program.json"), json.replace("\"x0\"", "\"x9\"")).unwrap();
    assert!(Program::load_dir(&dir)
        .unwrap_err()
        .to_string()
        .contains("program.json"));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn compile_and_load_dir_agree() {
    let root = tmp("compile");
    let x = input(&[1, 8]).unwrap();
    let y = x
        .linear(
            common::W::new(&[4, 8], 1).arr(),
            Some(common::W::new(&[4], 2).arr()),
        )
        .unwrap()
        .relu()
        .unwrap();
    let opts = CompileOptions {
        device: Device::Reference,
        build_dir: Some(root.clone()),
        ..Default::default()
    };
    let mut c = compile(&[(None, y)], &opts).unwrap();
    assert_eq!(c.device(), "reference");
    let xin = common::data(8, 5);
    let a = c.run(&[PortData::F32(&xin)]).unwrap();
    let mut d = load_dir(&root, Device::Reference, Precision::Fp16).unwrap();
    assert_eq!(d.run(&[PortData::F32(&xin)]).unwrap(), a);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn alias_keeps_state_resident_counter_counts() {
    let x = input(&[1, 4]).unwrap();
    let p = Program::lower(
        Graph::from_outputs(&[(Some("next".into()), x.add_scalar(1.0).unwrap())]).unwrap(),
    )
    .unwrap();
    let mut l = Reference
        .load(&p, std::path::Path::new("."), Precision::Fp16)
        .unwrap();
    l.set_input(0, PortData::F32(&[0.0; 4])).unwrap();
    l.alias("next", "x0").unwrap();
    let mut out = [0.0f32; 4];
    for k in 1..=5 {
        l.execute().unwrap();
        l.read_output(0, &mut out).unwrap();
        assert_eq!(out, [k as f32; 4]);
    }
    assert!(l
        .alias("next", "x0")
        .unwrap_err()
        .to_string()
        .contains("before the first execute"));
    let mut l = Reference
        .load(&p, std::path::Path::new("."), Precision::Fp16)
        .unwrap();
    assert!(l
        .alias("nope", "x0")
        .unwrap_err()
        .to_string()
        .contains("no output port named 'nope'"));
}
