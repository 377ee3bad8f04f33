//! The one resource policy: caps on elements per tensor, total bytes of a program's buffers and
//! weights, and layer counts, checked before anything is allocated. The graph builder, the MIL
//! loader, the model loaders, the GGUF reader and the CLI all ask this module, so a size that one
//! path refuses is refused by every path.
//!
//! Defaults are sized for real ANE models (the largest embedding table of a 2^16-token vocabulary
//! at width 4096 is 2^28 elements; a 1.5 B-parameter fp16 model is 3 GiB). Each cap can be raised
//! or lowered through the environment: `ANEFORGE_MAX_ELEMENTS`, `ANEFORGE_MAX_BYTES`,
//! `ANEFORGE_MAX_LAYERS` (decimal integers; an unparsable value is a typed error, never ignored).

use crate::error::{Error, Result};

/// Default cap on the elements of one tensor: 2^28 (512 MiB at fp16).
pub const DEFAULT_MAX_ELEMENTS: u64 = 1 << 28;
/// Hard ceiling of the element cap whatever the environment says: 2^40 elements, so that bit and
/// byte counts of any allowed tensor fit in 64 bits.
pub const CEILING_ELEMENTS: u64 = 1 << 40;
/// Default cap on the bytes of one program (every node's output buffer plus its weights): 4 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;
/// Default cap on a model's layer count (config `num_hidden_layers`, `n_layer`, `--repeat` ...).
pub const DEFAULT_MAX_LAYERS: u64 = 1024;

/// The caps in force: elements per tensor, bytes per program, layers per model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest element count of one tensor.
    pub max_elements: u64,
    /// Largest total bytes of a program's buffers and weights (and of one tensor).
    pub max_bytes: u64,
    /// Largest layer / repeat count.
    pub max_layers: u64,
}

impl Default for Limits {
    /// The documented defaults, ignoring the environment.
    fn default() -> Self {
        Limits {
            max_elements: DEFAULT_MAX_ELEMENTS,
            max_bytes: DEFAULT_MAX_BYTES,
            max_layers: DEFAULT_MAX_LAYERS,
        }
    }
}

/// Reads one `ANEFORGE_MAX_*` variable: unset → `default`; not a positive integer → a value error
/// naming the variable and its text.
fn env_cap(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(default),
        Ok(s) => match s.trim().parse::<u64>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(Error::value(
                "limits",
                format!("{name}={s:?} is not a positive integer"),
            )),
        },
        Err(e) => Err(Error::value("limits", format!("{name}: {e}"))),
    }
}

/// A resource error: `what` exceeds a cap (Python: MemoryError).
pub fn exceeded(what: impl Into<String>, msg: impl Into<String>) -> Error {
    Error::Resource {
        what: what.into(),
        msg: msg.into(),
    }
}

impl Limits {
    /// The caps in force: the defaults overridden by `ANEFORGE_MAX_ELEMENTS`, `ANEFORGE_MAX_BYTES`
    /// and `ANEFORGE_MAX_LAYERS` (elements at most [`CEILING_ELEMENTS`]); errors if a variable is
    /// set but not a positive integer.
    pub fn current() -> Result<Limits> {
        Ok(Limits {
            max_elements: env_cap("ANEFORGE_MAX_ELEMENTS", DEFAULT_MAX_ELEMENTS)?
                .min(CEILING_ELEMENTS),
            max_bytes: env_cap("ANEFORGE_MAX_BYTES", DEFAULT_MAX_BYTES)?,
            max_layers: env_cap("ANEFORGE_MAX_LAYERS", DEFAULT_MAX_LAYERS)?,
        })
    }

    /// Element count of tensor `what` of `shape` with `elem_bytes`-byte elements, checked against
    /// the element and byte caps with overflow-free arithmetic; errors name the tensor, shape and cap.
    pub fn tensor(&self, what: &str, shape: &[usize], elem_bytes: usize) -> Result<u64> {
        let n = shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .filter(|&n| n <= self.max_elements)
            .ok_or_else(|| {
                exceeded(
                    what,
                    format!(
                        "shape {shape:?} has more than the {} elements allowed per tensor (ANEFORGE_MAX_ELEMENTS)",
                        self.max_elements
                    ),
                )
            })?;
        let bytes = n.saturating_mul(elem_bytes as u64);
        self.bytes(what, &format!("shape {shape:?}"), bytes)?;
        Ok(n)
    }

