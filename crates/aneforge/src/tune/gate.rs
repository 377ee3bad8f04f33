//! The fail-closed accuracy and speed gate every tuned variant passes before it is chosen.

/// Relative error of `out` against the lossless baseline `reference`: max |out − ref| / max |ref|
/// over every output; `None` when any value is NaN or infinite, or the lengths differ (fail-closed).
pub fn relative_error(reference: &[Vec<f32>], out: &[Vec<f32>]) -> Option<f64> {
    if reference.len() != out.len() || reference.iter().zip(out).any(|(r, o)| r.len() != o.len()) {
        return None;
    }
    let (mut diff, mut scale) = (0.0f64, 0.0f64);
    for (r, o) in reference.iter().zip(out) {
        for (&a, &b) in r.iter().zip(o) {
            if !a.is_finite() || !b.is_finite() {
                return None;
            }
            diff = diff.max((f64::from(b) - f64::from(a)).abs());
            scale = scale.max(f64::from(a).abs());
        }
    }
    Some(if scale > 0.0 { diff / scale } else { diff })
}

/// The gate's verdict on one variant.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Accepted,
    Rejected(String),
}

/// Accept a variant when its error is finite and ≤ `atol`, and, if lossy, when it is at least
/// `min_lossy_speedup` × faster than the baseline (`speedup` = baseline µs / variant µs).
pub fn judge(
    error: Option<f64>,
    atol: f64,
    lossy: bool,
    speedup: f64,
    min_lossy_speedup: f64,
) -> Verdict {
    match error {
        None => Verdict::Rejected("non-finite output (NaN or inf): fail-closed".into()),
        Some(e) if e > atol => Verdict::Rejected(format!("error {e:.3e} > atol {atol:.1e}")),
        Some(_) if lossy && speedup < min_lossy_speedup => Verdict::Rejected(format!(
            "lossy and only {speedup:.2}x faster (needs {min_lossy_speedup:.2}x)"
        )),
        Some(_) => Verdict::Accepted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_inf_and_shape_mismatch_fail_closed() {
        let r = vec![vec![1.0, -4.0]];
        assert_eq!(relative_error(&r, &[vec![1.0, -3.0]]), Some(0.25));
        assert_eq!(relative_error(&r, &[vec![f32::NAN, -4.0]]), None);
        assert_eq!(relative_error(&r, &[vec![1.0, f32::INFINITY]]), None);
        assert_eq!(relative_error(&r, &[vec![1.0]]), None);
        assert_eq!(relative_error(&[vec![0.0]], &[vec![0.5]]), Some(0.5));
    }

    #[test]
    fn gate_logic() {
        assert_eq!(judge(Some(1e-3), 5e-3, false, 0.9, 1.1), Verdict::Accepted);
        assert_eq!(judge(Some(1e-3), 5e-3, true, 1.2, 1.1), Verdict::Accepted);
        assert!(
            matches!(judge(Some(1e-3), 5e-3, true, 1.05, 1.1), Verdict::Rejected(m) if m.contains("1.05x"))
        );
        assert!(
            matches!(judge(Some(6e-3), 5e-3, false, 3.0, 1.1), Verdict::Rejected(m) if m.contains("> atol"))
        );
        assert!(
            matches!(judge(None, 5e-3, false, 3.0, 1.1), Verdict::Rejected(m) if m.contains("fail-closed"))
        );
    }
}
