//! The Rust Trainer on the reference executor: one host SGD step against a hand-derived f64
//! gradient, a regression whose loss falls by a stated factor in every mode, a separable
//! classification problem learned to high accuracy, checkpoint resume and release, and the
//! error a device-mode step gives on weights its update overflowed.

mod common;

use aneforge::train::{
    conv2d, conv_param, Batch, FitOptions, Loss, Mode, OptimConfig, Parameter, Rule, Trainer,
};
use aneforge::{input_port, CompileOptions, DType, Device, Precision};
use common::noise;

fn opts(precision: Precision) -> CompileOptions {
    CompileOptions {
        device: Device::Reference,
        precision,
        ..CompileOptions::default()
    }
}

/// Linear regression y = x·W* with W* [4, 2]; batch 8. Returns (params, loss, W*).
fn regression(tag: &str) -> ([Parameter; 1], Loss, Vec<f32>) {
    let w = Parameter::new(&[0.0; 8], &[4, 2], Some(&format!("w_{tag}"))).unwrap();
    let x = input_port(&[8, 4], DType::Fp16, Some(&format!("x_{tag}"))).unwrap();
    let y = input_port(&[8, 2], DType::Fp16, Some(&format!("y_{tag}"))).unwrap();
    let loss = Loss::mse(&x.matmul(w.tensor()).unwrap(), &y).unwrap();
    let w_star = vec![0.5, -1.0, 0.25, 0.75, -0.5, 0.125, 1.0, -0.25];
    ([w], loss, w_star)
}

/// Batch `k` of the regression: x from `noise`, y = x·W*.
/// Adam (β = 0.9, 0.999, ε = 1e-8) at `lr`, no weight decay, no loss scaling.
fn adam(lr: f32) -> OptimConfig {
    OptimConfig {
        rule: Rule::Adam {
            betas: (0.9, 0.999),
            eps: 1e-8,
        },
        lr,
        weight_decay: 0.0,
        loss_scale: 1.0,
    }
}

fn batch(k: usize, w_star: &[f32]) -> [Batch; 2] {
    let x: Vec<f32> = (0..32).map(|i| noise(k * 32 + i)).collect();
    let mut y = vec![0.0; 16];
    for r in 0..8 {
        for c in 0..2 {
            y[r * 2 + c] = (0..4).map(|j| x[r * 4 + j] * w_star[j * 2 + c]).sum();
        }
    }
    [Batch::floats(&[8, 4], x), Batch::floats(&[8, 2], y)]
}

#[test]
fn one_host_sgd_step_applies_the_hand_derived_mse_gradient() {
    let (params, loss, w_star) = regression("one");
    let w0: Vec<f32> = (0..8).map(|i| noise(1000 + i) * 0.5).collect();
    params[0].set_value(&w0).unwrap();
    let cfg = OptimConfig {
        rule: Rule::Sgd { momentum: 0.0 },
        lr: 0.1,
        weight_decay: 0.0,
        loss_scale: 1.0,
    };
    let mut tr = Trainer::new(&loss, &params, cfg, Mode::Host, opts(Precision::Fp32)).unwrap();
    let [x, y] = batch(0, &w_star);
    tr.step(&[x.clone(), y.clone()]).unwrap();
    // d/dW mean((xW − y)²) = 2/(8·2) · xᵀ(xW − y), in f64.
    let mut want: Vec<f64> = w0.iter().map(|&v| f64::from(v)).collect();
    let mut r = [0.0f64; 16];
    for i in 0..8 {
        for c in 0..2 {
            let p: f64 = (0..4)
                .map(|j| f64::from(x.data[i * 4 + j]) * f64::from(w0[j * 2 + c]))
                .sum();
            r[i * 2 + c] = p - f64::from(y.data[i * 2 + c]);
        }
    }
    for j in 0..4 {
        for c in 0..2 {
            let g: f64 = (0..8)
                .map(|i| f64::from(x.data[i * 4 + j]) * r[i * 2 + c])
                .sum::<f64>()
                * 2.0
                / 16.0;
            want[j * 2 + c] -= 0.1 * g;
        }
    }
    for (got, want) in params[0].value().iter().zip(&want) {
        assert!(
            (f64::from(*got) - want).abs() < 2e-3 * want.abs().max(0.05),
            "{got} vs {want}"
        );
    }
    assert_eq!(tr.t(), 1);
}

