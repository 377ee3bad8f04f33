//! Plans compile once per key (own test binary, so no other test compiles concurrently).

use aneforge::numerics::compile_count;
use aneforge::numerics::fft::{FftKind, FftPlan};
use aneforge::Device;

#[test]
fn a_second_call_does_not_recompile() {
    let x: Vec<f32> = (0..96).map(|i| (i as f32 * 0.37).sin()).collect();
    let zeros = vec![0.0; 96];
    let start = compile_count();
    let first = FftPlan::new(FftKind::Fft, &[2, 48], None, Device::Reference)
        .unwrap()
        .run(&x, Some(&zeros))
        .unwrap();
    assert_eq!(compile_count(), start + 1);
    let again = FftPlan::new(FftKind::Fft, &[2, 48], None, Device::Reference).unwrap();
    assert_eq!(again.run(&x, Some(&zeros)).unwrap(), first);
    assert_eq!(
        compile_count(),
        start + 1,
        "same kind and shape must reuse the cached program"
    );
    FftPlan::new(FftKind::Ifft, &[2, 48], None, Device::Reference).unwrap();
    FftPlan::new(FftKind::Fft, &[3, 48], None, Device::Reference).unwrap();
    assert_eq!(
        compile_count(),
        start + 3,
        "a new kind or shape is a new program"
    );
}
