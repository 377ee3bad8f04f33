//! Segmented plans on the reference executor: host ops between fused regions, the plan file,
//! loading it back, and the errors of bad indices and corrupted plans. Oracles are written out
//! in the tests (hand-computed values and plain loops over the test's own data).

mod common;

use aneforge::plan::file::{PLAN_FILE, REGIONS};
use aneforge::{
    compile, embedding, input, input_port, load_dir, CompileOptions, Compiled, DType, Device,
    Error, PortData, Precision, Tensor,
};
use common::Scratch;

fn opts(dir: &std::path::Path) -> CompileOptions {
    CompileOptions {
        device: Device::Reference,
        build_dir: Some(dir.to_path_buf()),
        ..Default::default()
    }
}

fn build(outs: &[(&str, Tensor)], name: &str) -> (Compiled, Scratch) {
    let dir = Scratch::new(&format!("seg-{name}"));
    let named: Vec<(Option<String>, Tensor)> = outs
        .iter()
        .map(|(n, t)| (Some(n.to_string()), t.clone()))
        .collect();
    (compile(&named, &opts(&dir)).unwrap(), dir)
}

fn ints(c: &Compiled, i: usize) -> Vec<i32> {
    let mut v = vec![0; c.outputs()[i].numel()];
    c.loaded.read_output_i32(i, &mut v).unwrap();
    v
}

/// x [2, 5] → x·2 (region) → argmax / topk (host) → values + 1 (region).
fn chain() -> Vec<(&'static str, Tensor)> {
    let x = input(&[2, 5]).unwrap();
    let y = x.mul_scalar(2.0).unwrap();
    let am = y.argmax(1, false).unwrap();
    let (vals, idx) = y.topk(2, -1, true, true).unwrap();
    let after = vals.add_scalar(1.0).unwrap();
    vec![("am", am), ("vals", after), ("idx", idx)]
}

const X: [f32; 10] = [0.5, 3.0, -1.0, 3.0, 2.0, -4.0, -2.0, -3.0, -0.5, -1.5];

#[test]
fn region_host_region_chain_runs_and_writes_a_plan() {
    let (mut c, dir) = build(&chain(), "chain");
    let out = c.run(&[PortData::F32(&X)]).unwrap();
    // Row 0: 2x = [1, 6, -2, 6, 4]: argmax 1 (first of the tie), top-2 = 6@1, 6@3.
    // Row 1: 2x = [-8, -4, -6, -1, -3]: argmax 3, top-2 = -1@3, -3@4.
    assert_eq!(ints(&c, 0), vec![1, 3]);
    assert_eq!(out[1], vec![7.0, 7.0, 0.0, -2.0]);
    assert_eq!(ints(&c, 2), vec![1, 3, 3, 4]);
    assert_eq!(c.outputs()[0].dtype, DType::Int32);
    let plan = c.plan.as_ref().expect("a plan");
    let kinds = plan.stage_kinds();
    assert_eq!(kinds, ["region", "host", "host", "region"]);
    assert!(dir.join(PLAN_FILE).is_file());
    assert_eq!(std::fs::read_dir(dir.join(REGIONS)).unwrap().count(), 2);

    let mut back = load_dir(&dir, Device::Reference, Precision::Fp16).unwrap();
    let again = back.run(&[PortData::F32(&X)]).unwrap();
    assert_eq!(again[1], out[1]);
    assert_eq!(ints(&back, 2), vec![1, 3, 3, 4]);
}

#[test]
fn a_graph_without_host_ops_is_one_program() {
    let x = input(&[2, 5]).unwrap();
    let (c, dir) = build(&[("y", x.relu().unwrap())], "single");
    assert!(c.plan.is_none());
    assert!(!dir.join(PLAN_FILE).exists() && dir.join("model.mil").is_file());
}

#[test]
fn sort_argsort_and_argmin_follow_numpy() {
    let x = input(&[1, 6]).unwrap();
    let (s, i) = x.sort_with_indices(1, true).unwrap();
    let outs = [
        ("asc", x.sort(-1, false).unwrap().add_scalar(0.0).unwrap()),
        ("desc", s),
        ("perm", i),
        ("amin", x.argmin(1, true).unwrap()),
        ("small", x.topk(3, 1, false, false).unwrap().1),
    ];
    let (mut c, _dir) = build(&outs, "sort");
    let data = [3.0, -1.0, 2.0, -1.0, 5.0, 2.0];
    let out = c.run(&[PortData::F32(&data)]).unwrap();
    assert_eq!(out[0], vec![-1.0, -1.0, 2.0, 2.0, 3.0, 5.0]);
    assert_eq!(out[1], vec![5.0, 3.0, 2.0, 2.0, -1.0, -1.0]);
    // Stable descending: equal values keep index order (np.argsort(-x, kind="stable")).
    assert_eq!(ints(&c, 2), vec![4, 0, 2, 5, 1, 3]);
    assert_eq!(ints(&c, 3), vec![1]);
    // The 3 smallest (-1@1, -1@3, 2@2) in index order (sorted=False).
    assert_eq!(ints(&c, 4), vec![1, 2, 3]);
}

