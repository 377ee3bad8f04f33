//! Training steps on the reference executor are bit-identical to the ones recorded in
//! `tests/train_bit_identical_hashes.txt` (from the Trainer before the issue-15 training work):
//! the benchmark's MNIST MLP (784-256-10 GELU, batch 128) and a small CNN (conv3×3-relu-maxpool
//! ×2 + linear), in every Trainer mode, hashing each step's loss and, after the last step, every
//! parameter and optimizer state buffer (`state_dict`).
//!
//! A faster training kernel must reproduce every bit; a change here needs a documented contract
//! change. Like `bit_identical`, one hash file per GEMM dispatch class (AVX-512, and `.avx2.txt`
//! recorded at a2149b8); other CPUs skip with a note.
//! Record (only when the contract changes): `ANEFORGE_RECORD_HASHES=1 cargo test --test train_bit_identical`.

mod common;

use std::collections::BTreeMap;

use hashes::fnv1a as digest;

use aneforge::train::{
    conv2d, conv_param, Batch, Loss, Mode, OptimConfig, Parameter, Rule, Trainer,
};
use aneforge::{input_port, CompileOptions, DType, Device, Precision};
use common::noise;

mod hashes;

const HASH_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/train_bit_identical_hashes.txt"
);

/// `n` values `noise(seed + i) · scale`.
fn init(n: usize, seed: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| noise(seed + i) * scale).collect()
}

/// A parameter of `shape` initialised from `init(.., seed, scale)`.
fn param(shape: &[usize], seed: usize, scale: f32, name: &str) -> Parameter {
    let n = shape.iter().product();
    Parameter::new(&init(n, seed, scale), shape, Some(name)).unwrap()
}

/// A model builder: parameters, the loss and the shape of the image input (tag → names).
type Model = fn(&str) -> (Vec<Parameter>, Loss, Vec<usize>);

/// The benchmark MLP 784-256-10 (GELU) with cross-entropy over class indices, batch 128.
fn mlp(tag: &str) -> (Vec<Parameter>, Loss, Vec<usize>) {
    let params = vec![
        param(&[784, 256], 1, 0.087, &format!("w1_{tag}")),
        param(&[256], 2, 0.01, &format!("b1_{tag}")),
        param(&[256, 10], 3, 0.076, &format!("w2_{tag}")),
        param(&[10], 4, 0.01, &format!("b2_{tag}")),
    ];
    let x = input_port(&[128, 784], DType::Fp16, Some(&format!("x_{tag}"))).unwrap();
    let y = input_port(&[128], DType::Fp16, Some(&format!("y_{tag}"))).unwrap();
    let h = x
        .matmul(params[0].tensor())
        .unwrap()
        .add(params[1].tensor())
        .unwrap();
    let logits = h
        .gelu()
        .unwrap()
        .matmul(params[2].tensor())
        .unwrap()
        .add(params[3].tensor())
        .unwrap();
    (
        params,
        Loss::cross_entropy(&logits, &y).unwrap(),
        vec![128, 784],
    )
}

/// The example CNN (16 and 32 channels, 3×3, pad 1, relu, 2×2 max-pool, linear), batch 16.
fn cnn(tag: &str) -> (Vec<Parameter>, Loss, Vec<usize>) {
    let n = 16;
    let c1 = conv_param(
        &init(16 * 9, 10, 0.8),
        &[16, 1, 3, 3],
        Some(&format!("c1_{tag}")),
    )
    .unwrap();
    let c2 = conv_param(
        &init(32 * 16 * 9, 11, 0.2),
        &[32, 16, 3, 3],
        Some(&format!("c2_{tag}")),
    )
    .unwrap();
    let b1 = param(&[16, 1, 1], 12, 0.01, &format!("cb1_{tag}"));
    let b2 = param(&[32, 1, 1], 13, 0.01, &format!("cb2_{tag}"));
    let w = param(&[32 * 49, 10], 14, 0.03, &format!("w_{tag}"));
    let b = param(&[10], 15, 0.01, &format!("b_{tag}"));
    let x = input_port(&[n, 1, 28, 28], DType::Fp16, Some(&format!("x_{tag}"))).unwrap();
    let y = input_port(&[n], DType::Fp16, Some(&format!("y_{tag}"))).unwrap();
    let block = |h: &aneforge::Tensor, c: &Parameter, b: &Parameter| {
        conv2d(h, c.tensor(), 1, 1)
            .unwrap()
            .add(b.tensor())
            .unwrap()
            .relu()
            .unwrap()
            .max_pool([2, 2], [2, 2], [0; 4])
            .unwrap()
    };
    let h = block(&block(&x, &c1, &b1), &c2, &b2);
    let logits = h
        .reshape(&[n as i64, 32 * 49])
        .unwrap()
        .matmul(w.tensor())
        .unwrap()
        .add(b.tensor())
        .unwrap();
    let loss = Loss::cross_entropy(&logits, &y).unwrap();
    (vec![c1, b1, c2, b2, w, b], loss, vec![n, 1, 28, 28])
}

