//! The `attention_tiles` compile option on the reference executor: sdpa (plain, causal, user
//! mask), mha and cross_attention against a float64 attention computed here, for even and
//! uneven tile counts; outputs bit-identical across counts; the default compile untouched;
//! counts of 0 or above the query rows refused with errors naming the option.

mod common;

use aneforge::compile::{compile, CompileOptions, Device};
use aneforge::{input, sdpa, AttentionWeights, HostArray, PortData, Tensor};
use common::data;

/// Compile `y` on the reference executor with `tiles` and run it on `xs`.
fn run(y: &Tensor, tiles: Option<usize>, xs: &[Vec<f32>]) -> aneforge::Result<Vec<f32>> {
    let opts = CompileOptions {
        device: Device::Reference,
        attention_tiles: tiles,
        ..CompileOptions::default()
    };
    let mut net = compile(&[(None, y.clone())], &opts)?;
    let ports: Vec<PortData> = xs.iter().map(|x| PortData::F32(x)).collect();
    Ok(net.run(&ports)?.remove(0))
}

/// Softmax nodes (one per query tile) of `y` compiled with `tiles`.
fn softmaxes(y: &Tensor, tiles: Option<usize>) -> usize {
    let opts = CompileOptions {
        device: Device::Reference,
        attention_tiles: tiles,
        ..CompileOptions::default()
    };
    let net = compile(&[(None, y.clone())], &opts).unwrap();
    net.program.mil.matches("softmax(").count()
}

/// Values rounded to fp16, as the program's inputs and constants see them.
fn h(x: &[f32]) -> Vec<f64> {
    x.iter()
        .map(|&v| f64::from(half::f16::from_f32(v).to_f32()))
        .collect()
}

/// float64 softmax(q kᵀ · scale + mask) v per head: q [H, S, D], k [H, T, D], v [H, T, Dv], mask [S, T].
#[allow(clippy::too_many_arguments)]
fn oracle(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    mask: Option<&[f64]>,
    (heads, s, t, d, dv): (usize, usize, usize, usize, usize),
    scale: f64,
) -> Vec<f64> {
    let mut out = vec![0.0; heads * s * dv];
    for hd in 0..heads {
        for i in 0..s {
            let scores: Vec<f64> = (0..t)
                .map(|j| {
                    let dot: f64 = (0..d)
                        .map(|c| q[(hd * s + i) * d + c] * k[(hd * t + j) * d + c])
                        .sum();
                    dot * scale + mask.map_or(0.0, |m| m[i * t + j])
                })
                .collect();
            let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|x| (x - top).exp()).collect();
            let sum: f64 = e.iter().sum();
            for c in 0..dv {
                out[(hd * s + i) * dv + c] =
                    (0..t).map(|j| e[j] * v[(hd * t + j) * dv + c]).sum::<f64>() / sum;
            }
        }
    }
    out
}

/// max |got − want| / max |want|.
fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    got.iter()
        .zip(want)
        .fold(0.0f64, |m, (&g, w)| m.max((f64::from(g) - w).abs()))
        / scale
}

/// The bit patterns of `x`.
fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// Every count in `counts` matches `want` within fp16 rounding and gives the default's bits.
fn check_counts(y: &Tensor, xs: &[Vec<f32>], want: &[f64], counts: &[usize]) {
    let default = run(y, None, xs).unwrap();
    assert!(
        rel_err(&default, want) < 1e-2,
        "{}",
        rel_err(&default, want)
    );
    for &k in counts {
        let got = run(y, Some(k), xs).unwrap();
        assert_eq!(softmaxes(y, Some(k)), k);
        let e = rel_err(&got, want);
        assert!(e < 1e-2, "{k} tiles: error {e}");
        assert_eq!(bits(&got), bits(&default), "{k} tiles changed the bits");
    }
}

