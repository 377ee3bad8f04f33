//! Signal processing on the graph: windows (host coefficient vectors), direct FIR filtering (a
//! native 1 × K convolution with flipped taps for K ≤ 15), FFT convolution (complex FFT of both
//! zero-padded signals, product, inverse FFT, in one program) and correlation, STFT and
//! spectrogram (frames cut on the host, one batched real FFT on the device). Signals are host
//! f64; each program input is scaled on the host (x to unit maximum, h to unit L1 norm, so every
//! spectrum or product is bounded by the signal length, below fp16's 65504) and results are
//! scaled back.

use super::fft::{fft_last, radices, FftKind, FftPlan};
use super::{cached, run, Feeds, Plan, SharedPlan};
use crate::compile::Device;
use crate::dynamic_conv;
use crate::error::{Error, Result};
use crate::input_port;
use crate::ops::conv::{ConvOptions, MAX_KERNEL_WIDTH};
use crate::shape::MAX_EXTENT;
use crate::DType;

/// A window of length n: `hann`, `hamming` or `blackman`; `periodic` (the FFT convention,
/// `scipy.signal.get_window`'s default) or symmetric. Errors: unknown name, n = 0.
pub fn window(name: &str, n: usize, periodic: bool) -> Result<Vec<f64>> {
    if n == 0 {
        return Err(Error::value("window", "length must be >= 1"));
    }
    let m = if periodic {
        n
    } else {
        n.saturating_sub(1).max(1)
    } as f64;
    let cos = |k: f64, i: usize| (2.0 * std::f64::consts::PI * k * i as f64 / m).cos();
    let f: Box<dyn Fn(usize) -> f64> = match name {
        "hann" => Box::new(|i| 0.5 - 0.5 * cos(1.0, i)),
        "hamming" => Box::new(|i| 0.54 - 0.46 * cos(1.0, i)),
        "blackman" => Box::new(|i| 0.42 - 0.5 * cos(1.0, i) + 0.08 * cos(2.0, i)),
        _ => {
            return Err(Error::NotImplemented(format!(
                "window: no window '{name}' (available: hann, hamming, blackman)"
            )))
        }
    };
    Ok(if n == 1 {
        vec![1.0]
    } else {
        (0..n).map(f).collect()
    })
}

/// Output slice of a full convolution of lengths (l, k) for NumPy's `mode` (full, same, valid).
fn mode_range(mode: &str, l: usize, k: usize) -> Result<(usize, usize)> {
    let (big, small) = (l.max(k), l.min(k));
    match mode {
        "full" => Ok((0, l + k - 1)),
        "same" => Ok(((small - 1) / 2, big)),
        "valid" => Ok((small - 1, big - small + 1)),
        _ => Err(Error::value(
            "convolve",
            format!("unknown mode '{mode}' (expected full, same or valid)"),
        )),
    }
}

/// Smallest length ≥ n whose prime factors are 2, 3 and 5 (cheap digit groups).
fn fft_size(n: usize) -> usize {
    (n..)
        .find(|&m| {
            let mut r = m;
            for p in [2, 3, 5] {
                while r % p == 0 {
                    r /= p;
                }
            }
            r == 1
        })
        .unwrap_or(n)
}

/// FFT-convolution program: inputs `x`, `h` [1, n] (zero-padded); output `y` [1, n] (circular convolution).
fn fft_conv_plan(n: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("dsp/fftconv/{n}/{device:?}"), || {
        let mut feeds = Feeds::default();
        let (x, h) = (
            input_port(&[1, n], DType::Fp16, Some("x"))?,
            input_port(&[1, n], DType::Fp16, Some("h"))?,
        );
        let (xr, xi) = fft_last(&mut feeds, &(x, None), false)?;
        let (hr, hi) = fft_last(&mut feeds, &(h, None), false)?;
        let yr = xr.mul(&hr)?.sub(&xi.mul(&hi)?)?;
        let yi = xr.mul(&hi)?.add(&xi.mul(&hr)?)?;
        let y = fft_last(&mut feeds, &(yr, Some(yi)), true)?.0;
        Plan::build(&["x", "h"], &[("y", y)], feeds, device)
    })
}

/// Error unless `v` is non-empty and finite.
fn check_signal(op: &str, what: &str, v: &[f64]) -> Result<()> {
    if v.is_empty() {
        return Err(Error::value(op, format!("{what} is empty")));
    }
    match v.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(Error::value(
            op,
            format!("{what}[{i}] = {} is not finite", v[i]),
        )),
        None => Ok(()),
    }
}

/// Largest |value|, or 1 for an all-zero signal.
fn max_abs(v: &[f64]) -> f64 {
    match v.iter().fold(0.0f64, |m, x| m.max(x.abs())) {
        s if s > 0.0 => s,
        _ => 1.0,
    }
}

/// L1 norm, or 1 for an all-zero signal.
fn l1(v: &[f64]) -> f64 {
    match v.iter().map(|x| x.abs()).sum::<f64>() {
        s if s > 0.0 => s,
        _ => 1.0,
    }
}

