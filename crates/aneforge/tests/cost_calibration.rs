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
    let mut want = vec!["floor"];
    for kind in [
        "copy",
        "permute",
        "elementwise",
        "unary",
        "scalar",
        "fused elementwise",
        "fused unary",
        "fused scalar",
        "broadcast",
        "reduce",
        "softmax",
        "gemm",
        "conv",
        "conv work",
    ] {
        want.extend([kind; 4]);
    }
    want.extend(["ports", "epilogue", "cut", "host"]);
    assert_eq!(names, want);
    // The probes' work from their shapes ([n, n] for n = 16, 64, 256, 1024): reshapes copy
    // 2·2·n² bytes; transposes, x·x, relu, x·0.5, x + row and softmax touch n² elements, the
    // softmax probe's units (y − z, then softmax) 2n²; matmuls K = N = s with
    // M = clamp(2^19 / s², 64, 4096): 2·4096·8², 2·512·32², 2·64·128², 2·64·512²; padded 3×3
    // convs of c channels on h = clamp(⌊√(3e7 / 18c²)⌋, 10, 64): 2·4·64²·36, 2·16·64²·144,
    // 2·64·20²·576, 2·256·10²·2304; the conv work probes, c channels on c×c for c = 8, 16, 32,
    // 64: 2·c³·9c; the port probe converts x and x·x on 1024²; the epilogue probe folds
    // batch_norm and relu into each 1×1 conv of 8 channels on 64×64: 2·8·64² elements.
    let work: Vec<f64> = probes.iter().map(|p| p.work).collect();
    let mut expected = vec![0.0];
    for n in [16.0f64, 64.0, 256.0, 1024.0] {
        expected.push(4.0 * n * n);
    }
    for _ in 0..9 {
        expected.extend([256.0, 4096.0, 65536.0, 1048576.0]);
    }
    expected.extend([512.0, 8192.0, 131072.0, 2097152.0]);
    expected.extend([524288.0, 1048576.0, 2097152.0, 33554432.0]);
    expected.extend([1179648.0, 18874368.0, 29491200.0, 117964800.0]);
    expected.extend([73728.0, 1179648.0, 18874368.0, 301989888.0, 2097152.0]);
    expected.push(65536.0);
    // (the cut probe's work is the model's µs for it; the host probe's topk reads 256² elements)
    assert_eq!(work[..work.len() - 2], expected[..]);
    assert_eq!(work[work.len() - 1], 65536.0);
    // The curves hold one point per probe size, in increasing size.
    let sizes = |k: &cost::RateCurve| k.points.map(|p| p[0]);
    assert_eq!(sizes(&measured.gemm_curve), [8.0, 32.0, 128.0, 512.0]);
    assert_eq!(sizes(&measured.conv_curve), [4.0, 16.0, 64.0, 256.0]);
    assert_eq!(
        sizes(&measured.conv_work_curve),
        [73728.0, 1179648.0, 18874368.0, 301989888.0]
    );
    for k in [
        &measured.permute_curve,
        &measured.elementwise_curve,
        &measured.unary_curve,
        &measured.scalar_curve,
        &measured.broadcast_curve,
        &measured.fused_binary_curve,
        &measured.fused_unary_curve,
        &measured.fused_scalar_curve,
        &measured.reduce_curve,
        &measured.softmax_curve,
    ] {
        assert_eq!(sizes(k), [256.0, 4096.0, 65536.0, 1048576.0]);
    }
    assert_eq!(measured.host_curve.points[0][0], 65536.0);
    assert_eq!(
        sizes(&measured.copy_curve),
        [1024.0, 16384.0, 262144.0, 4194304.0]
    );
    assert!(measured.cut_us >= 0.0 && measured.port_elems_per_us >= 0.0);
    assert!(measured.epilogue_per_us > 0.0);
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
