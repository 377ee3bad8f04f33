//! Malformed files: every one must fail with a typed error naming the file and the key,
//! tensor or offset, never panic and never allocate from an unchecked count.

mod common;

use aneforge_gguf::{GgufError, GgufFile};
use common::*;

/// A small valid file: two keys (one an array) and a Q8_0 tensor plus an F32 tensor.
fn valid() -> GgufBuilder {
    let q8_block: Vec<u8> = [0x00u8, 0x3C] // d = 1.0
        .into_iter()
        .chain((0..32).map(|i| i as u8))
        .collect();
    let mut tokens = STRING.to_le_bytes().to_vec();
    tokens.extend(2u64.to_le_bytes());
    tokens.extend(gguf_str("hi"));
    tokens.extend(gguf_str("there"));
    GgufBuilder::new()
        .kv_str("general.architecture", "llama")
        .kv_raw("tokenizer.ggml.tokens", ARRAY, &tokens)
        .tensor("token_embd.weight", &[32, 1], 8, q8_block)
        .tensor("output_norm.weight", &[2], 0, vec![0; 8])
}

/// The error of opening `bytes`, asserting that its message names the temp file.
fn open_err(tag: &str, bytes: &[u8]) -> GgufError {
    let err = open_bytes(tag, bytes).expect_err("the file must be refused");
    assert!(
        err.to_string().contains(tag),
        "message does not name the file: {err}"
    );
    err
}

#[test]
fn the_valid_file_opens_and_dequantizes() {
    let (bytes, _) = valid().build();
    let file = open_bytes("valid", &bytes).unwrap();
    let embd = file
        .tensor("token_embd.weight")
        .unwrap()
        .dequantize()
        .unwrap();
    assert_eq!(embd, (0..32).map(|i| i as f32).collect::<Vec<_>>());
}

