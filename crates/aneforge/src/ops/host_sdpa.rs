//! Host scaled dot-product attention: `softmax(q kᵀ · scale + mask) v` over the last two axes,
//! with an optional additive mask tensor (any shape broadcasting to `[..., Sq, Skv]`) that may be
//! computed at run time. Scores, softmax and the weighted sum are f32; a row whose every score
//! is −inf is a runtime error (no silent NaN).

use crate::error::{Error, Result};
use crate::ops::kernel::broadcast_strides;
use crate::shape::{self, Shape};

/// Op name used in errors.
pub const SDPA: &str = "sdpa";

/// Shape rule: `q [..., Sq, D]`, `k [..., Skv, D]`, `v [..., Skv, Dv]` with equal leading axes,
/// an optional mask broadcasting to `[..., Sq, Skv]`; the output is `[..., Sq, Dv]`.
pub fn sdpa_shape(q: &[usize], k: &[usize], v: &[usize], mask: Option<&[usize]>) -> Result<Shape> {
    let r = q.len();
    let ok = r >= 2
        && k.len() == r
        && v.len() == r
        && q[..r - 2] == k[..r - 2]
        && k[..r - 2] == v[..r - 2]
        && q[r - 1] == k[r - 1]
        && k[r - 2] == v[r - 2];
    if !ok {
        return Err(Error::shape(
            SDPA,
            format!("needs q [..., Sq, D], k [..., Skv, D], v [..., Skv, Dv] with equal leading axes; got {q:?}, {k:?}, {v:?}"),
        ));
    }
    let mut scores = q[..r - 1].to_vec();
    scores.push(k[r - 2]);
    if let Some(m) = mask {
        let b = shape::broadcast(SDPA, m, &scores)?;
        if b != scores {
            return Err(Error::shape(
                SDPA,
                format!("attn_mask {m:?} must broadcast to the scores {scores:?}"),
            ));
        }
    }
    let mut out = q[..r - 1].to_vec();
    out.push(v[r - 1]);
    Ok(out)
}

/// A tensor seen by the kernel: its elements and its shape.
pub type View<'a> = (&'a [f32], &'a [usize]);

/// The attention output for the shapes `sdpa_shape` accepted (each tensor paired with its shape).
pub fn sdpa(q: View, k: View, v: View, mask: Option<View>, scale: f32) -> Result<Vec<f32>> {
    let ((q, q_shape), (k, k_shape), (v, v_shape)) = (q, k, v);
    let out_shape = sdpa_shape(q_shape, k_shape, v_shape, mask.map(|m| m.1))?;
    let r = q_shape.len();
    let (sq, d, skv, dv) = (
        q_shape[r - 2],
        q_shape[r - 1],
        k_shape[r - 2],
        v_shape[r - 1],
    );
    let mut scores_shape = q_shape[..r - 1].to_vec();
    scores_shape.push(skv);
    let mask_strides = mask.map(|(_, s)| broadcast_strides(s, &scores_shape));
    let score_strides = shape::strides(&scores_shape);
    let heads = shape::numel(&q_shape[..r - 2]);
    let mut out = vec![0.0f32; shape::numel(&out_shape)];
    let mut row = vec![0.0f32; skv];
    for h in 0..heads {
        let (qh, kh, vh) = (&q[h * sq * d..], &k[h * skv * d..], &v[h * skv * dv..]);
        for i in 0..sq {
            let qi = &qh[i * d..(i + 1) * d];
            for (j, s) in row.iter_mut().enumerate() {
                *s = qi
                    .iter()
                    .zip(&kh[j * d..(j + 1) * d])
                    .map(|(a, b)| a * b)
                    .sum::<f32>()
                    * scale;
            }
            if let (Some((m, _)), Some(ms)) = (mask, &mask_strides) {
                let flat = (h * sq + i) * skv;
                for (j, s) in row.iter_mut().enumerate() {
                    let mut rem = flat + j;
                    let mut at = 0;
                    for (st, mst) in score_strides.iter().zip(ms) {
                        at += (rem / st) * mst;
                        rem %= st;
                    }
                    *s += m[at];
                }
            }
            let top = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if top == f32::NEG_INFINITY || top.is_nan() {
                return Err(Error::Runtime {
                    op: SDPA.into(),
                    msg: format!("query row {i} of head {h} has no finite score (mask or inputs are -inf/NaN)"),
                });
            }
            row.iter_mut().for_each(|s| *s = (*s - top).exp());
            let total: f32 = row.iter().sum();
            let oi = &mut out[(h * sq + i) * dv..(h * sq + i + 1) * dv];
            for (j, w) in row.iter().enumerate() {
                let vj = &vh[j * dv..(j + 1) * dv];
                oi.iter_mut().zip(vj).for_each(|(o, x)| *o += w / total * x);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_scores_average_the_values_and_a_mask_removes_a_key() {
        // Two keys with equal scores: the output is the mean of the two value rows.
        let (q, k, v) = ([1.0, 0.0], [1.0, 0.0, 1.0, 0.0], [2.0, 4.0]);
        let out = sdpa((&q, &[1, 2]), (&k, &[2, 2]), (&v, &[2, 1]), None, 1.0).unwrap();
        assert_eq!(out, [3.0]);
        let mask: View = (&[0.0, f32::NEG_INFINITY], &[2]);
        let masked = sdpa((&q, &[1, 2]), (&k, &[2, 2]), (&v, &[2, 1]), Some(mask), 1.0).unwrap();
        assert_eq!(masked, [2.0]);
        // Scores ln 3 and 0 weight the values 3/4 and 1/4 (closed form).
        let q2 = [3f32.ln(), 0.0];
        let k2 = [1.0, 0.0, 0.0, 1.0];
        let out = sdpa((&q2, &[1, 2]), (&k2, &[2, 2]), (&v, &[2, 1]), None, 1.0).unwrap();
        assert!((out[0] - 2.5).abs() < 1e-6, "{out:?}");
    }

    #[test]
    fn bad_shapes_and_fully_masked_rows_are_errors() {
        assert!(sdpa_shape(&[1, 2, 3, 4], &[1, 2, 5, 3], &[1, 2, 5, 4], None).is_err());
        assert!(sdpa_shape(&[1, 2, 3, 4], &[1, 2, 5, 4], &[1, 2, 5, 4], Some(&[3, 4])).is_err());
        assert_eq!(
            sdpa_shape(&[1, 2, 3, 4], &[1, 2, 5, 4], &[1, 2, 5, 6], Some(&[3, 5])).unwrap(),
            [1, 2, 3, 6]
        );
        let inf = [f32::NEG_INFINITY; 2];
        let kv: View = (&[1.0, 1.0], &[2, 1]);
        let e = sdpa((&[1.0], &[1, 1]), kv, kv, Some((&inf, &[2])), 1.0).unwrap_err();
        assert!(e.to_string().contains("no finite score"), "{e}");
    }
}
