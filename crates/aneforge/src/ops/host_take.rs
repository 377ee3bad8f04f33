//! Runtime-indexed data movement: `take` (NumPy `take` with int32 indices: `gather`,
//! `embedding`) and the scatter-adds that are the gradients of `take` and of `topk`/`sort` values.

use super::host::{check_axis, expect_dtypes, lanes, HostKernel, HostRef, HostTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::TensorType;

/// Index `v` (at flat position `pos` of the index tensor) into an axis of extent `n`: NumPy's
/// `mode="raise"` range `-n..n`, negatives counting from the end; an error names op, value and bound.
fn checked_index(op: &str, v: i32, pos: usize, n: usize) -> Result<usize> {
    let u = if v < 0 { v as i64 + n as i64 } else { v as i64 };
    if u < 0 || u >= n as i64 {
        return Err(Error::value(
            op,
            format!(
                "index {v} (element {pos} of the indices) is out of range for an axis of size {n} (valid: -{n}..{})",
                n as i64 - 1
            ),
        ));
    }
    Ok(u as usize)
}

/// Every index of `idx` checked against extent `n` (all of them before any output is written).
fn checked_indices(op: &str, idx: &[i32], n: usize) -> Result<Vec<usize>> {
    idx.iter()
        .enumerate()
        .map(|(pos, &v)| checked_index(op, v, pos, n))
        .collect()
}

/// NumPy `take(x, indices, axis)` for `x` laid out `(outer, n, inner)` around the axis, into
/// `out` (`outer × len(indices) × inner`); every index is checked (range `-n..n`) before any
/// read, and the lengths of `x` and `out` against the layout.
pub fn take_into(
    x: &[f32],
    (outer, n, inner): (usize, usize, usize),
    indices: &[i32],
    out: &mut [f32],
) -> Result<()> {
    let m = indices.len();
    if x.len() != outer * n * inner || out.len() != outer * m * inner {
        return Err(Error::shape(
            "gather",
            format!(
                "{} values and {} outputs do not form {outer} x {n} x {inner} -> {outer} x {m} x {inner}",
                x.len(),
                out.len()
            ),
        ));
    }
    // One pass proves the common case (every index in 0..n); the full check, with negative
    // indices wrapped and the error naming the first bad one, only when it fails.
    let wrapped: Vec<i32>;
    let checked = match InRange::new(indices, n) {
        Some(c) => c,
        None => {
            let (lo, hi) = idx_range(indices);
            if lo < -(n as i64) || hi >= n as i64 {
                let pos = indices
                    .iter()
                    .position(|&v| !(-(n as i64)..n as i64).contains(&(v as i64)))
                    .expect("the range holds an index out of bounds");
                return checked_index("gather", indices[pos], pos, n).map(|_| ());
            }
            let n32 = i32::try_from(n).map_err(|_| {
                Error::shape(
                    "gather",
                    format!("negative indices into an axis of {n} (more than 2^31 - 1)"),
                )
            })?;
            wrapped = indices
                .iter()
                .map(|&v| if v < 0 { v + n32 } else { v })
                .collect();
            InRange::new(&wrapped, n).expect("wrapped indices are in 0..n")
        }
    };
    if out.is_empty() {
        return Ok(());
    }
    let indices = checked.idx;
    if inner == 1 {
        gather_lanes(x, checked, out);
    } else {
        for (dst, src) in out
            .chunks_exact_mut(m * inner)
            .zip(x.chunks_exact(n * inner))
        {
            for (row, &v) in dst.chunks_exact_mut(inner).zip(indices) {
                let s = v as usize * inner;
                row.copy_from_slice(&src[s..s + inner]);
            }
        }
    }
    Ok(())
}

/// The smallest and largest of `idx` (`(0, -1)` when empty), in one vectorisable pass.
fn idx_range(idx: &[i32]) -> (i64, i64) {
    let (lo, hi) = idx
        .iter()
        .fold((i32::MAX, i32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    if idx.is_empty() {
        (0, -1)
    } else {
        (lo as i64, hi as i64)
    }
}

/// Indices into an axis of extent `n`, every one in `0..n` (checked when made).
#[derive(Clone, Copy)]
struct InRange<'a> {
    idx: &'a [i32],
    n: usize,
}

impl<'a> InRange<'a> {
    /// `idx` when every index is in `0..n` (one pass: the largest index read as unsigned, so a
    /// negative one counts as too large), else `None`.
    fn new(idx: &'a [i32], n: usize) -> Option<InRange<'a>> {
        (idx.is_empty() || (max_unsigned(idx) as usize) < n).then_some(InRange { idx, n })
    }
}

/// The largest of `idx` read as u32 (0 when empty); AVX2 when the CPU has it.
fn max_unsigned(idx: &[i32]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { max_unsigned_avx2(idx) };
    }
    idx.iter().fold(0, |m, &v| m.max(v as u32))
}

/// [`max_unsigned`], 8 lanes per step.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_unsigned_avx2(idx: &[i32]) -> u32 {
    use std::arch::x86_64::{
        __m256i, _mm256_loadu_si256, _mm256_max_epu32, _mm256_setzero_si256, _mm256_storeu_si256,
    };
    let mut chunks = idx.chunks_exact(8);
    let mut m = _mm256_setzero_si256();
    for c in &mut chunks {
        m = _mm256_max_epu32(m, _mm256_loadu_si256(c.as_ptr() as *const __m256i));
    }
    let mut lanes = [0u32; 8];
    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, m);
    (chunks.remainder().iter().map(|&v| v as u32))
        .chain(lanes)
        .fold(0, u32::max)
}

