//! Host optimizers and the device update graph against closed-form or hand-written f64
//! updates: SGD momentum + weight decay, Adam bias correction, AdamW decoupled decay, the
//! loss-scale division and the non-finite skip.

use aneforge::train::{update_graph, OptimConfig, Optimizer, Rule, StepOutcome};
use aneforge::{compile, input_port, CompileOptions, DType, Device, PortData, Precision};

const ADAM: Rule = Rule::Adam {
    betas: (0.9, 0.999),
    eps: 1e-8,
};
const ADAMW: Rule = Rule::AdamW {
    betas: (0.9, 0.999),
    eps: 1e-8,
};

fn config(rule: Rule, lr: f32, weight_decay: f32, loss_scale: f32) -> OptimConfig {
    OptimConfig {
        rule,
        lr,
        weight_decay,
        loss_scale,
    }
}

/// Run `steps` host updates of one parameter `w0` with the gradients `grads[t]`.
fn run(cfg: OptimConfig, w0: &[f32], grads: &[Vec<f32>]) -> (Vec<f32>, Vec<StepOutcome>) {
    let mut opt = Optimizer::new(cfg, &[w0.len()]).unwrap();
    let mut w = w0.to_vec();
    let outcomes = grads
        .iter()
        .map(|g| opt.step(&mut [w.as_mut_slice()], &[g.as_slice()]).unwrap())
        .collect();
    (w, outcomes)
}

fn assert_close(got: &[f32], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= rtol * w.abs().max(1e-3),
            "[{i}] got {g}, want {w} (err {err})"
        );
    }
}

#[test]
fn sgd_momentum_weight_decay_and_loss_scale_follow_the_recurrence() {
    // buf = μ·buf + (g/s + λ·w); w −= lr·buf, written out in f64 for three steps.
    let (lr, mu, wd, s) = (0.1, 0.9, 0.01, 8.0);
    let w0 = [1.0f32, -2.0, 0.5];
    let grads: Vec<Vec<f32>> = vec![
        vec![8.0, -4.0, 2.0],
        vec![-1.0, 16.0, 0.0],
        vec![4.0, 4.0, -8.0],
    ];
    let (got, _) = run(
        config(
            Rule::Sgd {
                momentum: mu as f32,
            },
            lr as f32,
            wd as f32,
            s as f32,
        ),
        &w0,
        &grads,
    );
    let mut w: Vec<f64> = w0.iter().map(|&x| f64::from(x)).collect();
    let mut buf = [0.0f64; 3];
    for g in &grads {
        for i in 0..3 {
            buf[i] = mu * buf[i] + (f64::from(g[i]) / s + wd * w[i]);
            w[i] -= lr * buf[i];
        }
    }
    assert_close(&got, &w, 1e-6);
    // First step by hand: w = 1 − 0.1·(8/8 + 0.01·1) = 0.899.
    let (one, _) = run(
        config(Rule::Sgd { momentum: 0.9 }, 0.1, 0.01, 8.0),
        &[1.0],
        &[vec![8.0]],
    );
    assert_close(&one, &[0.899], 1e-7);
}

#[test]
fn adam_first_step_moves_every_weight_by_lr_against_the_gradient_sign() {
    // With bias correction m̂₁ = g and v̂₁ = g², so the first step is lr·g/(|g| + eps) ≈ ±lr.
    let w0 = [0.3f32, -0.7, 2.0];
    let (got, _) = run(
        config(ADAM, 0.01, 0.0, 1.0),
        &w0,
        &[vec![5.0, -0.002, 40.0]],
    );
    assert_close(&got, &[0.29, -0.69, 1.99], 1e-5);
}

