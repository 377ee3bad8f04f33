//! Lowering tests: a MIL snapshot per op kind, parse(print(g)) == g, byte determinism, and
//! the parsed program computing bit-identical outputs.

mod common;

use std::collections::BTreeSet;

use aneforge::exec::reference::Reference;
use aneforge::mil::parse::parse;
use aneforge::{DType, Executor, Graph, PortData, Precision, Program};

fn lower(t: &aneforge::Tensor) -> Program {
    Program::lower(Graph::from_outputs(&[(None, t.clone())]).unwrap()).unwrap()
}

fn run(p: &Program) -> Vec<Vec<f32>> {
    let mut l = Reference
        .load(p, std::path::Path::new("."), Precision::Fp16)
        .unwrap();
    let ins = l.inputs().to_vec();
    let feeds: Vec<Vec<f32>> = ins
        .iter()
        .enumerate()
        .map(|(i, s)| {
            common::data(s.numel(), 100 + i as u64)
                .iter()
                .map(|v| v * 3.0)
                .collect()
        })
        .collect();
    let u8s: Vec<Vec<u8>> = ins
        .iter()
        .map(|s| (0..s.numel()).map(|i| (i * 37 % 256) as u8).collect())
        .collect();
    for (i, s) in ins.iter().enumerate() {
        let d = if s.dtype == DType::Uint8 {
            PortData::U8(&u8s[i])
        } else {
            PortData::F32(&feeds[i])
        };
        l.set_input(i, d).unwrap();
    }
    l.execute().unwrap();
    l.read_outputs().unwrap()
}

#[test]
fn mil_snapshot_per_op() {
    for (name, t) in common::op_cases() {
        insta::assert_snapshot!(name, lower(&t).mil);
    }
}

#[test]
fn every_mil_op_kind_has_a_case() {
    let printed: BTreeSet<String> = common::op_cases()
        .iter()
        .flat_map(|(_, t)| {
            lower(t)
                .mil
                .lines()
                .filter(|l| l.starts_with("        "))
                .filter_map(|l| {
                    l.split(" = ")
                        .nth(1)
                        .and_then(|r| r.split('(').next())
                        .map(String::from)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let missing: Vec<&str> = aneforge::ops::mil_op_names()
        .into_iter()
        .filter(|n| !printed.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "op kinds without a lowering case: {missing:?}"
    );
    let unknown: Vec<&String> = printed
        .iter()
        .filter(|n| !aneforge::ops::mil_op_names().contains(&n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "printed ops missing from the registry: {unknown:?}"
    );
}

#[test]
fn parse_of_print_is_the_same_graph_and_computes_the_same_bits() {
    for (name, t) in common::op_cases() {
        let p = lower(&t);
        let g = parse(
            &p.mil,
            "model.mil".as_ref(),
            &p.weights.to_bytes(),
            "weights.bin".as_ref(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(g, p.graph, "{name}: parse(print(g)) != g");
        let q = Program::lower(g).unwrap();
        assert_eq!(q.mil, p.mil, "{name}: print(parse(print(g))) differs");
        assert_eq!(q.weights, p.weights, "{name}: blob differs");
        let (a, b) = (run(&p), run(&q));
        assert!(
            a.iter()
                .flatten()
                .zip(b.iter().flatten())
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "{name}: outputs differ"
        );
    }
}

#[test]
fn same_graph_lowers_to_identical_bytes() {
    let a: Vec<Program> = common::op_cases().iter().map(|(_, t)| lower(t)).collect();
    let b: Vec<Program> = common::op_cases().iter().map(|(_, t)| lower(t)).collect();
    for (p, q) in a.iter().zip(&b) {
        assert_eq!(p.mil, q.mil);
        assert_eq!(p.weights, q.weights);
        assert_eq!(p.sha256, q.sha256);
    }
}