/// Each lane of `x` (lanes of `idx.n`) gathered at `idx` into the lanes of `out` (lanes of
/// `idx.len()`): `out[o][j] = x[o][idx[j]]`; AVX2 gathers 8 at a time when the CPU has it.
fn gather_lanes(x: &[f32], idx: InRange<'_>, out: &mut [f32]) {
    let (n, idx) = (idx.n, idx.idx);
    let m = idx.len();
    if m == 0 || n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        for (dst, src) in out.chunks_exact_mut(m).zip(x.chunks_exact(n)) {
            // SAFETY: the CPU has AVX2; every index is in 0..n = src.len() (`InRange`).
            unsafe { gather_avx2(src, idx, dst) };
        }
        return;
    }
    for (dst, src) in out.chunks_exact_mut(m).zip(x.chunks_exact(n)) {
        dst.iter_mut()
            .zip(idx)
            .for_each(|(d, &v)| *d = src[v as usize]);
    }
}

/// `out[j] = src[idx[j]]`, 8 lanes per AVX2 gather.
///
/// # Safety
/// The CPU has AVX2, `out.len() == idx.len()` and every index is in `0..src.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gather_avx2(src: &[f32], idx: &[i32], out: &mut [f32]) {
    use std::arch::x86_64::{__m256i, _mm256_i32gather_ps, _mm256_loadu_si256, _mm256_storeu_ps};
    let body = idx.len() / 8 * 8;
    for j in (0..body).step_by(8) {
        let at = _mm256_loadu_si256(idx.as_ptr().add(j) as *const __m256i);
        let v = _mm256_i32gather_ps::<4>(src.as_ptr(), at);
        _mm256_storeu_ps(out.as_mut_ptr().add(j), v);
    }
    for j in body..idx.len() {
        out[j] = src[idx[j] as usize];
    }
}

/// [`take_into`] into a freshly allocated output.
pub fn take(x: &[f32], layout: (usize, usize, usize), indices: &[i32]) -> Result<Vec<f32>> {
    let mut out = vec![0.0f32; layout.0 * indices.len() * layout.2];
    take_into(x, layout, indices, &mut out)?;
    Ok(out)
}

/// `take(x, indices, axis)`: `x[..., indices[...], ...]` with the index tensor's shape replacing
/// axis `axis` (NumPy `take`); output fp16 of shape `x[:axis] + indices.shape + x[axis+1:]`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Take {
    pub axis: usize,
}

impl HostKernel for Take {
    fn name(&self) -> &'static str {
        "gather"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("gather", inputs, &[DType::Fp16, DType::Int32])?;
        let (x, idx) = (&inputs[0].shape, &inputs[1].shape);
        check_axis("gather", self.axis, x)?;
        let shape = [&x[..self.axis], &idx[..], &x[self.axis + 1..]].concat();
        Ok(vec![TensorType::fp16(shape)])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0].f32s("gather")?;
        let layout = lanes(inputs[0].shape, self.axis);
        let idx = inputs[1].i32s("gather")?;
        take_into(x, layout, idx, outputs[0].f32s_mut("gather")?)
    }
}

/// Gradient of [`Take`]: zeros with extent `dim` on `axis`, plus `g` added at `indices`
/// (NumPy `np.add.at`); inputs `g` (fp16) and `indices` (int32, the shape `take` inserted).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TakeAdd {
    pub axis: usize,
    pub dim: usize,
}