#[test]
fn adam_follows_the_bias_corrected_recurrence_for_five_steps() {
    let (lr, b1, b2, eps) = (0.05f64, 0.9f64, 0.999f64, 1e-8f64);
    let w0 = [0.5f32, -1.5];
    let grads: Vec<Vec<f32>> = (0..5)
        .map(|t| vec![1.0 - 0.3 * t as f32, 0.2 * t as f32 - 0.1])
        .collect();
    let (got, outcomes) = run(config(ADAM, lr as f32, 0.0, 1.0), &w0, &grads);
    assert_eq!(outcomes[4], StepOutcome::Applied { t: 5 });
    let mut w: Vec<f64> = w0.iter().map(|&x| f64::from(x)).collect();
    let (mut m, mut v) = ([0.0f64; 2], [0.0f64; 2]);
    for (t, g) in grads.iter().enumerate() {
        let t = t as i32 + 1;
        for i in 0..2 {
            let g = f64::from(g[i]);
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            let (mh, vh) = (m[i] / (1.0 - b1.powi(t)), v[i] / (1.0 - b2.powi(t)));
            w[i] -= lr * mh / (vh.sqrt() + eps);
        }
    }
    assert_close(&got, &w, 1e-5);
}

#[test]
fn adamw_decays_decoupled_from_the_gradient_while_adam_adds_l2_to_it() {
    // Zero gradients: AdamW's moments stay 0, so only the decay acts: w_t = w0·(1 − lr·λ)^t.
    let (lr, wd) = (0.1f64, 0.5f64);
    let w0 = [2.0f32, -4.0];
    let zeros = vec![vec![0.0f32; 2]; 3];
    let (got, _) = run(config(ADAMW, lr as f32, wd as f32, 1.0), &w0, &zeros);
    let f = (1.0 - lr * wd).powi(3);
    assert_close(&got, &[2.0 * f, -4.0 * f], 1e-6);
    // Adam's L2 decay goes through the moments instead: the first step is lr·sign(w).
    let (l2, _) = run(config(ADAM, lr as f32, wd as f32, 1.0), &w0, &zeros[..1]);
    assert_close(&l2, &[1.9, -3.9], 1e-6);
}

#[test]
fn loss_scale_divides_the_gradient_before_the_update() {
    let w0 = [1.0f32, -1.0];
    let grads = vec![vec![0.25f32, -3.0], vec![1.5, 0.5]];
    let scaled: Vec<Vec<f32>> = grads
        .iter()
        .map(|g| g.iter().map(|x| x * 1024.0).collect())
        .collect();
    for rule in [ADAM, ADAMW, Rule::Sgd { momentum: 0.5 }] {
        let (plain, _) = run(config(rule, 0.01, 0.1, 1.0), &w0, &grads);
        let (with_scale, _) = run(config(rule, 0.01, 0.1, 1024.0), &w0, &scaled);
        let want: Vec<f64> = plain.iter().map(|&x| f64::from(x)).collect();
        assert_close(&with_scale, &want, 1e-6);
    }
    // SGD by hand: 1 − 0.1·(512/1024) = 0.95.
    let (one, _) = run(
        config(Rule::Sgd { momentum: 0.0 }, 0.1, 0.0, 1024.0),
        &[1.0],
        &[vec![512.0]],
    );
    assert_close(&one, &[0.95], 1e-7);
}

#[test]
fn a_non_finite_gradient_skips_the_step_and_counts_it() {
    let w0 = [0.5f32, 0.25];
    let grads = vec![
        vec![f32::NAN, 1.0],
        vec![1.0, f32::INFINITY],
        vec![2.0, -2.0],
    ];
    let (got, outcomes) = run(config(ADAM, 0.01, 0.0, 1.0), &w0, &grads);
    assert_eq!(
        outcomes,
        vec![
            StepOutcome::Skipped { skipped: 1 },
            StepOutcome::Skipped { skipped: 2 },
            StepOutcome::Applied { t: 1 },
        ]
    );
    // The applied step is a first step (t = 1): ±lr from the untouched w0.
    assert_close(&got, &[0.49, 0.26], 1e-5);
}

#[test]
fn invalid_hyper_parameters_and_mismatched_sizes_are_errors() {
    let e = Optimizer::new(config(ADAM, -1.0, 0.0, 1.0), &[2]).unwrap_err();
    assert!(e.to_string().contains("lr = -1"), "{e}");
    let e = Optimizer::new(config(ADAM, 0.1, 0.0, 0.0), &[2]).unwrap_err();
    assert!(e.to_string().contains("loss_scale = 0"), "{e}");
    let mut opt = Optimizer::new(config(ADAM, 0.1, 0.0, 1.0), &[2]).unwrap();
    let mut w = [0.0f32; 3];
    let e = opt.step(&mut [&mut w], &[&[0.0; 3]]).unwrap_err();
    assert!(e.to_string().contains("sizes [2]"), "{e}");
}

