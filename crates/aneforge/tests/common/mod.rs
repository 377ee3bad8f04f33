//! Shared helpers for the integration tests: deterministic data, weights and the op corpus.
#![allow(dead_code)]

use aneforge::{constant, HostArray, Tensor};

pub use aneforge::conformance::corpus::data;

/// A weight array owned by the test.
pub struct W {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl W {
    pub fn new(shape: &[usize], seed: u64) -> W {
        W {
            shape: shape.to_vec(),
            data: data(shape.iter().product(), seed),
        }
    }
    pub fn arr(&self) -> HostArray<'_> {
        HostArray::f32(&self.shape, &self.data)
    }
    pub fn tensor(&self) -> Tensor {
        constant("test", self.arr()).unwrap()
    }
}

/// One case per op kind: (MIL op name, output tensor) — the library's conformance corpus.
pub fn op_cases() -> Vec<(&'static str, Tensor)> {
    aneforge::conformance::corpus::conformance().unwrap()
}
