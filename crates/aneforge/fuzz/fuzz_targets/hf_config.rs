//! Fuzz a Hugging Face config.json through the GPT-2 and BERT config readers: errors are fine, panics are not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| aneforge_fuzz::targets::hf_config(data));
