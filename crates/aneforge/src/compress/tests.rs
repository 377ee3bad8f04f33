//! The compression pass: which consts are weights, the selection order and gate, errors, and
//! compressed programs computing exactly what the dequantized weights compute.

use super::*;
use crate::conv2d;
use crate::exec::reference::RefProgram;
use crate::exec::{Loaded, PortData, Precision};
use crate::graph::Tensor;
use crate::ops::constexpr::Encoded;
use crate::ops::conv::ConvOptions;
use crate::ops::io::HostArray;
use crate::program::Program;
use crate::{constant, input};

fn opts(mode: Compress, family: Family) -> CompressOptions {
    CompressOptions {
        mode,
        atol: 0.05,
        block_size: 4,
        family: Some(family),
    }
}

use crate::conformance::corpus::data as uniform;

/// Approximately normal values (sum of four uniforms, scaled to unit variance).
fn normal(n: usize, seed: u64) -> Vec<f32> {
    let u: Vec<Vec<f32>> = (0..4).map(|k| uniform(n, seed * 4 + k)).collect();
    (0..n)
        .map(|i| (u[0][i] + u[1][i] + u[2][i] + u[3][i]) * 0.866)
        .collect()
}

/// Values drawn from 12 levels (a 16-entry palette holds them exactly).
fn levels(n: usize, seed: u64) -> Vec<f32> {
    const L: [f32; 6] = [0.125, 0.25, 0.5, 0.75, 1.0, 1.5];
    uniform(n, seed)
        .iter()
        .map(|&u| L[((u.abs() * 6.0) as usize).min(5)] * u.signum())
        .collect()
}

/// Half the elements zeroed.
fn half_zero(n: usize, seed: u64) -> Vec<f32> {
    normal(n, seed)
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % 2 == 0 { 0.0 } else { v })
        .collect()
}

fn graph(t: &Tensor) -> Graph {
    Graph::from_outputs(&[(None, t.clone())]).unwrap()
}

/// x [2, 16] @ W1 [16, 8] → relu → linear(W2 [8, 8], b) → layer_norm(γ, β); plus a conv branch.
fn net(w1: &[f32], w2: &[f32], wc: &[f32]) -> Graph {
    let x = input(&[2, 16]).unwrap();
    let h = x
        .matmul_weight(HostArray::f32(&[16, 8], w1))
        .unwrap()
        .relu()
        .unwrap();
    let b = uniform(8, 9);
    let h = h
        .linear(HostArray::f32(&[8, 8], w2), Some(HostArray::f32(&[8], &b)))
        .unwrap();
    let g = constant("t", HostArray::f32(&[8], &uniform(8, 10))).unwrap();
    let h = h.layer_norm(Some(&g), Some(&g), 1e-5).unwrap();
    let img = input(&[1, 4, 5, 5]).unwrap();
    let c = conv2d(
        &img,
        HostArray::f32(&[8, 4, 3, 3], wc),
        Some(HostArray::f32(&[8], &b)),
        ConvOptions::default(),
    )
    .unwrap();
    Graph::from_outputs(&[(None, h), (None, c)]).unwrap()
}

fn smooth_net() -> Graph {
    net(&normal(128, 1), &normal(64, 2), &normal(288, 3))
}

fn run(g: &Graph) -> Vec<Vec<f32>> {
    let p = Program::lower(g.clone()).unwrap();
    let mut l = RefProgram::new(&p, Precision::Fp16).unwrap();
    let feeds: Vec<Vec<f32>> = l
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, s)| uniform(s.numel(), 50 + i as u64))
        .collect();
    for (i, f) in feeds.iter().enumerate() {
        l.set_input(i, PortData::F32(f)).unwrap();
    }
    l.execute().unwrap();
    l.read_outputs().unwrap()
}

