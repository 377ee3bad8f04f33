//! The cost model against hand-computed values: per-node bytes and flops, the host and analytic
//! formulas, anchors and their scaling, `project_peak`, warnings, and the powermetrics parser.

use aneforge::cost::{self, anchors, power, HostConstants, OpOverhead, WorkKind};
use aneforge::{
    compile, constant, conv2d, conv_transpose2d, input, CompileOptions, Compress, ConvOptions,
    Device, Graph, HostArray, Tensor,
};

fn graph(y: &Tensor) -> Graph {
    Graph::from_outputs(&[(None, y.clone())]).unwrap()
}

fn matmul_graph() -> Graph {
    let w = vec![0.5f32; 20];
    let x = input(&[2, 3, 4]).unwrap();
    graph(
        &x.matmul(&constant("t", HostArray::f32(&[4, 5], &w)).unwrap())
            .unwrap(),
    )
}

/// The one node's work of conv2d (or conv_transpose2d) of an input of shape `x` with weights
/// of shape `w` (all 0.1) and `groups`.
fn conv_work(x: &[usize], w: &[usize], groups: usize, transpose: bool) -> cost::NodeWork {
    let data = vec![0.1f32; w.iter().product()];
    let weights = HostArray::f32(w, &data);
    let x = input(x).unwrap();
    let opts = ConvOptions {
        groups,
        ..ConvOptions::default()
    };
    let y = if transpose {
        conv_transpose2d(&x, weights, None, opts)
    } else {
        conv2d(&x, weights, None, opts)
    };
    let mut w = cost::graph_work(&graph(&y.unwrap()));
    assert_eq!(w.len(), 1);
    w.remove(0)
}

#[test]
fn gemm_and_conv_work_match_hand_counts() {
    // matmul [2,3,4]·[4,5] → [2,3,5]: 30 outputs × 4 multiply-adds × 2; bytes 2·(24+20+30).
    let w = cost::graph_work(&matmul_graph());
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].op, w[0].kind, w[0].flops, w[0].bytes),
        ("matmul", WorkKind::Gemm, 240, 148)
    );

    // conv x[1,2,5,5] w[4,2,3,3] valid → [1,4,3,3]: 36 outputs × 18 MACs × 2; bytes 2·(50+72+36).
    let w = conv_work(&[1, 2, 5, 5], &[4, 2, 3, 3], 1, false);
    assert_eq!((w.kind, w.flops, w.bytes), (WorkKind::Conv, 1296, 316));
    assert_eq!(w.output_shapes, vec![vec![1, 4, 3, 3]]);

    // grouped conv: groups 2, w[4,1,3,3] → each output 9 MACs.
    assert_eq!(
        conv_work(&[1, 2, 5, 5], &[4, 1, 3, 3], 2, false).flops,
        2 * 36 * 9
    );

    // conv_transpose x[1,2,3,3] w[2,4,2,2] → [1,4,4,4]: 18 inputs × 16 MACs × 2.
    let w = conv_work(&[1, 2, 3, 3], &[2, 4, 2, 2], 1, true);
    assert_eq!(
        (w.kind, w.flops, w.bytes),
        (WorkKind::Conv, 576, 2 * (18 + 32 + 64))
    );
}

#[test]
fn elementwise_counts_elements_and_layout_moves_bytes() {
    let x = input(&[4, 8]).unwrap();
    let y = x.relu().unwrap().transpose(&[1, 0]).unwrap();
    let w = cost::graph_work(&graph(&y));
    assert_eq!(w.len(), 2);
    assert_eq!(
        (w[0].kind, w[0].flops, w[0].bytes),
        (WorkKind::Elementwise, 32, 128)
    );
    // A transpose moving the last axis is a strided gather: elements as work, sized by them.
    assert_eq!(
        (w[1].kind, w[1].flops, w[1].bytes, w[1].size),
        (WorkKind::Permute, 32, 128, 32)
    );
    // Reshapes and transposes keeping the last axis are contiguous copies: bytes only.
    let y = x
        .reshape(&[2, 16])
        .unwrap()
        .reshape(&[2, 2, 8])
        .unwrap()
        .transpose(&[1, 0, 2])
        .unwrap();
    let w = cost::graph_work(&graph(&y));
    let rows: Vec<_> = w
        .iter()
        .map(|n| (n.kind, n.flops, n.bytes, n.size))
        .collect();
    // The second reshape's input is read by it alone: the reference executor moves that buffer.
    // The first reads the graph input and the transpose's result is the output: copies.
    let want = [WorkKind::Data, WorkKind::Move, WorkKind::Data].map(|k| (k, 0, 128, 0));
    assert_eq!(rows, want, "{w:?}");
    let c = &HostConstants::DEFAULTS;
    assert_eq!(cost::host_node_us(&w[1], c), c.op_us.data);
    assert!(cost::host_node_us(&w[0], c) > c.op_us.data);
    // A reshape of a value read twice copies.
    let r = x.relu().unwrap();
    let y = r
        .reshape(&[32])
        .unwrap()
        .add(&r.reshape(&[32]).unwrap())
        .unwrap();
    let kinds: Vec<_> = cost::graph_work(&graph(&y))
        .iter()
        .map(|n| n.kind)
        .collect();
    let want = [
        WorkKind::Elementwise,
        WorkKind::Data,
        WorkKind::Data,
        WorkKind::Elementwise,
    ];
    assert_eq!(kinds, want);
}

