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
        ..HostConstants::DEFAULTS
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

    let (measured, probes) =
        calibrate::calibrate(Duration::from_millis(20), calibrate::Clock::Cpu).unwrap();
    let names: Vec<&str> = probes.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "floor",
            "data small",
            "data",
            "gemm small",
            "gemm",
            "conv small",
            "conv",
            "elementwise small",
            "elementwise",
            "reduce small",
            "reduce"
        ]
    );
    // The probes' work from their shapes: transposes move 2·2·8192 and 2·2·2^19 bytes; matmuls
    // 32·64·64·2 and 256·512·512·2 flops; 3×3 convs 8·16·16 outputs × 72 MACs × 2 and
    // 64·56·56 × 576 × 2; x·x over 256 and 2^18 elements; softmax over 256 and 2^18 elements.
    let work: Vec<f64> = probes.iter().map(|p| p.work).collect();
    assert_eq!(
        work,
        [
            0.0,
            32768.0,
            2097152.0,
            262144.0,
            134217728.0,
            294912.0,
            231211008.0,
            256.0,
            262144.0,
            256.0,
            262144.0
        ]
    );
    measured.validate().unwrap();
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