/// The same graph with every constexpr replaced by a plain const of its dequantized values.
fn dequantized(g: &Graph) -> Graph {
    let mut g = g.clone();
    for n in &mut g.nodes {
        if let Op::Constexpr(c) = &n.op {
            let mut d = vec![0f32; crate::shape::numel(c.shape())];
            c.expand(&mut d);
            n.op = Op::Const(io::Const {
                shape: c.shape().to_vec(),
                values: Arc::new(d.iter().map(|&v| f16::from_f32(v)).collect()),
            });
        }
    }
    g
}

fn encodings(report: &[CompressionEntry]) -> Vec<(String, Encoding)> {
    report
        .iter()
        .map(|e| (format!("{}{:?}", e.site, e.shape), e.encoding))
        .collect()
}

#[test]
fn only_weight_inputs_are_compressed() {
    let (g, report) = compress(smooth_net(), &opts(Compress::Int8, Family::A13)).unwrap();
    let want = [
        ("matmul[8, 16]", Encoding::Int8),
        ("matmul[8, 8]", Encoding::Int8),
        ("conv[8, 4, 3, 3]", Encoding::Int8),
    ];
    assert_eq!(encodings(&report), want.map(|(s, e)| (s.to_string(), e)));
    let n_const = |g: &Graph| {
        g.nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Const(_)))
            .count()
    };
    assert_eq!(
        g.nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Constexpr(_)))
            .count(),
        3
    );
    assert_eq!(
        n_const(&g),
        n_const(&smooth_net()) - 3,
        "biases and norm parameters stay fp16"
    );
    for e in &report {
        assert_eq!(e.bytes_fp16, crate::shape::numel(&e.shape) * 2);
        assert_eq!(
            e.bytes_encoded,
            crate::shape::numel(&e.shape) + e.shape[0] * 2,
            "int8 data + one fp16 scale per output channel"
        );
        assert!(e.rel_error > 0.0 && e.rel_error < 0.02, "{e:?}");
        let Op::Constexpr(_) = &g.nodes[e.name[1..].parse::<usize>().unwrap()].op else {
            panic!("{} is not the constexpr", e.name)
        };
    }
    // A const that also feeds a non-weight input, a matmul's x operand, or a program output stays fp16.
    let (x, w) = (
        input(&[4, 4]).unwrap(),
        constant("t", HostArray::f32(&[4, 4], &normal(16, 4))).unwrap(),
    );
    let shared = graph(&x.matmul(&w).unwrap().add(&w).unwrap());
    let as_x = graph(&w.matmul(&x).unwrap());
    let output = Graph::from_outputs(&[(None, x.matmul(&w).unwrap()), (None, w.clone())]).unwrap();
    let weight = graph(&x.matmul(&w).unwrap());
    for g in [shared, as_x, output] {
        assert!(compress(g, &opts(Compress::Int8, Family::A13))
            .unwrap()
            .1
            .is_empty());
    }
    assert_eq!(
        compress(weight, &opts(Compress::Int8, Family::A13))
            .unwrap()
            .1
            .len(),
        1,
        "the same const used only as a weight"
    );
}

#[test]
fn compressed_programs_compute_with_the_dequantized_weights_and_round_trip() {
    let sparse_net = net(&half_zero(128, 1), &half_zero(64, 2), &half_zero(288, 3));
    let level_net = net(&levels(128, 1), &levels(64, 2), &levels(288, 3));
    for (mode, g0) in [
        (Compress::Int8, smooth_net()),
        (Compress::Int4, level_net),
        (Compress::Blockwise, smooth_net()),
        (Compress::Sparse, sparse_net),
    ] {
        let (g, report) = compress(g0.clone(), &opts(mode, Family::A16)).unwrap();
        let want = match mode {
            Compress::Int8 => Encoding::Int8,
            Compress::Int4 => Encoding::Int4,
            Compress::Blockwise => Encoding::Blockwise,
            _ => Encoding::Sparse,
        };
        assert!(
            report.iter().all(|e| e.encoding == want),
            "{mode:?}: {:?}",
            encodings(&report)
        );
        assert_eq!(run(&g), run(&dequantized(&g)), "{mode:?}");
        if mode == Compress::Sparse {
            assert_eq!(run(&g), run(&g0), "sparse is lossless");
        }
        let p = Program::lower(g.clone()).unwrap();
        let back = crate::mil::parse::parse(
            &p.mil,
            "model.mil".as_ref(),
            &p.weights.to_bytes(),
            "weights.bin".as_ref(),
        )
        .unwrap();
        assert_eq!(back, g, "{mode:?}: parse(print(g)) != g");
    }
}

