//! The quirk rewrites (passes/quirks.rs): for each, a MIL snapshot of the rewritten program and
//! the reference executor's outputs with and without the rewrite (exact unless a tolerance is stated).

mod common;

use aneforge::exec::reference::Reference;
use aneforge::ops::conv::ConvOptions;
use aneforge::passes::quirks::quirks;
use aneforge::targets::Family;
use aneforge::{
    compile, conv2d, input, CompileOptions, Device, Executor, Graph, PortData, Precision, Program,
    Tensor,
};
use common::{data, W};

/// The program of `outputs` before and after the rewrite for `family`, and the warnings.
fn rewrite(outputs: &[Tensor], family: Option<Family>) -> (Program, Program, Vec<String>) {
    let named: Vec<(Option<String>, Tensor)> = outputs.iter().map(|t| (None, t.clone())).collect();
    let g = Graph::from_outputs(&named).unwrap();
    let r = quirks(&g, family).unwrap();
    (
        Program::lower(g).unwrap(),
        Program::lower(r.graph).unwrap(),
        r.warnings,
    )
}

/// Every output of `p` on the reference executor for `feeds` (one per input, in order).
fn run(p: &Program, feeds: &[&[f32]], precision: Precision) -> Vec<Vec<f32>> {
    let mut l = Reference
        .load(p, std::path::Path::new("."), precision)
        .unwrap();
    for (i, f) in feeds.iter().enumerate() {
        l.set_input(i, PortData::F32(f)).unwrap();
    }
    l.execute().unwrap();
    l.read_outputs().unwrap()
}

/// Assert both programs give bit-identical outputs on `feeds` (fp16 contract).
fn assert_same_bits(before: &Program, after: &Program, feeds: &[&[f32]]) {
    let (a, b) = (
        run(before, feeds, Precision::Fp16),
        run(after, feeds, Precision::Fp16),
    );
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        let diff = x
            .iter()
            .zip(y)
            .position(|(p, q)| p.to_bits() != q.to_bits());
        assert!(
            diff.is_none(),
            "output {k} element {diff:?}: {:?} vs {:?}",
            diff.map(|i| x[i]),
            diff.map(|i| y[i])
        );
    }
}

/// `n` values spread evenly over [lo, hi].
fn ramp(n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n)
        .map(|i| lo + (hi - lo) * i as f32 / (n - 1) as f32)
        .collect()
}

#[test]
fn round_is_guarded_past_1024() {
    let x = input(&[2, 3001]).unwrap();
    let (before, after, _) = rewrite(&[x.round().unwrap()], None);
    insta::assert_snapshot!("round", after.mil);
    // Halves below 1024 (ties), and every magnitude up to 4000 (fp16 integers past 1024).
    let mut feed = ramp(3001, -1500.5, 1500.5);
    feed.extend(ramp(3001, -4000.0, 4000.0));
    assert_same_bits(&before, &after, &[&feed]);
    // Rewriting again leaves the guarded program as it is.
    let again = quirks(&after.graph, None).unwrap();
    assert_eq!(Program::lower(again.graph).unwrap().mil, after.mil);
}

#[test]
fn softplus_is_split_at_10() {
    let x = input(&[1, 6001]).unwrap();
    let (before, after, _) = rewrite(&[x.softplus().unwrap()], None);
    insta::assert_snapshot!("softplus", after.mil);
    let feed = ramp(6001, -30.0, 60.0);
    // Measured: identical after fp16 rounding over [-30, 60] (the split form is off by at most 4.6e-5 before rounding).
    assert_same_bits(&before, &after, &[&feed]);
    let got = run(&after, &[&feed], Precision::Fp32).remove(0);
    for (&v, &y) in feed.iter().zip(&got) {
        let want = (v as f64).exp().ln_1p();
        assert!(
            (y as f64 - want).abs() <= 5e-5 * want.max(1.0),
            "softplus({v}) = {y}, want {want}"
        );
    }
    let again = quirks(&after.graph, None).unwrap();
    assert_eq!(
        Program::lower(again.graph).unwrap().mil,
        after.mil,
        "the split form is left alone"
    );
}

#[test]
fn scalar_mul_after_rounding_uses_a_full_shape_constant() {
    let x = input(&[3, 5]).unwrap();
    let outs = [
        x.floor().unwrap().mul_scalar(2.5).unwrap(),
        x.ceil().unwrap().mul_scalar(-0.75).unwrap(),
        x.round().unwrap().mul_scalar(3.0).unwrap(),
    ];
    let (before, after, _) = rewrite(&outs, None);
    insta::assert_snapshot!("scalar_mul_after_rounding", after.mil);
    assert_eq!(after.mil.matches("BLOBFILE").count(), 3, "{}", after.mil);
    let feed: Vec<f32> = data(15, 1).iter().map(|v| v * 2000.0).collect();
    assert_same_bits(&before, &after, &[&feed]);
}