    /// Checks `bytes` (of `what`, described by `detail`) against the byte cap.
    pub fn bytes(&self, what: &str, detail: &str, bytes: u64) -> Result<()> {
        if bytes > self.max_bytes {
            return Err(exceeded(
                what,
                format!(
                    "{detail} needs {bytes} bytes, more than the {} allowed (ANEFORGE_MAX_BYTES)",
                    self.max_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Checks the total bytes of `tensors` — (producing op, shape, element bytes) of every buffer
    /// and weight of one program — against the byte cap, naming `what` (the program) and the
    /// largest tensor; each tensor is checked against the element cap first.
    pub fn buffers<'a>(
        &self,
        what: &str,
        tensors: impl IntoIterator<Item = (&'a str, &'a [usize], usize)>,
    ) -> Result<()> {
        let (mut total, mut count) = (0u64, 0usize);
        let mut largest: (u64, &[usize]) = (0, &[]);
        for (op, shape, elem_bytes) in tensors {
            let b = self.tensor(op, shape, elem_bytes)? * elem_bytes as u64;
            total = total.saturating_add(b);
            count += 1;
            if b > largest.0 {
                largest = (b, shape);
            }
        }
        let detail = format!(
            "{count} tensors (largest {:?}, {} bytes)",
            largest.1, largest.0
        );
        self.bytes(what, &detail, total)
    }

    /// A layer / repeat count `n` read from `field`: 1..=max_layers, else a value error (0 or
    /// negative) or a resource error (too many), naming the field.
    pub fn layers(&self, field: &str, n: i128) -> Result<usize> {
        if n < 1 {
            return Err(Error::value(field, format!("must be >= 1, got {n}")));
        }
        if n > self.max_layers as i128 {
            return Err(exceeded(
                field,
                format!(
                    "{n} is more than the {} allowed (ANEFORGE_MAX_LAYERS)",
                    self.max_layers
                ),
            ));
        }
        Ok(n as usize)
    }
}

/// A vector of `n` copies of `fill` for `what`, allocated with `try_reserve_exact` so that an
/// allocation failure is a resource error instead of an abort.
pub fn try_vec<T: Clone>(what: &str, n: usize, fill: T) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        exceeded(
            what,
            format!(
                "cannot allocate {n} elements of {} bytes",
                std::mem::size_of::<T>()
            ),
        )
    })?;
    v.resize(n, fill);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Limits {
        Limits {
            max_elements: 1000,
            max_bytes: 1500,
            max_layers: 4,
        }
    }

    #[test]
    fn tensor_caps_elements_bytes_and_overflow() {
        let l = small();
        assert_eq!(l.tensor("t", &[10, 100], 1).unwrap(), 1000);
        let e = l.tensor("t", &[10, 101], 1).unwrap_err();
        assert!(matches!(e, Error::Resource { .. }), "{e:?}");
        assert!(e.to_string().contains("[10, 101]") && e.to_string().contains("1000"));
        let e = l.tensor("t", &[10, 100], 2).unwrap_err().to_string();
        assert!(e.contains("2000 bytes") && e.contains("1500"), "{e}");
        let e = l
            .tensor("t", &[usize::MAX, usize::MAX], 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than the 1000 elements"), "{e}");
    }

    #[test]
    fn layers_are_one_to_cap() {
        let l = small();
        assert_eq!(l.layers("n_layer", 4).unwrap(), 4);
        assert!(matches!(l.layers("n_layer", 0), Err(Error::Value { .. })));
        assert!(matches!(l.layers("n_layer", -3), Err(Error::Value { .. })));
        let e = l.layers("n_layer", 1_000_000_000).unwrap_err();
        assert!(matches!(e, Error::Resource { .. }) && e.to_string().contains("n_layer"));
    }

    #[test]
    fn try_vec_reports_impossible_allocations() {
        assert_eq!(try_vec("v", 3, 7u8).unwrap(), vec![7, 7, 7]);
        let e = try_vec("v", usize::MAX / 2, 0u32).unwrap_err();
        assert!(matches!(e, Error::Resource { .. }), "{e:?}");
    }
}