#[test]
fn embedding_with_runtime_ids_and_its_range_error() {
    let ids = input_port(&[3], DType::Int32, Some("ids")).unwrap();
    let table = input(&[4, 2]).unwrap();
    let e = embedding(&ids, &table).unwrap().mul_scalar(10.0).unwrap();
    let (mut c, _dir) = build(&[("e", e)], "embed");
    let t = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5];
    let mut run = |ids: &[i32]| {
        c.loaded.set_input(0, PortData::I32(ids))?;
        c.loaded.set_input(1, PortData::F32(&t))?;
        c.loaded.execute()?;
        c.loaded.read_outputs()
    };
    // Rows 3, 0, -1 (= 3, NumPy take) times 10.
    assert_eq!(
        run(&[3, 0, -1]).unwrap()[0],
        vec![30.0, 35.0, 0.0, 5.0, 30.0, 35.0]
    );
    let err = run(&[1, i32::MAX, 0]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Value { .. }), "{err:?}");
    for needle in ["gather", "2147483647", "size 4", "stage 0"] {
        assert!(msg.contains(needle), "'{msg}' lacks '{needle}'");
    }
}

#[test]
fn int32_ports_cast_to_fp16_in_a_fused_region() {
    let ids = input_port(&[3], DType::Int32, None).unwrap();
    let y = ids.cast(DType::Fp16).unwrap().mul_scalar(0.5).unwrap();
    let (mut c, _dir) = build(&[("y", y)], "cast");
    assert!(c.plan.is_none());
    c.loaded
        .set_input(0, PortData::I32(&[-7, 2048, 65504]))
        .unwrap();
    c.loaded.execute().unwrap();
    assert_eq!(
        c.loaded.read_outputs().unwrap()[0],
        vec![-3.5, 1024.0, 32752.0]
    );
}

#[test]
fn int32_values_feed_only_cast_and_host_ops() {
    let ids = input_port(&[3], DType::Int32, None).unwrap();
    let err = ids.relu().unwrap_err();
    assert!(
        matches!(err, Error::DType { .. }) && err.to_string().contains("int32"),
        "{err}"
    );
    let x = input(&[2, 3]).unwrap();
    let err = x.topk(4, 1, true, true).unwrap_err();
    assert!(err.to_string().contains("k = 4"), "{err}");
}

fn corrupt(name: &str, edit: impl Fn(&std::path::Path)) -> Error {
    let (_, dir) = build(&chain(), name);
    edit(&dir);
    match load_dir(&dir, Device::Reference, Precision::Fp16) {
        Err(e) => e,
        Ok(_) => panic!("{name}: a corrupted plan loaded"),
    }
}

#[test]
fn corrupted_plans_are_rejected_before_anything_runs() {
    let plan = |d: &std::path::Path| d.join(PLAN_FILE);
    let e = corrupt("badjson", |d| {
        std::fs::write(plan(d), "{\"format\": ").unwrap()
    });
    assert!(
        matches!(e, Error::Format { .. }) && e.to_string().contains("plan.json"),
        "{e}"
    );
    let e = corrupt("noregion", |d| {
        let first = std::fs::read_dir(d.join(REGIONS))
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        std::fs::remove_dir_all(first.path()).unwrap();
    });
    assert!(matches!(e, Error::Io { .. } | Error::Format { .. }), "{e}");
    let e = corrupt("shape", |d| {
        let text = std::fs::read_to_string(plan(d)).unwrap();
        std::fs::write(
            plan(d),
            text.replacen(
                "\"shape\": [\n        2,\n        5\n      ]",
                "\"shape\": [\n        2,\n        6\n      ]",
                1,
            ),
        )
        .unwrap();
    });
    assert!(matches!(e, Error::Format { .. }), "{e}");
    let e = corrupt("region", |d| {
        let first = std::fs::read_dir(d.join(REGIONS))
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        std::fs::write(first.path().join("model.mil"), "garbage").unwrap();
    });
    assert!(matches!(e, Error::Format { .. }), "{e}");
}

/// x [1, 4] → region 0 (relu) → host sort(r) → region 1 reads the sort and r straight from
/// region 0 (an fp16 value crossing region → region) and computes the mask x > 0 itself.
fn adjacent() -> Tensor {
    let x = input(&[1, 4]).unwrap();
    let r = x.relu().unwrap();
    let positive = x.compare_scalar(aneforge::ops::elementwise::Compare::Greater, 0.0);
    let s = r.sort(1, true).unwrap();
    let picked = aneforge::select(&positive.unwrap(), &s, &x).unwrap();
    picked.add(&r).unwrap()
}

