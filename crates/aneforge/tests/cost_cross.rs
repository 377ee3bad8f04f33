//! Cross-compilation and whole-program profiling on the ANE executor, driven against the fake
//! e5rt library (tests/fake_e5rt): TargetArchitecture reaches the compiler, one cache per arch,
//! unknown arches refused before compiling; the ANE profile is one program span per call.

mod fake_e5rt;

use std::path::PathBuf;

use aneforge::cost::cross::cross_compile;
use aneforge::cost::profile::profile_calls;
use aneforge::exec::ane::cross::compile_only;
use aneforge::exec::clock::Clock;
use aneforge::exec::profile::SpanKind;
use aneforge::{compile, input, CompileOptions, Device, Graph, PortData, Program, Tensor};

fn relu() -> Vec<(Option<String>, Tensor)> {
    vec![(None, input(&[1, 4]).unwrap().relu().unwrap())]
}

/// The relu program lowered and written to a fresh scratch directory `name`/prog.
fn relu_program_dir(name: &str) -> PathBuf {
    let p = Program::lower(Graph::from_outputs(&relu()).unwrap()).unwrap();
    p.write_to(&fake_e5rt::scratch(name).join("prog")).unwrap()
}

fn compile_calls(log: &[String]) -> Vec<&String> {
    log.iter()
        .filter(|l| l.starts_with("e5rt_e5_compiler_compile "))
        .collect()
}

#[test]
fn compile_only_passes_the_arch_and_caches_per_arch() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let dir = relu_program_dir("cross");
    let h14 = compile_only(&dir, "h14").unwrap();
    let h16 = compile_only(&dir, "h16").unwrap();
    assert_eq!(h14, dir.join("cache-h14"));
    assert_eq!(h16, dir.join("cache-h16"));
    // The fake writes its bundle under the cache location it was given.
    assert!(h14.join("fake.bundle").is_dir() && h16.join("fake.bundle").is_dir());
    let log = fake.log();
    for arch in ["h14", "h16"] {
        let opt = format!(
            "e5rt_e5_compiler_options_set_custom_ane_compiler_options TargetArchitecture={arch}"
        );
        assert!(log.contains(&opt), "{log:#?}");
        let cache = format!(
            "e5rt_e5_compiler_config_options_set_cache_bundle_location {}",
            dir.join(format!("cache-{arch}")).display()
        );
        assert!(log.contains(&cache), "{log:#?}");
    }
    assert_eq!(compile_calls(&log).len(), 2);
    // Compile only: no operation is created, nothing stays alive.
    assert!(
        !log.iter().any(|l| l.contains("operation_create")),
        "{log:#?}"
    );
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn unknown_arch_is_refused_before_compiling() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let dir = relu_program_dir("cross-unknown");
    let e = compile_only(&dir, "h99").unwrap_err().to_string();
    assert!(e.contains("unknown target 'h99' (known: h11, h12"), "{e}");
    assert!(fake.log().is_empty(), "{:#?}", fake.log());
    let e = cross_compile(&relu(), "z9").unwrap_err().to_string();
    assert!(e.contains("z9"), "{e}");
    // A chip past M6 is no chip name: refused with the accepted arches, families and chips.
    let e = cross_compile(&relu(), "M7 Pro").unwrap_err().to_string();
    assert!(
        e.contains("'M7 Pro' is not a known ANE arch; expected one of h11, h12")
            && e.contains("a family A13, A14, A15, A16 or an M-series chip M1 … M6"),
        "{e}"
    );
    assert!(fake.log().is_empty());
}

#[test]
fn cross_compile_check_compiles_for_the_target_family() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let c = cross_compile(&relu(), "h15").unwrap();
    assert_eq!((c.arch, c.compiled), ("h15", Some(true)));
    assert_eq!(c.caches.len(), 1);
    assert!(c.caches[0].ends_with("cache-h15"), "{:?}", c.caches);
    // A family name compiles its representative arch.
    let c = cross_compile(&relu(), "A16").unwrap();
    assert_eq!((c.arch, c.compiled), ("h16s", Some(true)));
    assert!(fake.log().contains(
        &"e5rt_e5_compiler_options_set_custom_ane_compiler_options TargetArchitecture=h16s"
            .to_string()
    ));
    // M-series chip names compile their arch (the measured M5 Pro is h17s).
    for (chip, arch) in [("M1", "h13"), ("m4 max", "h16"), ("M5 Pro", "h17s")] {
        let c = cross_compile(&relu(), chip).unwrap();
        assert_eq!((c.arch, c.compiled), (arch, Some(true)), "{chip}");
        assert!(c.caches[0].ends_with(format!("cache-{arch}")), "{chip}");
        let opt = format!(
            "e5rt_e5_compiler_options_set_custom_ane_compiler_options TargetArchitecture={arch}"
        );
        assert!(fake.log().contains(&opt), "{chip}");
    }
    // A compiler failure is reported, not raised.
    fake.fail("e5rt_e5_compiler_compile", 1, 11);
    let c = cross_compile(&relu(), "h14").unwrap();
    assert_eq!(c.compiled, Some(false));
    assert!(c.note.contains("e5rt refused to compile"), "{}", c.note);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn ane_profile_is_one_program_span_per_call() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let opts = CompileOptions {
        device: Device::Ane,
        build_dir: Some(fake_e5rt::scratch("ane-profile").join("prog")),
        ..CompileOptions::default()
    };
    let mut net = compile(&relu(), &opts).unwrap();
    net.run(&[PortData::F32(&[1.0, -2.0, 3.0, -4.0])]).unwrap();
    let r = profile_calls(net.loaded.as_mut(), 3, Clock::Wall).unwrap();
    assert_eq!((r.device, r.runs, r.rows.len()), ("ane", 3, 1));
    let row = &r.rows[0];
    assert_eq!(
        (row.kind, row.name.as_str()),
        (SpanKind::Program, "program (ane)")
    );
    assert!(row.leaf && row.share > 0.0 && row.share <= 1.0 + 1e-9);
    drop(net);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}