#[test]
fn truncation_at_every_byte_is_a_typed_error() {
    let (bytes, layout) = valid().build();
    for cut in 0..layout.len {
        match open_bytes("cut", &bytes[..cut]) {
            Err(GgufError::Truncated { offset, .. }) => assert!(offset <= cut as u64),
            Err(GgufError::CountTooLarge {
                count, remaining, ..
            }) => assert!(count == 2 && remaining < 2 * 24),
            Err(GgufError::TensorPastEnd { file_len, .. }) => assert_eq!(file_len, cut as u64),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn truncation_at_each_section_boundary_names_the_section() {
    let (bytes, layout) = valid().build();
    let cases = [
        (0, "magic"),
        (4, "version"),
        (8, "tensor count"),
        (16, "metadata count"),
        // Key 0 is 8 + 20 bytes, then its 4-byte type.
        (
            layout.metadata_start + 30,
            "value type of metadata key 'general.architecture'",
        ),
        // Tensor 0: name 8 + 17, n_dims 4, dims 2 * 8, type 4, then the 8-byte offset.
        (
            layout.tensor_infos_start + 50,
            "data offset of tensor 'token_embd.weight'",
        ),
    ];
    for (cut, what_expected) in cases {
        match open_err("section", &bytes[..cut]) {
            GgufError::Truncated {
                what,
                offset,
                file_len,
                ..
            } => {
                assert_eq!(what, what_expected, "cut at {cut}");
                assert!(
                    offset <= cut as u64 && file_len == cut as u64,
                    "cut at {cut}"
                );
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // With nothing left after a count, the count itself is refused.
    for (cut, what_expected) in [
        (layout.metadata_start, "the metadata count"),
        (layout.tensor_infos_start, "the tensor count"),
    ] {
        match open_err("count", &bytes[..cut]) {
            GgufError::CountTooLarge {
                what,
                count: 2,
                remaining: 0,
                ..
            } => assert_eq!(what, what_expected),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // Inside a value, the key is named.
    let inside_tokens = layout.metadata_start + 8 + "general.architecture".len() + 4 + 8 + 5 + 30;
    let msg = open_err("in-array", &bytes[..inside_tokens]).to_string();
    assert!(msg.contains("'tokenizer.ggml.tokens'"), "{msg}");
    // Cutting the data section: the first tensor that does not fit is named with its span.
    match open_err("in-data", &bytes[..layout.data_start + 10]) {
        GgufError::TensorPastEnd {
            tensor,
            start,
            end,
            file_len,
            ..
        } => {
            assert_eq!(tensor, "token_embd.weight");
            let start_expected = layout.data_start as u64;
            assert_eq!((start, end), (start_expected, start_expected + 34));
            assert_eq!(file_len, start_expected + 10);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tensor_offset_past_the_end_names_the_tensor_and_span() {
    let mut builder = valid();
    builder.tensors[1].offset = 1 << 20;
    let (mut bytes, layout) = builder.build_without_data();
    bytes.resize(layout.data_start + 64, 0);
    let msg = open_err("offset-past-end", &bytes).to_string();
    let start = layout.data_start as u64 + (1 << 20);
    let expected = format!(
        "tensor 'output_norm.weight' data [{start}, {}) runs past the file length {}",
        start + 8,
        layout.data_start + 64
    );
    assert!(msg.contains(&expected), "{msg}");
    // An offset so large that start + size overflows u64 is the same error, not a panic.
    builder.tensors[1].offset = u64::MAX - 31;
    let (mut bytes, layout) = builder.build_without_data();
    bytes.resize(layout.data_start + 64, 0);
    assert!(matches!(
        open_err("offset-overflow", &bytes),
        GgufError::TensorPastEnd { .. }
    ));
}

#[test]
fn array_of_2_pow_40_entries_is_refused_before_allocating() {
    let mut value = U32.to_le_bytes().to_vec();
    value.extend((1u64 << 40).to_le_bytes());
    value.extend([0u8; 16]);
    let (bytes, layout) = GgufBuilder::new()
        .kv_raw("huge.array", ARRAY, &value)
        .build();
    let after_count = layout.metadata_start + 8 + "huge.array".len() + 4 + 4 + 8;
    match open_err("huge-array", &bytes) {
        GgufError::CountTooLarge {
            what,
            count,
            min_entry_bytes,
            remaining,
            ..
        } => {
            assert_eq!(what, "array 'huge.array' of u32");
            let left = (bytes.len() - after_count) as u64;
            assert_eq!((count, min_entry_bytes, remaining), (1 << 40, 4, left));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_counts_and_lengths_are_refused_before_allocating() {
    let (mut bytes, _) = GgufBuilder::new().build();
    bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes()); // tensor count
    let msg = open_err("huge-tensor-count", &bytes).to_string();
    assert!(
        msg.contains("the tensor count claims 18446744073709551615 entries"),
        "{msg}"
    );
    bytes[8..16].copy_from_slice(&0u64.to_le_bytes());
    bytes[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes()); // metadata count
    assert!(matches!(
        open_err("huge-kv-count", &bytes),
        GgufError::CountTooLarge { .. }
    ));
    // A string claiming 2^62 bytes.
    let (bytes, _) = GgufBuilder::new()
        .kv_raw("long.string", STRING, &(1u64 << 62).to_le_bytes())
        .build();
    match open_err("huge-string", &bytes) {
        GgufError::Truncated { what, needed, .. } => {
            assert_eq!(what, "value of metadata key 'long.string'");
            assert_eq!(needed, 1 << 62);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_value_and_tensor_types_are_named() {
    let (bytes, _) = GgufBuilder::new().kv_raw("odd.key", 13, &[0; 8]).build();
    let msg = open_err("unknown-value-type", &bytes).to_string();
    assert!(
        msg.contains("metadata key 'odd.key' has unknown value type id 13"),
        "{msg}"
    );
    let mut builder = valid();
    builder.tensors[1].type_id = 4; // removed from ggml (was Q4_2)
    let (bytes, _) = builder.build();
    let msg = open_err("unknown-tensor-type", &bytes).to_string();
    assert!(
        msg.contains("tensor 'output_norm.weight' has unknown type id 4"),
        "{msg}"
    );
}

#[test]
fn unsupported_quant_type_is_an_error_on_dequantize() {
    // IQ2_XXS (id 16): 256 elements in 66 bytes; the file is valid, decoding is not offered.
    let (bytes, _) = GgufBuilder::new()
        .tensor("blk.0.ffn_up.weight", &[256], 16, vec![0; 66])
        .build();
    let file = open_bytes("iq2", &bytes).unwrap();
    let tensor = file.tensor("blk.0.ffn_up.weight").unwrap();
    assert_eq!(tensor.data().len(), 66);
    let msg = tensor.dequantize().unwrap_err().to_string();
    assert!(
        msg.contains("unsupported quant type IQ2_XXS (id 16) for tensor 'blk.0.ffn_up.weight'"),
        "{msg}"
    );
}

#[test]
fn wrong_magic_and_versions() {
    let (mut bytes, _) = valid().build();
    bytes[..4].copy_from_slice(b"GGML");
    assert!(
        matches!(open_err("magic", &bytes), GgufError::BadMagic { found, .. } if &found == b"GGML")
    );
    for (version, detail) in [
        (1u32, "GGUF v1"),
        (4, "versions 2 and 3"),
        (0x0300_0000, "big-endian"),
    ] {
        let mut builder = valid();
        builder.version = version;
        let (bytes, _) = builder.build();
        match open_err("version", &bytes) {
            GgufError::UnsupportedVersion {
                version: v,
                detail: d,
                ..
            } => {
                assert_eq!(v, version);
                assert!(d.contains(detail), "{d}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn structural_errors_are_typed() {
    // Duplicate key.
    let (bytes, _) = valid().kv_u32("general.architecture", 1).build();
    let msg = open_err("dup-key", &bytes).to_string();
    assert!(
        msg.contains("duplicate metadata key 'general.architecture'"),
        "{msg}"
    );
    // Duplicate tensor name.
    let (bytes, _) = valid()
        .tensor("output_norm.weight", &[1], 0, vec![0; 4])
        .build();
    let msg = open_err("dup-tensor", &bytes).to_string();
    assert!(
        msg.contains("duplicate tensor name 'output_norm.weight'"),
        "{msg}"
    );
    // Alignment that is not a power of two, or not a u32.
    let (bytes, _) = valid().kv_u32("general.alignment", 48).build();
    assert!(matches!(
        open_err("align-48", &bytes),
        GgufError::BadAlignment { .. }
    ));
    let (bytes, _) = valid().kv_str("general.alignment", "32").build();
    assert!(matches!(
        open_err("align-str", &bytes),
        GgufError::BadAlignment { .. }
    ));
    // Misaligned tensor offset.
    let mut builder = valid();
    builder.tensors[1].offset = 40;
    let (bytes, _) = builder.build();
    let msg = open_err("misaligned", &bytes).to_string();
    assert!(
        msg.contains("'output_norm.weight' offset 40 is not a multiple of the alignment 32"),
        "{msg}"
    );
    // Five dimensions, a row that is not whole blocks, an element count overflowing u64.
    let (bytes, _) = GgufBuilder::new()
        .tensor("t5", &[1, 1, 1, 1, 1], 0, vec![0; 4])
        .build();
    assert!(open_err("dims5", &bytes)
        .to_string()
        .contains("5 dimensions, at most 4"));
    let (bytes, _) = GgufBuilder::new()
        .tensor("q", &[48], 8, vec![0; 68])
        .build();
    let msg = open_err("partial-block", &bytes).to_string();
    assert!(
        msg.contains("rows of 48 elements are not whole Q8_0 blocks of 32"),
        "{msg}"
    );
    let (bytes, _) = GgufBuilder::new()
        .tensor("big", &[1 << 32, 1 << 32], 0, vec![])
        .build();
    assert!(open_err("overflow", &bytes)
        .to_string()
        .contains("element count overflows u64"));
    // Nesting deeper than the limit.
    let mut value = Vec::new();
    for _ in 0..20 {
        value.extend(ARRAY.to_le_bytes());
        value.extend(1u64.to_le_bytes());
    }
    value.extend(U8.to_le_bytes());
    value.extend(0u64.to_le_bytes());
    let (bytes, _) = GgufBuilder::new().kv_raw("deep", ARRAY, &value).build();
    let msg = open_err("deep", &bytes).to_string();
    assert!(
        msg.contains("'deep' nests arrays deeper than 8 levels"),
        "{msg}"
    );
    // Invalid UTF-8 in a key.
    let (mut bytes, layout) = GgufBuilder::new().kv_u32("bad", 1).build();
    bytes[layout.metadata_start + 8] = 0xFF;
    assert!(matches!(
        open_err("utf8", &bytes),
        GgufError::InvalidUtf8 { .. }
    ));
}

#[test]
fn non_regular_files_are_refused_without_blocking() {
    for path in ["/dev/null", "/tmp"] {
        match GgufFile::open(path) {
            Err(GgufError::NotRegularFile { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path}: {other:?}"),
        }
    }
    let missing = GgufFile::open("/nonexistent/model.gguf").unwrap_err();
    assert!(matches!(missing, GgufError::Io { .. }));
    assert!(missing.to_string().contains("/nonexistent/model.gguf"));
}
