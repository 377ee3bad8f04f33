//! 4-bit palettization: one 16-entry fp16 codebook per tensor by 1-D k-means. Init: centroids at
//! the midpoints of the 17 quantile edges (NumPy's default linear quantile at k/16); then 20
//! Lloyd iterations (nearest centroid, first on ties; each centroid becomes the mean of its
//! members summed in element order, or stays put when it has none), in f64. The palette is the
//! fp16-rounded centroids and each index the nearest palette entry.

use std::sync::Arc;

use half::f16;
use rayon::prelude::*;

use crate::mil::blob::{BlobType, Packed};
use crate::ops::constexpr::{Encoded, LUT_SIZE};

/// Lloyd iterations after the quantile init.
pub const ITERATIONS: usize = 20;

/// Elements per parallel assignment chunk.
const CHUNK: usize = 1 << 14;

/// NumPy's default ("linear") quantile `q` of sorted data, including its lerp from the upper end when the fraction is >= 0.5.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let v = (sorted.len() - 1) as f64 * q;
    let lo = v.floor();
    let t = v - lo;
    let lo = lo as usize;
    let (a, b) = (sorted[lo], sorted[(lo + 1).min(sorted.len() - 1)]);
    let d = b - a;
    if t >= 0.5 {
        b - d * (1.0 - t)
    } else {
        a + d * t
    }
}

/// Index of the centroid nearest to `x` (the first one on ties).
fn nearest(x: f64, c: &[f64]) -> u8 {
    let mut best = (0, (x - c[0]).abs());
    for (k, &ck) in c.iter().enumerate().skip(1) {
        let d = (x - ck).abs();
        if d < best.1 {
            best = (k, d);
        }
    }
    best.0 as u8
}

/// Nearest-centroid index of every element (in parallel chunks).
fn assign(x: &[f64], c: &[f64]) -> Vec<u8> {
    let mut idx = vec![0u8; x.len()];
    idx.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(o, xs)| o.iter_mut().zip(xs).for_each(|(o, &v)| *o = nearest(v, c)));
    idx
}

/// The k-means centroids (f64) of `x` after the quantile-midpoint init and [`ITERATIONS`] Lloyd steps.
pub fn kmeans(x: &[f64]) -> Vec<f64> {
    let mut sorted = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    let edges: Vec<f64> = (0..=LUT_SIZE)
        .map(|k| quantile(&sorted, k as f64 / LUT_SIZE as f64))
        .collect();
    let mut c: Vec<f64> = edges.windows(2).map(|e| (e[0] + e[1]) / 2.0).collect();
    for _ in 0..ITERATIONS {
        let idx = assign(x, &c);
        let (mut sum, mut count) = ([0f64; LUT_SIZE], [0usize; LUT_SIZE]);
        for (&v, &k) in x.iter().zip(&idx) {
            sum[k as usize] += v;
            count[k as usize] += 1;
        }
        for k in 0..LUT_SIZE {
            if count[k] > 0 {
                c[k] = sum[k] / count[k] as f64;
            }
        }
    }
    c
}

/// Palettize `w`: the fp16 codebook and each element's nearest entry.
pub fn palettize(w: &[f16]) -> Encoded {
    let x: Vec<f64> = w.iter().map(|v| v.to_f64()).collect();
    let lut: Vec<f16> = kmeans(&x).iter().map(|&c| f16::from_f64(c)).collect();
    let lut64: Vec<f64> = lut.iter().map(|v| v.to_f64()).collect();
    let idx = assign(&x, &lut64);
    Encoded::Lut {
        indices: Packed::pack(BlobType::Uint4, idx.into_iter()),
        lut: Arc::new(lut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_matches_numpy_linear_interpolation() {
        let s = [0.0, 1.0, 3.0, 7.0];
        // np.quantile([0, 1, 3, 7], [0, 0.25, 0.5, 0.8, 1]) = [0, 0.75, 2, 4.6, 7]
        let got: Vec<f64> = [0.0, 0.25, 0.5, 0.8, 1.0]
            .iter()
            .map(|&q| quantile(&s, q))
            .collect();
        assert_eq!(got[..3], [0.0, 0.75, 2.0]);
        assert!((got[3] - 4.6).abs() < 1e-12 && got[4] == 7.0);
        assert_eq!(quantile(&[5.0], 0.5), 5.0);
    }

    #[test]
    fn sixteen_distinct_values_are_reproduced_exactly() {
        // 16 well-separated clusters of repeated fp16 values: k-means lands on each value.
        let vals: Vec<f32> = (0..16).map(|k| (k as f32 - 7.5) * 0.25).collect();
        let w: Vec<f16> = (0..320)
            .map(|i| f16::from_f32(vals[(i * 7) % 16]))
            .collect();
        let Encoded::Lut { indices, lut } = palettize(&w) else {
            panic!("not a lut")
        };
        assert_eq!(lut.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), vals);
        assert!((0..w.len()).all(|i| lut[indices.get(i) as usize] == w[i]));
    }

    #[test]
    fn lloyd_moves_centroids_to_cluster_means() {
        // Two values only: the init puts 8 centroids on each side; the palette holds both values.
        let w: Vec<f16> = (0..10)
            .map(|i| f16::from_f32(if i < 3 { -1.0 } else { 2.0 }))
            .collect();
        let Encoded::Lut { indices, lut } = palettize(&w) else {
            panic!("not a lut")
        };
        assert!((0..10).all(|i| lut[indices.get(i) as usize] == w[i]));
        // Init midpoints include 0.71875, 3.75 and 9.28125; one step moves the nearest centroids
        // onto 0, 1, 9, 10 and 11, and centroids without members (3.75) stay put.
        let c = kmeans(&[0.0, 0.0, 1.0, 9.0, 10.0, 11.0]);
        assert_eq!(c.len(), LUT_SIZE);
        assert!(
            [0.0, 1.0, 9.0, 10.0, 11.0, 3.75]
                .iter()
                .all(|v| c.contains(v)),
            "{c:?}"
        );
    }
}
