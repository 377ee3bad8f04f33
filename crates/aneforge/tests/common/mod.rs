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

/// A scratch directory for one test: `<tmp>/aneforge-<tag>-<pid>-<n>` (unique within the run),
/// created fresh and removed with everything in it when dropped.
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    /// A new empty directory named after `tag` (a stale one of the same name is emptied).
    pub fn new(tag: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("aneforge-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    /// Take charge of the directory `path` made by someone else: removed when dropped.
    pub fn at(path: std::path::PathBuf) -> Scratch {
        Scratch(path)
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh tune cache for the process (`ANEFORGE_CACHE_DIR` set to a scratch directory,
/// `ANEFORGE_QUIET` set), base options on the reference executor and `reps` calls per measurement.
pub fn tune_setup(
    tag: &str,
    reps: usize,
) -> (
    Scratch,
    aneforge::compile::CompileOptions,
    aneforge::tune::TuneOptions,
) {
    let dir = Scratch::new(tag);
    std::env::set_var("ANEFORGE_CACHE_DIR", &*dir);
    std::env::set_var("ANEFORGE_QUIET", "1");
    let base = aneforge::compile::CompileOptions {
        device: aneforge::compile::Device::Reference,
        ..Default::default()
    };
    let opts = aneforge::tune::TuneOptions {
        reps,
        ..Default::default()
    };
    (dir, base, opts)
}
