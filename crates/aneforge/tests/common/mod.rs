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

/// A deterministic pseudo-random value in [-1, 1) for index i.
pub fn noise(i: usize) -> f32 {
    let x = (i as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(17)
        ^ 0x5555;
    ((x % 20_000) as f32 / 10_000.0) - 1.0
}
