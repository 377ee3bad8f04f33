//! Segmented plans, round 3: the reference hand-off (values pass between regions and host
//! stages as f32 value buffers, with the fp16 rounding kept where a host op computes), bool
//! values read by regions of two levels, int32 inputs returned as outputs, and the routes saved
//! in `plan.json`. Oracles are hand-computed values and plain loops over the test's data.

use std::path::Path;

mod common;

use aneforge::exec::reference::handoff::ref_program;
use aneforge::graph::build::indexing::cumsum;
use aneforge::ops::elementwise::Compare;
use aneforge::options::Route;
use aneforge::plan::file::PLAN_FILE;
use aneforge::{
    compile, input, input_port, load_dir, select, CompileOptions, Compiled, DType, Device,
    PortData, Precision, Tensor,
};
use common::Scratch;

/// Compile `outs` into a fresh scratch directory (removed when the guard drops).
fn build(
    outs: &[(&str, Tensor)],
    name: &str,
    route: Route,
    precision: Precision,
) -> (Compiled, Scratch) {
    let dir = Scratch::new(&format!("seg3-{name}"));
    let named: Vec<(Option<String>, Tensor)> = outs
        .iter()
        .map(|(n, t)| (Some(n.to_string()), t.clone()))
        .collect();
    let opts = CompileOptions {
        device: Device::Reference,
        build_dir: Some(dir.to_path_buf()),
        route,
        precision,
        ..Default::default()
    };
    (compile(&named, &opts).unwrap(), dir)
}

/// y = 3 x on a [4] fp16 input, fp16 precision.
fn times_three(name: &str) -> (Compiled, Scratch) {
    let x = input(&[4]).unwrap();
    let y = x.mul_scalar(3.0).unwrap();
    build(&[("y", y)], name, Route::Auto, Precision::Fp16)
}

/// y = cast(ids) on a [3] int32 input, fp16 precision.
fn int32_cast(name: &str) -> (Compiled, Scratch) {
    let ids = input_port(&[3], DType::Int32, None).unwrap();
    let y = ids.cast(DType::Fp16).unwrap();
    build(&[("y", y)], name, Route::Auto, Precision::Fp16)
}

fn f16(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

#[test]
fn a_host_result_is_rounded_to_fp16_before_the_next_region() {
    // cumsum([1, 2^-11]) = [1, 1 + 2^-11]; 1 + 2^-11 is halfway between fp16 1 and 1 + 2^-10
    // and rounds to even (1). Unrounded, (y - 1) would keep 2^-11.
    let x = input(&[1, 2]).unwrap();
    let y = cumsum(&x.mul_scalar(1.0).unwrap(), 1, false, false)
        .unwrap()
        .add_scalar(-1.0)
        .unwrap();
    let tiny = 2f32.powi(-11);
    for (precision, want) in [(Precision::Fp16, 0.0), (Precision::Fp32, tiny)] {
        let (mut c, _dir) = build(&[("y", y.clone())], "round", Route::Auto, precision);
        let got = c.run(&[PortData::F32(&[1.0, tiny])]).unwrap();
        assert_eq!(got[0], [0.0, want], "{precision:?}");
    }
}

#[test]
fn region_to_region_and_moved_values_match_the_single_program_bit_for_bit() {
    // relu(0.5 x) + 1 three times, with and without identity takes between the blocks: takes
    // only move fp16 values, so the plan and the one program agree exactly.
    let n = 4096;
    let xv: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 1001) as f32 - 500.0) / 7.0)
        .collect();
    let idv: Vec<i32> = (0..n as i32).collect();
    for precision in [Precision::Fp16, Precision::Fp32] {
        let chain = |with_take: bool| {
            let x = input(&[1, n]).unwrap();
            let ids = input_port(&[n], DType::Int32, None).unwrap();
            let mut y = x.clone();
            for _ in 0..3 {
                y = y
                    .mul_scalar(0.5)
                    .unwrap()
                    .relu()
                    .unwrap()
                    .add_scalar(1.0)
                    .unwrap();
                if with_take {
                    y = y.take(&ids, 1).unwrap();
                }
            }
            (y.mul_scalar(1.0).unwrap(), ids)
        };
        let (plain, _) = chain(false);
        let (cut, _) = chain(true);
        let (mut single, _dir) = build(&[("y", plain)], "single", Route::Auto, precision);
        let (mut plan, _dir) = build(&[("y", cut)], "plan", Route::Auto, precision);
        assert_eq!(plan.plan.as_ref().unwrap().stages.len(), 7);
        let want = single.run(&[PortData::F32(&xv)]).unwrap();
        for _ in 0..2 {
            let got = plan
                .run(&[PortData::F32(&xv), PortData::I32(&idv)])
                .unwrap();
            assert_eq!(got, want, "{precision:?}");
        }
        // The oracle: the same three blocks in a loop, rounded per op in fp16 mode.
        let r = |v: f32| {
            if precision == Precision::Fp16 {
                f16(v)
            } else {
                v
            }
        };
        let mut v: Vec<f32> = xv.iter().map(|&a| r(a)).collect();
        for _ in 0..3 {
            v = v.iter().map(|&a| r(r(r(a * 0.5).max(0.0)) + 1.0)).collect();
        }
        assert_eq!(want[0], v);
    }
}

