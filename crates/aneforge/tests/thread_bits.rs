//! The reference executor gives the same bits at 1, 2 and 3 threads on graphs of the sizes the
//! thread work targets: a MiniLM-sized encoder layer (seq 128, width 384, 12 heads, FFN 1536:
//! every kernel above its parallel threshold) and a ResNet-18-sized
//! stem and basic block (7×7/2 conv, batch norm, relu, max pool, 3×3 convs, residual add),
//! and MobileNetV3-small through the ONNX importer (seeded weights, `mobilenet/mod.rs`: its
//! stem, depthwise, pointwise and SE convs, each split over the threads or not by its size).
//! One test function: the thread count is process-wide.

use aneforge::compile::{compile, CompileOptions, Compiled};
use aneforge::options::Device;
use aneforge::{batch_norm, conv2d, input, set_num_threads, ConvOptions, PortData, Tensor};

mod common;
mod mobilenet;

use common::W;

const SEQ: usize = 128;
const D: usize = 384;
const HEADS: usize = 12;
const FFN: usize = 1536;

/// `x @ Wᵀ + b` with seeded weights scaled by 1/√in (so activations stay O(1) in fp16).
fn linear(x: &Tensor, out: usize, inp: usize, seed: u64) -> Tensor {
    let mut w = W::new(&[out, inp], seed);
    let s = 1.0 / (inp as f32).sqrt();
    w.data.iter_mut().for_each(|v| *v *= s);
    x.linear(w.arr(), Some(W::new(&[out], seed + 1).arr()))
        .unwrap()
}

/// Split [SEQ, D] into heads [HEADS, SEQ, D / HEADS].
fn heads(x: &Tensor) -> Tensor {
    x.reshape(&[SEQ as i64, HEADS as i64, (D / HEADS) as i64])
        .unwrap()
        .transpose(&[1, 0, 2])
        .unwrap()
}

/// One post-norm BERT encoder layer on x [SEQ, D].
fn encoder_layer(x: &Tensor) -> Tensor {
    let (q, k, v) = (
        heads(&linear(x, D, D, 10)),
        heads(&linear(x, D, D, 20)),
        heads(&linear(x, D, D, 30)),
    );
    let scale = aneforge::scalar("test", 1.0 / ((D / HEADS) as f32).sqrt()).unwrap();
    let scores = q
        .matmul(&k.transpose(&[0, 2, 1]).unwrap())
        .unwrap()
        .mul(&scale)
        .unwrap();
    let ctx = scores
        .softmax(-1)
        .unwrap()
        .matmul(&v)
        .unwrap()
        .transpose(&[1, 0, 2])
        .unwrap()
        .reshape(&[SEQ as i64, D as i64])
        .unwrap();
    let h = x
        .add(&linear(&ctx, D, D, 40))
        .unwrap()
        .layer_norm(None, None, 1e-5)
        .unwrap();
    let f = linear(&linear(&h, FFN, D, 50).gelu().unwrap(), D, FFN, 60);
    h.add(&f).unwrap().layer_norm(None, None, 1e-5).unwrap()
}

/// conv (seeded He-scaled weight) + batch norm, optionally relu.
fn conv_bn(x: &Tensor, cout: usize, k: usize, stride: usize, relu: bool, seed: u64) -> Tensor {
    let cin = x.shape()[1];
    let mut w = W::new(&[cout, cin, k, k], seed);
    let s = (2.0 / (cin * k * k) as f32).sqrt();
    w.data.iter_mut().for_each(|v| *v *= s);
    let p = k / 2;
    let opts = ConvOptions {
        stride: [stride; 2],
        pad: [p; 4],
        ..Default::default()
    };
    let y = conv2d(x, w.arr(), None, opts).unwrap();
    let (mean, var) = (W::new(&[cout], seed + 1), W::new(&[cout], seed + 2));
    let var_pos: Vec<f32> = var.data.iter().map(|v| 1.0 + 0.3 * v).collect();
    let y = batch_norm(
        &y,
        mean.arr(),
        aneforge::HostArray::f32(&[cout], &var_pos),
        None,
        None,
        1e-5,
    )
    .unwrap();
    if relu {
        y.relu().unwrap()
    } else {
        y
    }
}

/// ResNet-18's stem and first basic block on a 112×112 image.
fn resnet_block(x: &Tensor) -> Tensor {
    let s = conv_bn(x, 64, 7, 2, true, 100)
        .max_pool([3, 3], [2, 2], [1, 1, 1, 1])
        .unwrap();
    let b = conv_bn(&conv_bn(&s, 64, 3, 1, true, 200), 64, 3, 1, false, 300);
    s.add(&b).unwrap().relu().unwrap()
}

/// A program's outputs as `compile` takes them: (optional name, tensor).
type Outputs = Vec<(Option<String>, Tensor)>;

/// Outputs of `net` on `x` at `threads` threads, as bit patterns.
fn run_at(threads: usize, net: &mut Compiled, x: &[f32]) -> Vec<u32> {
    set_num_threads(threads).unwrap();
    let out = net.run(&[PortData::F32(x)]).unwrap().concat();
    assert!(out.iter().all(|v| v.is_finite()), "{threads} threads");
    out.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn results_are_bit_identical_at_1_2_and_3_threads() {
    let dir = tempfile_dir();
    let mobilenet = aneforge::onnx::import_bytes(&mobilenet::onnx_bytes(224), None, &[]).unwrap();
    let cases: [(&str, Outputs); 3] = [
        (
            "minilm-layer",
            vec![(None, encoder_layer(&input(&[SEQ, D]).unwrap()))],
        ),
        (
            "resnet18-block",
            vec![(None, resnet_block(&input(&[1, 3, 112, 112]).unwrap()))],
        ),
        ("mobilenetv3-small", mobilenet.named_outputs()),
    ];
    for (name, outputs) in cases {
        let opts = CompileOptions {
            device: Device::Reference,
            build_dir: Some(dir.join(name)),
            ..Default::default()
        };
        let mut net = compile(&outputs, &opts).unwrap();
        let x = common::data(net.inputs()[0].numel(), 7);
        let one = run_at(1, &mut net, &x);
        for threads in [2, 3] {
            let got = run_at(threads, &mut net, &x);
            let differ = got.iter().zip(&one).filter(|(a, b)| a != b).count();
            assert_eq!(
                differ, 0,
                "{name}: {differ} elements differ at {threads} threads"
            );
        }
        assert!(
            one.iter().any(|&b| b != one[0]),
            "{name}: a constant output proves nothing"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A fresh scratch directory under the test target dir (removed by the test).
fn tempfile_dir() -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("thread-bits");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
