//! Host calibration storage: atomic write, read back, corrupt files refused (never trusted), and
//! a real (short) calibration run of the reference executor. One test: it sets ANEFORGE_CACHE_DIR.

use std::time::Duration;

use aneforge::cost::{self, calibrate, host, HostConstants};
use aneforge::{input, Graph};

#[test]
fn calibration_round_trips_and_corrupt_files_are_refused() {
    let dir = std::env::temp_dir().join(format!("aneforge-cost-cal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("ANEFORGE_CACHE_DIR", &dir);
    assert_eq!(host::load().unwrap(), None);

    let x = input(&[4, 8]).unwrap();
    let g = Graph::from_outputs(&[(None, x.relu().unwrap())]).unwrap();
    assert_eq!(
        cost::estimate(&g, None).unwrap().provenance,
        "uncalibrated defaults"
    );

    let c = HostConstants {
        floor_us: 5.0,
        bytes_per_us: 64.0,
        gemm_flops_per_us: 2.0,
        conv_flops_per_us: 3.0,
        elementwise_per_us: 8.0,
    };
    let path = host::save(&c).unwrap();
    assert_eq!(host::load().unwrap(), Some(c));
    let e = cost::estimate(&g, None).unwrap();
    // relu over 32 elements: 32 / 8 = 4 µs, plus the 5 µs floor.
    assert_eq!((e.provenance.as_str(), e.micros), ("calibrated host", 9.0));

    for corrupt in ["{\"floor_us\": 1", "{\"floor_us\": 1, \"bytes_per_us\": -1, \"gemm_flops_per_us\": 1, \"conv_flops_per_us\": 1, \"elementwise_per_us\": 1}"] {
        std::fs::write(&path, corrupt).unwrap();
        let err = host::load().unwrap_err().to_string();
        assert!(err.contains("host_cost_model.json"), "{err}");
        let e = cost::estimate(&g, None).unwrap();
        assert_eq!(e.provenance, "uncalibrated defaults");
        assert!(e.warnings[0].contains("ignoring the host calibration"), "{:?}", e.warnings);
    }

    let (measured, probes) = calibrate::calibrate(Duration::from_millis(20)).unwrap();
    assert_eq!(
        probes.iter().map(|p| p.name).collect::<Vec<_>>(),
        ["floor", "data", "gemm", "conv", "elementwise"]
    );
    // The probes' work from their shapes: transpose [1,512,1024] moves 2·2·2^19 bytes; matmul
    // 256³·2 flops; conv 32·30·30 outputs × 288 MACs × 2; add + mul over 2^18 elements each.
    let work: Vec<f64> = probes.iter().map(|p| p.work).collect();
    assert_eq!(work, [0.0, 2097152.0, 33554432.0, 16588800.0, 524288.0]);
    host::save(&measured).unwrap();
    // JSON floats round-trip to within an ulp.
    let back = host::load().unwrap().unwrap();
    assert!((back.floor_us - measured.floor_us).abs() <= 1e-12 * measured.floor_us.max(1.0));
    assert!(
        (back.gemm_flops_per_us - measured.gemm_flops_per_us).abs()
            <= 1e-9 * measured.gemm_flops_per_us
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