#[test]
fn sdpa_tiles_match_the_oracle_plain_causal_and_masked() {
    let (heads, s, d, dv) = (2, 37, 8, 5);
    let (qx, kx, vx) = (
        data(heads * s * d, 1),
        data(heads * s * d, 2),
        data(heads * s * dv, 3),
    );
    let (q, k, v) = (
        input(&[1, heads, s, d]).unwrap(),
        input(&[1, heads, s, d]).unwrap(),
        input(&[1, heads, s, dv]).unwrap(),
    );
    let xs = [qx.clone(), kx.clone(), vx.clone()];
    let dims = (heads, s, s, d, dv);
    let scale = 1.0 / (d as f64).sqrt();
    let counts = [1, 2, 3, 5, 36, 37];

    let plain = sdpa(&q, &k, &v, None, false, None).unwrap();
    let want = oracle(&h(&qx), &h(&kx), &h(&vx), None, dims, scale);
    check_counts(&plain, &xs, &want, &counts);

    let causal = sdpa(&q, &k, &v, None, true, None).unwrap();
    let cm: Vec<f64> = (0..s * s)
        .map(|i| if i % s > i / s { -1e4 } else { 0.0 })
        .collect();
    let want = oracle(&h(&qx), &h(&kx), &h(&vx), Some(&cm), dims, scale);
    check_counts(&causal, &xs, &want, &counts);

    let mx: Vec<f32> = data(s * s, 4).iter().map(|x| 3.0 * x).collect();
    let masked = sdpa(
        &q,
        &k,
        &v,
        Some(0.3),
        false,
        Some(HostArray::f32(&[1, 1, s, s], &mx)),
    )
    .unwrap();
    let want = oracle(&h(&qx), &h(&kx), &h(&vx), Some(&h(&mx)), dims, 0.3);
    check_counts(&masked, &xs, &want, &counts);
}

/// [S, H·dh] row-major → [H, S, dh].
fn heads_first(x: &[f64], s: usize, heads: usize) -> Vec<f64> {
    let dh = x.len() / s / heads;
    let mut out = vec![0.0; x.len()];
    for i in 0..s {
        for hd in 0..heads {
            for c in 0..dh {
                out[(hd * s + i) * dh + c] = x[i * heads * dh + hd * dh + c];
            }
        }
    }
    out
}

/// `x` [S, In] · wᵀ (w [Out, In]) in float64.
fn linear(x: &[f64], w: &[f64], out: usize) -> Vec<f64> {
    let inn = w.len() / out;
    x.chunks(inn)
        .flat_map(|r| (0..out).map(move |o| (0..inn).map(|c| r[c] * w[o * inn + c]).sum::<f64>()))
        .collect()
}

#[test]
fn mha_and_cross_attention_tiles_match_the_oracle() {
    let (s, t, dm, heads) = (29, 11, 12, 3);
    let ws: Vec<Vec<f32>> = (0..4)
        .map(|i| data(dm * dm, 10 + i).iter().map(|x| x * 0.5).collect())
        .collect();
    const SHAPE: [usize; 2] = [12, 12];
    let w = |i: usize| HostArray::f32(&SHAPE, &ws[i]);
    let aw = AttentionWeights {
        wq: w(0),
        wk: w(1),
        wv: w(2),
        wo: w(3),
        bq: None,
        bk: None,
        bv: None,
        bo: None,
    };
    let (xx, cx) = (data(s * dm, 20), data(t * dm, 21));
    // The float64 oracle of the whole block (the fp16 program rounds each projection: the
    // tolerance of check_counts covers it at these sizes).
    let block = |x: &[f64], ctx: &[f64], rows: usize, ctx_rows: usize| {
        let p =
            |src: &[f64], i: usize, n: usize| heads_first(&linear(src, &h(&ws[i]), dm), n, heads);
        let o = oracle(
            &p(x, 0, rows),
            &p(ctx, 1, ctx_rows),
            &p(ctx, 2, ctx_rows),
            None,
            (heads, rows, ctx_rows, dm / heads, dm / heads),
            1.0 / ((dm / heads) as f64).sqrt(),
        );
        let dh = dm / heads;
        let mut merged = vec![0.0; rows * dm];
        for hd in 0..heads {
            for i in 0..rows {
                for c in 0..dh {
                    merged[i * dm + hd * dh + c] = o[(hd * rows + i) * dh + c];
                }
            }
        }
        linear(&merged, &h(&ws[3]), dm)
    };
    let x = input(&[s, dm]).unwrap();
    let want = block(&h(&xx), &h(&xx), s, s);
    check_counts(
        &x.mha(aw, heads).unwrap(),
        std::slice::from_ref(&xx),
        &want,
        &[2, 4, 29],
    );

    let ctx = input(&[t, dm]).unwrap();
    let want = block(&h(&xx), &h(&cx), s, t);
    let y = x.cross_attention(&ctx, aw, heads).unwrap();
    check_counts(&y, &[xx, cx], &want, &[3, 7]);
}

