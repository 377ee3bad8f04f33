//! Fuzz an ONNX model through the importer and the lowering: errors are fine, panics are not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| aneforge_fuzz::targets::onnx(data));