#[test]
fn the_hand_off_api_feeds_value_buffers_and_lazy_outputs_read_the_same() {
    let (mut c, _dir) = times_three("api");
    let r = ref_program(c.loaded.as_mut()).expect("a reference program");
    r.lazy_output(0);
    r.handoff_input(0)
        .unwrap()
        .copy_from_slice(&[1.0, 0.5, -2.0, 0.25]);
    aneforge::Loaded::execute(r).unwrap();
    let want = [3.0f32, 1.5, -6.0, 0.75];
    assert_eq!(c.loaded.read_outputs().unwrap()[0], want);
    assert_eq!(
        ref_program(c.loaded.as_mut())
            .unwrap()
            .handoff_output(0)
            .unwrap(),
        want
    );
    match c.loaded.output_view(0).unwrap() {
        aneforge::exec::PortView::F16(v) => {
            assert_eq!(v.iter().map(|h| h.to_f32()).collect::<Vec<_>>(), want)
        }
        _ => panic!("fp16 port"),
    }
    // A later set_input goes through the port again (the hand-off flag lasts one execute).
    c.loaded
        .set_input(0, PortData::F32(&[1.0, 1.0, 1.0, 1.0]))
        .unwrap();
    c.loaded.execute().unwrap();
    assert_eq!(c.loaded.read_outputs().unwrap()[0], [3.0; 4]);
    // int32 ports have no hand-off.
    let (mut ci, _dir) = int32_cast("api32");
    let e = ref_program(ci.loaded.as_mut())
        .unwrap()
        .handoff_input(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("hand-offs are fp16 values only"), "{e}");
}

