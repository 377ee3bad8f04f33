//! Fuzz a GGUF file: open, architecture, and dequantize every tensor; errors are fine, panics are not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| aneforge_fuzz::gguf::gguf(data));
