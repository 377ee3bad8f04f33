//! Point and vector kernels: `cross_product` of 3-vectors, greedy farthest point sampling
//! (`fps`) and fixed-radius neighbour membership (`radius_search`).

use crate::error::{Error, Result};
use crate::ops::host::checks::check_len;
use crate::shape::Shape;

/// Op names used in errors.
pub const CROSS_PRODUCT: &str = "cross_product";
/// Op name of farthest point sampling.
pub const FPS: &str = "fps";
/// Op name of the radius membership test.
pub const RADIUS_SEARCH: &str = "radius_search";

/// Shape rule of `cross_product`: `a` and `b` equal, last axis 3; the output has that shape.
pub fn cross_product_shape(a: &[usize], b: &[usize]) -> Result<Shape> {
    if a != b || a.last() != Some(&3) {
        return Err(Error::shape(
            CROSS_PRODUCT,
            format!("a {a:?} and b {b:?} must have the same shape with a last axis of 3"),
        ));
    }
    Ok(a.to_vec())
}

/// `a × b` for each 3-vector on the last axis.
pub fn cross_product(a: &[f32], b: &[f32]) -> Result<Vec<f32>> {
    if a.len() != b.len() || !a.len().is_multiple_of(3) {
        return Err(Error::shape(
            CROSS_PRODUCT,
            format!(
                "a has {} and b {} elements; both must be the same multiple of 3",
                a.len(),
                b.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(a.len());
    for (u, v) in a.chunks(3).zip(b.chunks(3)) {
        out.push(u[1] * v[2] - u[2] * v[1]);
        out.push(u[2] * v[0] - u[0] * v[2]);
        out.push(u[0] * v[1] - u[1] * v[0]);
    }
    Ok(out)
}

/// Squared distance between two 3-vectors, in f64.
fn dist2(p: &[f32], q: &[f32]) -> f64 {
    p.iter()
        .zip(q)
        .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
        .sum()
}

/// Shape rule of `fps`: `points` is `[N, 3]`, `1 <= k <= N`; the output is `[k, 3]`.
pub fn fps_shape(points: &[usize], k: i64) -> Result<Shape> {
    if points.len() != 2 || points[1] != 3 {
        return Err(Error::shape(
            FPS,
            format!("points must be [N, 3], got {points:?}"),
        ));
    }
    if k < 1 || k as u64 > points[0] as u64 {
        return Err(Error::value(
            FPS,
            format!("k must be in 1..={}, got {k}", points[0]),
        ));
    }
    Ok(vec![k as usize, 3])
}

/// Greedy farthest point sampling: start at point 0, then repeatedly take the point whose
/// squared L2 distance to the chosen set is largest (the lowest index on ties); `[k, 3]` points.
pub fn fps(points: &[f32], n: usize, k: usize) -> Result<Vec<f32>> {
    check_len(FPS, "points", points.len(), &[n, 3])?;
    fps_shape(&[n, 3], k as i64)?;
    let mut nearest = vec![f64::INFINITY; n];
    let mut out = Vec::with_capacity(k * 3);
    let mut current = 0;
    for _ in 0..k {
        let p = &points[current * 3..current * 3 + 3];
        out.extend_from_slice(p);
        let (mut best, mut best_d) = (0, -1.0);
        for (i, d) in nearest.iter_mut().enumerate() {
            *d = d.min(dist2(p, &points[i * 3..i * 3 + 3]));
            if *d > best_d {
                (best, best_d) = (i, *d);
            }
        }
        current = best;
    }
    Ok(out)
}

/// Shape rule of `radius_search`: `points [N, 3]`, `centroids [M, 3]`, radius finite and >= 0;
/// the output is `[N, M]`.
pub fn radius_search_shape(points: &[usize], centroids: &[usize], radius: f64) -> Result<Shape> {
    if points.len() != 2 || points[1] != 3 || centroids.len() != 2 || centroids[1] != 3 {
        return Err(Error::shape(
            RADIUS_SEARCH,
            format!(
                "points and centroids must be [N, 3] and [M, 3], got {points:?} and {centroids:?}"
            ),
        ));
    }
    if !(radius.is_finite() && radius >= 0.0) {
        return Err(Error::value(
            RADIUS_SEARCH,
            format!("radius must be finite and >= 0, got {radius}"),
        ));
    }
    Ok(vec![points[0], centroids[0]])
}

/// `out[i, j] = 1` when point `i` lies within `radius` of centroid `j` (squared distance <=
/// radius², inclusive), else 0.
pub fn radius_search(points: &[f32], centroids: &[f32], radius: f64) -> Result<Vec<f32>> {
    if !points.len().is_multiple_of(3) || !centroids.len().is_multiple_of(3) {
        return Err(Error::shape(
            RADIUS_SEARCH,
            "points and centroids must hold 3-vectors",
        ));
    }
    let r2 = radius * radius;
    Ok(points
        .chunks(3)
        .flat_map(|p| {
            centroids
                .chunks(3)
                .map(move |c| if dist2(p, c) <= r2 { 1.0 } else { 0.0 })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_product_of_the_unit_axes_is_the_third_axis() {
        let e = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
        let f = [0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        assert_eq!(
            cross_product(&e, &f).unwrap(),
            [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
        );
        assert_eq!(
            cross_product(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap(),
            [-3.0, 6.0, -3.0]
        );
        assert!(cross_product_shape(&[2, 3], &[2, 4]).is_err());
        assert!(cross_product_shape(&[2, 4], &[2, 4]).is_err());
    }

    #[test]
    fn fps_picks_the_farthest_point_each_time() {
        // Points on a line at 0, 1, 10, 4: start 0 -> 10 (farthest) -> 4 (min dist 4 beats 1).
        let pts = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 10.0, 0.0, 0.0, 4.0, 0.0, 0.0];
        let out = fps(&pts, 4, 3).unwrap();
        assert_eq!(out, [0.0, 0.0, 0.0, 10.0, 0.0, 0.0, 4.0, 0.0, 0.0]);
        assert!(fps_shape(&[4, 3], 5)
            .unwrap_err()
            .to_string()
            .contains("k must"));
        assert!(fps_shape(&[4, 2], 1).is_err());
    }

    #[test]
    fn radius_search_is_inclusive_at_the_radius() {
        let pts = [0.0, 0.0, 0.0, 3.0, 4.0, 0.0];
        let cen = [0.0, 0.0, 0.0];
        assert_eq!(radius_search(&pts, &cen, 5.0).unwrap(), [1.0, 1.0]);
        assert_eq!(radius_search(&pts, &cen, 4.9).unwrap(), [1.0, 0.0]);
        assert!(radius_search_shape(&[2, 3], &[1, 3], f64::NAN).is_err());
    }
}