#[test]
fn values_lent_to_a_region_stay_readable_by_every_later_reader() {
    // Region 0: a = 0.5 x + 1; host 1: h = take(a, reversed); host 2: s = cumsum(a); region 3:
    // b = 2 h + a, y = s + b (h, a and s lent to it by swapping buffers). a, h and b are plan
    // outputs too, read after the lends. Small halves: every value is exact in fp16, so the
    // oracle is the plain loop.
    let n = 64;
    let x = input(&[1, n]).unwrap();
    let ids = input_port(&[n], DType::Int32, None).unwrap();
    let a = x.mul_scalar(0.5).unwrap().add_scalar(1.0).unwrap();
    let h = a.take(&ids, 1).unwrap();
    let b = h.mul_scalar(2.0).unwrap().add(&a).unwrap();
    let s = cumsum(&a, 1, false, false).unwrap();
    let y = s.add(&b).unwrap();
    let xv: Vec<f32> = (0..n).map(|i| (i % 9) as f32 - 4.0).collect();
    let idv: Vec<i32> = (0..n as i32).rev().collect();
    let av: Vec<f32> = xv.iter().map(|v| 0.5 * v + 1.0).collect();
    let hv: Vec<f32> = idv.iter().map(|&i| av[i as usize]).collect();
    let bv: Vec<f32> = hv.iter().zip(&av).map(|(h, a)| 2.0 * h + a).collect();
    let sv: Vec<f32> = av
        .iter()
        .scan(0.0, |t, a| Some(*t + a).inspect(|v| *t = *v))
        .collect();
    let yv: Vec<f32> = sv.iter().zip(&bv).map(|(s, b)| s + b).collect();
    for precision in [Precision::Fp16, Precision::Fp32] {
        let outs = [
            ("a", a.clone()),
            ("h", h.clone()),
            ("b", b.clone()),
            ("y", y.clone()),
        ];
        let (mut c, _dir) = build(&outs, "lend", Route::Auto, precision);
        let kinds = c.plan.as_ref().unwrap().stage_kinds();
        assert_eq!(kinds, ["region", "host", "host", "region"]);
        for _ in 0..3 {
            let got = c.run(&[PortData::F32(&xv), PortData::I32(&idv)]).unwrap();
            assert_eq!(got, [&av[..], &hv, &bv, &yv], "{precision:?}");
        }
    }
}

#[test]
fn swapping_a_value_buffer_checks_the_port_and_the_length() {
    let (mut c, _dir) = times_three("swap");
    let r = ref_program(c.loaded.as_mut()).expect("a reference program");
    r.lazy_output(0);
    let mut v = vec![1.0f32, 0.5, -2.0, 0.25];
    r.swap_input(0, &mut v, true).unwrap();
    aneforge::Loaded::execute(r).unwrap();
    r.swap_input(0, &mut v, false).unwrap();
    assert_eq!(v, [1.0, 0.5, -2.0, 0.25], "the lent values come back");
    assert_eq!(c.loaded.read_outputs().unwrap()[0], [3.0, 1.5, -6.0, 0.75]);
    let r = ref_program(c.loaded.as_mut()).unwrap();
    let e = r.swap_input(0, &mut vec![0.0; 3], true).unwrap_err();
    assert!(
        matches!(e, aneforge::Error::Shape { .. }) && e.to_string().contains("3 values"),
        "{e}"
    );
    let e = r.swap_input(1, &mut vec![0.0; 4], true).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    // An int32 port has no f32 value to lend.
    let (mut ci, _dir) = int32_cast("swap32");
    let e = ref_program(ci.loaded.as_mut())
        .unwrap()
        .swap_input(0, &mut vec![0.0; 3], true)
        .unwrap_err();
    assert!(
        e.to_string().contains("hand-offs are fp16 values only"),
        "{e}"
    );
}

#[test]
fn a_mask_read_at_two_levels_is_recomputed_and_never_crosses() {
    // m = x > 0 selects after the first sort (level 1) and after the second (level 2).
    let x = input(&[1, 4]).unwrap();
    let m = x.compare_scalar(Compare::Greater, 0.0).unwrap();
    let a = select(&m, &x.sort(1, true).unwrap(), &x).unwrap();
    let b = select(&m, &a.sort(1, false).unwrap(), &a).unwrap();
    let (mut c, _dir) = build(&[("y", b)], "mask", Route::Auto, Precision::Fp16);
    let plan = c.plan.as_ref().unwrap();
    assert!(plan.values.iter().all(|v| v.ty.dtype != DType::Bool));
    let kinds = plan.stage_kinds();
    assert_eq!(kinds, ["host", "region", "host", "region"]);
    // x = [2, -1, 3, -4]: sort desc [3, 2, -1, -4] → a = [3, -1, -1, -4];
    // sort asc of a [-4, -1, -1, 3] → b = [-4, -1, -1, -4].
    let got = c.run(&[PortData::F32(&[2.0, -1.0, 3.0, -4.0])]).unwrap();
    assert_eq!(got[0], [-4.0, -1.0, -1.0, -4.0]);
}

