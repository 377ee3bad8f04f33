//! Static shapes: validation (rank 1..=5, extents 1..=65536), NumPy broadcasting, axis handling.

use crate::error::{Error, Result};

/// A static shape; rank 0 only occurs for scalar constants.
pub type Shape = Vec<usize>;

/// Largest rank a graph tensor may have.
pub const MAX_RANK: usize = 5;
/// Largest extent of any axis (the MIL parser's limit).
pub const MAX_EXTENT: usize = 65536;

/// Check rank 1..=5, every extent in 1..=65536 and the element cap of [`crate::limits`] (a
/// resource error), naming `op` and the shape on failure.
pub fn check(op: &str, shape: &[usize]) -> Result<()> {
    if shape.is_empty() || shape.len() > MAX_RANK {
        return Err(Error::shape(
            op,
            format!(
                "rank must be 1..={MAX_RANK}, got shape {shape:?} (rank {})",
                shape.len()
            ),
        ));
    }
    if let Some(&d) = shape.iter().find(|&&d| d == 0 || d > MAX_EXTENT) {
        return Err(Error::shape(
            op,
            format!("every extent must be in 1..={MAX_EXTENT}, got {d} in shape {shape:?}"),
        ));
    }
    crate::limits::Limits::current()?.tensor(op, shape, 2)?;
    Ok(())
}

/// Number of elements.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major strides (in elements).
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// NumPy broadcast of two shapes, naming `op` and both shapes on failure.
pub fn broadcast(op: &str, a: &[usize], b: &[usize]) -> Result<Shape> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() {
            1
        } else {
            a[i - (rank - a.len())]
        };
        let db = if i < rank - b.len() {
            1
        } else {
            b[i - (rank - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::shape(
                    op,
                    format!("shapes {a:?} and {b:?} do not broadcast (axis {i}: {da} vs {db})"),
                ))
            }
        };
    }
    Ok(out)
}

/// Normalise a possibly negative axis against `rank`, naming `op` on failure.
pub fn axis(op: &str, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Error::shape(
            op,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// Normalise a list of axes: in range, no duplicates, sorted.
pub fn axes(op: &str, axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = axes
        .iter()
        .map(|&a| axis(op, a, rank))
        .collect::<Result<Vec<_>>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::shape(
            op,
            format!("axes {axes:?} repeat an axis (rank {rank})"),
        ));
    }
    if out.is_empty() {
        return Err(Error::shape(op, "axes must not be empty"));
    }
    Ok(out)
}