#[test]
fn gemm_and_conv_sizes_are_the_thin_side() {
    // matmul [2,3,4]·[4,5]: K = 4, N = 5 → 4.
    assert_eq!(cost::graph_work(&matmul_graph())[0].size, 4);
    // conv w[4,2,3,3]: K = 18 multiply-adds per output, Cout = 4 → 4; w[16,2,1,1]: K = 2.
    assert_eq!(conv_work(&[1, 2, 5, 5], &[4, 2, 3, 3], 1, false).size, 4);
    assert_eq!(conv_work(&[1, 2, 5, 5], &[16, 2, 1, 1], 1, false).size, 2);
}

#[test]
fn rate_curves_interpolate_in_log_log_and_clamp() {
    let c = cost::RateCurve::new(&[[8.0, 100.0], [512.0, 6400.0]]);
    // log-log line through (8, 100) and (512, 6400): rate = 100 · (s/8); at 64 → 800.
    assert!((c.rate(64.0).unwrap() - 800.0).abs() < 1e-9);
    assert_eq!((c.rate(1.0), c.rate(1e6)), (Some(100.0), Some(6400.0)));
    assert_eq!(cost::RateCurve::default().rate(5.0), None);
    // matmul [2,3,4]·[4,5]: size 4 ≤ 8 → 100 flop/µs; 240 flops → 2.4 µs + 10 µs floor.
    let k = HostConstants {
        floor_us: 10.0,
        gemm_curve: c,
        ..HostConstants::DEFAULTS
    };
    let e = cost::estimate_host(&matmul_graph(), &k, "x").unwrap();
    assert!((e.micros - 12.4).abs() < 1e-9, "{}", e.micros);
    // The port term: input [2,3,4] (24 el) + output [2,3,5] (30 el) at 27 el/µs = 2 µs.
    let ported = HostConstants {
        port_elems_per_us: 27.0,
        ..k
    };
    let e = cost::estimate_host(&matmul_graph(), &ported, "x").unwrap();
    assert!((e.ports_us - 2.0).abs() < 1e-12, "{}", e.ports_us);
    assert!((e.micros - 14.4).abs() < 1e-9, "{}", e.micros);
    // A port curve takes precedence: 54 port elements between points (27, 9) and (108, 36)
    // interpolate log-log to 18 el/µs → 3 µs.
    let curved = HostConstants {
        port_curve: cost::RateCurve::new(&[[27.0, 9.0], [108.0, 36.0]]),
        ..ported
    };
    let e = cost::estimate_host(&matmul_graph(), &curved, "x").unwrap();
    assert!((e.ports_us - 3.0).abs() < 1e-9, "{}", e.ports_us);
    // Elementwise at its curve's rate for its element count: relu over 32 elements, curve
    // (16, 4), (64, 16) → 8 el/µs at 32 → 4 µs; softmax's reduce curve (32, 2) → 16 µs.
    let x = input(&[4, 8]).unwrap();
    let el = HostConstants {
        floor_us: 0.0,
        elementwise_curve: cost::RateCurve::new(&[[16.0, 4.0], [64.0, 16.0]]),
        reduce_curve: cost::RateCurve::new(&[[32.0, 2.0]]),
        ..HostConstants::DEFAULTS
    };
    let r = cost::estimate_host(&graph(&x.relu().unwrap()), &el, "x").unwrap();
    assert!((r.micros - 4.0).abs() < 1e-9, "{}", r.micros);
    let r = cost::estimate_host(&graph(&x.softmax(-1).unwrap()), &el, "x").unwrap();
    assert!((r.micros - 16.0).abs() < 1e-9, "{}", r.micros);
    // Softmax at its own curve when set ((32, 4) → 8 µs); other reductions keep the reduce
    // curve (amax over the 32 elements → 16 µs).
    let sm = HostConstants {
        softmax_curve: cost::RateCurve::new(&[[32.0, 4.0]]),
        ..el
    };
    let r = cost::estimate_host(&graph(&x.softmax(-1).unwrap()), &sm, "x").unwrap();
    assert!((r.micros - 8.0).abs() < 1e-9, "{}", r.micros);
    let r = cost::estimate_host(&graph(&x.amax(&[1], true).unwrap()), &sm, "x").unwrap();
    assert!((r.micros - 16.0).abs() < 1e-9, "{}", r.micros);
    // A conv at the lower of its channel curve's rate and its work curve's: conv 2→3 (3×3,
    // pad 1) on 4×4 is 48 outputs × 18 multiply-adds × 2 = 1728 flops, min(K, Cout) = 3:
    // channel rate 1728 → 1 µs; a work curve at 864 for 1728 flops halves the rate → 2 µs;
    // one at 3456 does not bind → 1 µs.
    let conv = || {
        let opts = ConvOptions {
            pad: [1; 4],
            ..ConvOptions::default()
        };
        let w = HostArray::f32(&[3, 2, 3, 3], &[0.1; 54]);
        graph(&conv2d(&input(&[1, 2, 4, 4]).unwrap(), w, None, opts).unwrap())
    };
    let by_channels = HostConstants {
        floor_us: 0.0,
        conv_curve: cost::RateCurve::new(&[[3.0, 1728.0]]),
        ..HostConstants::DEFAULTS
    };
    for (work_rate, want) in [(None, 1.0), (Some(864.0), 2.0), (Some(3456.0), 1.0)] {
        let c = HostConstants {
            conv_work_curve: work_rate.map_or(cost::RateCurve::EMPTY, |r| {
                cost::RateCurve::new(&[[1728.0, r]])
            }),
            ..by_channels
        };
        let e = cost::estimate_host(&conv(), &c, "x").unwrap();
        assert!(
            (e.micros - want).abs() < 1e-9,
            "{work_rate:?}: {}",
            e.micros
        );
    }
    // Permutes at their curve's rate by elements: transpose of [4, 8] (32 el) at 16 el/µs;
    // copies at the copy rate: reshape 128 B at 32 B/µs.
    let x = input(&[4, 8]).unwrap();
    let p = HostConstants {
        floor_us: 0.0,
        copy_bytes_per_us: 32.0,
        permute_curve: cost::RateCurve::new(&[[32.0, 16.0]]),
        ..HostConstants::DEFAULTS
    };
    let t = cost::estimate_host(&graph(&x.transpose(&[1, 0]).unwrap()), &p, "x").unwrap();
    assert!((t.micros - 2.0).abs() < 1e-9, "{}", t.micros);
    let r = cost::estimate_host(&graph(&x.reshape(&[8, 4]).unwrap()), &p, "x").unwrap();
    assert!((r.micros - 4.0).abs() < 1e-9, "{}", r.micros);
    for bad in [
        [[8.0, 1.0], [4.0, 2.0], [0.0; 2], [0.0; 2]],
        [[8.0, f64::NAN], [0.0; 2], [0.0; 2], [0.0; 2]],
        [[8.0, 0.0], [0.0; 2], [0.0; 2], [0.0; 2]],
    ] {
        let k = HostConstants {
            conv_curve: cost::RateCurve { points: bad },
            ..HostConstants::DEFAULTS
        };
        let err = k.validate().unwrap_err().to_string();
        assert!(err.contains("conv_curve: point"), "{err}");
    }
}

