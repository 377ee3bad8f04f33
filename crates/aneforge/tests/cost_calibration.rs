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
            "copy small",
            "copy",
            "permute",
            "permute",
            "permute",
            "permute",
            "gemm small",
            "gemm",
            "gemm curve",
            "gemm curve",
            "gemm curve",
            "gemm curve",
            "conv small",
            "conv",
            "conv curve",
            "conv curve",
            "conv curve",
            "conv curve",
            "elementwise small",
            "elementwise",
            "reduce small",
            "reduce",
            "cut"
        ]
    );
    // The probes' work from their shapes: reshapes copy 2·2·128 and 2·2·2^19 bytes; transposes
    // of 32², 128², 256·512 and 1024² elements; matmuls 32·64·64·2 and 256·512·512·2 flops, then
    // K = N = s with M = clamp(2^21 / s², 64, 16384): 2·16384·8², 2·2048·32², 2·128·128², 2·64·512²;
    // 3×3 convs 8·16·16 outputs × 72 MACs × 2 and 64·56·56 × 576 × 2, then c channels on
    // h = clamp(⌊√(3e7 / 18c²)⌋, 10, 130): 2·4·128²·36, 2·16·78²·144, 2·64·18²·576, 2·256·8²·2304;
    // x·x over 256 and 2^18 elements; softmax over 256 and 2^18 elements.
    let work: Vec<f64> = probes.iter().map(|p| p.work).collect();
    assert_eq!(
        work[..23],
        [
            0.0,
            512.0,
            2097152.0,
            1024.0,
            16384.0,
            131072.0,
            1048576.0,
            262144.0,
            134217728.0,
            2097152.0,
            4194304.0,
            4194304.0,
            33554432.0,
            294912.0,
            231211008.0,
            4718592.0,
            28035072.0,
            23887872.0,
            75497472.0,
            256.0,
            262144.0,
            256.0,
            262144.0
        ]
    );
    // The curves hold one point per probe size, in increasing size.
    let sizes = |k: &cost::RateCurve| k.points.map(|p| p[0]);
    assert_eq!(sizes(&measured.gemm_curve), [8.0, 32.0, 128.0, 512.0]);
    assert_eq!(sizes(&measured.conv_curve), [4.0, 16.0, 64.0, 256.0]);
    assert_eq!(
        sizes(&measured.permute_curve),
        [1024.0, 16384.0, 131072.0, 1048576.0]
    );
    assert!(measured.cut_us >= 0.0 && measured.copy_bytes_per_us > 0.0);
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
