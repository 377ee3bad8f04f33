//! Issue 16 reproducers: each former panic, abort or wrapped value is now the right answer or a
//! typed error naming the tensor, shape and limit. Expected values are closed forms worked by
//! hand in the comments, never outputs of the code under test.

use std::path::Path;

use aneforge::exec::reference::Reference;
use aneforge::limits::Limits;
use aneforge::ops::conv::ConvOptions;
use aneforge::{
    conv2d, dynamic_conv, input, Error, Executor, Graph, HostArray, PortData, Precision, Program,
    Tensor,
};

/// Runs `out` on the reference executor with `feeds` (one per input, creation order).
fn run(out: &Tensor, feeds: &[&[f32]]) -> Vec<f32> {
    let p = Program::lower(Graph::from_outputs(&[(None, out.clone())]).unwrap()).unwrap();
    let mut l = Reference.load(&p, Path::new("."), Precision::Fp16).unwrap();
    for (i, f) in feeds.iter().enumerate() {
        l.set_input(i, PortData::F32(f)).unwrap();
    }
    l.execute().unwrap();
    let mut o = vec![0.0; out.shape().iter().product()];
    l.read_output(0, &mut o).unwrap();
    o
}

fn opts(pad: [usize; 4], dilation: [usize; 2], stride: [usize; 2]) -> ConvOptions {
    ConvOptions {
        stride,
        pad,
        dilation,
        groups: 1,
    }
}