#[test]
fn host_formula_is_floor_plus_work_over_rate() {
    let c = HostConstants {
        floor_us: 10.0,
        bytes_per_us: 100.0,
        gemm_flops_per_us: 1000.0,
        conv_flops_per_us: 1.0,
        elementwise_per_us: 1.0,
        ..HostConstants::DEFAULTS
    };
    let e = cost::estimate_host(&matmul_graph(), &c, "calibrated host").unwrap();
    // gemm: 240 flops / 1000 per µs = 0.24 (bytes only cost data-movement nodes)
    assert!((e.micros - 10.24).abs() < 1e-9, "{}", e.micros);
    assert_eq!(e.provenance, "calibrated host");
    assert!(e.warnings.is_empty());
    let slow = HostConstants {
        gemm_flops_per_us: 10.0,
        ..c
    };
    let e = cost::estimate_host(&matmul_graph(), &slow, "x").unwrap();
    assert!((e.micros - 34.0).abs() < 1e-9, "{}", e.micros);
    let bad = HostConstants {
        bytes_per_us: f64::NAN,
        ..c
    };
    let err = cost::estimate_host(&matmul_graph(), &bad, "x")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bytes_per_us must be finite and positive"),
        "{err}"
    );
}

#[test]
fn host_formula_adds_per_op_overheads_and_costs_reductions_at_their_rate() {
    // x [4, 8] → relu (32 elements) → softmax (32 elements) → transpose (2·(32+32) bytes).
    let x = input(&[4, 8]).unwrap();
    let y = x
        .relu()
        .unwrap()
        .softmax(-1)
        .unwrap()
        .transpose(&[1, 0])
        .unwrap();
    let kinds: Vec<WorkKind> = cost::graph_work(&graph(&y))
        .iter()
        .map(|w| w.kind)
        .collect();
    assert_eq!(
        kinds,
        [WorkKind::Elementwise, WorkKind::Reduce, WorkKind::Permute]
    );
    let c = HostConstants {
        floor_us: 10.0,
        bytes_per_us: 64.0,
        elementwise_per_us: 8.0,
        reduce_per_us: 4.0,
        op_us: OpOverhead {
            elementwise: 1.0,
            reduce: 2.0,
            data: 3.0,
            ..OpOverhead::default()
        },
        ..HostConstants::DEFAULTS
    };
    // 10 + (1 + 32/8) + (2 + 32/4) + (3 + 128/64) = 30 (no permute curve: the transpose's
    // bytes at the bandwidth).
    let e = cost::estimate_host(&graph(&y), &c, "x").unwrap();
    assert!((e.micros - 30.0).abs() < 1e-9, "{}", e.micros);
    // reduce_per_us 0 (files older than the field): reductions at the elementwise rate, 2 + 32/8.
    let old = HostConstants {
        reduce_per_us: 0.0,
        ..c
    };
    let e = cost::estimate_host(&graph(&y), &old, "x").unwrap();
    assert!((e.micros - 26.0).abs() < 1e-9, "{}", e.micros);
    let bad = HostConstants {
        op_us: OpOverhead {
            conv: -1.0,
            ..OpOverhead::default()
        },
        ..c
    };
    let err = cost::estimate_host(&graph(&y), &bad, "x")
        .unwrap_err()
        .to_string();
    assert!(err.contains("op_us.conv must be finite"), "{err}");
}

