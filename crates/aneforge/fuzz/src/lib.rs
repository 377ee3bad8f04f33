//! Fuzz targets for every file format aneforge reads (see README.md); the same functions run
//! under cargo-fuzz and under the deterministic mutation harness in `make test`.

pub mod gguf;
pub mod mutate;
pub mod targets;
