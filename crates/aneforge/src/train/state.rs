//! The Trainer's state dict: named fp32 tensors plus string metadata (no file format here;
//! [`super::checkpoint`] reads and writes it as safetensors).

use std::collections::BTreeMap;

/// Named fp32 tensors (shape, row-major values) plus string metadata: the Trainer's state dict.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateDict {
    pub tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    pub metadata: BTreeMap<String, String>,
}