#[test]
fn compressed_weights_are_read_at_their_encoded_size() {
    // x [4, 256] · w [256, 256]: fp16 reads 2·(1024 + 65536) + writes 2·1024 bytes; int8 per
    // output channel reads the 65536 int8 codes and 256 fp16 scales instead of the fp16 weight.
    let w: Vec<f32> = (0..256 * 256)
        .map(|i| ((i % 97) as f32 - 48.0) / 64.0)
        .collect();
    let x = input(&[4, 256]).unwrap();
    let y = x
        .matmul(&constant("w", HostArray::f32(&[256, 256], &w)).unwrap())
        .unwrap();
    let outs = [(None, y)];
    let bytes = |compress: Option<Compress>| {
        let opts = CompileOptions {
            device: Device::Reference,
            compress,
            ..CompileOptions::default()
        };
        let net = compile(&outs, &opts).unwrap();
        let w = cost::graph_work(&net.program.graph);
        let mm: Vec<_> = w.iter().filter(|n| n.kind == WorkKind::Gemm).collect();
        assert_eq!(mm.len(), 1);
        mm[0].bytes
    };
    assert_eq!(bytes(None), 2 * (1024 + 65536 + 1024));
    assert_eq!(
        bytes(Some(Compress::Int8)),
        2 * 1024 + 65536 + 2 * 256 + 2 * 1024
    );
}

#[test]
fn a_graph_with_host_ops_is_costed_as_its_plan_with_cuts() {
    // x [2,5] · 2 (region) → topk k=2 (host) → values + 1 (region): 2 regions; the host stage
    // reads [2,5] fp16 (20 B) and writes values [2,2] fp16 (8 B) and indices [2,2] int32 (16 B).
    let x = input(&[2, 5]).unwrap();
    let (vals, _) = x.mul_scalar(2.0).unwrap().topk(2, -1, true, true).unwrap();
    let g = graph(&vals.add_scalar(1.0).unwrap());
    let c = HostConstants {
        floor_us: 10.0,
        bytes_per_us: 4.0,
        elementwise_per_us: 1.0,
        ..HostConstants::DEFAULTS
    };
    let e = cost::estimate_host(&g, &c, "x").unwrap();
    assert_eq!(e.regions, 2);
    assert!((e.cut_us - 44.0 / 4.0).abs() < 1e-12, "{}", e.cut_us);
    // 2 floors + mul 10 el + topk 10 el + add 4 el (1 el/µs) + 11 µs of hand-off.
    assert!(
        (e.micros - (20.0 + 24.0 + 11.0)).abs() < 1e-9,
        "{}",
        e.micros
    );
    let single = cost::estimate_host(&matmul_graph(), &c, "x").unwrap();
    assert_eq!((single.regions, single.cut_us), (1, 0.0));
    // A measured per-cut constant is paid once per host stage, on top of the bytes.
    let cut = HostConstants { cut_us: 7.0, ..c };
    let e = cost::estimate_host(&g, &cut, "x").unwrap();
    assert!((e.cut_us - (7.0 + 11.0)).abs() < 1e-12, "{}", e.cut_us);
    assert!(
        (e.micros - (20.0 + 24.0 + 18.0)).abs() < 1e-9,
        "{}",
        e.micros
    );
}

#[test]
fn a_plan_on_a_device_pays_the_projected_cut_and_says_so() {
    // The topk plan of the test above on h14: 2 regions × 100 µs floor, mul/topk/add at
    // 20 + 20 + 8 B / 48e3 B/µs, and 1 host stage × 200 µs projected + 44 B / 48e3 B/µs.
    let x = input(&[2, 5]).unwrap();
    let (vals, _) = x.mul_scalar(2.0).unwrap().topk(2, -1, true, true).unwrap();
    let e = cost::estimate(&graph(&vals.add_scalar(1.0).unwrap()), Some("h14")).unwrap();
    assert_eq!(e.regions, 2);
    assert!(
        (e.cut_us - (200.0 + 44.0 / 48e3)).abs() < 1e-9,
        "{}",
        e.cut_us
    );
    let nodes: f64 = e.ops.iter().map(|o| o.micros).sum();
    assert!((e.micros - (200.0 + nodes + e.cut_us)).abs() < 1e-9);
    assert!(
        e.provenance
            .starts_with("measured anchor h14; cuts projected (200 µs"),
        "{}",
        e.provenance
    );
    let single = cost::estimate(&matmul_graph(), Some("h14")).unwrap();
    assert_eq!(single.provenance, "measured anchor h14");
}