#[test]
fn mul_by_zero_after_a_reduction_is_a_subtraction() {
    let x = input(&[4, 7]).unwrap();
    let zero = x.sum(&[-1], true).unwrap().mul_scalar(0.0).unwrap();
    let (before, after, _) = rewrite(&[zero.add(&x).unwrap()], None);
    insta::assert_snapshot!("mul_by_zero_after_reduce", after.mil);
    assert!(
        after.mil.contains("sub(x = ") && !after.mil.contains("mul("),
        "{}",
        after.mil
    );
    let feed: Vec<f32> = data(28, 2).iter().map(|v| v * 8.0).collect();
    assert_same_bits(&before, &after, &[&feed]);
    // A zero multiplier on anything else is kept.
    let (_, kept, _) = rewrite(&[x.mul_scalar(0.0).unwrap()], None);
    assert!(kept.mil.contains("mul("), "{}", kept.mil);
}

#[test]
fn an_output_that_is_an_input_is_multiplied_by_one() {
    let x = input(&[2, 3]).unwrap();
    let (_, after, _) = rewrite(&[x], None);
    insta::assert_snapshot!("empty_program", after.mil);
    let feed = data(6, 3);
    assert_eq!(
        run(&after, &[&feed], Precision::Fp16)[0],
        feed.iter()
            .map(|&v| half::f16::from_f32(v).to_f32())
            .collect::<Vec<_>>()
    );
}

#[test]
fn square_is_a_product() {
    let x = input(&[2, 200]).unwrap();
    let (_, after, _) = rewrite(&[x.square().unwrap().sigmoid().unwrap()], None);
    insta::assert_snapshot!("square", after.mil);
    assert!(
        after.mil.contains("mul(x = x0, y = x0)") && !after.mil.contains("square("),
        "{}",
        after.mil
    );
    let feed: Vec<f32> = data(400, 4)
        .iter()
        .map(|v| half::f16::from_f32(v * 3.0).to_f32())
        .collect();
    let got = run(&after, &[&feed], Precision::Fp16).remove(0);
    for (&v, &y) in feed.iter().zip(&got) {
        let sq = half::f16::from_f32(v * v).to_f64();
        let want = 1.0 / (1.0 + (-sq).exp());
        assert!(
            (y as f64 - want).abs() <= 1e-3,
            "sigmoid({v}²) = {y}, want {want}"
        );
    }
}

#[test]
fn layer_norm_affine_moves_after_the_reshape_pair() {
    let x = input(&[4, 6, 8]).unwrap();
    let beta = input(&[8]).unwrap(); // one non-constant affine term: the failing case
    let gamma = W::new(&[8], 5);
    let y = x
        .reshape(&[24, 8])
        .unwrap()
        .layer_norm(Some(&gamma.tensor()), Some(&beta), 1e-5)
        .unwrap()
        .reshape(&[4, 6, 8])
        .unwrap();
    let (before, after, _) = rewrite(&[y], None);
    insta::assert_snapshot!("layer_norm_affine", after.mil);
    let last_reshape = after.mil.rfind("reshape(").unwrap();
    assert!(
        after.mil[last_reshape..].contains("mul(") && after.mil[last_reshape..].contains("add("),
        "affine after the reshape: {}",
        after.mil
    );
    let (fx, fb) = (data(192, 6), data(8, 7));
    assert_same_bits(&before, &after, &[&fx, &fb]);
}

#[test]
fn width_offset_slices_leave_the_last_axis_on_a13_a14() {
    let x = input(&[3, 5, 20]).unwrap();
    let s = x.slice_by_size(&[0, 1, 4], &[3, 3, 10]).unwrap();
    for family in [Family::A13, Family::A14] {
        let (before, after, warnings) = rewrite(std::slice::from_ref(&s), Some(family));
        assert!(warnings.is_empty(), "{warnings:?}");
        insta::assert_snapshot!(format!("width_slice_{family}"), after.mil);
        assert!(
            after.mil.contains("val = tensor<int32, [3]>([0, 1, 0])")
                && after.mil.contains("val = tensor<int32, [3]>([0, 4, 0])"),
            "{}",
            after.mil
        );
        assert_same_bits(&before, &after, &[&data(300, 8)]);
    }
    for family in [None, Some(Family::A15), Some(Family::A16)] {
        let (before, after, warnings) = rewrite(std::slice::from_ref(&s), family);
        assert_eq!(
            (after.mil, warnings.len()),
            (before.mil, 0),
            "{family:?} keeps the slice"
        );
    }
    let (before, after, warnings) = rewrite(
        &[input(&[40]).unwrap().slice_by_size(&[3], &[7]).unwrap()],
        Some(Family::A13),
    );
    assert_eq!(after.mil, before.mil, "a rank-1 slice cannot move");
    assert!(
        warnings.len() == 1 && warnings[0].contains("on A13") && warnings[0].contains("4094"),
        "{warnings:?}"
    );
}

