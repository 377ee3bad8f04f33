//! Well-formed files written by the test's own writer: every metadata type, typed accessors,
//! alignment, tensor infos, borrowed data and dequantization of plain types.

mod common;

use aneforge_gguf::{Architecture, Array, GgmlType, GgufError, Value, ValueType};
use common::*;

/// An array value: element type id, count, then the encoded elements.
fn array(elem_type: u32, elems: &[Vec<u8>]) -> Vec<u8> {
    let mut out = elem_type.to_le_bytes().to_vec();
    out.extend((elems.len() as u64).to_le_bytes());
    for e in elems {
        out.extend_from_slice(e);
    }
    out
}

/// A file with one key of every scalar type, string and nested arrays, and two tensors.
fn every_type() -> GgufBuilder {
    let f32_data: Vec<u8> = [1.5f32, -2.25, 3.0, 0.125, -0.0, 7.75]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    // 0x3C00 = 1.0, 0xC000 = -2.0, 0x3555 = (1 + 341/1024) / 4, 0x0001 = 2^-24.
    let f16_data: Vec<u8> = [0x3C00u16, 0xC000, 0x3555, 0x0001]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    GgufBuilder::new()
        .kv_str("general.architecture", "llama")
        .kv_raw("k.u8", U8, &[200])
        .kv_raw("k.i8", I8, &(-100i8).to_le_bytes())
        .kv_raw("k.u16", U16, &60000u16.to_le_bytes())
        .kv_raw("k.i16", I16, &(-30000i16).to_le_bytes())
        .kv_u32("k.u32", 4_000_000_000)
        .kv_raw("k.i32", I32, &(-2_000_000_000i32).to_le_bytes())
        .kv_raw("k.f32", F32, &0.1f32.to_le_bytes())
        .kv_raw("k.bool", BOOL, &[1])
        .kv_str("k.string", "héllo")
        .kv_raw("k.u64", U64, &(1u64 << 50).to_le_bytes())
        .kv_raw("k.i64", I64, &(-(1i64 << 50)).to_le_bytes())
        .kv_raw("k.f64", F64, &std::f64::consts::PI.to_le_bytes())
        .kv_raw(
            "k.strings",
            ARRAY,
            &array(STRING, &[gguf_str("a"), gguf_str(""), gguf_str("ccc")]),
        )
        .kv_raw(
            "k.nested",
            ARRAY,
            &array(
                ARRAY,
                &[
                    array(
                        I32,
                        &[1i32.to_le_bytes().to_vec(), (-2i32).to_le_bytes().to_vec()],
                    ),
                    array(I32, &[]),
                ],
            ),
        )
        .tensor("norm.weight", &[3, 2], 0, f32_data)
        .tensor("half", &[4], 1, f16_data)
}

#[test]
fn reads_every_metadata_type_in_file_order() {
    let (bytes, _) = every_type().build();
    let file = open_bytes("every-type", &bytes).unwrap();
    assert_eq!(file.version(), 3);
    let md = file.metadata();
    let keys: Vec<&str> = md.entries().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys[..3], ["general.architecture", "k.u8", "k.i8"]);
    assert_eq!(md.get("k.u8"), Some(&Value::U8(200)));
    assert_eq!(md.get("k.i8"), Some(&Value::I8(-100)));
    assert_eq!(md.get("k.u16"), Some(&Value::U16(60000)));
    assert_eq!(md.get("k.i16"), Some(&Value::I16(-30000)));
    assert_eq!(md.get_u32("k.u32").unwrap(), 4_000_000_000);
    assert_eq!(md.get_i32("k.i32").unwrap(), -2_000_000_000);
    assert_eq!(md.get_f32("k.f32").unwrap(), 0.1f32);
    assert!(md.get_bool("k.bool").unwrap());
    assert_eq!(md.get_str("k.string").unwrap(), "héllo");
    assert_eq!(md.get_u64("k.u64").unwrap(), 1 << 50);
    assert_eq!(md.get("k.i64"), Some(&Value::I64(-(1 << 50))));
    assert_eq!(md.get_float("k.f64").unwrap(), std::f64::consts::PI);
    assert_eq!(md.get_float("k.f32").unwrap(), f64::from(0.1f32));
    assert_eq!(md.get_unsigned("k.u8").unwrap(), 200);
    assert_eq!(md.get_str_array("k.strings").unwrap(), ["a", "", "ccc"]);
    let nested = md.get_array("k.nested").unwrap();
    assert_eq!(nested.elem_type(), ValueType::Array);
    assert_eq!(
        *nested,
        Array::Array(vec![Array::I32(vec![1, -2]), Array::I32(vec![])])
    );
    assert_eq!(md.get_array("k.strings").unwrap().len(), 3);
}

#[test]
fn typed_accessors_name_the_key_and_the_actual_type() {
    let (bytes, _) = every_type().build();
    let file = open_bytes("accessors", &bytes).unwrap();
    let md = file.metadata();
    let err = md.get_u32("k.string").unwrap_err().to_string();
    assert!(err.contains("'k.string' is string, not u32"), "{err}");
    let err = md.get_str("k.strings").unwrap_err().to_string();
    assert!(
        err.contains("'k.strings' is array of string, not string"),
        "{err}"
    );
    let err = md.get_unsigned("k.i8").unwrap_err().to_string();
    assert!(
        err.contains("'k.i8' is i8, not a non-negative integer"),
        "{err}"
    );
    assert!(matches!(md.get_u32("nope"), Err(GgufError::MissingKey { key, .. }) if key == "nope"));
}

