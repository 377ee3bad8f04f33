//! The graph-built FFT against rustfft (f64) on the reference executor, on fp16-rounded inputs.

use aneforge::conformance::corpus::data;
use aneforge::numerics::fft::{radices, FftKind, FftPlan};
use aneforge::{Device, Error};
use half::f16;
use rustfft::num_complex::Complex64;
use rustfft::FftPlanner;

/// Deterministic values in [-1, 1), rounded to fp16 (so the oracle sees what the graph sees).
fn signal(len: usize, seed: u64) -> Vec<f32> {
    data(len, seed)
        .into_iter()
        .map(|v| f16::from_f32(v).to_f32())
        .collect()
}

/// rustfft of each row of length n (forward or inverse scaled by 1/n).
fn oracle(re: &[f32], im: &[f32], n: usize, inverse: bool) -> Vec<Complex64> {
    let mut planner = FftPlanner::<f64>::new();
    let f = if inverse {
        planner.plan_fft_inverse(n)
    } else {
        planner.plan_fft_forward(n)
    };
    let mut buf: Vec<Complex64> = re
        .iter()
        .zip(im)
        .map(|(&r, &i)| Complex64::new(r as f64, i as f64))
        .collect();
    for row in buf.chunks_mut(n) {
        f.process(row);
    }
    let s = if inverse { 1.0 / n as f64 } else { 1.0 };
    buf.iter().map(|c| c * s).collect()
}

/// Relative L2 error of (re, im) against the oracle.
fn rel_l2(re: &[f32], im: &[f32], want: &[Complex64]) -> f64 {
    let num: f64 = want
        .iter()
        .zip(re.iter().zip(im))
        .map(|(w, (&r, &i))| (w.re - r as f64).powi(2) + (w.im - i as f64).powi(2))
        .sum();
    let den: f64 = want.iter().map(|w| w.norm_sqr()).sum();
    (num / den).sqrt()
}

#[test]
fn digit_groups_are_balanced_and_bounded() {
    assert_eq!(radices(1024).unwrap(), vec![8, 8, 16]);
    assert_eq!(radices(1031).unwrap(), vec![1031]);
    assert_eq!(radices(1536).unwrap().iter().product::<usize>(), 1536);
    assert!(radices(1536).unwrap().len() <= 3);
    let e = radices(2 * 4099).unwrap_err();
    assert!(
        matches!(e, Error::NotImplemented(_)) && e.to_string().contains("4099"),
        "{e}"
    );
    let e = radices(70000).unwrap_err();
    assert!(
        matches!(e, Error::Shape { .. }) && e.to_string().contains("70000"),
        "{e}"
    );
}

#[test]
fn fft_and_ifft_match_rustfft() {
    for &n in &[64usize, 256, 1024, 2048, 1536, 1280, 97] {
        let shape = [3, n];
        let (re, im) = (signal(3 * n, n as u64), signal(3 * n, 7 * n as u64));
        for (kind, inverse) in [(FftKind::Fft, false), (FftKind::Ifft, true)] {
            let p = FftPlan::new(kind, &shape, None, Device::Reference).unwrap();
            let out = p.run(&re, Some(&im)).unwrap();
            let err = rel_l2(&out[0], &out[1], &oracle(&re, &im, n, inverse));
            assert!(err < 2e-3, "{kind:?} n={n}: relative L2 {err:e}");
        }
    }
}

