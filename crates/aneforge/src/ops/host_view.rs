//! Window reads: `input_view` (a contiguous window of the flattened tensor) and
//! `dynamic_slice` (a box whose start is an int32 tensor known only at run time).

use crate::error::{Error, Result};
use crate::ops::host::checks::check_len;
use crate::shape::{self, Shape};

/// Op name of the flat window.
pub const INPUT_VIEW: &str = "input_view";
/// Op name of the runtime-start slice.
pub const DYNAMIC_SLICE: &str = "dynamic_slice";

/// Shape rule of `input_view`: `offset >= 0`, `size >= 1`, `offset + size <= numel(x)`;
/// the output is `[size]`.
pub fn input_view_shape(x: &[usize], offset: i64, size: i64) -> Result<Shape> {
    let n = shape::numel(x) as i64;
    if offset < 0 || size < 1 || offset + size > n {
        return Err(Error::value(
            INPUT_VIEW,
            format!("offset {offset} and size {size} must satisfy 0 <= offset, 1 <= size, offset + size <= {n} (x {x:?})"),
        ));
    }
    Ok(vec![size as usize])
}

/// Elements `offset..offset + size` of the row-major flattening of `x`.
pub fn input_view(x: &[f32], offset: usize, size: usize) -> Result<Vec<f32>> {
    input_view_shape(&[x.len()], offset as i64, size as i64)?;
    Ok(x[offset..offset + size].to_vec())
}

/// Shape rule of `dynamic_slice`: `start` is int32 `[rank(x)]`, `sizes` has one extent per
/// axis in `1..=x[axis]`; the output is `sizes`.
pub fn dynamic_slice_shape(x: &[usize], start: &[usize], sizes: &[i64]) -> Result<Shape> {
    if start != [x.len()] || sizes.len() != x.len() {
        return Err(Error::shape(
            DYNAMIC_SLICE,
            format!("start must be [{}] and sizes have {} entries for x {x:?}, got start {start:?} and sizes {sizes:?}", x.len(), x.len()),
        ));
    }
    if let Some(d) = (0..x.len()).find(|&d| sizes[d] < 1 || sizes[d] as u64 > x[d] as u64) {
        return Err(Error::value(
            DYNAMIC_SLICE,
            format!(
                "sizes[{d}] = {} must be in 1..={} for x {x:?}",
                sizes[d], x[d]
            ),
        ));
    }
    Ok(sizes.iter().map(|&s| s as usize).collect())
}

/// Flat offsets of the rows (last-axis runs of `sizes[last]` elements) of the box `start`,
/// `sizes` inside `x_shape`, in row-major order; a start outside `0..=x[d] - sizes[d]` is a
/// value error naming the axis and value (never clamped).
fn box_rows(x_shape: &[usize], start: &[i32], sizes: &[usize]) -> Result<Vec<usize>> {
    check_len(DYNAMIC_SLICE, "start", start.len(), &[x_shape.len()])?;
    for d in 0..x_shape.len() {
        let s = start[d] as i64;
        if s < 0 || s as u64 + sizes[d] as u64 > x_shape[d] as u64 {
            return Err(Error::value(
                DYNAMIC_SLICE,
                format!(
                    "start[{d}] = {s} with size {} leaves axis {d} of extent {}",
                    sizes[d], x_shape[d]
                ),
            ));
        }
    }
    let strides = shape::strides(x_shape);
    let inner = *sizes.last().unwrap_or(&1);
    let last = sizes.len() - 1;
    let mut coord = vec![0usize; sizes.len()];
    let mut rows = Vec::with_capacity(shape::numel(sizes) / inner);
    for _ in 0..shape::numel(sizes) / inner {
        rows.push(
            (0..sizes.len())
                .map(|d| (coord[d] + start[d] as usize) * strides[d])
                .sum(),
        );
        for d in (0..last).rev() {
            coord[d] += 1;
            if coord[d] < sizes[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    Ok(rows)
}

/// `x[start[0]..start[0] + sizes[0], ...]`; a start outside `0..=x[d] - sizes[d]` is a value
/// error naming the axis and value (never clamped).
pub fn dynamic_slice(
    x: &[f32],
    x_shape: &[usize],
    start: &[i32],
    sizes: &[usize],
) -> Result<Vec<f32>> {
    check_len(DYNAMIC_SLICE, "x", x.len(), x_shape)?;
    let inner = *sizes.last().unwrap_or(&1);
    let mut out = Vec::with_capacity(shape::numel(sizes));
    for base in box_rows(x_shape, start, sizes)? {
        out.extend_from_slice(&x[base..base + inner]);
    }
    Ok(out)
}

/// The gradient of `dynamic_slice`: zeros of `x_shape` with `g` (shape `sizes`) written into
/// the box at `start` (same start checks as [`dynamic_slice`]), into `out`.
pub fn dynamic_slice_add(
    g: &[f32],
    sizes: &[usize],
    start: &[i32],
    x_shape: &[usize],
    out: &mut [f32],
) -> Result<()> {
    check_len(DYNAMIC_SLICE, "g", g.len(), sizes)?;
    check_len(DYNAMIC_SLICE, "out", out.len(), x_shape)?;
    let inner = *sizes.last().unwrap_or(&1);
    out.fill(0.0);
    for (row, base) in box_rows(x_shape, start, sizes)?.into_iter().enumerate() {
        out[base..base + inner].copy_from_slice(&g[row * inner..(row + 1) * inner]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_view_reads_a_flat_window() {
        assert_eq!(input_view(&[0.0, 1.0, 2.0, 3.0], 1, 2).unwrap(), [1.0, 2.0]);
        assert!(input_view_shape(&[2, 2], 3, 2).is_err());
        assert!(input_view_shape(&[2, 2], -1, 2).is_err());
    }

    #[test]
    fn dynamic_slice_reads_the_box_and_rejects_a_start_past_the_end() {
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        assert_eq!(
            dynamic_slice(&x, &[3, 4], &[1, 2], &[2, 2]).unwrap(),
            [6.0, 7.0, 10.0, 11.0]
        );
        let e = dynamic_slice(&x, &[3, 4], &[2, 0], &[2, 2])
            .unwrap_err()
            .to_string();
        assert!(e.contains("start[0] = 2"), "{e}");
        assert!(dynamic_slice(&x, &[3, 4], &[-1, 0], &[1, 1]).is_err());
        assert!(dynamic_slice_shape(&[3, 4], &[2], &[1, 5]).is_err());
        assert_eq!(dynamic_slice_shape(&[3, 4], &[2], &[1, 4]).unwrap(), [1, 4]);
    }

    #[test]
    fn dynamic_slice_add_places_the_gradient_in_the_box() {
        let mut out = vec![7.0f32; 12];
        dynamic_slice_add(&[1.0, 2.0, 3.0, 4.0], &[2, 2], &[1, 2], &[3, 4], &mut out).unwrap();
        let want = [0., 0., 0., 0., 0., 0., 1., 2., 0., 0., 3., 4.];
        assert_eq!(out, want);
        let e = dynamic_slice_add(&[1.0; 4], &[2, 2], &[0, 3], &[3, 4], &mut out).unwrap_err();
        assert!(e.to_string().contains("start[1] = 3"), "{e}");
    }
}