#[test]
fn tensor_infos_shapes_and_borrowed_data() {
    let (bytes, layout) = every_type().build();
    let file = open_bytes("tensors", &bytes).unwrap();
    assert_eq!(file.alignment(), 32);
    assert_eq!(file.data_offset(), layout.data_start as u64);
    let infos = file.tensor_infos();
    assert_eq!(infos.len(), 2);
    assert_eq!(infos[0].name, "norm.weight");
    assert_eq!(infos[0].dims, [3, 2]);
    assert_eq!(infos[0].shape(), [2, 3]);
    assert_eq!(infos[0].ggml_type, GgmlType::F32);
    assert_eq!((infos[0].n_elements, infos[0].n_bytes), (6, 24));
    assert_eq!(
        infos[1].offset, 32,
        "the second tensor starts at the next aligned offset"
    );
    let norm = file.tensor("norm.weight").unwrap();
    assert_eq!(
        norm.data(),
        &bytes[layout.data_start..layout.data_start + 24]
    );
    assert_eq!(
        norm.dequantize().unwrap(),
        [1.5, -2.25, 3.0, 0.125, -0.0, 7.75]
    );
    let half = file.tensor("half").unwrap().dequantize().unwrap();
    assert_eq!(
        half,
        [1.0, -2.0, (1.0 + 341.0 / 1024.0) / 4.0, 2f32.powi(-24)]
    );
    let mut short = [0f32; 3];
    let err = file.tensor("half").unwrap().dequantize_into(&mut short);
    assert!(matches!(
        err,
        Err(GgufError::BufferLength {
            expected: 4,
            actual: 3,
            ..
        })
    ));
    let err = file.tensor("nope").unwrap_err().to_string();
    assert!(err.contains("no tensor 'nope'"), "{err}");
}

#[test]
fn honours_general_alignment_and_version_2() {
    let mut builder = GgufBuilder::new().kv_u32("general.alignment", 64);
    builder.alignment = 64;
    builder.version = 2;
    let builder = builder
        .tensor("a", &[1], 0, 1f32.to_le_bytes().to_vec())
        .tensor("b", &[1], 0, 2f32.to_le_bytes().to_vec());
    let (bytes, layout) = builder.build();
    let file = open_bytes("align64", &bytes).unwrap();
    assert_eq!((file.version(), file.alignment()), (2, 64));
    assert_eq!(file.data_offset() % 64, 0);
    assert_eq!(file.data_offset(), layout.data_start as u64);
    assert_eq!(file.tensor_infos()[1].offset, 64);
    assert_eq!(file.tensor("b").unwrap().dequantize().unwrap(), [2.0]);
}

#[test]
fn architecture_known_and_unknown() {
    let (bytes, _) = every_type().build();
    let file = open_bytes("arch-llama", &bytes).unwrap();
    let arch = file.architecture().unwrap();
    assert_eq!(arch, Architecture::Llama);
    assert_eq!(arch.key("block_count"), "llama.block_count");
    let (bytes, _) = GgufBuilder::new()
        .kv_str("general.architecture", "mamba9")
        .build();
    let err = open_bytes("arch-unknown", &bytes)
        .unwrap()
        .architecture()
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(&err, GgufError::UnknownArchitecture { arch, .. } if arch == "mamba9"));
    assert!(
        msg.contains("arch-unknown") && msg.contains("'mamba9'"),
        "{msg}"
    );
}

#[test]
fn removed_keys_miss_and_the_rest_keep_order_and_lookup() {
    let (bytes, _) = every_type().build();
    let mut file = open_bytes("remove", &bytes).unwrap();
    let before: Vec<String> = (file.metadata().entries().iter())
        .map(|(k, _)| k.clone())
        .collect();
    let md = file.metadata_mut();
    assert_eq!(md.remove("k.u16"), Some(Value::U16(60000)));
    assert_eq!(md.remove("k.u16"), None);
    assert!(matches!(
        md.get_u32("k.u16"),
        Err(GgufError::MissingKey { .. })
    ));
    let after: Vec<&str> = md.entries().iter().map(|(k, _)| k.as_str()).collect();
    let want: Vec<&str> = (before.iter().map(String::as_str))
        .filter(|k| *k != "k.u16")
        .collect();
    assert_eq!(after, want);
    // every later key still finds its own value
    assert_eq!(md.get("k.i16"), Some(&Value::I16(-30000)));
    assert_eq!(md.get_str_array("k.strings").unwrap(), ["a", "", "ccc"]);
    assert_eq!(md.get_float("k.f64").unwrap(), std::f64::consts::PI);
}

#[test]
fn released_tensor_pages_read_back_unchanged() {
    let (bytes, _) = every_type().build();
    let file = open_bytes("release", &bytes).unwrap();
    let t = file.tensor("norm.weight").unwrap();
    let want = t.dequantize().unwrap();
    file.release_tensor_pages(&t);
    file.release_pages();
    assert_eq!(t.dequantize().unwrap(), want);
    assert_eq!(want, [1.5, -2.25, 3.0, 0.125, -0.0, 7.75]);
}