#[test]
fn analytic_formula_on_a_measured_anchor() {
    let e = cost::estimate(&matmul_graph(), Some("h14")).unwrap();
    assert_eq!(e.provenance, "measured anchor h14");
    assert_eq!(e.target, Some("h14"));
    // 100 µs floor + max(148 B / 48e3 B/µs, 240 / (7.3e6 · (240/1.8e10)^0.38))
    let memory = 148.0 / 48e3;
    let compute = 240.0 / (7.3e6 * (240.0f64 / 1.8e10).powf(0.38));
    let expected = 100.0 + f64::max(memory, compute);
    assert!(
        (e.micros - expected).abs() < 1e-9,
        "{} vs {expected}",
        e.micros
    );
    assert!(
        e.warnings.iter().any(|w| w.starts_with("dispatch floor:")),
        "{:?}",
        e.warnings
    );
    // A node past 1.8e10 flops runs at the full peak: 256·4096·4096 ·2 = 8.6e9 (below) vs 2x.
    let x = input(&[2, 512, 4096]).unwrap();
    let w = vec![0.0f32; 4096 * 4096];
    let y = x
        .matmul(&constant("t", HostArray::f32(&[4096, 4096], &w)).unwrap())
        .unwrap();
    let e = cost::estimate(&graph(&y), Some("h17s")).unwrap();
    let flops = 2.0 * 1024.0 * 4096.0 * 4096.0;
    let bytes = 2.0 * (2.0 * 512.0 * 4096.0 * 2.0 + 4096.0 * 4096.0);
    let expected = 110.0 + f64::max(bytes / 57e3, flops / 8.9e6);
    assert!(
        (e.micros - expected).abs() < 1e-6,
        "{} vs {expected}",
        e.micros
    );
    assert!(!e.warnings.iter().any(|w| w.starts_with("dispatch floor:")));
}

#[test]
fn other_arches_scale_from_the_nearest_anchor() {
    let m = anchors::machine("h17d").unwrap();
    assert_eq!(
        m.provenance,
        "scaled from h17s (cores 64/16, clock 1.89/1.89 GHz)"
    );
    assert!(
        (m.bytes_per_us - 57e3 * 4.0).abs() < 1e-6
            && (m.peak_flops_per_us - 8.9e6 * 4.0).abs() < 1e-3
    );
    assert!((m.floor_us - 110.0).abs() < 1e-12);
    // M1 Max-like h13g from h13: bandwidth and peak ×2, same clock.
    let m = anchors::machine("h13g").unwrap();
    assert!((m.bytes_per_us - 18e3).abs() < 1e-6 && (m.peak_flops_per_us - 6.5e6).abs() < 1e-3);
    // m11: one core at 0.5 GHz, nearest anchor h14 (1.938 GHz, 4 cores).
    let m = anchors::machine("m11").unwrap();
    assert!(
        (m.floor_us - 100.0 * 1.938 / 0.5).abs() < 1e-9,
        "{}",
        m.floor_us
    );
    assert!((m.peak_flops_per_us - 7.3e6 * 0.25 * 0.5 / 1.938).abs() < 1e-3);
    // h16 (M4): clock not recorded → projected from h17s with cores 4/16.
    let m = anchors::machine("h16").unwrap();
    assert!(
        m.provenance.starts_with("projected from h17s"),
        "{}",
        m.provenance
    );
    assert!((m.bytes_per_us - 57e3 / 4.0).abs() < 1e-6);
    // Family names cost their representative arch.
    assert_eq!(
        anchors::machine("A13").unwrap().provenance,
        "measured anchor h13"
    );
    assert_eq!(anchors::machine("a16").unwrap().arch, "h16s");
}

#[test]
fn unknown_targets_old_families_and_empty_graphs_are_errors() {
    let g = matmul_graph();
    let e = cost::estimate(&g, Some("h99")).unwrap_err().to_string();
    assert!(e.contains("'h99' is not a known ANE arch"), "{e}");
    let e = cost::estimate(&g, Some("h12")).unwrap_err().to_string();
    assert!(e.contains("OLDER") || e.contains("MIL"), "{e}");
    assert!(cost::project_peak("u1").is_err());
    let x = input(&[2, 2]).unwrap();
    let mut g = graph(&x.relu().unwrap());
    g.nodes.truncate(1);
    let e = cost::estimate(&g, Some("h14")).unwrap_err().to_string();
    assert!(e.contains("no compute nodes"), "{e}");
    // A graph that is just an input (or a constant) is empty too, not the copy compiling adds.
    let c = constant("c", HostArray::f32(&[2], &[1.0, 2.0])).unwrap();
    for outs in [vec![x.clone()], vec![c.clone()], vec![x.clone(), c]] {
        let outs: Vec<_> = outs.into_iter().map(|t| (None, t)).collect();
        for target in [None, Some("h14")] {
            let e = cost::estimate_outputs(&outs, target).unwrap_err();
            assert!(e.to_string().contains("no compute nodes"), "{e}");
        }
    }
    // An op beside an input output is costed, the input's copy included.
    let e = cost::estimate_outputs(&[(None, x.clone()), (None, x.relu().unwrap())], None).unwrap();
    let ops: Vec<_> = e.ops.iter().map(|o| o.work.op).collect();
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert!(ops.contains(&"relu"), "{ops:?}");
}

