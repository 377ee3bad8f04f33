//! The indexing / scan host ops inside compiled plans on the reference executor: a region
//! before and after each host op, outputs against values worked out by hand in the tests,
//! and the run-time errors of bad indices.

mod common;

use aneforge::graph::build::indexing::cumsum;
use aneforge::{
    compile, input, input_port, CompileOptions, Compiled, DType, Device, PortData, Tensor,
};
use common::Scratch;

/// Compile `outs` into a fresh scratch directory (removed when the guard drops).
fn build(outs: &[(&str, Tensor)], name: &str) -> (Compiled, Scratch) {
    let dir = Scratch::new(&format!("hostops-{name}"));
    let opts = CompileOptions {
        device: Device::Reference,
        build_dir: Some(dir.to_path_buf()),
        ..Default::default()
    };
    let named: Vec<(Option<String>, Tensor)> = outs
        .iter()
        .map(|(n, t)| (Some(n.to_string()), t.clone()))
        .collect();
    (compile(&named, &opts).unwrap(), dir)
}

#[test]
fn kv_cache_write_scatter_add_and_running_sums_in_one_plan() {
    let cache = input(&[2, 3, 2]).unwrap();
    let pos = input_port(&[1], DType::Int32, Some("pos")).unwrap();
    let row = input(&[2, 1, 2]).unwrap();
    // (cache·1) → index_put at pos along axis 1 → +1 (a region after the host op).
    let written = cache
        .mul_scalar(1.0)
        .unwrap()
        .index_put(&pos, &row, 1)
        .unwrap()
        .add_scalar(1.0)
        .unwrap();
    let x = input(&[1, 4]).unwrap();
    let idx = input_port(&[1, 3], DType::Int32, Some("idx")).unwrap();
    let upd = input(&[1, 3]).unwrap();
    let scattered = x.scatter(&idx, &upd, 1, Some("add")).unwrap();
    let sums = cumsum(&x, 1, true, true).unwrap();
    let (mut c, _dir) = build(&[("w", written), ("s", scattered), ("r", sums)], "kv");
    let cache_v: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let out = c
        .run(&[
            PortData::F32(&cache_v),
            PortData::I32(&[2]),
            PortData::F32(&[-1.0, -2.0, -3.0, -4.0]),
            PortData::F32(&[1.0, 2.0, 3.0, 4.0]),
            PortData::I32(&[0, 3, 0]),
            PortData::F32(&[0.5, 0.25, 2.0]),
        ])
        .unwrap();
    // Position 2 of both heads replaced, then + 1.
    let want_w = [
        1.0, 2.0, 3.0, 4.0, 0.0, -1.0, 7.0, 8.0, 9.0, 10.0, -2.0, -3.0,
    ];
    assert_eq!(out[0], want_w);
    // x[0] += 0.5 + 2.0, x[3] += 0.25.
    assert_eq!(out[1], [3.5, 2.0, 3.0, 4.25]);
    // Exclusive reverse running sum of [1, 2, 3, 4]: [9, 7, 4, 0].
    assert_eq!(out[2], [9.0, 7.0, 4.0, 0.0]);
    let bad = c.run(&[
        PortData::F32(&cache_v),
        PortData::I32(&[3]),
        PortData::F32(&[0.0; 4]),
        PortData::F32(&[0.0; 4]),
        PortData::I32(&[0, 0, 0]),
        PortData::F32(&[0.0; 3]),
    ]);
    let e = bad.unwrap_err().to_string();
    assert!(e.contains("index_put") && e.contains("index 3"), "{e}");
}

#[test]
fn one_hot_and_greedy_sample_feed_regions() {
    let ids = input_port(&[3], DType::Int32, Some("ids")).unwrap();
    let hot = ids.one_hot(4).unwrap().mul_scalar(2.0).unwrap();
    let logits = input(&[2, 5]).unwrap();
    let tok = logits
        .mul_scalar(1.0)
        .unwrap()
        .sample(0.0, 0, 1.0, 7)
        .unwrap();
    let (mut c, _dir) = build(&[("hot", hot), ("tok", tok)], "hot");
    c.loaded.set_input(0, PortData::I32(&[2, 0, 3])).unwrap();
    c.loaded
        .set_input(
            1,
            PortData::F32(&[0.0, 1.0, 5.0, 5.0, -1.0, 3.0, 2.0, 1.0, 0.0, -7.0]),
        )
        .unwrap();
    c.loaded.execute().unwrap();
    let out = c.loaded.read_outputs().unwrap();
    let mut want = [0.0f32; 12];
    for (r, &i) in [2usize, 0, 3].iter().enumerate() {
        want[r * 4 + i] = 2.0;
    }
    assert_eq!(out[0], want);
    let mut ids = [0i32; 2];
    c.loaded.read_output_i32(1, &mut ids).unwrap();
    // First maximum per row: 5.0 at 2, 3.0 at 0.
    assert_eq!(ids, [2, 0]);
    assert!(logits
        .sample(-1.0, 0, 1.0, 0)
        .unwrap_err()
        .to_string()
        .contains("temperature"));
    assert!(logits
        .sample(1.0, 0, 0.0, 0)
        .unwrap_err()
        .to_string()
        .contains("top_p"));
    c.loaded.set_input(0, PortData::I32(&[4, 0, 0])).unwrap();
    let e = c.loaded.execute().unwrap_err().to_string();
    assert!(e.contains("one_hot") && e.contains("index 4"), "{e}");
}

#[test]
fn routing_decomposes_minmax_norm_and_flatten_unless_told_host() {
    use aneforge::options::Route;
    let build_route = |route: Route, name: &str| {
        let x = input(&[1, 1, 2, 3]).unwrap();
        let y = x
            .minmax_norm("width", 0.5)
            .unwrap()
            .flatten()
            .unwrap()
            .mul_scalar(2.0)
            .unwrap();
        let dir = Scratch::new(&format!("route-{name}"));
        let opts = CompileOptions {
            device: Device::Reference,
            build_dir: Some(dir.to_path_buf()),
            route,
            ..Default::default()
        };
        (compile(&[(None, y)], &opts).unwrap(), dir)
    };
    // Rows [1, 2, 3] and [4, 4, 6]: (x − min) / (max − min + 0.5), times 2.
    let want = [0.0, 0.8, 1.6, 0.0, 0.0, 1.6];
    let xs = [1.0, 2.0, 3.0, 4.0, 4.0, 6.0];
    for (route, fused) in [
        (Route::Auto, true),
        (Route::Fused, true),
        (Route::Host, false),
    ] {
        let (mut c, _dir) = build_route(route, route.name());
        // Fully routed: a plan of one region (its plan file keeps the routes).
        let kinds = c.plan.as_ref().unwrap().stage_kinds();
        assert_eq!(kinds == ["region"], fused, "{route:?}: {kinds:?}");
        let texts: Vec<String> = c.routes.iter().map(|r| r.to_string()).collect();
        let want_texts: [&str; 2] = if fused {
            [
                "routed fused: minmax_norm (removes 1 cut)",
                "routed fused: flatten (removes 1 cut)",
            ]
        } else {
            [
                "kept on host: minmax_norm (route=\"host\")",
                "kept on host: flatten (route=\"host\")",
            ]
        };
        assert_eq!(texts, want_texts);
        let out = c.run(&[PortData::F32(&xs)]).unwrap();
        for (g, w) in out[0].iter().zip(want) {
            assert!((g - w).abs() < 2e-3, "{route:?}: {:?} vs {want:?}", out[0]);
        }
    }
}
