//! Profiling on the reference executor and on segmented plans: one op span per step per call,
//! nested in its call, work labels against hand counts, shares of the call, the Chrome trace.

use aneforge::cost::profile::{profile_calls, ProfileReport};
use aneforge::exec::clock::Clock;
use aneforge::exec::profile::SpanKind;
use aneforge::{
    batch_norm, compile, constant, conv2d, input, CompileOptions, ConvOptions, Device, HostArray,
    PortData, Tensor,
};
use serde_json::Value;

fn compiled(outputs: &[(Option<String>, Tensor)]) -> aneforge::Compiled {
    let opts = CompileOptions {
        device: Device::Reference,
        ..CompileOptions::default()
    };
    compile(outputs, &opts).unwrap()
}

/// Run once on a ramp (feeds the inputs), then profile `repeat` calls on the wall clock.
fn profile(outputs: &[(Option<String>, Tensor)], repeat: usize) -> ProfileReport {
    profile_on(outputs, repeat, Clock::Wall)
}

/// [`profile`] timed by `clock`.
fn profile_on(outputs: &[(Option<String>, Tensor)], repeat: usize, clock: Clock) -> ProfileReport {
    let mut net = compiled(outputs);
    let data: Vec<Vec<f32>> = net
        .inputs()
        .iter()
        .map(|p| (0..p.numel()).map(|i| (i % 7) as f32 / 8.0).collect())
        .collect();
    let ports: Vec<PortData> = data.iter().map(|d| PortData::F32(d)).collect();
    net.run(&ports).unwrap();
    profile_calls(net.loaded.as_mut(), repeat, clock).unwrap()
}