#[test]
fn project_peak_scales_the_m1_anchor_by_cores_and_clock() {
    let p = cost::project_peak("h13").unwrap();
    assert_eq!((p.cores, p.rel_m1, p.tflops), (4, 1.0, 1.8));
    let p = cost::project_peak("h17s").unwrap();
    let rel = 16.0 * 1.89 / (4.0 * 1.428);
    assert!((p.rel_m1 - rel).abs() < 1e-12 && (p.tflops - 1.8 * rel).abs() < 1e-12);
    assert!(p.clock_recorded);
    let p = cost::project_peak("m11").unwrap();
    assert!(
        (p.rel_m1 - 0.5 / (4.0 * 1.428)).abs() < 1e-12,
        "{}",
        p.rel_m1
    );
    assert!(!cost::project_peak("h15").unwrap().clock_recorded);
}

#[test]
fn narrow_sums_draw_a_precision_warning() {
    let x = input(&[1, 1024]).unwrap();
    let y = x.sum(&[1], true).unwrap();
    let e = cost::estimate(&graph(&y), Some("h17s")).unwrap();
    let p: Vec<_> = e
        .warnings
        .iter()
        .filter(|w| w.starts_with("precision:"))
        .collect();
    assert_eq!(p.len(), 1, "{:?}", e.warnings);
    assert!(p[0].contains("1024"), "{}", p[0]);
}

#[test]
fn powermetrics_text_parses_into_energy() {
    // The sample text follows the layout `powermetrics --samplers cpu_power,gpu_power,ane_power`
    // prints (powermetrics(1) man page; sample headers "*** Sampled system activity (<date>)
    // (<ms>ms elapsed) ***" and "<Rail> Power: <n> mW" lines), written by hand for this test.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/powermetrics_sample.txt"
    ))
    .unwrap();
    let s = power::parse_powermetrics(&text).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].elapsed_ms, s[0].cpu_mw, s[0].ane_mw, s[0].combined_mw),
        (502.31, Some(1240.0), Some(1800.0), Some(3096.0))
    );
    // Second sample has no combined line: CPU + GPU + ANE = 1100 + 40 + 2000.
    assert_eq!(
        (s[1].ane_mw, s[1].combined_mw),
        (Some(2000.0), Some(3140.0))
    );
    let e = power::energy(&s);
    assert!((e.window_ms - 1000.0).abs() < 1e-9);
    assert!((e.ane_mj - (1800.0 * 0.50231 + 2000.0 * 0.49769)).abs() < 1e-9);
    assert!((e.combined_mj - (3096.0 * 0.50231 + 3140.0 * 0.49769)).abs() < 1e-9);
    for (bad, msg) in [
        ("no samples here", "no '*** Sampled system activity'"),
        ("ANE Power: 5 mW", "before any sample header"),
        (
            "*** Sampled system activity (x) ***",
            "without '(<ms>ms elapsed)'",
        ),
        (
            "*** Sampled system activity (d) (10ms elapsed) ***\nANE Power: -3 mW",
            "not a non-negative number",
        ),
        (
            "*** Sampled system activity (d) (10ms elapsed) ***\nANE Power: 3 kW",
            "unknown power unit",
        ),
    ] {
        let e = power::parse_powermetrics(bad).unwrap_err().to_string();
        assert!(e.contains(msg), "{bad}: {e}");
    }
    // Idle subtraction: the idle window (hand-written, same layout) draws 0.4·310 + 0.6·370 =
    // 346 mW combined and 0.4·0 + 0.6·20 = 12 mW ANE on average; the busy window above
    // (3096·0.50231 + 3140·0.49769) / 1.0 s and (1800·0.50231 + 2000·0.49769) / 1.0 s.
    let idle = power::parse_powermetrics(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/powermetrics_idle.txt"
        ))
        .unwrap(),
    )
    .unwrap();
    let busy_combined = 3096.0 * 0.50231 + 3140.0 * 0.49769;
    let busy_ane = 1800.0 * 0.50231 + 2000.0 * 0.49769;
    // 40 calls in 0.8 s: (P_busy − P_idle) mW × 0.8 s / 40.
    let c = power::idle_subtracted(&idle, &s, 40, 0.8).unwrap();
    assert!((c.idle_combined_mw - 346.0).abs() < 1e-9, "{c:?}");
    assert!((c.idle_ane_mw - 12.0).abs() < 1e-9, "{c:?}");
    assert!((c.combined_mj - (busy_combined - 346.0) * 0.8 / 40.0).abs() < 1e-9);
    assert!((c.ane_mj - (busy_ane - 12.0) * 0.8 / 40.0).abs() < 1e-9);
    // Busy below idle stays negative (reported, not clamped).
    let quiet = power::idle_subtracted(&s, &idle, 1, 1.0).unwrap();
    assert!((quiet.combined_mj - (346.0 - busy_combined)).abs() < 1e-9);
    for (calls, secs, msg) in [
        (0, 1.0, "need ≥ 1 call"),
        (1, 0.0, "need ≥ 1 call"),
        (1, f64::NAN, "need ≥ 1 call"),
    ] {
        let e = power::idle_subtracted(&idle, &s, calls, secs)
            .unwrap_err()
            .to_string();
        assert!(e.contains(msg), "{e}");
    }
    let e = power::idle_subtracted(&[], &s, 1, 1.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("idle window has no samples"), "{e}");
    if !cfg!(target_os = "macos") {
        let e = power::check_available().unwrap_err().to_string();
        assert!(e.contains("unavailable: needs macOS and root"), "{e}");
    }
}