#[test]
fn dilated_conv_with_large_right_padding_runs() {
    // x = [1, 2, 3, 4], kernel [1, 1] at dilation 5, right pad 5: out[o] = x[o] + x[o + 5], and
    // x[o + 5] is always padding, so out = x (4 outputs: (4 + 5 − 6) / 1 + 1).
    let x = input(&[1, 1, 1, 4]).unwrap();
    let y = conv2d(
        &x,
        HostArray::f32(&[1, 1, 1, 2], &[1.0, 1.0]),
        None,
        opts([0, 0, 0, 5], [1, 5], [1, 1]),
    )
    .unwrap();
    assert_eq!(run(&y, &[&[1.0, 2.0, 3.0, 4.0]]), [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn conv_taps_wholly_inside_padding_read_zeros() {
    // 1×1 input, 5×5 ones kernel, pad 2: only the centre tap reads x, so out = x.
    let x = input(&[1, 1, 1, 1]).unwrap();
    let y = conv2d(
        &x,
        HostArray::f32(&[1, 1, 5, 5], &[1.0; 25]),
        None,
        opts([2; 4], [1, 1], [1, 1]),
    )
    .unwrap();
    assert_eq!(run(&y, &[&[3.0]]), [3.0]);
    // x [1, 1, 4, 1] = [1, 2, 3, 4], kernel (3, 5) of ones, pad (1, 2): only the centre column
    // reads x, so out[h] = x[h − 1] + x[h] + x[h + 1] = [3, 6, 9, 7].
    let x = input(&[1, 1, 4, 1]).unwrap();
    let y = conv2d(
        &x,
        HostArray::f32(&[1, 1, 3, 5], &[1.0; 15]),
        None,
        opts([1, 1, 2, 2], [1, 1], [1, 1]),
    )
    .unwrap();
    assert_eq!(run(&y, &[&[1.0, 2.0, 3.0, 4.0]]), [3.0, 6.0, 9.0, 7.0]);
    // The same through dynamic_conv (weight is a graph input).
    let x = input(&[1, 1, 1, 1]).unwrap();
    let w = input(&[1, 1, 5, 5]).unwrap();
    let y = dynamic_conv(&x, &w, opts([2; 4], [1, 1], [1, 1])).unwrap();
    assert_eq!(run(&y, &[&[3.0], &[1.0; 25]]), [3.0]);
}

#[test]
fn window_parameters_must_fit_mil_int32() {
    let x = input(&[1, 1, 4, 4]).unwrap();
    let w = || HostArray::f32(&[1, 1, 1, 1], &[1.0]);
    for (o, what) in [
        (opts([0; 4], [1, 1], [1, 1 << 31]), "strides"),
        (opts([0; 4], [1, (1 << 32) + 1], [1, 1]), "dilations"),
        (opts([0, 0, 0, 1 << 31], [1, 1], [1, 1 << 30]), "pad"),
    ] {
        let e = conv2d(&x, w(), None, o).unwrap_err();
        let s = e.to_string();
        assert!(
            matches!(e, Error::Value { .. }) && s.contains(what) && s.contains("2147483647"),
            "{s}"
        );
    }
    let e = x.max_pool([1, 1], [1, 1 << 31], [0; 4]).unwrap_err();
    assert!(e.to_string().contains("strides"), "{e}");
}

fn resource(e: Error, needles: &[&str]) {
    let s = e.to_string();
    assert!(
        matches!(e, Error::Resource { .. }),
        "not a resource error: {e:?}"
    );
    assert!(
        needles.iter().all(|n| s.contains(n)),
        "'{s}' lacks {needles:?}"
    );
}

#[test]
fn builder_refuses_tensors_past_the_element_cap_before_allocating() {
    // 65536 × 32768 = 2^31 elements > the 2^28 default cap.
    resource(
        input(&[65536, 32768]).unwrap_err(),
        &["input", "[65536, 32768]", "268435456"],
    );
    let x = input(&[2, 2]).unwrap();
    resource(
        x.tile(&[32768, 16384]).unwrap_err(),
        &["tile", "[65536, 32768]"],
    );
}

#[test]
fn program_byte_cap_counts_every_buffer_and_weight() {
    let x = input(&[64, 64]).unwrap();
    let g = Graph::from_outputs(&[(None, x.relu().unwrap().exp().unwrap())]).unwrap();
    // Three [64, 64] fp16 buffers (input, relu, exp) = 3 · 8192 = 24576 bytes.
    let cap = |max_bytes| Limits {
        max_bytes,
        ..Limits::default()
    };
    g.check_limits(&cap(24576), "prog").unwrap();
    resource(
        g.check_limits(&cap(24575), "prog").unwrap_err(),
        &["prog", "24576 bytes", "24575"],
    );
}

fn parse(mil: &str) -> aneforge::Result<Graph> {
    aneforge::mil::parse::parse(mil, "model.mil".as_ref(), &[], "weights.bin".as_ref())
}

fn program(sig: &str, body: &str, out: &str) -> String {
    format!("program(1.3)\n{{\n    func main<ios18>({sig}) {{\n{body}\n    }} -> ({out});\n}}\n")
}

#[test]
fn loader_applies_the_builder_limits() {
    // A declared input of 2^48 elements.
    let mil = program(
        "tensor<fp16, [65536, 65536, 65536]> x0",
        "        tensor<fp16, [65536, 65536, 65536]> y0 = relu(x = x0)[name = string(\"y0\")];",
        "y0",
    );
    resource(
        parse(&mil).unwrap_err(),
        &["model.mil", "[65536, 65536, 65536]", "elements"],
    );
    // A two-line tile to 2^31 elements.
    let mil = program(
        "tensor<fp16, [2, 2]> x0",
        "        tensor<int32, [2]> r = const()[name = string(\"r\"), val = tensor<int32, [2]>([32768, 16384])];\n        tensor<fp16, [65536, 32768]> y0 = tile(reps = r, x = x0)[name = string(\"y0\")];",
        "y0",
    );
    resource(parse(&mil).unwrap_err(), &["tile", "[65536, 32768]"]);
    // upsample to an extent of 1024 · 32768 = 33554432 > 65536, which the builder refuses too.
    let mil = program(
        "tensor<fp16, [1, 1, 1024, 1]> x0",
        "        int32 h = const()[name = string(\"h\"), val = int32(32768)];\n        int32 w = const()[name = string(\"w\"), val = int32(1)];\n        tensor<fp16, [1, 1, 33554432, 1]> y0 = upsample_nearest_neighbor(scale_factor_height = h, scale_factor_width = w, x = x0)[name = string(\"y0\")];",
        "y0",
    );
    let e = parse(&mil).unwrap_err();
    let s = e.to_string();
    assert!(
        matches!(e, Error::Format { .. }) && s.contains("33554432") && s.contains("65536"),
        "{s}"
    );
    assert!(input(&[1, 1, 1024, 1]).unwrap().upsample(32768, 1).is_err());
}

#[test]
fn inverse_of_negative_zero_is_negative_infinity() {
    // IEEE 754: 1 / −0 = −inf, 1 / +0 = +inf.
    let x = input(&[2]).unwrap();
    let y = run(&x.inverse(0.0).unwrap(), &[&[-0.0, 0.0]]);
    assert_eq!(y, [f32::NEG_INFINITY, f32::INFINITY]);
}
