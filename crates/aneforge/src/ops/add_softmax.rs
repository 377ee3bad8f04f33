//! softmax(x + m) over the last axis per block of 8 rows, where m (an attention mask or bias)
//! broadcasts against x: the add rounded to fp16, the softmax of `reduce`, and its result
//! rounded to fp16 — the bits of the `add` step, the `softmax` step and the executor's
//! rounding, in the three passes of `simd_softmax`'s fused lanes where they apply.

use rayon::prelude::*;

use super::kernel::{broadcast_strides, PAR_MIN_ELEMS};
use super::reduce::softmax_rows;
use super::simd_fp16::round_in_place;
use super::simd_softmax::{try_add_softmax_rows_rounded, Fused};

/// Rows per block (the softmax lanes' block).
const ROWS: usize = 8;

/// y = r(softmax(r(x + m))) along the last axis of `shape` (r: round to fp16), m of `m_shape`
/// broadcasting to `shape` (NumPy rules, already checked by the graph). x and y hold
/// numel(shape) values, m numel(m_shape).
pub fn add_softmax_rounded(
    x: &[f32],
    m: &[f32],
    shape: &[usize],
    m_shape: &[usize],
    y: &mut [f32],
) {
    let n = *shape.last().unwrap_or(&1);
    if n == 0 || x.is_empty() {
        return;
    }
    let strides = broadcast_strides(m_shape, shape);
    let (lead, col) = strides.split_at(strides.len() - 1);
    let lead_dims = &shape[..shape.len() - 1];
    // Where row r's mask values start: r's index over the leading axes times their strides.
    let row_start = |mut r: usize| -> usize {
        let mut at = 0;
        for (&d, &s) in lead_dims.iter().zip(lead).rev() {
            at += (r % d) * s;
            r /= d;
        }
        at
    };
    let col = col[0];
    // Row r's mask: n values, or one broadcast along the row.
    let mask = |r: usize| {
        let start = row_start(r);
        &m[start..start + if col == 1 { n } else { 1 }]
    };
    let block = |b: usize, yb: &mut [f32]| {
        let first = b * ROWS;
        let xb = &x[first * n..first * n + yb.len()];
        let rows = std::array::from_fn(|k| mask(first + k));
        match try_add_softmax_rows_rounded(xb, &rows, yb, n) {
            Fused::Done => return,
            Fused::Sums => {}
            Fused::Declined => {
                for (k, (row, xr)) in yb.chunks_exact_mut(n).zip(xb.chunks_exact(n)).enumerate() {
                    let mk = mask(first + k);
                    let b = |j: usize| mk[j.min(mk.len() - 1)];
                    row.iter_mut()
                        .zip(xr)
                        .enumerate()
                        .for_each(|(j, (o, &a))| *o = a + b(j));
                }
                round_in_place(yb);
            }
        }
        let v = yb.to_vec();
        softmax_rows(&v, yb, n);
        round_in_place(yb);
    };
    if x.len() >= PAR_MIN_ELEMS {
        y.par_chunks_mut(ROWS * n)
            .enumerate()
            .for_each(|(b, yb)| block(b, yb));
    } else {
        y.chunks_mut(ROWS * n)
            .enumerate()
            .for_each(|(b, yb)| block(b, yb));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::reduce::Softmax;
    use crate::ops::{Buf, Family};

    /// The add (broadcast by index arithmetic written here), rounded, then the softmax op's
    /// own eval, rounded: the steps the fused pass stands for.
    fn steps(x: &[f32], m: &[f32], shape: &[usize], m_shape: &[usize]) -> Vec<f32> {
        let st = broadcast_strides(m_shape, shape);
        let mut idx = vec![0usize; shape.len()];
        let mut v = Vec::with_capacity(x.len());
        for &a in x {
            let at: usize = idx.iter().zip(&st).map(|(i, s)| i * s).sum();
            v.push(a + m[at]);
            for ax in (0..shape.len()).rev() {
                idx[ax] += 1;
                if idx[ax] < shape[ax] {
                    break;
                }
                idx[ax] = 0;
            }
        }
        round_in_place(&mut v);
        let mut out = [Buf::zeros(shape)];
        let sm = Softmax {
            axis: shape.len() - 1,
        };
        sm.eval(
            &[&Buf {
                shape: shape.to_vec(),
                data: v,
            }],
            &mut out,
        )
        .unwrap();
        round_in_place(&mut out[0].data);
        out[0].data.clone()
    }

    /// Masks of several broadcast shapes (a row of the last axis, one value per row, a full
    /// tensor, a per-head value), widths that leave the AVX lanes (not a multiple of 8), row
    /// counts that leave short blocks, a NaN row and a size split over pools of 1, 2 and 3
    /// threads: the fused bits equal the steps'.
    #[test]
    fn fused_bits_equal_the_steps() {
        let cases: [(&[usize], &[usize]); 6] = [
            (&[12, 128, 128], &[1, 1, 128]),
            (&[2, 3, 17, 24], &[2, 1, 1, 24]),
            (&[5, 13], &[5, 13]),
            (&[3, 9, 40], &[3, 9, 1]),
            (&[1, 7], &[7]),
            (&[4, 2, 16], &[2, 1]),
        ];
        for (shape, m_shape) in cases {
            let len: usize = shape.iter().product();
            let mlen: usize = m_shape.iter().product();
            let mut x: Vec<f32> = (0..len)
                .map(|i| crate::ops::simd_fp16::round1(((i * 7919 % 613) as f32 - 300.0) / 37.0))
                .collect();
            if len > 100 {
                x[50] = f32::NAN;
            }
            let m: Vec<f32> = (0..mlen)
                .map(|i| if i % 5 == 4 { -10000.0 } else { (i % 3) as f32 })
                .collect();
            let want = steps(&x, &m, shape, m_shape);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            for threads in 1..=3 {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let mut y = vec![0f32; len];
                pool.install(|| add_softmax_rounded(&x, &m, shape, m_shape, &mut y));
                assert_eq!(
                    bits(&y),
                    bits(&want),
                    "{shape:?} + {m_shape:?}, {threads} threads"
                );
            }
        }
    }
}