#[test]
fn ops_folded_into_a_conv_cost_their_elements_at_the_epilogue_rate() {
    // conv [1,2,4,4] → [1,3,4,4] (48 outputs, K = 2·3·3 = 18 → 1728 flops), batch_norm and
    // relu folded into its step (48 elements each), then a second relu that is not (its input
    // is read twice: by it and as a graph output).
    let x = input(&[1, 2, 4, 4]).unwrap();
    let w = HostArray::f32(&[3, 2, 3, 3], &[0.1; 54]);
    let pad = ConvOptions {
        pad: [1; 4],
        ..ConvOptions::default()
    };
    let (zeros, ones) = ([0.0f32; 3], [1.0f32; 3]);
    let st = |v| HostArray::f32(&[3], v);
    let y = conv2d(&x, w, None, pad).unwrap();
    let y = aneforge::batch_norm(
        &y,
        st(&zeros),
        st(&ones),
        Some(st(&ones)),
        Some(st(&zeros)),
        1e-3,
    )
    .unwrap()
    .relu()
    .unwrap();
    let g = Graph::from_outputs(&[(None, y.clone()), (None, y.relu().unwrap())]).unwrap();
    let folded = cost::fused::folded_into(&g);
    let conv = g
        .nodes
        .iter()
        .position(|n| n.op.family().name() == "conv")
        .unwrap();
    assert_eq!(folded.iter().filter(|f| **f == Some(conv)).count(), 2);
    let c = HostConstants {
        floor_us: 0.0,
        conv_flops_per_us: 1728.0,
        elementwise_per_us: 4.0,
        reduce_per_us: 2.0,
        epilogue_per_us: 32.0,
        ..HostConstants::DEFAULTS
    };
    // conv 1 µs + (48 + 48) / 32 folded + the last relu 48 / 4 = 16 µs.
    let e = cost::estimate_host(&g, &c, "x").unwrap();
    assert!((e.micros - 16.0).abs() < 1e-9, "{}", e.micros);
    // Without an epilogue rate (older files) every op is its own step: 1 + 48/2 + 48/4 + 48/4.
    let unfused = HostConstants {
        epilogue_per_us: 0.0,
        ..c
    };
    let e = cost::estimate_host(&g, &unfused, "x").unwrap();
    assert!((e.micros - 49.0).abs() < 1e-9, "{}", e.micros);
}

#[test]
fn elementwise_ops_cost_at_their_forms_curve() {
    // x [4, 8] (32 elements): relu (unary), x · 0.5 (scalar), x + row [8] (broadcast),
    // x · x (binary); each form's curve holds one point, 1, 2, 4 and 8 el/µs.
    let x = input(&[4, 8]).unwrap();
    let row = constant("row", HostArray::f32(&[8], &[0.25; 8])).unwrap();
    let one = |rate: f64| cost::RateCurve::new(&[[32.0, rate]]);
    let c = HostConstants {
        floor_us: 0.0,
        unary_curve: one(1.0),
        scalar_curve: one(2.0),
        broadcast_curve: one(4.0),
        elementwise_curve: one(8.0),
        ..HostConstants::DEFAULTS
    };
    let us = |y: Tensor| cost::estimate_host(&graph(&y), &c, "x").unwrap().micros;
    assert_eq!(us(x.relu().unwrap()), 32.0);
    assert_eq!(us(x.mul_scalar(0.5).unwrap()), 16.0);
    assert_eq!(us(x.add(&row).unwrap()), 8.0);
    assert_eq!(us(x.mul(&x).unwrap()), 4.0);
    // A form without a curve (older files) costs at the binary curve: relu at 8 el/µs.
    let old = HostConstants {
        unary_curve: cost::RateCurve::EMPTY,
        ..c
    };
    let e = cost::estimate_host(&graph(&x.relu().unwrap()), &old, "x").unwrap();
    assert_eq!(e.micros, 4.0);
}

