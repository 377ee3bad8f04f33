//! `tune` / `tune_precision` on tiny graphs with real measurements on the reference executor:
//! the table's structure, the gate's invariants, the cache (hit, structural key, corrupt file
//! rewritten). One test function: it sets ANEFORGE_CACHE_DIR for the process.

mod common;

use aneforge::tune::{self, cache, TuneOptions};
use aneforge::{constant, input, Graph, HostArray, Tensor};

fn net(seed: f32) -> Vec<(Option<String>, Tensor)> {
    let w: Vec<f32> = (0..64 * 64)
        .map(|i| ((i as f32 * 0.37 + seed).sin()) * 0.2)
        .collect();
    let x = input(&[1, 64]).unwrap();
    let y = x
        .matmul(&constant("t", HostArray::f32(&[64, 64], &w)).unwrap())
        .unwrap();
    vec![(None, y.sum(&[1], true).unwrap())]
}

#[test]
fn tune_measures_gates_and_caches() {
    let (dir, base, opts) = common::tune_setup("cost-tune", 3);

    let (t, hit) = tune::tune(&net(0.0), &base, &opts).unwrap();
    assert!(!hit);
    assert_eq!(t.executor, "reference");
    let names: Vec<&str> = t.table.iter().map(|r| r.variant.as_str()).collect();
    assert_eq!(names[0], "baseline");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "auto",
            "baseline",
            "blockwise",
            "int4",
            "int8",
            "int8+sum_via_matmul",
            "sum_via_matmul"
        ]
    );
    let base_row = &t.table[0];
    assert_eq!((base_row.error, base_row.accepted), (Some(0.0), true));
    let base_us = base_row.measured_us.unwrap();
    for r in &t.table {
        assert!(r.estimate_us.is_finite() && r.estimate_us > 0.0, "{r:?}");
        if r.accepted {
            assert!(r.error.unwrap() <= 5e-3, "{r:?}");
            if r.lossy {
                assert!(base_us / r.measured_us.unwrap() >= 1.10, "{r:?}");
            }
        } else if r.measured_us.is_some() {
            assert!(!r.note.is_empty(), "{r:?}");
        }
    }
    // Lossless rows are ranked (and measured) before lossy ones.
    let first_lossy = t.table.iter().position(|r| r.lossy).unwrap();
    assert!(
        t.table[..first_lossy].iter().all(|r| !r.lossy)
            && t.table[first_lossy..].iter().all(|r| r.lossy)
    );
    assert!(t.table.iter().any(|r| r.variant == t.chosen && r.accepted));

    // Same structure, other weights: a cache hit with the same table.
    let (again, hit) = tune::tune(&net(1.0), &base, &opts).unwrap();
    assert!(hit);
    // The cached table (JSON floats round-trip to within an ulp).
    let summary = |t: &tune::Tuned| {
        t.table
            .iter()
            .map(|r| (r.variant.clone(), r.accepted, r.note.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (again.chosen.as_str(), summary(&again)),
        (t.chosen.as_str(), summary(&t))
    );
    for (a, b) in again.table.iter().zip(&t.table) {
        let (x, y) = (a.measured_us.unwrap_or(0.0), b.measured_us.unwrap_or(0.0));
        assert!((x - y).abs() <= 1e-9 * y.abs(), "{a:?} vs {b:?}");
    }
    let key =
        |o: &[(Option<String>, Tensor)]| cache::structural_hash(&Graph::from_outputs(o).unwrap());
    assert_eq!(key(&net(0.0)), key(&net(1.0)));
    let other = vec![(None, input(&[1, 64]).unwrap().relu().unwrap())];
    assert_ne!(key(&net(0.0)), key(&other));

    // A corrupt cache is ignored (measured again) and rewritten as valid JSON.
    let file = dir.join(cache::TUNE_FILE);
    std::fs::write(&file, "{\"truncated").unwrap();
    let (_, hit) = tune::tune(
        &net(0.0),
        &base,
        &TuneOptions {
            budget: 1,
            ..opts.clone()
        },
    )
    .unwrap();
    assert!(!hit);
    let all = cache::load_all().unwrap();
    assert_eq!(all.len(), 1);
    // Budget 1: only the baseline is measured.
    let t1 = all.values().next().unwrap();
    assert!(
        t1.table[1..]
            .iter()
            .all(|r| r.measured_us.is_none() && !r.accepted),
        "{:?}",
        t1.table
    );
    assert_eq!(t1.chosen, "baseline");

    let e = tune::tune(
        &net(0.0),
        &base,
        &TuneOptions {
            budget: 0,
            ..opts.clone()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("budget must be ≥ 1"), "{e}");

    // tune_precision: fp16 sums vs the fp32 reference; an impossible target names the best error.
    let p = tune::tune_precision(&net(0.0), 0.5).unwrap();
    assert!(p
        .table
        .iter()
        .any(|r| r.variant == p.chosen && r.accepted && r.error.unwrap() <= 0.5));
    let e = tune::tune_precision(&net(0.0), 1e-12)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no variant meets target_error"), "{e}");
}