/// Convolution of `x` and `h` through the FFT (`numpy.convolve` semantics for `mode`): both
/// zero-padded to a 2·3·5-smooth length ≥ L + K − 1, x scaled to unit maximum and h to unit L1 norm.
pub fn fft_convolve(x: &[f64], h: &[f64], mode: &str, device: Device) -> Result<Vec<f64>> {
    check_signal("fft_convolve", "x", x)?;
    check_signal("fft_convolve", "h", h)?;
    let (start, len) = mode_range(mode, x.len(), h.len())?;
    let n = fft_size(x.len() + h.len() - 1);
    radices(n)?;
    let (sx, sh) = (max_abs(x), l1(h));
    let pad = |v: &[f64], s: f64| -> Vec<f32> {
        (0..n)
            .map(|i| v.get(i).map_or(0.0, |x| (x / s) as f32))
            .collect()
    };
    let y = &run(
        &fft_conv_plan(n, device)?,
        "fft_convolve",
        &[&pad(x, sx), &pad(h, sh)],
    )?[0];
    Ok(y[start..start + len]
        .iter()
        .map(|&v| v as f64 * sx * sh)
        .collect())
}

/// Direct-convolution program: inputs `x` [1, 1, 1, w] (zero-padded), `taps` [1, 1, 1, k] (flipped); output [1, 1, 1, w − k + 1].
fn direct_plan(w: usize, k: usize, device: Device) -> Result<SharedPlan> {
    cached(format!("dsp/direct/{w}/{k}/{device:?}"), || {
        let (x, t) = (
            input_port(&[1, 1, 1, w], DType::Fp16, Some("x"))?,
            input_port(&[1, 1, 1, k], DType::Fp16, Some("taps"))?,
        );
        Plan::build(
            &["x", "taps"],
            &[("y", dynamic_conv(&x, &t, ConvOptions::default())?)],
            Feeds::default(),
            device,
        )
    })
}

/// FIR filter `x` with `taps` (`numpy.convolve(x, taps, mode)`): a native 1 × K convolution
/// for K ≤ 15 (x scaled to unit maximum, taps to unit L1 norm), else [`fft_convolve`].
pub fn fir_filter(x: &[f64], taps: &[f64], mode: &str, device: Device) -> Result<Vec<f64>> {
    check_signal("fir_filter", "x", x)?;
    check_signal("fir_filter", "taps", taps)?;
    let k = taps.len();
    if k > MAX_KERNEL_WIDTH {
        return fft_convolve(x, taps, mode, device);
    }
    let (start, len) = mode_range(mode, x.len(), k)?;
    let w = x.len() + 2 * (k - 1);
    if w > MAX_EXTENT {
        return Err(Error::shape(
            "fir_filter",
            format!(
                "signal of {} samples is longer than {} (one program axis)",
                x.len(),
                MAX_EXTENT - 2 * (k - 1)
            ),
        ));
    }
    let (sx, st) = (max_abs(x), l1(taps));
    let xs: Vec<f32> = (0..w)
        .map(|i| {
            if i < k - 1 || i >= k - 1 + x.len() {
                0.0
            } else {
                (x[i + 1 - k] / sx) as f32
            }
        })
        .collect();
    let ts: Vec<f32> = taps.iter().rev().map(|t| (t / st) as f32).collect();
    let y = &run(&direct_plan(w, k, device)?, "fir_filter", &[&xs, &ts])?[0];
    Ok(y[start..start + len]
        .iter()
        .map(|&v| v as f64 * sx * st)
        .collect())
}

/// Cross-correlation of real signals (`numpy.correlate(a, v, mode)`): [`fir_filter`] with `v` reversed.
pub fn correlate(a: &[f64], v: &[f64], mode: &str, device: Device) -> Result<Vec<f64>> {
    let rev: Vec<f64> = v.iter().rev().copied().collect();
    fir_filter(a, &rev, mode, device)
}

/// Short-time Fourier transform: frames t = 0, 1, … of `window.len()` samples every `hop`
/// (no padding; x must hold at least one frame), each multiplied by `window`, then one batched
/// rfft on the device. Returns (re, im) as [frames, win/2 + 1] row-major and the frame count.
pub fn stft(
    x: &[f64],
    window: &[f64],
    hop: usize,
    device: Device,
) -> Result<(Vec<f64>, Vec<f64>, usize)> {
    check_signal("stft", "x", x)?;
    check_signal("stft", "window", window)?;
    let win = window.len();
    if hop == 0 || win > x.len() {
        return Err(Error::value(
            "stft",
            format!(
                "needs hop >= 1 and a window ({win}) no longer than the signal ({})",
                x.len()
            ),
        ));
    }
    let frames = 1 + (x.len() - win) / hop;
    let sx = max_abs(x);
    let data: Vec<f32> = (0..frames * win)
        .map(|i| (x[(i / win) * hop + i % win] * window[i % win] / sx) as f32)
        .collect();
    let out = FftPlan::new(FftKind::Rfft, &[frames, win], None, device)?.run(&data, None)?;
    let back = |v: &[f32]| v.iter().map(|&y| y as f64 * sx).collect::<Vec<_>>();
    Ok((back(&out[0]), back(&out[1]), frames))
}