#[test]
fn region_outputs_and_bool_masks_feed_later_regions_on_both_precisions() {
    let xv = [0.5f32, -2.0, 3.0, 1.0];
    // r = [0.5, 0, 3, 1]; sort desc = [3, 1, 0.5, 0]; mask x > 0 = [1, 0, 1, 1];
    // select = [3, -2, 0.5, 0]; + r = [3.5, -2, 3.5, 1].
    let want = vec![3.5f32, -2.0, 3.5, 1.0];
    let (mut c, dir) = build(&[("y", adjacent())], "adjacent");
    let plan = c.plan.as_ref().unwrap();
    let kinds = plan.stage_kinds();
    assert_eq!(kinds, ["region", "host", "region"]);
    // Crossing: r and the sorted values (the permutation, which nothing reads, is not computed:
    // the stage is `sort_values`); the mask does not cross: a compare sinks into the region of
    // its first consumer (x is a plan input, read there).
    let mut cut = plan
        .values
        .iter()
        .filter(|v| v.name.starts_with("cut"))
        .map(|v| v.ty.dtype)
        .collect::<Vec<_>>();
    cut.sort_by_key(|d| d.to_string());
    assert_eq!(cut, [DType::Fp16, DType::Fp16]);
    assert_eq!(c.run(&[PortData::F32(&xv)]).unwrap()[0], want);
    assert_eq!(c.run(&[PortData::F32(&xv)]).unwrap()[0], want);
    let mut c32 = load_dir(&dir, Device::Reference, Precision::Fp32).unwrap();
    assert_eq!(c32.run(&[PortData::F32(&xv)]).unwrap()[0], want);
}

#[test]
fn plan_inputs_round_to_fp16_and_host_values_reach_the_next_region_exactly() {
    // 1/3 is rounded to fp16 when it enters the plan; take permutes; the region halves.
    let x = input(&[1, 3]).unwrap();
    let idx = input_port(&[3], DType::Int32, None).unwrap();
    let taken = x.take(&idx, 1).unwrap();
    let y = taken.mul_scalar(0.5).unwrap();
    let (mut c, _dir) = build(&[("y", y)], "inf");
    c.loaded
        .set_input(0, PortData::F32(&[60000.0, 1.0 / 3.0, 2.0]))
        .unwrap();
    c.loaded.set_input(1, PortData::I32(&[1, 0, 2])).unwrap();
    c.loaded.execute().unwrap();
    let third = half::f16::from_f32(1.0 / 3.0).to_f32();
    assert_eq!(
        c.loaded.read_outputs().unwrap()[0],
        vec![half::f16::from_f32(third * 0.5).to_f32(), 30000.0, 1.0]
    );
}

#[test]
#[cfg(feature = "cli")]
fn cli_run_writes_int32_outputs_as_int32_npy() {
    let (_, dir) = build(&chain(), "cli");
    let x = dir.join("x.npy");
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 5), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let pad = (10 + header.len() + 1).next_multiple_of(64) - (10 + header.len() + 1);
    let header = format!("{header}{}\n", " ".repeat(pad));
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    X.iter()
        .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes()));
    std::fs::write(&x, bytes).unwrap();
    let out = dir.join("out");
    let code = aneforge::cli::run_cli([
        "aneforge".to_string(),
        "run".into(),
        dir.display().to_string(),
        "--input".into(),
        format!("x0={}", x.display()),
        "--output-dir".into(),
        out.display().to_string(),
    ]);
    assert_eq!(code, 0);
    // The int32 output `idx` (top-2 positions per row, see the chain test) as NumPy `<i4`.
    let b = std::fs::read(out.join("idx.npy")).unwrap();
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let head = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    assert!(
        head.contains("'descr': '<i4'") && head.contains("(2, 2)"),
        "{head}"
    );
    let ints: Vec<i32> = b[10 + hlen..]
        .chunks_exact(4)
        .map(|w| i32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert_eq!(ints, [1, 3, 3, 4]);
    let f = std::fs::read(out.join("vals.npy")).unwrap();
    assert!(std::str::from_utf8(&f[10..64]).unwrap().contains("'<f4'"));
}

/// Ops run inside each plan stage on each of the calls `inputs` makes (ids, then x when given),
/// with each call's first output, and the stage names.
type StageRuns = (Vec<Vec<usize>>, Vec<Vec<f32>>, Vec<String>);