#[test]
fn concat_of_width_slices_is_reported_on_a15() {
    let x = input(&[2, 16]).unwrap();
    let (a, b) = (
        x.slice_by_size(&[0, 2], &[2, 4]).unwrap(),
        x.slice_by_size(&[0, 9], &[2, 4]).unwrap(),
    );
    let y = aneforge::concat(&[a, b], -1).unwrap();
    let (_, _, warnings) = rewrite(std::slice::from_ref(&y), Some(Family::A15));
    assert!(
        warnings.len() == 1
            && warnings[0].contains("joins 2 slices")
            && warnings[0].contains("A15"),
        "{warnings:?}"
    );
    assert!(rewrite(&[y], Some(Family::A16)).2.is_empty());
}

#[test]
fn strided_patch_conv_becomes_space_to_depth_and_a_1x1_conv() {
    let x = input(&[1, 3, 32, 30]).unwrap(); // 30 is not a multiple of 4: the last two columns are cropped
    let (w, b) = (W::new(&[8, 3, 4, 4], 9), W::new(&[8], 10));
    let opts = ConvOptions {
        stride: [4, 4],
        ..ConvOptions::default()
    };
    let y = conv2d(&x, w.arr(), Some(b.arr()), opts).unwrap();
    let (before, after, _) = rewrite(&[y], None);
    insta::assert_snapshot!("patch_conv", after.mil);
    assert!(
        after.mil.contains("space_to_depth(")
            && after.mil.contains("tensor<fp16, [8, 48, 1, 1]>")
            && after.mil.contains("[1, 8, 8, 7]> y0 = conv("),
        "{}",
        after.mil
    );
    let feed: Vec<f32> = data(3 * 32 * 30, 11).iter().map(|v| v * 4.0).collect();
    // fp32: the same products summed in another order.
    let (a, c) = (
        run(&before, &[&feed], Precision::Fp32).remove(0),
        run(&after, &[&feed], Precision::Fp32).remove(0),
    );
    let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
    let err = a
        .iter()
        .zip(&c)
        .fold(0f32, |m, (p, q)| m.max((p - q).abs()));
    assert!(
        err <= 1e-5 * scale,
        "fp32: max |diff| {err} (max |y| {scale})"
    );
    // fp16: at most one fp16 ulp of the largest output apart.
    let (a, c) = (
        run(&before, &[&feed], Precision::Fp16).remove(0),
        run(&after, &[&feed], Precision::Fp16).remove(0),
    );
    let err = a
        .iter()
        .zip(&c)
        .fold(0f32, |m, (p, q)| m.max((p - q).abs()));
    assert!(
        err <= scale / 1024.0,
        "fp16: max |diff| {err} (max |y| {scale})"
    );
    // Padded, dilated or grouped convs and strides that differ from the kernel are kept.
    let pad = ConvOptions {
        stride: [4, 4],
        pad: [1, 1, 1, 1],
        ..ConvOptions::default()
    };
    let (before, after, _) = rewrite(&[conv2d(&x, w.arr(), None, pad).unwrap()], None);
    assert_eq!(before.mil, after.mil);
    // Cin·P² = 1100·64 channels after space_to_depth would exceed 65536: kept.
    let wide = W::new(&[1, 1100, 8, 8], 12);
    let opts = ConvOptions {
        stride: [8, 8],
        ..ConvOptions::default()
    };
    let (before, after, _) = rewrite(
        &[conv2d(&input(&[1, 1100, 8, 8]).unwrap(), wide.arr(), None, opts).unwrap()],
        None,
    );
    assert_eq!(before.mil, after.mil);
}

#[test]
fn compile_applies_the_rewrites_except_in_fp32() {
    let x = || input(&[2, 8]).unwrap();
    let dir = std::env::temp_dir().join(format!("aneforge-quirks-{}", std::process::id()));
    let opts = CompileOptions {
        device: Device::Reference,
        build_dir: Some(dir.clone()),
        target: Some("h13".into()),
        ..Default::default()
    };
    let c = compile(&[(None, x().softplus().unwrap())], &opts).unwrap();
    assert!(
        c.program.mil.contains("minimum(") && c.program.mil.contains("relu("),
        "{}",
        c.program.mil
    );
    let fp32 = CompileOptions {
        precision: Precision::Fp32,
        ..opts
    };
    let c = compile(&[(None, x().softplus().unwrap())], &fp32).unwrap();
    assert!(!c.program.mil.contains("minimum("), "{}", c.program.mil);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn only_the_quirky_corpus_cases_change() {
    for (name, t) in common::op_cases() {
        let g = Graph::from_outputs(&[(None, t)]).unwrap();
        for family in [None, Some(Family::A13), Some(Family::A16)] {
            let r = quirks(&g, family).unwrap();
            assert_eq!(
                r.graph != g,
                ["round", "softplus"].contains(&name),
                "{name} on {family:?}"
            );
            assert!(r.warnings.is_empty(), "{name}: {:?}", r.warnings);
        }
    }
}
