//! Dataset readers on files written here: CIFAR-10 binary records and MNIST CSV rows, and the
//! errors naming the file and the offending record or value.

use std::path::{Path, PathBuf};

use aneforge::train::data::{parse_mnist_csv, read_cifar10, read_mnist_csv};

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("train-data");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// One CIFAR-10 record: label byte, then pixel i = (7·i + label) mod 256.
fn record(label: u8) -> Vec<u8> {
    let mut r = vec![label];
    r.extend((0..3072).map(|i| ((7 * i + label as usize) % 256) as u8));
    r
}

#[test]
fn cifar10_records_split_into_labels_and_channel_major_pixels() {
    let path = scratch("data_batch_1.bin");
    let bytes: Vec<u8> = [3u8, 0, 9].iter().flat_map(|&l| record(l)).collect();
    std::fs::write(&path, &bytes).unwrap();
    let im = read_cifar10(&path).unwrap();
    assert_eq!(im.labels, vec![3, 0, 9]);
    assert_eq!(im.shape, vec![3, 32, 32]);
    assert_eq!(im.len(), 3);
    // Record 1 (label 0), blue plane (channel 2), row 5, column 7: pixel index 2·1024 + 5·32 + 7.
    let i = 2 * 1024 + 5 * 32 + 7;
    assert_eq!(im.pixels[3072 + i], ((7 * i) % 256) as u8);
}

#[test]
fn malformed_cifar10_files_name_the_file_and_record() {
    let path = scratch("bad_batch.bin");
    let mut bytes: Vec<u8> = [1u8, 2].iter().flat_map(|&l| record(l)).collect();
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let e = read_cifar10(&path).unwrap_err().to_string();
    assert!(
        e.contains("bad_batch.bin") && e.contains("6145 bytes") && e.contains("3073-byte"),
        "{e}"
    );
    bytes[3073] = 10;
    std::fs::write(&path, &bytes).unwrap();
    let e = read_cifar10(&path).unwrap_err().to_string();
    assert!(
        e.contains("label 10 out of range 0..9 (record 1)") && e.contains("at byte 3073"),
        "{e}"
    );
    std::fs::write(&path, b"").unwrap();
    assert!(read_cifar10(&path)
        .unwrap_err()
        .to_string()
        .contains("0 bytes"));
}

/// A CSV row: pixel i = (i + seed) mod 256, then the label.
fn row(seed: usize, label: &str) -> String {
    let mut cols: Vec<String> = (0..784).map(|i| ((i + seed) % 256).to_string()).collect();
    cols.push(label.to_string());
    cols.join(",")
}

#[test]
fn mnist_csv_rows_hold_784_pixels_then_the_label() {
    let path = scratch("mnist.csv");
    std::fs::write(&path, format!("{}\n{}\n", row(0, "7"), row(100, "2.0"))).unwrap();
    let im = read_mnist_csv(&path).unwrap();
    assert_eq!(im.labels, vec![7, 2]);
    assert_eq!(im.shape, vec![784]);
    assert_eq!(im.pixels.len(), 2 * 784);
    assert_eq!(im.pixels[300], 44); // (300 + 0) mod 256
    assert_eq!(im.pixels[784 + 10], 110);
}

#[test]
fn malformed_mnist_rows_name_the_line_column_and_value() {
    let src = Path::new("mnist_5k.csv");
    let short = format!("{}\n1,2,3\n", row(0, "1"));
    let e = parse_mnist_csv(short.as_bytes(), src)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mnist_5k.csv") && e.contains("line 2: 3 values, expected 785"),
        "{e}"
    );
    let e = parse_mnist_csv(row(0, "12").as_bytes(), src)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 1, column 785: label '12' is not an integer in 0..=9"),
        "{e}"
    );
    let bad_pixel = row(0, "3").replacen("0,", "abc,", 1);
    let e = parse_mnist_csv(bad_pixel.as_bytes(), src)
        .unwrap_err()
        .to_string();
    assert!(e.contains("column 1: pixel 'abc'"), "{e}");
    let big = row(0, "3").replacen("0,", "256,", 1);
    assert!(parse_mnist_csv(big.as_bytes(), src)
        .unwrap_err()
        .to_string()
        .contains("'256'"));
    assert!(parse_mnist_csv(b"\n", src)
        .unwrap_err()
        .to_string()
        .contains("no MNIST rows"));
}
