//! Shared by the bit-identity tests: FNV-1a digests and the recorded-hash file check.
#![allow(dead_code)] // each test crate uses a part

use std::collections::BTreeMap;

/// FNV-1a 64 over `bytes`.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// FNV-1a 64 over the little-endian bit patterns of `values`.
pub fn digest_f32(values: &[f32]) -> u64 {
    fnv1a(values.iter().flat_map(|v| v.to_bits().to_le_bytes()))
}

/// The `gemm` dispatch class of this CPU, which fixes the f32 summation order and so the hashes:
/// `Some("")` on x86-64 AVX-512 (the original files), `Some(".avx2")` on x86-64 AVX2+FMA without
/// AVX-512 (`<file>.avx2.txt`), `None` elsewhere (nothing recorded: comparison skipped).
fn cpu_class() -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some("");
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some(".avx2");
        }
    }
    None
}

/// Compare `got` (name → hash) with the lines starting with `prefix` of `file` for this CPU's
/// class ([`cpu_class`]), or record them (`ANEFORGE_RECORD_HASHES`); `test` names the caller.
pub fn check(file: &str, test: &str, prefix: &str, got: BTreeMap<String, u64>) {
    let Some(class) = cpu_class() else {
        eprintln!("{test}: no hashes are recorded for this CPU's gemm dispatch; not compared");
        return;
    };
    let stem = file.strip_suffix(".txt").expect("hash files end in .txt");
    let file = &format!("{stem}{class}.txt");
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut recorded: BTreeMap<String, u64> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("line 'name hash'");
            (k.to_string(), u64::from_str_radix(v, 16).expect("hex hash"))
        })
        .collect();
    if std::env::var_os("ANEFORGE_RECORD_HASHES").is_some() {
        recorded.retain(|k, _| !k.starts_with(prefix));
        recorded.extend(got);
        let header = text.lines().take_while(|l| l.starts_with('#'));
        let mut out: Vec<String> = header.map(str::to_string).collect();
        out.extend(recorded.iter().map(|(k, v)| format!("{k} {v:016x}")));
        std::fs::write(file, out.join("\n") + "\n").unwrap();
        return;
    }
    assert!(
        !text.is_empty(),
        "{test}: no recorded hashes in {file} (record them with ANEFORGE_RECORD_HASHES=1 on the \
         executor before the change)"
    );
    let want: BTreeMap<&String, &u64> = recorded
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .collect();
    let differ: Vec<&String> = got
        .iter()
        .filter(|(k, v)| want.get(k) != Some(v))
        .map(|(k, _)| k)
        .collect();
    assert!(
        differ.is_empty(),
        "{test}: results changed bits: {differ:?}"
    );
    assert_eq!(want.len(), got.len(), "cases recorded vs run");
}