#[test]
fn blockwise_results_reach_the_weight_input_through_add_zero() {
    let (g, report) = compress(smooth_net(), &opts(Compress::Blockwise, Family::A16)).unwrap();
    for e in &report {
        let id: usize = e.name[1..].parse().unwrap();
        let users: Vec<&Node> = g
            .nodes
            .iter()
            .filter(|n| n.inputs.iter().any(|v| v.node == id))
            .collect();
        assert_eq!(users.len(), 1);
        assert_eq!(users[0].op, Op::Binary(Binary::Add));
        let Op::Const(zero) = &g.nodes[users[0].inputs[1].node].op else {
            panic!("bridge operand is not a const")
        };
        assert_eq!((zero.shape.len(), zero.values[0].to_f32()), (0, 0.0));
    }
    assert_eq!(g.n_ops(), smooth_net().n_ops() + 3);
}

#[test]
fn selection_order_gate_and_family_filter() {
    // W1 half zeros, W2 smooth (a palette misses it by ~10 %), conv weight on 12 levels.
    let g = net(&half_zero(128, 1), &normal(64, 2), &levels(288, 3));
    let pick = |o: CompressOptions| {
        compress(g.clone(), &o)
            .unwrap()
            .1
            .iter()
            .map(|e| e.encoding)
            .collect::<Vec<_>>()
    };
    use Encoding::*;
    assert_eq!(
        pick(opts(Compress::Auto, Family::A16)),
        [Sparse, Blockwise, Int4]
    );
    assert_eq!(
        pick(opts(Compress::Auto, Family::A14)),
        [Sparse, Int8, Int4],
        "no blockwise before A15"
    );
    assert_eq!(
        pick(opts(Compress::Auto, Family::A13)),
        [Sparse, Fp16, Int4],
        "A13 folds int8: the smooth weight stays fp16"
    );
    assert_eq!(
        pick(opts(Compress::Int4, Family::A13)),
        [Int8, Int8, Int4],
        "the gate sends the smooth weights to int8"
    );
    assert_eq!(
        pick(opts(Compress::Sparse, Family::A13)),
        [Sparse, Fp16, Fp16]
    );
    assert_eq!(
        pick(CompressOptions {
            atol: 1.0,
            ..opts(Compress::Int4, Family::A13)
        }),
        [Int4, Int4, Int4]
    );
    // The rejected palette really misses: its error, computed directly, exceeds atol.
    let Some(Op::Const(c)) = g
        .nodes
        .iter()
        .map(|n| &n.op)
        .find(|op| matches!(op, Op::Const(c) if c.shape == [8, 8]))
    else {
        panic!("no [8, 8] weight")
    };
    let mut d = vec![0f32; 64];
    Constexpr::new(c.shape.clone(), lut::palettize(&c.values))
        .unwrap()
        .expand(&mut d);
    let palette_err = rel_l2(&c.values, &d);
    let (_, report) = compress(g.clone(), &opts(Compress::Int4, Family::A13)).unwrap();
    assert!(
        palette_err > 0.05 && report[1].rel_error < 0.02,
        "int4 error {palette_err}, int8 error {}",
        report[1].rel_error
    );
    assert!(report[2].rel_error <= 0.05, "{:?}", report[2]);
}

#[test]
fn int4_needs_an_even_inner_axis() {
    let x = input(&[2, 3]).unwrap();
    let g = graph(
        &x.matmul_weight(HostArray::f32(&[3, 4], &normal(12, 5)))
            .unwrap(),
    );
    assert_eq!(
        compress(g, &opts(Compress::Int4, Family::A13)).unwrap().1[0].encoding,
        Encoding::Int8
    );
}

