//! The op census: `docs/op-catalog.md` is exactly what `aneforge ops --markdown` generates from
//! the op registry (a new op, floor or opset fact makes this fail until the file is regenerated),
//! and `aneforge ops --json` / `--target` list every registered op.

use std::path::Path;
use std::process::Command;

fn aneforge(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_aneforge"))
        .args(args)
        .env("ANEFORGE_QUIET", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_committed_op_catalog_is_the_generated_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/op-catalog.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = aneforge(&["ops", "--markdown"]);
    assert!(committed == generated, "{} differs from the census; regenerate it with `cargo run -p aneforge -- ops --markdown > docs/op-catalog.md`", path.display());
    for op in aneforge::ops::mil_op_names() {
        assert!(
            generated.contains(&format!("\n| {op} | ")),
            "{op} missing from the catalog"
        );
    }
}

#[test]
fn json_and_target_views_list_every_op() {
    let v: serde_json::Value =
        serde_json::from_str(&aneforge(&["ops", "--json", "--target", "h13"])).unwrap();
    let ops = v.as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, aneforge::ops::mil_op_names());
    let sin = ops.iter().find(|o| o["name"] == "sin").unwrap();
    assert_eq!(
        (
            sin["target_status"].as_str(),
            sin["status"]["A15"].as_str(),
            sin["hardware"].as_str()
        ),
        (Some("decompose"), Some("native"), Some("unverified"))
    );
    assert!(
        ops.iter().all(|o| o["reference"]["result"] == "pass"),
        "{v}"
    );
    let table = aneforge(&["ops", "--target", "A15"]);
    let line = table.lines().find(|l| l.starts_with("sin ")).unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        ["sin", "Unary", "ios16+", "native", "pass", "unverified"]
    );
    let out = Command::new(env!("CARGO_BIN_EXE_aneforge"))
        .args(["ops", "--target", "q7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}
