//! Fuzz a program directory (model.mil, weights.bin, program.json) through Program::load_dir: errors are fine, panics are not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| aneforge_fuzz::targets::program_dir(data));