#[test]
fn an_int32_input_is_returned_as_an_output() {
    let x = input(&[3]).unwrap();
    let ids = input_port(&[3], DType::Int32, Some("ids")).unwrap();
    let (mut c, _dir) = build(
        &[("ids_out", ids.clone()), ("y", x.mul_scalar(2.0).unwrap())],
        "ints",
        Route::Auto,
        Precision::Fp16,
    );
    let idv = [7, -3, 123456];
    c.run(&[PortData::F32(&[1.0, 2.0, 3.0]), PortData::I32(&idv)])
        .unwrap();
    let mut got = vec![0; 3];
    c.loaded.read_output_i32(0, &mut got).unwrap();
    assert_eq!(got, idv);
    assert_eq!(c.loaded.read_outputs().unwrap()[1], [2.0, 4.0, 6.0]);
    // Returned twice: each output is its own exact copy.
    let (mut twice, _dir) = build(
        &[("a", ids.clone()), ("b", ids)],
        "ints2",
        Route::Auto,
        Precision::Fp16,
    );
    twice.run(&[PortData::I32(&idv)]).unwrap();
    for k in 0..2 {
        twice.loaded.read_output_i32(k, &mut got).unwrap();
        assert_eq!(got, idv);
    }
}

fn rewrite(path: &Path, f: impl Fn(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, f(text)).unwrap();
}

#[test]
fn routes_are_saved_in_the_plan_and_format_1_still_loads() {
    let x = input(&[2, 8]).unwrap();
    let outs = [
        ("m", x.flatten().unwrap()),
        ("s", x.sort(1, false).unwrap()),
    ];
    let (c, _dir) = build(&outs, "routes", Route::Host, Precision::Fp16);
    let want: Vec<String> = c.routes.iter().map(|r| r.to_string()).collect();
    assert_eq!(want, ["kept on host: flatten (route=\"host\")"]);
    let dir = c.dir.clone();
    let text = std::fs::read_to_string(dir.join(PLAN_FILE)).unwrap();
    assert!(text.contains("\"format\": \"aneforge-plan-2\""), "{text}");
    let back = load_dir(&dir, Device::Reference, Precision::Fp16).unwrap();
    let got: Vec<String> = back.routes.iter().map(|r| r.to_string()).collect();
    assert_eq!(got, want);
    // A format-1 file (written before routes were saved) loads with no routes...
    let plan = dir.join(PLAN_FILE);
    rewrite(&plan, |t| {
        let start = t.find(",\n  \"routes\"").unwrap();
        let end = t.rfind('}').unwrap();
        format!("{}\n{}", &t[..start], &t[end..]).replace("aneforge-plan-2", "aneforge-plan-1")
    });
    let old = load_dir(&dir, Device::Reference, Precision::Fp16).unwrap();
    assert!(old.routes.is_empty());
    // ... and a format-1 file listing routes, or an unknown route mode, is refused by name.
    rewrite(&plan, |_| {
        text.replace("aneforge-plan-2", "aneforge-plan-1")
    });
    let e = load_dir(&dir, Device::Reference, Precision::Fp16)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("format 'aneforge-plan-1' has no routes"), "{e}");
    rewrite(&plan, |_| {
        text.replace("\"mode\": \"host\"", "\"mode\": \"gpu\"")
    });
    let e = load_dir(&dir, Device::Reference, Precision::Fp16)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("route of 'flatten'") && e.contains("\"gpu\""),
        "{e}"
    );
}

#[test]
#[cfg(feature = "cli")]
fn aneforge_plan_prints_the_saved_routes() {
    let x = input(&[2, 8]).unwrap();
    let outs = [
        ("m", x.flatten().unwrap()),
        ("s", x.sort(1, false).unwrap()),
    ];
    let (c, _dir) = build(&outs, "cliroutes", Route::Host, Precision::Fp16);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aneforge"))
        .args(["plan", &c.dir.display().to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("route: kept on host: flatten (route=\"host\")"),
        "{text}"
    );
}
