//! Fuzz a safetensors state dict, every tensor read at its declared shape: errors are fine, panics are not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| aneforge_fuzz::targets::safetensors(data));