/// Every event of the trace with its `cat`, as (cat, name, ts, dur, run).
fn trace_events(r: &ProfileReport) -> Vec<(String, String, f64, f64, u64)> {
    let text = serde_json::to_string(&r.chrome_trace()).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["ph"], "X");
            (
                e["cat"].as_str().unwrap().to_string(),
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
                e["args"]["run"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn reference_rows_are_one_per_step_with_hand_counted_work() {
    // x [64, 128] · w [128, 96] → relu → + 1: three ops, two steps (relu and the add run as one
    // fused elementwise step, reported as one row named after both).
    let w = vec![0.01f32; 128 * 96];
    let x = input(&[64, 128]).unwrap();
    let y = x
        .matmul(&constant("w", HostArray::f32(&[128, 96], &w)).unwrap())
        .unwrap()
        .relu()
        .unwrap()
        .add_scalar(1.0)
        .unwrap();
    let r = profile(&[(None, y)], 5);
    assert_eq!((r.device, r.runs), ("reference", 5));
    let ops: Vec<&str> = r.rows.iter().map(|row| row.name.as_str()).collect();
    assert_eq!(ops, ["matmul", "relu+add"]);
    let mm = &r.rows[0];
    assert_eq!(mm.kind, SpanKind::Op);
    assert_eq!(mm.shape, vec![64, 96]);
    // 2 · 64·96 outputs · 128 MACs; bytes fp16: 2 · (64·128 + 128·96 + 64·96).
    assert_eq!(mm.flops, 2 * 64 * 96 * 128);
    assert_eq!(mm.bytes, 2 * (64 * 128 + 128 * 96 + 64 * 96));
    assert!(r.rows.iter().all(|row| row.leaf && row.micros >= 0.0));
    let share: f64 = r.rows.iter().map(|row| row.share).sum();
    // Op spans nest in the call: their shares cover part of it (no lower bound: the call's own
    // overhead grows with the machine's load).
    assert!(share > 0.0 && share <= 1.0 + 1e-9, "shares sum to {share}");
    let total: f64 = r.rows.iter().map(|row| row.micros).sum();
    assert!(total <= r.call_us * (1.0 + 1e-9), "{total} > {}", r.call_us);
    assert!(r.table().contains("matmul"));
}

#[test]
fn chrome_trace_has_one_complete_event_per_step_per_call_nested_in_the_call() {
    let x = input(&[8, 16]).unwrap();
    // Two steps: a reduction and the fused relu+mul run after it.
    let y = x
        .sum(&[1], true)
        .unwrap()
        .relu()
        .unwrap()
        .mul_scalar(3.0)
        .unwrap();
    let r = profile(&[(None, y)], 4);
    let ev = trace_events(&r);
    let calls: Vec<_> = ev.iter().filter(|e| e.0 == "call").collect();
    let ops: Vec<_> = ev.iter().filter(|e| e.0 == "op").collect();
    assert_eq!((calls.len(), ops.len()), (4, 8));
    for op in &ops {
        assert!(op.3 >= 0.0);
        let call = calls.iter().find(|c| c.4 == op.4).unwrap();
        assert!(op.2 >= call.2 && op.2 + op.3 <= call.2 + call.3 + 1e-6);
    }
    for run in 0..4 {
        assert_eq!(ops.iter().filter(|o| o.4 == run).count(), 2);
    }
}

#[test]
fn plan_stages_nest_their_region_ops() {
    // x·2 (region) → topk (host) → values + 1 (region).
    let x = input(&[2, 5]).unwrap();
    let (vals, _) = x.mul_scalar(2.0).unwrap().topk(2, -1, true, true).unwrap();
    let r = profile(&[(None, vals.add_scalar(1.0).unwrap())], 3);
    let stages: Vec<_> = r
        .rows
        .iter()
        .filter(|row| row.kind == SpanKind::Stage)
        .collect();
    assert_eq!(stages.len(), 3, "{:#?}", r.rows);
    assert!(stages[1].name.contains("topk") && stages[1].leaf);
    assert!(!stages[0].leaf && !stages[2].leaf);
    let ops: Vec<_> = r
        .rows
        .iter()
        .filter(|row| row.kind == SpanKind::Op)
        .collect();
    assert_eq!(ops.len(), 2);
    assert_eq!((ops[0].stage, ops[1].stage), (Some(0), Some(2)));
    assert!(ops.iter().all(|o| o.depth == 1));
    let leaf: f64 = r
        .rows
        .iter()
        .filter(|row| row.leaf)
        .map(|row| row.share)
        .sum();
    assert!(leaf <= 1.0 + 1e-9);
}

#[test]
fn repeat_out_of_range_is_a_value_error() {
    let mut net = compiled(&[(None, input(&[2]).unwrap().relu().unwrap())]);
    let e = profile_calls(net.loaded.as_mut(), 0, Clock::Wall).unwrap_err();
    assert!(e.to_string().contains("repeat must be 1..="), "{e}");
}

#[test]
fn a_fused_conv_step_is_one_row_with_the_work_of_its_ops_on_the_cpu_clock() {
    // conv 3→4 (3×3, pad 1) on [1, 3, 8, 8], batch_norm and relu folded into its step, then
    // + 1 (a scalar add: not folded).
    let x = input(&[1, 3, 8, 8]).unwrap();
    let w = vec![0.05f32; 4 * 3 * 9];
    let pad = ConvOptions {
        pad: [1; 4],
        ..ConvOptions::default()
    };
    let st = [0.5f32; 4];
    let a = |v| HostArray::f32(&[4], v);
    let y = conv2d(&x, HostArray::f32(&[4, 3, 3, 3], &w), None, pad).unwrap();
    let y = batch_norm(&y, a(&st), a(&st), Some(a(&st)), Some(a(&st)), 1e-3)
        .unwrap()
        .relu()
        .unwrap()
        .add_scalar(1.0)
        .unwrap();
    let r = profile_on(&[(None, y)], 3, Clock::Cpu);
    assert_eq!(r.clock, Clock::Cpu);
    assert!(r.table().contains("cpu clock"));
    let names: Vec<&str> = r.rows.iter().map(|row| row.name.as_str()).collect();
    assert_eq!(names, ["conv+batch_norm+relu", "add"]);
    let conv = &r.rows[0];
    assert_eq!(conv.shape, vec![1, 4, 8, 8]);
    // conv 2 · 256 outputs · 27 MACs, batch_norm and relu 256 elements each; fp16 bytes of
    // x, w, the 4 statistics and the one output (the intermediates are never stored).
    assert_eq!(conv.flops, 2 * 256 * 27 + 2 * 256);
    assert_eq!(conv.bytes, 2 * (3 * 64 + 108 + 4 * 4 + 256));
    let total: f64 = r.rows.iter().map(|row| row.micros).sum();
    assert!(
        total >= 0.0 && total <= r.call_us * (1.0 + 1e-9),
        "{total} > {}",
        r.call_us
    );
}

/// The host estimate groups ops into the executor's steps: for programs with fused elementwise
/// runs, conv epilogues and steps that break runs, the estimate's steps (an op with
/// `folded_into` joins that node's step, which runs at its last op's place) named `op+op+...`
/// are the profile's op rows, in order.
#[test]
fn estimate_steps_are_the_profiles_op_rows() {
    use aneforge::cost::{self, HostConstants, RateCurve};
    let one = RateCurve::new(&[[1.0, 1.0]]);
    let c = HostConstants {
        epilogue_per_us: 1.0,
        fused_binary_curve: one,
        fused_unary_curve: one,
        fused_scalar_curve: one,
        ..HostConstants::DEFAULTS
    };
    let w = vec![0.1f32; 4 * 4 * 9];
    let conv = |y: &Tensor| {
        let opts = ConvOptions {
            pad: [1; 4],
            ..ConvOptions::default()
        };
        conv2d(y, HostArray::f32(&[4, 4, 3, 3], &w), None, opts).unwrap()
    };
    let stat = HostArray::f32(&[4], &[0.5; 4]);
    let x = input(&[1, 4, 8, 8]).unwrap();
    let row = constant("row", HostArray::f32(&[8], &[0.25; 8])).unwrap();
    let a = conv(&x);
    let a = batch_norm(&a, stat, stat, None, None, 1e-3)
        .unwrap()
        .relu()
        .unwrap();
    let b = a
        .mul_scalar(0.5)
        .unwrap()
        .add_scalar(0.25)
        .unwrap()
        .relu()
        .unwrap();
    let b = b.transpose(&[0, 1, 3, 2]).unwrap().add(&row).unwrap();
    let b = conv(&b).mul(&b).unwrap().sub(&x).unwrap();
    let y = b.mul(&b).unwrap().abs().unwrap();
    let outs = [(None, y)];
    let net = compiled(&outs);
    let e = cost::estimate_host(&net.program.graph, &c, "x").unwrap();
    let mut steps: Vec<Vec<&cost::OpEstimate>> = Vec::new();
    for o in &e.ops {
        let head = o.folded_into.unwrap_or(o.work.node);
        match steps.iter_mut().find(|s| s[0].work.node == head) {
            Some(s) => s.push(o),
            None => steps.push(vec![o]),
        }
    }
    steps.sort_by_key(|s| s.iter().map(|o| o.work.node).max());
    let want: Vec<String> = steps
        .iter()
        .map(|s| s.iter().map(|o| o.work.op).collect::<Vec<_>>().join("+"))
        .collect();
    assert!(want.iter().any(|n| n.starts_with("conv+")), "{want:?}");
    assert!(
        want.iter()
            .filter(|n| n.contains('+') && !n.starts_with("conv"))
            .count()
            >= 2,
        "{want:?}"
    );
    let r = profile(&outs, 1);
    let rows: Vec<String> = r
        .rows
        .iter()
        .filter(|r| r.kind == SpanKind::Op)
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(rows, want);
}
