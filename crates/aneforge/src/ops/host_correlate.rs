//! Sliding-window kernels: `cross_correlation` (valid, unflipped, 2-D) and `cost_volume`
//! (absolute differences against a reference shifted by each disparity).

use crate::error::{Error, Result};
use crate::shape::Shape;

/// Op name of the 2-D correlation.
pub const CROSS_CORRELATION: &str = "cross_correlation";
/// Op name of the disparity cost volume.
pub const COST_VOLUME: &str = "cost_volume";

/// Shape rule of `cross_correlation`: `x [H, W]`, `template [Th, Tw]` with Th <= H, Tw <= W;
/// the output is `[H - Th + 1, W - Tw + 1]`.
pub fn cross_correlation_shape(x: &[usize], template: &[usize]) -> Result<Shape> {
    if x.len() != 2 || template.len() != 2 || template[0] > x[0] || template[1] > x[1] {
        return Err(Error::shape(
            CROSS_CORRELATION,
            format!("x must be [H, W] and template [Th, Tw] with Th <= H and Tw <= W, got {x:?} and {template:?}"),
        ));
    }
    Ok(vec![x[0] - template[0] + 1, x[1] - template[1] + 1])
}

/// `out[i, j] = Σ_{a,b} x[i + a, j + b] · t[a, b]` (f32 accumulation).
pub fn cross_correlation(
    x: &[f32],
    x_shape: &[usize],
    t: &[f32],
    t_shape: &[usize],
) -> Result<Vec<f32>> {
    let out_shape = cross_correlation_shape(x_shape, t_shape)?;
    crate::ops::host::checks::check_len(CROSS_CORRELATION, "x", x.len(), x_shape)?;
    crate::ops::host::checks::check_len(CROSS_CORRELATION, "template", t.len(), t_shape)?;
    let (w, tw) = (x_shape[1], t_shape[1]);
    let mut out = Vec::with_capacity(out_shape[0] * out_shape[1]);
    for i in 0..out_shape[0] {
        for j in 0..out_shape[1] {
            let mut acc = 0.0f32;
            for (a, t_row) in t.chunks(tw).enumerate() {
                let x_row = &x[(i + a) * w + j..(i + a) * w + j + tw];
                acc += x_row.iter().zip(t_row).map(|(p, q)| p * q).sum::<f32>();
            }
            out.push(acc);
        }
    }
    Ok(out)
}

/// Shape rule of `cost_volume`: `aux [Wa]`, `reference [Wr]` with Wr >= Wa + R, R >= 0;
/// the output is `[R + 1, Wa]`.
pub fn cost_volume_shape(
    aux: &[usize],
    reference: &[usize],
    disparity_range: i64,
) -> Result<Shape> {
    if disparity_range < 0 {
        return Err(Error::value(
            COST_VOLUME,
            format!("disparity_range must be >= 0, got {disparity_range}"),
        ));
    }
    let r = disparity_range as usize;
    if aux.len() != 1 || reference.len() != 1 || reference[0] < aux[0] + r {
        return Err(Error::shape(
            COST_VOLUME,
            format!("aux [Wa] and reference [Wr] need Wr >= Wa + disparity_range ({r}), got {aux:?} and {reference:?}"),
        ));
    }
    Ok(vec![r + 1, aux[0]])
}

/// `out[d, x] = |aux[x] - reference[x + d]|` for `d` in `0..=disparity_range`.
pub fn cost_volume(aux: &[f32], reference: &[f32], disparity_range: usize) -> Result<Vec<f32>> {
    cost_volume_shape(&[aux.len()], &[reference.len()], disparity_range as i64)?;
    Ok((0..=disparity_range)
        .flat_map(|d| {
            aux.iter()
                .enumerate()
                .map(move |(x, a)| (a - reference[x + d]).abs())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_correlation_is_unflipped_and_valid() {
        // x = [[1,2,3],[4,5,6]], t = [[1,0],[0,-1]] -> [[1-5, 2-6]].
        let out = cross_correlation(
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            &[2, 3],
            &[1.0, 0.0, 0.0, -1.0],
            &[2, 2],
        )
        .unwrap();
        assert_eq!(out, [-4.0, -4.0]);
        assert!(cross_correlation_shape(&[2, 3], &[3, 1]).is_err());
    }

    #[test]
    fn cost_volume_shifts_the_reference_by_each_disparity() {
        let out = cost_volume(&[1.0, 2.0], &[0.0, 5.0, 1.0], 1).unwrap();
        assert_eq!(out, [1.0, 3.0, 4.0, 1.0]);
        assert!(cost_volume_shape(&[2], &[2], 1).is_err());
        assert!(cost_volume_shape(&[2], &[3], -1)
            .unwrap_err()
            .to_string()
            .contains("-1"));
    }
}