#[test]
fn regression_loss_falls_by_100x_in_every_mode_and_optimizer() {
    let rules = [
        (Rule::Sgd { momentum: 0.9 }, 0.05),
        (
            Rule::Adam {
                betas: (0.9, 0.999),
                eps: 1e-8,
            },
            0.05,
        ),
        (
            Rule::AdamW {
                betas: (0.9, 0.999),
                eps: 1e-8,
            },
            0.05,
        ),
    ];
    for (mi, mode) in [Mode::Host, Mode::DeviceOptimizer, Mode::Resident]
        .into_iter()
        .enumerate()
    {
        for (ri, (rule, lr)) in rules.into_iter().enumerate() {
            let (params, loss, w_star) = regression(&format!("{mi}{ri}"));
            let cfg = OptimConfig {
                rule,
                lr,
                weight_decay: 0.0,
                loss_scale: if mode == Mode::Host { 1.0 } else { 64.0 },
            };
            let mut tr = Trainer::new(&loss, &params, cfg, mode, opts(Precision::Fp16)).unwrap();
            let losses: Vec<f64> = (0..150)
                .map(|k| tr.step(&batch(k, &w_star)).unwrap().loss)
                .collect();
            let (first, last) = (losses[0], losses[140..].iter().sum::<f64>() / 10.0);
            assert!(last < first / 100.0, "{mode:?} {rule:?}: {first} -> {last}");
            tr.sync().unwrap();
            let w = params[0].value();
            for (a, b) in w.iter().zip(&w_star) {
                assert!(
                    (a - b).abs() < 0.05,
                    "{mode:?} {rule:?}: {w:?} vs {w_star:?}"
                );
            }
        }
    }
}

/// An update that overflows the weights to ±inf (Adam at lr 1e5 moves every weight by about
/// lr): the next device-mode step is a Value error naming the weight input, as a copying feed of
/// the weights into the training program reports it, not a skipped step.
#[test]
fn device_mode_reports_weights_the_update_overflowed() {
    let (params, loss, w_star) = regression("overflow");
    let cfg = adam(1e5);
    let mode = Mode::DeviceOptimizer;
    let mut tr = Trainer::new(&loss, &params, cfg, mode, opts(Precision::Fp16)).unwrap();
    assert!(tr.step(&batch(0, &w_star)).unwrap().skipped.is_none());
    for k in 1..3 {
        let e = tr.step(&batch(k, &w_star)).unwrap_err().to_string();
        assert!(
            e.contains("input 'w_overflow'") && e.contains("is not finite"),
            "step {k}: {e}"
        );
    }
    assert_eq!((tr.t(), tr.skipped()), (1, 0));
}

#[test]
fn a_small_cnn_learns_a_separable_two_class_problem_with_fit() {
    // Class 1 images are bright in the top half, class 0 in the bottom half, plus noise.
    let n = 64;
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for e in 0..n {
        let label = e % 2;
        for p in 0..36 {
            let top = p / 6 < 3;
            let base = if top == (label == 1) { 0.8 } else { 0.1 };
            xs.push(base + 0.1 * noise(e * 36 + p));
        }
        ys.push(label);
    }
    let c = conv_param(
        &(0..36).map(|i| noise(5000 + i) * 0.3).collect::<Vec<_>>(),
        &[4, 1, 3, 3],
        Some("cnn_c"),
    )
    .unwrap();
    let w = Parameter::new(
        &(0..288).map(|i| noise(7000 + i) * 0.1).collect::<Vec<_>>(),
        &[144, 2],
        Some("cnn_w"),
    )
    .unwrap();
    let x = input_port(&[16, 1, 6, 6], DType::Fp16, Some("cnn_x")).unwrap();
    let y = input_port(&[16], DType::Fp16, Some("cnn_y")).unwrap();
    let h = conv2d(&x, c.tensor(), 1, 1).unwrap().relu().unwrap();
    let logits = h.reshape(&[16, 144]).unwrap().matmul(w.tensor()).unwrap();
    let loss = Loss::cross_entropy(&logits, &y).unwrap();
    let cfg = adam(0.01);
    let mut tr = Trainer::new(&loss, &[c, w], cfg, Mode::Host, opts(Precision::Fp16)).unwrap();
    let before = tr.accuracy(&xs, &ys).unwrap();
    let mut lines = Vec::new();
    let hist = tr
        .fit(
            &Batch::floats(&[n, 1, 6, 6], xs.clone()),
            &Batch::labels(&ys),
            &FitOptions {
                epochs: 6,
                seed: 1,
                log_every: 2,
            },
            Some((&xs, &ys)),
            &mut |l: &str| lines.push(l.to_string()),
        )
        .unwrap();
    assert_eq!(hist.loss.len(), 6 * 4);
    assert_eq!(hist.accuracy.len(), 6);
    assert!(
        hist.loss[20..].iter().sum::<f64>() / 4.0 < hist.loss[0] / 4.0,
        "{:?}",
        hist.loss
    );
    assert!(
        *hist.accuracy.last().unwrap() >= 0.95 && before < 0.9,
        "{before} -> {:?}",
        hist.accuracy
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("epoch 6 test accuracy ")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("epoch 1 step 2/4 loss ")),
        "{lines:?}"
    );
}

