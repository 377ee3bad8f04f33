//! Fuzz the MIL text parser: the input is `model.mil` text, optionally followed by a NUL byte
//! and a weights.bin image. Parsing must return a graph or an error, never panic or read out of bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (text, weights) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(text) = std::str::from_utf8(text) {
        let _ = aneforge::mil::parse::parse(
            text,
            "model.mil".as_ref(),
            weights,
            "weights.bin".as_ref(),
        );
    }
});
