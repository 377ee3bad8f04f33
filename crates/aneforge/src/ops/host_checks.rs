//! Checks shared by the host kernels: index resolution (NumPy-style negatives, never an
//! out-of-bounds read), element counts against shapes, finiteness.

use crate::error::{Error, Result};
use crate::shape;

/// `value` as an index into an axis of `extent` (negative counts from the end, as in NumPy);
/// an error naming `op`, `tensor`, the value and the extent otherwise.
pub fn resolve_index(op: &str, tensor: &str, value: i64, extent: usize) -> Result<usize> {
    let e = extent as i64;
    if value < -e || value >= e {
        return Err(Error::value(
            op,
            format!("{tensor} holds index {value}, out of range for an axis of extent {extent} (valid: {}..{e})", -e),
        ));
    }
    Ok(if value < 0 { value + e } else { value } as usize)
}

/// Check that `tensor` holds exactly the elements `shape` calls for.
pub fn check_len(op: &str, tensor: &str, len: usize, shape: &[usize]) -> Result<()> {
    if len != shape::numel(shape) {
        return Err(Error::shape(
            op,
            format!(
                "{tensor} has {len} elements but shape {shape:?} needs {}",
                shape::numel(shape)
            ),
        ));
    }
    Ok(())
}

/// Check that every value of `tensor` is finite, naming the first offender and its position.
pub fn check_finite(op: &str, tensor: &str, data: &[f32]) -> Result<()> {
    match data.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(Error::value(
            op,
            format!(
                "{tensor} holds the non-finite value {} at flat position {i}",
                data[i]
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_resolve_like_numpy_and_reject_out_of_range() {
        assert_eq!(resolve_index("t", "idx", 2, 3).unwrap(), 2);
        assert_eq!(resolve_index("t", "idx", -1, 3).unwrap(), 2);
        assert_eq!(resolve_index("t", "idx", -3, 3).unwrap(), 0);
        let e = resolve_index("gather", "indices", 3, 3)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("gather") && e.contains("indices") && e.contains('3'),
            "{e}"
        );
        assert!(resolve_index("t", "idx", -4, 3).is_err());
    }
}
