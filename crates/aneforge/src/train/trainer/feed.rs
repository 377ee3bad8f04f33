//! Feeding data inputs: host arrays converted to an input's shape (class indices → one-hot for
//! an [N, K] input), and the host cross-entropy the Trainer reports.

use super::DataPort;
use crate::error::{Error, Result};

/// A host array for one data input: shape, values (row-major, as f32) and whether it holds
/// integers (class indices, eligible for one-hot conversion).
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
    pub integer: bool,
}

impl Batch {
    /// Float values of `shape` (`data.len()` must equal its element count; checked when fed).
    pub fn floats(shape: &[usize], data: Vec<f32>) -> Batch {
        Batch {
            shape: shape.to_vec(),
            data,
            integer: false,
        }
    }

    /// Class indices, shape `[labels.len()]`.
    pub fn labels(labels: &[usize]) -> Batch {
        Batch {
            shape: vec![labels.len()],
            data: labels.iter().map(|&l| l as f32).collect(),
            integer: true,
        }
    }

    /// Examples `idx` (along axis 0) of this array, as a new array.
    pub(super) fn gather(&self, idx: &[usize]) -> Batch {
        let per = self.data.len() / self.shape[0].max(1);
        let mut shape = self.shape.clone();
        shape[0] = idx.len();
        let data = idx
            .iter()
            .flat_map(|&i| self.data[i * per..(i + 1) * per].iter().copied())
            .collect();
        Batch {
            shape,
            data,
            integer: self.integer,
        }
    }
}

/// Each array converted to its data input's shape (see [`fit`]); a DType error (Python
/// TypeError) lists the inputs when the count differs.
pub(super) fn fit_all(ports: &[DataPort], batch: &[Batch]) -> Result<Vec<Vec<f32>>> {
    if batch.len() != ports.len() {
        let names: Vec<String> = ports
            .iter()
            .map(|p| format!("{} {:?}", p.name, p.shape))
            .collect();
        return Err(Error::dtype(
            "Trainer.step",
            format!(
                "takes {} array(s) ({}), got {}",
                ports.len(),
                names.join(", "),
                batch.len()
            ),
        ));
    }
    ports.iter().zip(batch).map(|(p, b)| fit(p, b)).collect()
}

/// The int32 values of each int32 data input (`None` for the others). Batches reach the
/// trainer as f32, so an id must be an integer of magnitude ≤ 2^24 (exact in f32); anything
/// else is a value error naming the input, the element and the value.
pub(super) fn int32_feeds(ports: &[DataPort], data: &[Vec<f32>]) -> Result<Vec<Option<Vec<i32>>>> {
    const EXACT: f32 = (1u32 << 24) as f32;
    ports
        .iter()
        .zip(data)
        .map(|(p, v)| {
            if !p.int32 {
                return Ok(None);
            }
            v.iter()
                .enumerate()
                .map(|(k, &x)| {
                    if x.fract() == 0.0 && x.abs() <= EXACT {
                        Ok(x as i32)
                    } else {
                        Err(Error::value(
                            "Trainer.step",
                            format!("int32 input '{}': element {k} = {x} is not an integer within ±2^24", p.name),
                        ))
                    }
                })
                .collect::<Result<Vec<i32>>>()
                .map(Some)
        })
        .collect()
}

/// `b` as input `port`'s values: as is when the shapes match; integer class indices [N] become
/// one-hot rows for an [N, K] input; any array with N leading examples and the right element
/// count is reshaped. Value errors name the input, the shapes, or an index outside 0..K.
fn fit(port: &DataPort, b: &Batch) -> Result<Vec<f32>> {
    let want = &port.shape;
    let numel: usize = want.iter().product();
    if b.data.len() != b.shape.iter().product::<usize>() {
        return Err(Error::shape(
            "Trainer.step",
            format!(
                "array for input '{}' has {} values for shape {:?}",
                port.name,
                b.data.len(),
                b.shape
            ),
        ));
    }
    if &b.shape == want {
        return Ok(b.data.clone());
    }
    if want.len() == 2 && b.integer && b.shape == [want[0]] {
        let k = want[1];
        let mut out = vec![0.0; numel];
        for (r, &l) in b.data.iter().enumerate() {
            if !(l >= 0.0 && (l as usize) < k) {
                return Err(Error::value(
                    "Trainer.step",
                    format!(
                        "class index {l} at row {r} of input '{}' is outside 0..{k}",
                        port.name
                    ),
                ));
            }
            out[r * k + l as usize] = 1.0;
        }
        return Ok(out);
    }
    if b.data.len() == numel && b.shape.first() == want.first() {
        return Ok(b.data.clone());
    }
    Err(Error::value(
        "Trainer.step",
        format!(
            "array for input '{}' has shape {:?}; expected {:?}",
            port.name, b.shape, want
        ),
    ))
}

/// Mean over the rows of logits `z` [N, k] of logsumexp(z) − z[label], in f64, with the
/// target as one-hot rows (`onehot`) or one class index per row (NaN when an index is outside 0..k).
pub(super) fn host_cross_entropy(z: &[f32], k: usize, target: &[f32], onehot: bool) -> f64 {
    let n = z.len() / k;
    let mut total = 0.0;
    for r in 0..n {
        let row: Vec<f64> = z[r * k..(r + 1) * k]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        let picked = if onehot {
            row.iter()
                .zip(&target[r * k..(r + 1) * k])
                .map(|(v, &t)| v * f64::from(t))
                .sum()
        } else {
            let label = target[r];
            match (label >= 0.0).then(|| row.get(label as usize)).flatten() {
                Some(&v) => v,
                None => return f64::NAN,
            }
        };
        total += lse - picked;
    }
    total / n as f64
}
