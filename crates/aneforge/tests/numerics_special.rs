//! special::gamma / lgamma on the reference executor against closed forms in f64:
//! Γ(n) = (n − 1)!, Γ(n + ½) = (2n)!·√π / (4ⁿ·n!), ln Γ(n) = Σ ln k for k < n.

use aneforge::numerics::special::apply;
use aneforge::numerics::{Feeds, Plan};
use aneforge::{input_port, DType, Device, Error};

/// `name` evaluated on `xs` (each exactly representable in fp16).
fn eval(name: &str, xs: &[f64]) -> Vec<f64> {
    let x = input_port(&[xs.len()], DType::Fp16, Some("x")).unwrap();
    let y = apply(name, &x).unwrap();
    let mut plan = Plan::build(&["x"], &[("y", y)], Feeds::default(), Device::Reference).unwrap();
    let feed: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    plan.run(name, &[&feed])
        .unwrap()
        .remove(0)
        .into_iter()
        .map(f64::from)
        .collect()
}

/// ln Γ(x) for x a positive integer or half-integer.
fn ln_gamma(x: f64) -> f64 {
    let (mut z, mut acc) = if x.fract() == 0.0 {
        (1.0, 0.0)
    } else {
        (0.5, std::f64::consts::PI.sqrt().ln())
    };
    while z < x {
        acc += z.ln();
        z += 1.0;
    }
    acc
}

fn worst(got: &[f64], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max)
}

#[test]
fn gamma_matches_factorials_and_half_integers() {
    let xs: Vec<f64> = (1..=18).map(|k| f64::from(k) * 0.5).collect();
    let want: Vec<f64> = xs.iter().map(|&x| ln_gamma(x).exp()).collect();
    let err = worst(&eval("gamma", &xs), &want);
    assert!(err < 3e-3, "gamma: {err:e}");
}

#[test]
fn lgamma_matches_log_factorials_near_and_far() {
    let xs: Vec<f64> = (1..=16)
        .map(|k| f64::from(k) * 0.5)
        .chain([9.0, 12.5, 40.0, 300.0, 2048.0, 6000.0])
        .collect();
    let want: Vec<f64> = xs.iter().map(|&x| ln_gamma(x)).collect();
    let err = worst(&eval("lgamma", &xs), &want);
    assert!(err < 2e-3, "lgamma: {err:e}");
}

#[test]
fn unknown_name_is_not_implemented() {
    let x = input_port(&[4], DType::Fp16, Some("x")).unwrap();
    assert!(
        matches!(apply("digamma", &x), Err(Error::NotImplemented(m)) if m.contains("digamma") && m.contains("lgamma"))
    );
}