#[test]
#[cfg(feature = "safetensors")]
fn checkpoints_resume_identically_and_release_refuses_later_calls() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("train-trainer");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ck.safetensors");
    let cfg = adam(0.05);
    for (i, mode) in [Mode::Host, Mode::DeviceOptimizer, Mode::Resident]
        .into_iter()
        .enumerate()
    {
        let (pa, la, w_star) = regression(&format!("ck_a{i}"));
        let (pb, lb, _) = regression(&format!("ck_b{i}"));
        pb[0].set_value(&[1.0; 8]).unwrap();
        let mut a = Trainer::new(&la, &pa, cfg, mode, opts(Precision::Fp16)).unwrap();
        let mut b = Trainer::new(&lb, &pb, cfg, mode, opts(Precision::Fp16)).unwrap();
        for k in 0..3 {
            a.step(&batch(k, &w_star)).unwrap();
        }
        a.save(&path).unwrap();
        b.load(&path).unwrap();
        assert_eq!(b.t(), 3);
        for k in 3..6 {
            assert_eq!(
                a.step(&batch(k, &w_star)).unwrap(),
                b.step(&batch(k, &w_star)).unwrap()
            );
        }
        a.sync().unwrap();
        b.sync().unwrap();
        assert_eq!(pa[0].value(), pb[0].value());
        let sd = b.state_dict().unwrap();
        let keys: Vec<&String> = sd.tensors.keys().collect();
        assert_eq!(keys, ["m.0", "params.0", "v.0"]);
        assert_eq!(sd.metadata["optimizer"], "adam");
        b.release();
        let e = b.step(&batch(0, &w_star)).unwrap_err().to_string();
        assert!(e.contains("released"), "{e}");
    }
    // A checkpoint of another shape is refused naming the tensor.
    let w = Parameter::new(&[0.0; 3], &[3], Some("other_w")).unwrap();
    let x = input_port(&[2, 3], DType::Fp16, Some("other_x")).unwrap();
    let loss = Loss::custom(x.mul(w.tensor()).unwrap().sum(&[0, 1], true).unwrap(), None);
    let mut t = Trainer::new(&loss, &[w], cfg, Mode::Host, opts(Precision::Fp16)).unwrap();
    let e = t.load(&path).unwrap_err().to_string();
    assert!(
        e.contains("ck.safetensors") && e.contains("tensor 'm.0' missing or not of shape [3]"),
        "{e}"
    );
}

#[test]
fn step_errors_name_the_inputs() {
    let (params, loss, w_star) = regression("err");
    let cfg = OptimConfig {
        rule: Rule::Sgd { momentum: 0.0 },
        lr: 0.1,
        weight_decay: 0.0,
        loss_scale: 1.0,
    };
    let mut tr = Trainer::new(&loss, &params, cfg, Mode::Host, opts(Precision::Fp16)).unwrap();
    let [x, _] = batch(0, &w_star);
    let e = tr.step(std::slice::from_ref(&x)).unwrap_err().to_string();
    assert!(
        e.contains("takes 2 array(s) (x_err [8, 4], y_err [8, 2]), got 1"),
        "{e}"
    );
    let e = tr
        .step(&[Batch::floats(&[7, 4], vec![0.0; 28]), x])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("input 'x_err' has shape [7, 4]; expected [8, 4]"),
        "{e}"
    );
    let e = tr.predict(&[0.0; 4]).unwrap_err().to_string();
    assert!(e.contains("need logits"), "{e}");
    let dup = Trainer::new(
        &loss,
        &[params[0].clone(), params[0].clone()],
        cfg,
        Mode::Host,
        opts(Precision::Fp16),
    );
    assert!(dup
        .err()
        .unwrap()
        .to_string()
        .contains("'w_err' appears twice"));
    let e = Trainer::new(&loss, &params, cfg, Mode::Resident, opts(Precision::Fp32))
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("resident state needs precision fp16"),
        "{e}"
    );
}