impl HostKernel for TakeAdd {
    fn name(&self) -> &'static str {
        "take_add"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("take_add", inputs, &[DType::Fp16, DType::Int32])?;
        let (g, idx) = (&inputs[0].shape, &inputs[1].shape);
        let end = self.axis + idx.len();
        if end > g.len() || g[self.axis..end] != idx[..] || self.dim == 0 {
            return Err(Error::shape(
                "take_add",
                format!(
                    "g {g:?} does not hold indices {idx:?} at axis {} (or dim {} is 0)",
                    self.axis, self.dim
                ),
            ));
        }
        let shape = [&g[..self.axis], &[self.dim][..], &g[end..]].concat();
        Ok(vec![TensorType::fp16(shape)])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let g = inputs[0].f32s("take_add")?;
        let idx = checked_indices("take_add", inputs[1].i32s("take_add")?, self.dim)?;
        let (outer, _, inner) = lanes(&outputs[0].shape, self.axis);
        let out = outputs[0].f32s_mut("take_add")?;
        out.fill(0.0);
        let m = idx.len();
        for o in 0..outer {
            for (t, &j) in idx.iter().enumerate() {
                let src = (o * m + t) * inner;
                let dst = (o * self.dim + j) * inner;
                for i in 0..inner {
                    out[dst + i] += g[src + i];
                }
            }
        }
        Ok(())
    }
}

/// Gradient of `topk`/`sort` values: zeros with extent `dim` on `axis`, plus `g` added at
/// `indices` along `axis` (NumPy `put_along_axis` with add); `g` and `indices` share one shape.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AlongAdd {
    pub axis: usize,
    pub dim: usize,
}

impl HostKernel for AlongAdd {
    fn name(&self) -> &'static str {
        "along_add"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes("along_add", inputs, &[DType::Fp16, DType::Int32])?;
        let (g, idx) = (&inputs[0].shape, &inputs[1].shape);
        check_axis("along_add", self.axis, g)?;
        if g != idx || self.dim == 0 {
            return Err(Error::shape(
                "along_add",
                format!(
                    "g {g:?} and indices {idx:?} differ (or dim {} is 0)",
                    self.dim
                ),
            ));
        }
        let mut shape = g.clone();
        shape[self.axis] = self.dim;
        Ok(vec![TensorType::fp16(shape)])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let g = inputs[0].f32s("along_add")?;
        let idx = inputs[1].i32s("along_add")?;
        let (outer, k, inner) = lanes(inputs[0].shape, self.axis);
        let out = outputs[0].f32s_mut("along_add")?;
        out.fill(0.0);
        for o in 0..outer {
            for j in 0..k {
                for i in 0..inner {
                    let src = (o * k + j) * inner + i;
                    let t = checked_index("along_add", idx[src], src, self.dim)?;
                    out[(o * self.dim + t) * inner + i] += g[src];
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_gathers_on_every_layout_and_rejects_out_of_range_indices_before_writing() {
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        assert_eq!(
            take(&x, (3, 4, 1), &[3, -4]).unwrap(),
            [3.0, 0.0, 7.0, 4.0, 11.0, 8.0]
        );
        assert_eq!(take(&x, (1, 3, 4), &[2]).unwrap(), [8.0, 9.0, 10.0, 11.0]);
        assert_eq!(
            take(&x, (2, 2, 3), &[1, 0]).unwrap(),
            [3.0, 4.0, 5.0, 0.0, 1.0, 2.0, 9.0, 10.0, 11.0, 6.0, 7.0, 8.0]
        );
        assert!(take(&x, (3, 4, 1), &[]).unwrap().is_empty());
        let mut out = [7.0f32; 6];
        let e = take_into(&x, (3, 4, 1), &[1, 4], &mut out).unwrap_err();
        assert!(e.to_string().contains("index 4 (element 1"), "{e}");
        assert_eq!(out, [7.0; 6]);
        assert!(take(&x, (3, 4, 1), &[-5]).is_err());
        assert!(take(&x, (3, 5, 1), &[0]).is_err());
        // Long index lists (the vector range pass and gather, and their tails): a bad index
        // anywhere is found and named; a negative one counts from the end.
        let x: Vec<f32> = (0..100).map(|v| v as f32).collect();
        let idx: Vec<i32> = (0..37).map(|i| i * 7 % 100).collect();
        let want: Vec<f32> = idx.iter().map(|&i| i as f32).collect();
        assert_eq!(take(&x, (1, 100, 1), &idx).unwrap(), want);
        for (pos, bad) in [(3, 100), (36, 100), (20, -101), (35, i32::MIN)] {
            let mut b = idx.clone();
            b[pos] = bad;
            let e = take(&x, (1, 100, 1), &b).unwrap_err().to_string();
            assert!(e.contains(&format!("index {bad} (element {pos} ")), "{e}");
        }
        let mut neg = idx.clone();
        neg[35] = -1;
        let mut want_neg = want.clone();
        want_neg[35] = 99.0;
        assert_eq!(take(&x, (1, 100, 1), &neg).unwrap(), want_neg);
    }
}
