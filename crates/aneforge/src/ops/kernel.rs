//! Shared pieces of the reference kernels: the value buffer and broadcast indexing.

use std::sync::OnceLock;

use half::f16;

use super::simd_fp16::{lookup, TABLE_LEN};

use crate::shape::{self, Shape};

/// Elements above which a kernel splits its work across the rayon pool.
pub const PAR_MIN_ELEMS: usize = 1 << 15;

/// Run `f` on matching chunks of `out` (`out_chunk` elements each) and `inp` (`in_chunk` each),
/// on the rayon pool when `inp` has at least [`PAR_MIN_ELEMS`] elements.
pub fn for_chunks(
    out: &mut [f32],
    out_chunk: usize,
    inp: &[f32],
    in_chunk: usize,
    f: impl Fn(&mut [f32], &[f32]) + Sync + Send,
) {
    use rayon::prelude::*;
    if inp.len() >= PAR_MIN_ELEMS {
        out.par_chunks_mut(out_chunk)
            .zip(inp.par_chunks(in_chunk))
            .for_each(|(o, i)| f(o, i));
    } else {
        out.chunks_mut(out_chunk)
            .zip(inp.chunks(in_chunk))
            .for_each(|(o, i)| f(o, i));
    }
}

/// One value inside the reference executor: f32 storage of fp16 (or uint8 / bool 0-1) numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Buf {
    pub shape: Shape,
    pub data: Vec<f32>,
}

impl Buf {
    /// A zero-filled buffer of `shape`.
    pub fn zeros(shape: &[usize]) -> Self {
        Buf {
            shape: shape.to_vec(),
            data: vec![0.0; shape::numel(shape)],
        }
    }
}

/// Strides of `shape` seen through a broadcast to `out` (0 on broadcast axes), padded to `out`'s rank.
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let pad = out.len() - shape.len();
    let st = shape::strides(shape);
    (0..out.len())
        .map(|i| {
            if i < pad || shape[i - pad] == 1 {
                0
            } else {
                st[i - pad]
            }
        })
        .collect()
}

/// Call `f(out_index, offsets)` for every element of `out` in row-major order, where
/// `offsets[k]` is the element of operand `k` (with strides from [`broadcast_strides`]).
pub fn for_each_broadcast<const K: usize>(
    out: &[usize],
    strides: [&[usize]; K],
    mut f: impl FnMut(usize, [usize; K]),
) {
    let rank = out.len();
    if rank == 0 {
        f(0, [0; K]);
        return;
    }
    let mut idx = vec![0usize; rank];
    let mut off = [0usize; K];
    let inner = out[rank - 1];
    let inner_st: [usize; K] = std::array::from_fn(|k| strides[k][rank - 1]);
    let total = shape::numel(out);
    let mut o = 0;
    while o < total {
        let mut cur = off;
        for _ in 0..inner {
            f(o, cur);
            o += 1;
            for k in 0..K {
                cur[k] += inner_st[k];
            }
        }
        // Advance the outer index (axes 0..rank-1).
        let mut ax = rank - 1;
        loop {
            if ax == 0 {
                return;
            }
            ax -= 1;
            idx[ax] += 1;
            for k in 0..K {
                off[k] += strides[k][ax];
            }
            if idx[ax] < out[ax] {
                break;
            }
            for k in 0..K {
                off[k] -= strides[k][ax] * out[ax];
            }
            idx[ax] = 0;
        }
    }
}

/// e^v of every element in place, bit for bit `f32::exp`: the vector lanes of
/// [`super::simd_exp`] where they reproduce it, else exact fp16 values read a table of
/// `f32::exp` over all 65,536 fp16 inputs, built once, and any other value calls `exp`.
pub fn exp_in_place(v: &mut [f32]) {
    if super::simd_exp::try_exp_in_place(v).is_some() {
        return;
    }
    static TABLE: OnceLock<Box<[f32; TABLE_LEN]>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let t: Vec<f32> = (0..=u16::MAX)
            .map(|b| f16::from_bits(b).to_f32().exp())
            .collect();
        t.try_into().expect("65,536 entries")
    });
    let mut x = [0f32; 256];
    for c in v.chunks_mut(256) {
        let x = &mut x[..c.len()];
        x.copy_from_slice(c);
        lookup(table, x, c, f32::exp);
    }
}

/// Error function: the Numerical Recipes erfc Chebyshev fit (|error| < 1.2e-7) evaluated in f32 (the known-value test holds it to 2e-7).
pub fn erf(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_204
                                + t * (1.488_515_9 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = 1.0 - t * poly.exp();
    if x < 0.0 {
        -r
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_walk_matches_manual_indexing() {
        // a: [2,1,3], b: [4,1] -> out [2,4,3]
        let out = [2, 4, 3];
        let sa = broadcast_strides(&[2, 1, 3], &out);
        let sb = broadcast_strides(&[4, 1], &out);
        let mut seen = Vec::new();
        for_each_broadcast(&out, [&sa, &sb], |o, [a, b]| seen.push((o, a, b)));
        assert_eq!(seen.len(), 24);
        for (o, a, b) in seen {
            let (i, j, k) = (o / 12, (o / 3) % 4, o % 3);
            assert_eq!(a, i * 3 + k);
            assert_eq!(b, j);
        }
    }

    /// Every fp16 input, values between grid points and a NaN payload fp16 cannot hold.
    #[test]
    fn exp_in_place_is_bitwise_exp() {
        let mut x: Vec<f32> = (0..=u16::MAX).map(|b| f16::from_bits(b).to_f32()).collect();
        x.extend([-0.3f32, 1e-9, -88.8, 89.0, f32::from_bits(0x7fc0_0001)]);
        let mut got = x.clone();
        exp_in_place(&mut got);
        for (v, g) in x.iter().zip(&got) {
            assert_eq!(g.to_bits(), v.exp().to_bits(), "exp({v})");
        }
        assert_eq!(got[0x3c00], std::f32::consts::E, "exp(1) from the table");
    }

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0f32, 0.0f64),
            (0.5, 0.5204998778),
            (1.0, 0.8427007929),
            (-2.0, -0.9953222650),
            (3.5, 0.9999992569),
        ] {
            assert!((erf(x) as f64 - want).abs() < 2e-7, "erf({x})");
        }
    }
}