#[test]
fn default_and_heuristic_compiles_are_the_built_graph() {
    let (q, k, v) = (
        input(&[1, 2, 800, 16]).unwrap(),
        input(&[1, 2, 800, 16]).unwrap(),
        input(&[1, 2, 800, 16]).unwrap(),
    );
    let y = sdpa(&q, &k, &v, None, true, None).unwrap();
    let mil = |tiles| {
        let opts = CompileOptions {
            device: Device::Reference,
            attention_tiles: tiles,
            ..CompileOptions::default()
        };
        compile(&[(None, y.clone())], &opts).unwrap().program.mil
    };
    // The heuristic gives 2 tiles at 800 rows: asking for 2 changes nothing, 3 does.
    assert_eq!(mil(None), mil(Some(2)));
    assert_ne!(mil(None), mil(Some(3)));
    assert_eq!(softmaxes(&y, None), 2);
    // At this size too (the products take the blocked kernels), tiles leave every bit alone.
    let xs: Vec<Vec<f32>> = (0..3).map(|i| data(2 * 800 * 16, 30 + i)).collect();
    let base = run(&y, None, &xs).unwrap();
    for k in [1, 3, 7] {
        assert_eq!(
            bits(&run(&y, Some(k), &xs).unwrap()),
            bits(&base),
            "{k} tiles"
        );
    }
}

#[test]
fn bad_tile_counts_are_value_errors_naming_the_option() {
    let q = input(&[1, 2, 7, 4]).unwrap();
    let y = sdpa(&q, &q, &q, None, false, None).unwrap();
    let xs = [data(56, 1)];
    let e = run(&y, Some(0), &xs).unwrap_err().to_string();
    assert_eq!(
        e,
        "compile: attention_tiles must be >= 1 (or \"auto\"), got 0"
    );
    let e = run(&y, Some(8), &xs).unwrap_err().to_string();
    assert_eq!(
        e,
        "compile: attention_tiles = 8 exceeds the 7 query rows of an attention (sdpa); it must be in 1..=7"
    );
    let mut o = CompileOptions::default();
    assert!(o.set("attention_tiles", -1).is_err());
    o.set("attention_tiles", "auto").unwrap();
    assert_eq!(o.attention_tiles, None);
}

#[test]
fn the_cost_model_sees_the_tile_count() {
    let (heads, s, d) = (2, 1536, 64);
    let q = input(&[1, heads, s, d]).unwrap();
    let y = sdpa(&q, &q, &q, None, false, None).unwrap();
    let estimate = |tiles| {
        let opts = CompileOptions {
            device: Device::Reference,
            attention_tiles: Some(tiles),
            ..CompileOptions::default()
        };
        let net = compile(&[(None, y.clone())], &opts).unwrap();
        aneforge::cost::estimate(&net.program.graph, Some("h14")).unwrap()
    };
    let (one, three) = (estimate(1), estimate(3));
    // One tile: the [2, 1536, 1536] softmax is past the wall (≥ 768 rows, ≥ 512 columns): its
    // bytes in and out at h14's 48 GB/s, × 2.4 (18,874,368 B / 48,000 B/µs × 2.4 = 943.7184 µs).
    let softmax_us = |e: &aneforge::cost::Estimate| -> Vec<f64> {
        e.ops
            .iter()
            .filter(|o| o.work.op == "softmax")
            .map(|o| o.micros)
            .collect()
    };
    let walled = softmax_us(&one);
    assert_eq!(walled.len(), 1);
    assert!((walled[0] - 943.7184).abs() < 1e-6, "{walled:?}");
    // Three tiles of 512 rows: under the wall, 6,291,456 B each at 48 GB/s = 131.072 µs.
    let tiled = softmax_us(&three);
    assert_eq!(tiled.len(), 3);
    assert!(
        tiled.iter().all(|u| (u - 131.072).abs() < 1e-6),
        "{tiled:?}"
    );
    assert!(
        three.micros < one.micros,
        "{} vs {}",
        three.micros,
        one.micros
    );
}
