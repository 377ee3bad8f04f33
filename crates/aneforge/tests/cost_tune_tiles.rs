//! `tune` on a graph with attention: the `attention_tiles=k` variants (1 and 2h around the
//! heuristic h) are built, measured, accepted with zero error (tiles keep the bits) and cached
//! under a key naming the base tile count. One test function: it sets
//! ANEFORGE_CACHE_DIR for the process.

mod common;

use aneforge::compile::CompileOptions;
use aneforge::tune::{self, cache};
use aneforge::{input, sdpa, Tensor};

fn attention(s: usize) -> Vec<(Option<String>, Tensor)> {
    let (q, k, v) = (
        input(&[1, 1, s, 8]).unwrap(),
        input(&[1, 1, s, 8]).unwrap(),
        input(&[1, 1, s, 8]).unwrap(),
    );
    vec![(None, sdpa(&q, &k, &v, None, false, None).unwrap())]
}

#[test]
fn tune_measures_and_caches_tile_variants() {
    let (_cache, base, opts) = common::tune_setup("tune-tiles", 2);
    // 768 query rows: the heuristic builds 2 tiles, so the variants are 1 and 4 tiles.
    let (t, hit) = tune::tune(&attention(768), &base, &opts).unwrap();
    assert!(!hit);
    let mut names: Vec<&str> = t.table.iter().map(|r| r.variant.as_str()).collect();
    assert_eq!(names.remove(0), "baseline");
    names.sort();
    assert_eq!(names, ["attention_tiles=1", "attention_tiles=4"]);
    for r in &t.table {
        assert!(!r.lossy && r.measured_us.is_some(), "{r:?}");
        assert_eq!((r.error, r.accepted), (Some(0.0), true), "{r:?}");
    }
    let chosen = tune::variant(&t.chosen).unwrap();
    let want = t
        .chosen
        .strip_prefix("attention_tiles=")
        .map(|k| k.parse().unwrap());
    assert_eq!(chosen.options(&base).unwrap().attention_tiles, want);

    // Cached: the same structure is a hit, under a key marked for attention.
    let (again, hit) = tune::tune(&attention(768), &base, &opts).unwrap();
    assert!(hit);
    assert_eq!(again.chosen, t.chosen);
    let all = cache::load_all().unwrap();
    assert_eq!(all.len(), 1);
    assert!(
        all.keys().all(|k| k.ends_with("/attention_tiles=auto")),
        "{all:?}"
    );

    // Fewer than 512 query rows: no tile variant.
    let (small, _) = tune::tune(&attention(300), &base, &opts).unwrap();
    assert_eq!(small.table.len(), 1);
    // An explicit base count: the heuristic's 2 becomes a variant, the base's 4 is the baseline.
    let four = CompileOptions {
        attention_tiles: Some(4),
        ..base.clone()
    };
    let (t4, hit) = tune::tune(&attention(768), &four, &opts).unwrap();
    assert!(!hit);
    let mut names: Vec<&str> = t4.table[1..].iter().map(|r| r.variant.as_str()).collect();
    names.sort();
    assert_eq!(names, ["attention_tiles=1", "attention_tiles=2"]);
    assert!(tune::variant("attention_tiles=0").is_err());
}