#[test]
fn a_fused_elementwise_run_costs_its_first_op_as_a_step_and_the_rest_at_in_run_rates() {
    // x [4, 8] (32 elements): (x · 0.5 + 0.25).relu() is one fused run of three steps; the
    // transpose after it ends the run. The first op costs its own-step rate (scalar curve
    // 2 el/µs: 16 µs), x + 0.25 the in-run scalar rate (8 el/µs: 4 µs), relu the in-run unary
    // rate (16 el/µs: 2 µs); the transpose 32 el at 32 el/µs: 1 µs.
    let x = input(&[4, 8]).unwrap();
    let y = x
        .mul_scalar(0.5)
        .unwrap()
        .add_scalar(0.25)
        .unwrap()
        .relu()
        .unwrap()
        .transpose(&[1, 0])
        .unwrap();
    let g = graph(&y);
    let runs = cost::fused::elementwise_runs(&g);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].len(), 3);
    let one = |rate: f64| cost::RateCurve::new(&[[32.0, rate]]);
    let c = HostConstants {
        floor_us: 0.0,
        scalar_curve: one(2.0),
        unary_curve: one(1.0),
        permute_curve: one(32.0),
        fused_scalar_curve: one(8.0),
        fused_unary_curve: one(16.0),
        fused_binary_curve: one(64.0),
        ..HostConstants::DEFAULTS
    };
    let e = cost::estimate_host(&g, &c, "x").unwrap();
    assert_eq!(e.micros, 16.0 + 4.0 + 2.0 + 1.0);
    let into: Vec<Option<usize>> = e.ops.iter().map(|o| o.folded_into).collect();
    assert_eq!(into, [None, Some(runs[0][0]), Some(runs[0][0]), None]);
    // Without in-run rates (older files) every op is its own step: 16 + 16 (scalar) + 32 + 1.
    let old = HostConstants {
        fused_scalar_curve: cost::RateCurve::EMPTY,
        fused_unary_curve: cost::RateCurve::EMPTY,
        fused_binary_curve: cost::RateCurve::EMPTY,
        ..c
    };
    let e = cost::estimate_host(&g, &old, "x").unwrap();
    assert_eq!(e.micros, 16.0 + 16.0 + 32.0 + 1.0);
    assert!(e.ops.iter().all(|o| o.folded_into.is_none()));
}

#[test]
fn runs_break_at_other_steps_other_sizes_and_broadcast_operands() {
    // relu, ·2 on [4, 8] (a run); + row [8] (a broadcast operand: its own step); relu, exp
    // (a run); a sum to [4, 1] (a reduction); ·3, relu on [4, 1] (a run of another size).
    let x = input(&[4, 8]).unwrap();
    let row = constant("row", HostArray::f32(&[8], &[0.5; 8])).unwrap();
    let a = x.relu().unwrap().mul_scalar(2.0).unwrap();
    let b = a.add(&row).unwrap().relu().unwrap().exp().unwrap();
    let s = b
        .sum(&[1], true)
        .unwrap()
        .mul_scalar(3.0)
        .unwrap()
        .relu()
        .unwrap();
    let g = graph(&s);
    let name = |run: &Vec<usize>| -> Vec<&str> {
        run.iter().map(|&n| g.nodes[n].op.family().name()).collect()
    };
    let runs: Vec<Vec<&str>> = cost::fused::elementwise_runs(&g).iter().map(name).collect();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!(runs.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 2]);
}

#[test]
fn host_ops_of_a_plan_cost_their_elements_at_the_host_rate_and_flatten_is_a_copy() {
    // x [4, 8] → topk 2 (a host op: max(32 read, 8 written) = 32 elements at 4 el/µs: 8 µs);
    // flatten of x (a host copy: 32 fp16 elements read and written, 128 bytes).
    let x = input(&[4, 8]).unwrap();
    let (v, _) = x.topk(2, -1, true, true).unwrap();
    let g = graph(&v);
    let w = cost::graph_work(&g);
    assert_eq!((w[0].kind, w[0].flops), (WorkKind::Host, 32));
    let c = HostConstants {
        host_curve: cost::RateCurve::new(&[[32.0, 4.0]]),
        ..HostConstants::DEFAULTS
    };
    assert_eq!(cost::host_node_us(&w[0], &c), 8.0);
    // Without a host curve (older files): the elementwise rate.
    assert_eq!(
        cost::host_node_us(&w[0], &HostConstants::DEFAULTS),
        32.0 / HostConstants::DEFAULTS.elementwise_per_us
    );
    let f = cost::graph_work(&graph(&x.flatten().unwrap()));
    assert_eq!((f[0].kind, f[0].bytes), (WorkKind::Data, 128));
}

#[test]
fn m_series_chip_names_resolve_to_their_arch() {
    // M<n> = h<n + 12>; the measured M5 Pro is h17s; tiers other than the M5 Pro keep the base
    // arch; names are case and space free; other names are not chips.
    for (name, arch) in [
        ("M1", "h13"),
        ("m4", "h16"),
        ("M2 Pro", "h14"),
        ("m4max", "h16"),
        ("M5 Pro", "h17s"),
        ("M5", "h17"),
    ] {
        assert_eq!(
            aneforge::targets::chip_arch(name).as_deref(),
            Some(arch),
            "{name}"
        );
        assert_eq!(cost::project_peak(name).unwrap().arch, arch, "{name}");
    }
    for name in ["m9", "M4 Mini", "m", "mx", "h16", "A17"] {
        assert_eq!(aneforge::targets::chip_arch(name), None, "{name}");
    }
    let e = cost::estimate(&matmul_graph(), Some("M2 Pro")).unwrap();
    assert_eq!(e.provenance, "measured anchor h14");
}
