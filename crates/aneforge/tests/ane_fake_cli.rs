//! The `aneforge` CLI against the fake e5rt library (tests/fake_e5rt): `info`, and `selfcheck`
//! with and without a library. Nothing here runs on an ANE.

mod fake_e5rt;

use std::path::Path;
use std::process::{Command, Output};

use aneforge::conformance::selfcheck;
use fake_e5rt::scratch;

fn aneforge(args: &[&str], fake: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aneforge"));
    c.args(args)
        .env("ANEFORGE_QUIET", "1")
        .env_remove("ANEFORGE_DEVICE");
    match fake {
        Some(p) => c.env("ANEFORGE_E5RT_LIBRARY", p),
        None => c.env_remove("ANEFORGE_E5RT_LIBRARY"),
    };
    c.output().unwrap()
}

#[test]
fn without_a_library_linux_names_the_reason_and_selfcheck_exits_nonzero() {
    if std::env::consts::OS == "macos" {
        return;
    }
    let why = format!(
        "platform: not macOS (this is {}/{})",
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    let info = aneforge(&["info"], None);
    assert!(info.status.success());
    assert!(String::from_utf8_lossy(&info.stdout).contains(&format!("  ane: unavailable: {why}\n")));
    let sc = aneforge(&["selfcheck"], None);
    assert_eq!(sc.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&sc.stdout),
        format!("no Apple Neural Engine is present: {why}\n")
    );
}

#[test]
fn selfcheck_on_the_fake_runs_every_check_and_reports_it_is_not_hardware() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let info = String::from_utf8_lossy(&aneforge(&["info"], Some(&fake.path)).stdout).into_owned();
    assert!(info.contains("  ane: available\n"), "{info}");
    assert!(
        info.contains(&format!(
            "e5rt library: {} (ANEFORGE_E5RT_LIBRARY, for tests: not hardware)\n",
            fake.path.display()
        )),
        "{info}"
    );
    let dir = scratch("selfcheck");
    let report = dir.join("r.json");
    let out = aneforge(
        &[
            "selfcheck",
            "--report",
            report.to_str().unwrap(),
            "--repeat",
            "3",
        ],
        Some(&fake.path),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("is not Apple's Espresso framework: this is NOT a hardware result"),
        "{stdout}"
    );
    let r: selfcheck::Report =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        (r.format.as_str(), r.executor.as_str(), r.hardware),
        ("aneforge-selfcheck-1", "ane", false)
    );
    assert_eq!(r.library, fake.path.display().to_string());
    assert_eq!(r.ane_family, None);
    let n_ops = aneforge::conformance::corpus::conformance().unwrap().len();
    assert_eq!(r.checks.len(), 6 + n_ops);
    let by = |name: &str| r.checks.iter().find(|c| c.name == name).unwrap();
    let counter = by("aliased_counter");
    assert_eq!(
        (counter.outcome, counter.max_abs_error),
        (selfcheck::Outcome::Pass, Some(0.0))
    );
    assert!(counter.latency_us.unwrap() > 0.0);
    let relu = by("relu_1x64");
    assert_eq!(
        relu.outcome,
        selfcheck::Outcome::Fail,
        "the fake adds one instead of applying relu"
    );
    assert!((relu.max_abs_error.unwrap() - 1.0).abs() < 1e-3, "{relu:?}");
    assert_eq!(by("mask_0x4").backend.as_deref(), Some("fake-ane"));
    assert_eq!(by("mask_0x1").backend.as_deref(), Some("fake-bnns"));
    assert_eq!((r.passed, r.failed), (1, 5 + n_ops));
    let errors: Vec<_> = r
        .checks
        .iter()
        .filter_map(|c| c.error.as_ref().map(|e| (&c.name, e)))
        .collect();
    assert!(
        errors.is_empty(),
        "every program compiles and runs on the fake: {errors:?}"
    );
    let c = &r.conventions;
    assert_eq!(
        (
            c.upper_half_set,
            c.release_ok,
            c.release_cleared,
            c.release_failures
        ),
        (0, 64, 64, 0)
    );
    assert!(
        c.status_words > 1000 && c.status_verdict.contains("32- and 64-bit readings agree"),
        "{c:?}"
    );
    assert_eq!(r.symbols.len(), 35);
    // The census refuses a report that is not from hardware, and otherwise fills its column.
    let ops = aneforge(&["ops", "--report", report.to_str().unwrap()], None);
    assert_eq!(ops.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&ops.stderr).contains("not a hardware selfcheck report"));
    let plain = aneforge(&["ops"], None);
    let text = String::from_utf8_lossy(&plain.stdout);
    assert_eq!(
        text.lines().filter(|l| l.ends_with(" unverified")).count(),
        aneforge::ops::mil_op_names().len(),
        "{text}"
    );
    let mut fixture = r.clone();
    (fixture.hardware, fixture.library, fixture.platform) = (
        true,
        aneforge::exec::ane::ESPRESSO.into(),
        "macos/aarch64".into(),
    );
    let f = dir.join("fixture.json");
    std::fs::write(&f, serde_json::to_string(&fixture).unwrap()).unwrap();
    let census = aneforge(&["ops", "--report", f.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&census.stdout);
    assert!(census.status.success(), "{text}");
    let relu_line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("relu"))
        .unwrap();
    let with_relu = r
        .checks
        .iter()
        .filter(|c| c.ops.contains(&"relu".to_string()))
        .count();
    assert_eq!(
        with_relu, 5,
        "relu_1x64, layout_1x3x7, the two mask checks and conformance_relu"
    );
    assert!(
        relu_line.ends_with(&format!(
            "fail (0 of {with_relu} programs passed, max error 1.000e0)"
        )),
        "{relu_line}"
    );
    let add = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("add"))
        .unwrap();
    assert!(
        add.contains("fail (1 of "),
        "the counter (x + 1) passes: {add}"
    );
    for op in aneforge::ops::mil_op_names() {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(op))
            .unwrap();
        assert_eq!(
            line.ends_with(" unverified"),
            !r.checks.iter().any(|c| c.ops.iter().any(|o| o == op)),
            "{line}"
        );
    }
}