#[test]
fn bad_options_and_incompatible_sites_are_clear_errors() {
    let err = |g: Graph, o: CompressOptions| compress(g, &o).unwrap_err().to_string();
    let e = err(
        smooth_net(),
        CompressOptions {
            block_size: 3,
            ..opts(Compress::Blockwise, Family::A16)
        },
    );
    assert!(
        e.contains("block_size 3 does not divide the inner axis (16) of weight t")
            && e.contains("[8, 16] (matmul weight)"),
        "{e}"
    );
    let (_, r) = compress(
        smooth_net(),
        &CompressOptions {
            block_size: 3,
            ..opts(Compress::Auto, Family::A16)
        },
    )
    .unwrap();
    assert!(
        r.iter().all(|e| e.encoding != Encoding::Blockwise),
        "auto skips blockwise where the block does not divide"
    );
    let bmm = graph(
        &input(&[2, 3, 4])
            .unwrap()
            .matmul(
                &constant(
                    "t",
                    HostArray::f32(
                        &[2, 4, 6],
                        &levels(48, 6)
                            .iter()
                            .enumerate()
                            .map(|(i, &v)| if i % 2 == 0 { 0.0 } else { v })
                            .collect::<Vec<_>>(),
                    ),
                )
                .unwrap(),
            )
            .unwrap(),
    );
    let e = err(bmm.clone(), opts(Compress::Sparse, Family::A16));
    assert!(
        e.contains("compress='sparse'")
            && e.contains("[2, 4, 6] (matmul weight) cannot carry sparse"),
        "{e}"
    );
    assert!(
        err(bmm.clone(), opts(Compress::Blockwise, Family::A16)).contains("cannot carry blockwise")
    );
    let (_, r) = compress(
        bmm.clone(),
        &CompressOptions {
            atol: 1.0,
            ..opts(Compress::Auto, Family::A16)
        },
    )
    .unwrap();
    assert_eq!(
        r[0].encoding,
        Encoding::Int4,
        "auto skips what a batched weight cannot carry"
    );
    let (g, _) = compress(bmm, &opts(Compress::Int8, Family::A13)).unwrap();
    let Some(Op::Constexpr(c)) = g
        .nodes
        .iter()
        .map(|n| &n.op)
        .find(|op| matches!(op, Op::Constexpr(_)))
    else {
        panic!("not compressed")
    };
    assert!(
        matches!(c.encoded(), Encoded::Affine { axis: 2, .. }),
        "per output channel: the last axis of a non-transposed weight"
    );
    for atol in [0.0, -0.1, 1.5, f32::NAN] {
        assert!(err(
            smooth_net(),
            CompressOptions {
                atol,
                ..opts(Compress::Int8, Family::A13)
            }
        )
        .contains("compress_atol must be in (0, 1]"));
    }
    assert!(err(
        smooth_net(),
        CompressOptions {
            block_size: 0,
            ..opts(Compress::Int8, Family::A13)
        }
    )
    .contains("block_size must be >= 1"));
    assert!(Compress::parse("int3")
        .unwrap_err()
        .to_string()
        .contains("unknown compress mode 'int3' (expected int8, int4, sparse, blockwise or auto)"));
}

#[test]
fn weights_whose_reconstruction_overflows_stay_fp16() {
    // max |w| = 65504: its fp16 scale rounds up and 127 · scale overflows fp16.
    let mut w = normal(16, 7);
    w[0] = 65504.0;
    let g = graph(
        &input(&[1, 4])
            .unwrap()
            .matmul_weight(HostArray::f32(&[4, 4], &w))
            .unwrap(),
    );
    let (g2, r) = compress(g, &opts(Compress::Int8, Family::A13)).unwrap();
    assert_eq!(r[0].encoding, Encoding::Fp16);
    assert!(g2.nodes.iter().all(|n| !matches!(n.op, Op::Constexpr(_))));
}
