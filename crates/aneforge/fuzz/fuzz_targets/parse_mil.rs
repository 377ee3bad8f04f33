//! Fuzz the MIL text parser: the input is `model.mil` text, optionally followed by a NUL byte
//! and a weights.bin image. Parsing must return a graph or an error, never panic or read out of bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| aneforge_fuzz::targets::mil_text(data));