/// Hash of `steps` training steps of `model` in `mode` with `rule`: one entry for the losses,
/// one for the final parameters and optimizer state.
fn run(model: Model, tag: &str, mode: Mode, rule: Rule, steps: usize) -> [u64; 2] {
    let (params, loss, xshape) = model(tag);
    let cfg = OptimConfig {
        rule,
        lr: 3e-3,
        weight_decay: if matches!(rule, Rule::AdamW { .. }) {
            1e-2
        } else {
            0.0
        },
        loss_scale: if mode == Mode::Host { 1.0 } else { 1024.0 },
    };
    let opts = CompileOptions {
        device: Device::Reference,
        precision: Precision::Fp16,
        ..CompileOptions::default()
    };
    let mut tr = Trainer::new(&loss, &params, cfg, mode, opts).unwrap();
    let (n, numel): (usize, usize) = (xshape[0], xshape.iter().product());
    let mut losses = Vec::new();
    for k in 0..steps {
        let x: Vec<f32> = (0..numel)
            .map(|i| 0.5 + 0.5 * noise(k * numel + i + 99))
            .collect();
        let y: Vec<usize> = (0..n).map(|i| (i * 7 + k * 3) % 10).collect();
        let r = tr
            .step(&[Batch::floats(&xshape, x), Batch::labels(&y)])
            .unwrap();
        assert!(r.skipped.is_none(), "{tag}: step {k} skipped");
        losses.push(r.loss);
    }
    let sd = tr.state_dict().unwrap();
    let state = sd
        .tensors
        .iter()
        .flat_map(|(k, (_, v))| {
            k.bytes()
                .chain(v.iter().flat_map(|x| x.to_bits().to_le_bytes()))
        })
        .collect::<Vec<u8>>();
    [
        digest(losses.iter().flat_map(|l| l.to_bits().to_le_bytes())),
        digest(state),
    ]
}

/// Compare `got` with the recorded hashes, or record them.
fn check(got: BTreeMap<String, u64>) {
    hashes::check(HASH_FILE, "train_bit_identical", "", got);
}

#[test]
fn training_steps_are_bit_identical_in_every_mode() {
    let adam = Rule::Adam {
        betas: (0.9, 0.999),
        eps: 1e-8,
    };
    let adamw = Rule::AdamW {
        betas: (0.9, 0.999),
        eps: 1e-8,
    };
    let sgd = Rule::Sgd { momentum: 0.9 };
    let modes = [
        (Mode::Host, "host"),
        (Mode::DeviceOptimizer, "device"),
        (Mode::Resident, "resident"),
    ];
    let mut got = BTreeMap::new();
    for (mode, m) in modes {
        let cases: [(&str, Model, Rule, usize); 4] = [
            ("mlp-adam", mlp, adam, 3),
            ("mlp-adamw", mlp, adamw, 2),
            ("mlp-sgd", mlp, sgd, 2),
            ("cnn-adam", cnn, adam, 2),
        ];
        for (name, model, rule, steps) in cases {
            let [losses, state] = run(
                model,
                &format!("{name}_{m}").replace('-', "_"),
                mode,
                rule,
                steps,
            );
            got.insert(format!("{name}/{m}/losses"), losses);
            got.insert(format!("{name}/{m}/state"), state);
        }
    }
    check(got);
}
