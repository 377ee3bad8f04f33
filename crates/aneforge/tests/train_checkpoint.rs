//! Checkpoints: the safetensors layout read back by hand (u64 header length, JSON header,
//! data at the stated offsets), round trips of raw tensors and state dicts, and Format errors
//! on truncated, garbage and wrongly typed files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aneforge::train::checkpoint::{
    load_state, load_tensors, save_state, save_tensors, RawTensor, StDType,
};
use aneforge::train::StateDict;

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("train-checkpoint");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn sample() -> (Vec<RawTensor>, BTreeMap<String, String>) {
    let tensors = vec![
        RawTensor {
            name: "a".into(),
            dtype: StDType::F32,
            shape: vec![2, 3],
            data: f32_bytes(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.5]),
        },
        RawTensor {
            name: "b".into(),
            dtype: StDType::I64,
            shape: vec![1],
            data: 7i64.to_le_bytes().to_vec(),
        },
        RawTensor {
            name: "c".into(),
            dtype: StDType::U8,
            shape: vec![3],
            data: vec![1, 2, 255],
        },
    ];
    let meta = BTreeMap::from([("k".to_string(), "v".to_string())]);
    (tensors, meta)
}

#[test]
fn the_file_follows_the_safetensors_layout_and_round_trips() {
    let path = scratch("layout.safetensors");
    let (tensors, meta) = sample();
    save_tensors(&path, &tensors, &meta).unwrap();
    let raw = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(raw[..8].try_into().unwrap()) as usize;
    assert_eq!(n % 8, 0, "header padded to 8 bytes");
    let header: serde_json::Value = serde_json::from_slice(&raw[8..8 + n]).unwrap();
    let data = &raw[8 + n..];
    for t in &tensors {
        let h = &header[&t.name];
        assert_eq!(h["dtype"], t.dtype.name());
        assert_eq!(h["shape"], serde_json::json!(t.shape));
        let (b, e) = (
            h["data_offsets"][0].as_u64().unwrap() as usize,
            h["data_offsets"][1].as_u64().unwrap() as usize,
        );
        assert_eq!(&data[b..e], t.data.as_slice(), "bytes of {}", t.name);
    }
    assert_eq!(header["__metadata__"]["k"], "v");
    let (back, back_meta) = load_tensors(&path).unwrap();
    let mut back = back;
    back.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(back, tensors);
    assert_eq!(back_meta, meta);
}

#[test]
fn state_dicts_round_trip_as_f32() {
    let path = scratch("state.safetensors");
    let mut sd = StateDict::default();
    sd.tensors
        .insert("params.0".into(), (vec![2, 2], vec![1.0, -2.5, 3.25, 1e-7]));
    sd.tensors.insert("m.0".into(), (vec![4], vec![0.0; 4]));
    sd.metadata.insert("step".into(), "3".into());
    save_state(&path, &sd).unwrap();
    assert_eq!(load_state(&path).unwrap(), sd);
}

#[test]
fn corrupt_files_are_format_errors_naming_the_file_and_the_problem() {
    let path = scratch("corrupt.safetensors");
    let (tensors, meta) = sample();
    save_tensors(&path, &tensors, &meta).unwrap();
    let raw = std::fs::read(&path).unwrap();
    let err = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        let e = load_tensors(&path).unwrap_err();
        assert!(matches!(e, aneforge::Error::Format { .. }), "{e:?}");
        let s = e.to_string();
        assert!(s.contains("corrupt.safetensors"), "{s}");
        s
    };
    let s = err(&raw[..raw.len() - 4]);
    assert!(s.contains("offsets"), "{s}");
    let s = err(&[0xff; 12]);
    assert!(s.contains("header length 18446744073709551615"), "{s}");
    let s = err(&[1, 2, 3]);
    assert!(s.contains("too short") && s.contains("3 bytes"), "{s}");
    let mut bad_json = 8u64.to_le_bytes().to_vec();
    bad_json.extend_from_slice(b"{nope   ");
    let s = err(&bad_json);
    assert!(s.contains("malformed"), "{s}");
    // A state dict must be F32.
    save_tensors(&path, &tensors, &meta).unwrap();
    let e = load_state(&path).unwrap_err().to_string();
    assert!(e.contains("tensor 'b' is I64, expected F32"), "{e}");
    // A missing file is an I/O error naming it.
    let e = load_tensors(&scratch("missing.safetensors")).unwrap_err();
    assert!(
        matches!(e, aneforge::Error::Io { .. }) && e.to_string().contains("missing.safetensors")
    );
}

#[test]
fn a_byte_count_that_does_not_match_the_shape_is_refused_on_save() {
    let t = RawTensor {
        name: "w".into(),
        dtype: StDType::F32,
        shape: vec![3],
        data: vec![0; 8],
    };
    let e = save_tensors(&scratch("bad.safetensors"), &[t], &BTreeMap::new()).unwrap_err();
    assert!(e.to_string().contains("tensor 'w': 8 bytes"), "{e}");
}