#[test]
fn rfft_and_irfft_match_rustfft() {
    for &n in &[64usize, 1280, 255] {
        let x = signal(2 * n, n as u64 + 1);
        let zeros = vec![0.0; 2 * n];
        let p = FftPlan::new(FftKind::Rfft, &[2, n], None, Device::Reference).unwrap();
        let out = p.run(&x, None).unwrap();
        let full = oracle(&x, &zeros, n, false);
        let m = n / 2 + 1;
        let half: Vec<Complex64> = full.chunks(n).flat_map(|row| row[..m].to_vec()).collect();
        let err = rel_l2(&out[0], &out[1], &half);
        assert!(err < 2e-3, "rfft n={n}: relative L2 {err:e}");

        // irfft of the exact half spectrum (rounded to fp16) must give x back.
        let hre: Vec<f32> = half.iter().map(|c| f16::from_f64(c.re).to_f32()).collect();
        let him: Vec<f32> = half.iter().map(|c| f16::from_f64(c.im).to_f32()).collect();
        let p = FftPlan::new(FftKind::Irfft, &[2, m], Some(n), Device::Reference).unwrap();
        let y = &p.run(&hre, Some(&him)).unwrap()[0];
        let want: Vec<Complex64> = x.iter().map(|&v| Complex64::new(v as f64, 0.0)).collect();
        let err = rel_l2(y, &zeros, &want);
        assert!(err < 2e-3, "irfft n={n}: relative L2 {err:e}");
    }
}

#[test]
fn fft2_matches_rows_then_columns() {
    let (m, n) = (24, 40);
    let (re, im) = (signal(m * n, 3), signal(m * n, 4));
    let p = FftPlan::new(FftKind::Fft2, &[m, n], None, Device::Reference).unwrap();
    let out = p.run(&re, Some(&im)).unwrap();
    // Oracle: rustfft over rows, then over columns (transpose, rows, transpose back).
    let rows = oracle(&re, &im, n, false);
    let t = |v: &[Complex64], r: usize, c: usize| {
        (0..r * c)
            .map(|i| v[(i % r) * c + i / r])
            .collect::<Vec<_>>()
    };
    let cols = t(&rows, m, n);
    let (cr, ci): (Vec<f32>, Vec<f32>) = cols.iter().map(|c| (c.re as f32, c.im as f32)).unzip();
    let mut planner = FftPlanner::<f64>::new();
    let f = planner.plan_fft_forward(m);
    let mut buf: Vec<Complex64> = cr
        .iter()
        .zip(&ci)
        .map(|(&r, &i)| Complex64::new(r as f64, i as f64))
        .collect();
    buf.chunks_mut(m).for_each(|row| f.process(row));
    let want = t(&buf, n, m);
    let err = rel_l2(&out[0], &out[1], &want);
    assert!(err < 2e-3, "fft2 relative L2 {err:e}");

    let p = FftPlan::new(FftKind::Ifft2, &[m, n], None, Device::Reference).unwrap();
    let (wr, wi): (Vec<f32>, Vec<f32>) = want
        .iter()
        .map(|c| (f16::from_f64(c.re).to_f32(), f16::from_f64(c.im).to_f32()))
        .unzip();
    let back = p.run(&wr, Some(&wi)).unwrap();
    let x: Vec<Complex64> = re
        .iter()
        .zip(&im)
        .map(|(&r, &i)| Complex64::new(r as f64, i as f64))
        .collect();
    let err = rel_l2(&back[0], &back[1], &x);
    assert!(err < 2e-3, "ifft2 relative L2 {err:e}");
}

#[test]
fn bad_inputs_are_typed_errors() {
    let p = FftPlan::new(FftKind::Fft, &[8], None, Device::Reference).unwrap();
    let e = p.run(&[0.0; 8], None).unwrap_err();
    assert!(
        matches!(e, Error::Value { .. }) && e.to_string().contains("imaginary"),
        "{e}"
    );
    let e = p.run(&[0.0; 7], Some(&[0.0; 7])).unwrap_err();
    assert!(e.to_string().contains('7'), "{e}");
    let e = FftPlan::new(FftKind::Irfft, &[2, 5], Some(12), Device::Reference)
        .err()
        .unwrap();
    assert!(
        matches!(e, Error::Shape { .. }) && e.to_string().contains("12"),
        "{e}"
    );
    // A forward transform of 2048 values of 40 overflows fp16 (DC = 81920).
    let p = FftPlan::new(FftKind::Fft, &[2048], None, Device::Reference).unwrap();
    let e = p.run(&[40.0; 2048], Some(&[0.0; 2048])).unwrap_err();
    assert!(
        matches!(e, Error::Runtime { .. }) && e.to_string().contains("overflowed fp16"),
        "{e}"
    );
}