#[test]
fn device_update_graph_matches_the_f64_recurrence() {
    // SGD with momentum, weight decay and loss scale, then Adam, as compiled programs (fp32
    // reference executor), state fed back by hand for three steps.
    let (lr, mu, wd, s) = (0.1f64, 0.9f64, 0.01f64, 4.0f64);
    let w0 = [0.5f32, -1.0, 2.0];
    let grads: Vec<Vec<f32>> = vec![
        vec![4.0, -8.0, 2.0],
        vec![1.0, 1.0, -4.0],
        vec![-2.0, 6.0, 0.5],
    ];
    let opts = CompileOptions {
        device: Device::Reference,
        precision: Precision::Fp32,
        ..CompileOptions::default()
    };
    for rule in [
        Rule::Sgd {
            momentum: mu as f32,
        },
        ADAM,
    ] {
        let cfg = config(rule, lr as f32, wd as f32, s as f32);
        let w = input_port(&[3], DType::Fp16, Some("w")).unwrap();
        let g = input_port(&[3], DType::Fp16, Some("g")).unwrap();
        let lr_t = input_port(&[1], DType::Fp16, Some("lr_t")).unwrap();
        let state: Vec<_> = cfg
            .state_names()
            .iter()
            .map(|n| input_port(&[3], DType::Fp16, Some(n)).unwrap())
            .collect();
        let (w_new, s_new) = update_graph(&cfg, &w, &g, &state, &lr_t).unwrap();
        let mut outs = vec![(Some("w_new".to_string()), w_new)];
        outs.extend(
            s_new
                .into_iter()
                .enumerate()
                .map(|(i, t)| (Some(format!("s{i}")), t)),
        );
        let mut prog = compile(&outs, &opts).unwrap();
        let names: Vec<String> = prog.inputs().iter().map(|p| p.name.clone()).collect();
        let (mut wv, mut sv) = (w0.to_vec(), vec![vec![0.0f32; 3]; state.len()]);
        // f64 oracle
        let mut ow: Vec<f64> = w0.iter().map(|&x| f64::from(x)).collect();
        let (mut a, mut b) = ([0.0f64; 3], [0.0f64; 3]);
        for (t, gr) in grads.iter().enumerate() {
            let lr_feed = [cfg.device_lr(t as u64 + 1) as f32];
            let feeds: Vec<PortData> = names
                .iter()
                .map(|n| match n.as_str() {
                    "w" => PortData::F32(&wv),
                    "g" => PortData::F32(gr),
                    "lr_t" => PortData::F32(&lr_feed),
                    other => {
                        let k = cfg.state_names().iter().position(|s| *s == other).unwrap();
                        PortData::F32(&sv[k])
                    }
                })
                .collect();
            let out = prog.run(&feeds).unwrap();
            wv = out[0].clone();
            sv = out[1..].to_vec();
            let tt = t as i32 + 1;
            for i in 0..3 {
                let gi = f64::from(gr[i]);
                match rule {
                    Rule::Sgd { .. } => {
                        a[i] = mu * a[i] + (gi / s + wd * ow[i]);
                        ow[i] -= lr * a[i];
                    }
                    _ => {
                        let gl = gi / s + wd * ow[i];
                        a[i] = 0.9 * a[i] + 0.1 * gl;
                        b[i] = 0.999 * b[i] + 0.001 * gl * gl;
                        let mh = a[i] / (1.0 - 0.9f64.powi(tt));
                        let vh = b[i] / (1.0 - 0.999f64.powi(tt));
                        ow[i] -= lr * mh / (vh.sqrt() + 1e-8);
                    }
                }
            }
        }
        // Baked scalars (β, 1 − β, λ·s) are fp16 constants: ~1e-3 relative.
        assert_close(&wv, &ow, 3e-3);
    }
}