fn stage_ops_per_call(c: &mut Compiled, calls: &[(&[i32], Option<&[f32]>)]) -> StageRuns {
    use aneforge::exec::profile::{Profile, SpanKind};
    let (mut ops, mut outs, mut names) = (Vec::new(), Vec::new(), Vec::new());
    for (ids, x) in calls {
        let mut p = Profile::default();
        c.loaded.set_input(0, PortData::I32(ids)).unwrap();
        if let Some(x) = x {
            c.loaded.set_input(1, PortData::F32(x)).unwrap();
        }
        c.loaded.execute_profiled(&mut p).unwrap();
        outs.push(c.loaded.read_outputs().unwrap().remove(0));
        let stages: Vec<&aneforge::exec::profile::Span> = p
            .spans
            .iter()
            .filter(|s| s.kind == SpanKind::Stage)
            .collect();
        names = stages.iter().map(|s| s.name.clone()).collect();
        let inside = |k| {
            p.spans
                .iter()
                .filter(|s| s.stage == Some(k) && s.kind != SpanKind::Stage)
                .count()
        };
        ops.push((0..stages.len()).map(inside).collect());
    }
    (ops, outs, names)
}

const TABLE: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5];

/// 2·TABLE[id] row by row for `ids`, plus `add` [.., 2] cycled or per element.
fn doubled_rows(ids: &[i32], add: &[f32]) -> Vec<f32> {
    let rows = ids
        .iter()
        .flat_map(|&i| (0..2).map(move |j| 2.0 * TABLE[2 * i as usize + j]));
    rows.zip(add.iter().cycle()).map(|(v, a)| v + a).collect()
}

fn doubled_table() -> Tensor {
    let t = aneforge::constant("t", aneforge::HostArray::f32(&[4, 2], &TABLE)).unwrap();
    t.mul_scalar(2.0).unwrap()
}

/// ids → gather rows of a constant table·2 (host) → + a constant bias·3 (region): region 0
/// reads no input, so it runs on the first call only.
#[test]
fn a_region_of_constants_runs_on_the_first_call_only() {
    let bias = aneforge::constant("b", aneforge::HostArray::f32(&[2], &[0.25, -4.0])).unwrap();
    let ids = input_port(&[3], DType::Int32, Some("ids")).unwrap();
    let e = embedding(&ids, &doubled_table()).unwrap();
    let y = e.add(&bias.mul_scalar(3.0).unwrap()).unwrap();
    let (mut c, _dir) = build(&[("y", y)], "constant-region");
    let calls: [(&[i32], Option<&[f32]>); 3] =
        [(&[3, 0, 1], None), (&[2, 2, 0], None), (&[1, 3, 3], None)];
    let (ops, outs, names) = stage_ops_per_call(&mut c, &calls);
    assert_eq!(names[0], "stage 0 (constant region)");
    assert_eq!(names.len(), 3);
    for ((ids, _), out) in calls.iter().zip(&outs) {
        assert_eq!(*out, doubled_rows(ids, &[0.75, -12.0]), "ids {ids:?}");
    }
    assert!(ops[0][0] > 0 && ops[0][2] > 0, "{ops:?}");
    assert_eq!((ops[1][0], ops[2][0]), (0, 0), "{ops:?}");
    assert!(ops[1][2] > 0 && ops[2][2] > 0, "{ops:?}");
}

/// Region 0 both computes from an input (relu(x)) and exports a constant-only value (the
/// gathered table·2): the constant part becomes a region of its own, run once; relu every call.
#[test]
fn constants_leaving_a_region_that_reads_inputs_are_split_off() {
    let ids = input_port(&[3], DType::Int32, Some("ids")).unwrap();
    let x = input(&[3, 2]).unwrap();
    let y = embedding(&ids, &doubled_table())
        .unwrap()
        .add(&x.relu().unwrap())
        .unwrap();
    let (mut c, _dir) = build(&[("y", y)], "constant-split");
    let kinds = c.plan.as_ref().unwrap().stage_kinds();
    assert_eq!(kinds, ["region", "region", "host", "region"]);
    let xs = [
        [1.0f32, -1.0, 2.0, -2.0, 0.5, 3.0],
        [-1.0, 4.0, 0.25, 1.0, -3.0, 2.0],
    ];
    let calls: [(&[i32], Option<&[f32]>); 2] =
        [(&[0, 3, 2], Some(&xs[0])), (&[3, 3, 1], Some(&xs[1]))];
    let (ops, outs, names) = stage_ops_per_call(&mut c, &calls);
    assert_eq!(names[0], "stage 0 (constant region)");
    for (((ids, _), x), out) in calls.iter().zip(&xs).zip(&outs) {
        let relu: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
        let want: Vec<f32> = doubled_rows(ids, &[0.0])
            .iter()
            .zip(&relu)
            .map(|(a, b)| a + b)
            .collect();
        assert_eq!(*out, want, "ids {ids:?}");
    }
    assert!(ops[0][0] > 0 && ops[1][0] == 0, "{ops:?}");
    assert!(ops[0][1] > 0 && ops[1][1] > 0, "{ops:?}");
}
