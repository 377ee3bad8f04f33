//! af.dsp on the reference executor against direct f64 convolution and rustfft.

use aneforge::numerics::dsp::{correlate, fft_convolve, fir_filter, stft, window};
use aneforge::{Device, Error};
use rustfft::num_complex::Complex64;
use rustfft::FftPlanner;

fn signal(len: usize, seed: u64) -> Vec<f64> {
    (0..len)
        .map(|i| {
            ((i as f64 * 0.37 + seed as f64).sin() * 3.0 + (i as f64 * 1.91).cos()).round() / 2.0
        })
        .collect()
}

/// Full linear convolution in f64.
fn convolve(x: &[f64], h: &[f64]) -> Vec<f64> {
    (0..x.len() + h.len() - 1)
        .map(|n| {
            (0..h.len())
                .filter(|&k| n >= k && n - k < x.len())
                .map(|k| h[k] * x[n - k])
                .sum()
        })
        .collect()
}

fn rel(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b).powi(2)).sum();
    (num / want.iter().map(|b| b * b).sum::<f64>()).sqrt()
}

#[test]
fn direct_and_fft_convolution_match_f64() {
    let x = signal(500, 1);
    for k in [3usize, 15, 40] {
        let h = signal(k, 7);
        let want = convolve(&x, &h);
        let direct = fir_filter(&x, &h, "full", Device::Reference).unwrap();
        let fft = fft_convolve(&x, &h, "full", Device::Reference).unwrap();
        assert!(
            direct.len() == want.len() && rel(&direct, &want) < 5e-3,
            "k={k}: {:e}",
            rel(&direct, &want)
        );
        assert!(rel(&fft, &want) < 5e-3, "k={k}: {:e}", rel(&fft, &want));
        let same = fir_filter(&x, &h, "same", Device::Reference).unwrap();
        assert_eq!(same.len(), 500);
        let valid = correlate(&x, &h, "valid", Device::Reference).unwrap();
        let rev: Vec<f64> = h.iter().rev().copied().collect();
        assert!(rel(&valid, &convolve(&x, &rev)[k - 1..500]) < 5e-3);
    }
}

#[test]
fn stft_matches_rustfft_per_frame() {
    let x = signal(1000, 3);
    let w = window("hann", 128, true).unwrap();
    let (re, im, frames) = stft(&x, &w, 32, Device::Reference).unwrap();
    assert_eq!(frames, 1 + (1000 - 128) / 32);
    let fft = FftPlanner::<f64>::new().plan_fft_forward(128);
    let mut want = Vec::new();
    for t in 0..frames {
        let mut buf: Vec<Complex64> = (0..128)
            .map(|i| Complex64::new(x[t * 32 + i] * w[i], 0.0))
            .collect();
        fft.process(&mut buf);
        want.extend(buf[..65].iter().copied());
    }
    let got: Vec<f64> = re.iter().zip(&im).flat_map(|(&r, &i)| [r, i]).collect();
    let flat: Vec<f64> = want.iter().flat_map(|c| [c.re, c.im]).collect();
    assert!(rel(&got, &flat) < 3e-3, "{:e}", rel(&got, &flat));
}

#[test]
fn bad_arguments() {
    assert!(matches!(
        window("kaiser", 8, true),
        Err(Error::NotImplemented(_))
    ));
    let e = fir_filter(&[1.0; 4], &[1.0; 2], "middle", Device::Reference).unwrap_err();
    assert!(e.to_string().contains("middle"), "{e}");
    let e = stft(&[1.0; 10], &[1.0; 16], 4, Device::Reference).unwrap_err();
    assert!(e.to_string().contains("no longer than the signal"), "{e}");
    let e = fft_convolve(&[1.0, f64::NAN], &[1.0], "full", Device::Reference).unwrap_err();
    assert!(e.to_string().contains("not finite"), "{e}");
}
