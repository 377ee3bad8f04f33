//! The real `Ane` executor driven against the fake e5rt library (tests/fake_e5rt), which the
//! test builds with gcc: the full compile → bind → execute → release sequence, buffer sizes,
//! aliasing, views, error propagation, the ABI conventions switch, the budget, device
//! selection. The CLI's selfcheck on the fake is in `ane_fake_cli.rs`. Nothing here runs on an ANE.

mod fake_e5rt;

use fake_e5rt::scratch;

use std::path::{Path, PathBuf};

use aneforge::exec::ane::e5rt::{Conventions, E5rt, ReleaseBy, StatusWidth, REQUIRED};
use aneforge::exec::ane::{handles, library, live_programs, Ane};
use aneforge::exec::reference::Reference;
use aneforge::exec::{Executor, Loaded, PortData, PortView, Precision};
use aneforge::{
    compile, image_input, input, input_port, CompileOptions, DType, Device, Error, Graph, Program,
    Tensor,
};
use half::f16;

/// Lower `outputs` into `scratch(name)/prog`.
fn program(name: &str, outputs: &[(Option<String>, Tensor)]) -> (Program, PathBuf) {
    let p = Program::lower(Graph::from_outputs(outputs).unwrap()).unwrap();
    let dir = p.write_to(&scratch(name).join("prog")).unwrap();
    (p, dir)
}

fn load(ane: &Ane, p: &(Program, PathBuf)) -> aneforge::Result<Box<dyn Loaded>> {
    ane.load(&p.0, &p.1, Precision::Fp16)
}

/// What the fake computes for an fp16 input value: round(round(x) + 1).
fn plus_one(x: f32) -> f32 {
    f16::from_f32(f16::from_f32(x).to_f32() + 1.0).to_f32()
}

/// Input values in [-1, 1).
fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 / n as f32 * 2.0 - 1.0).collect()
}

fn f16_view(v: PortView<'_>) -> Vec<f32> {
    match v {
        PortView::F16(s) => s.iter().map(|x| x.to_f32()).collect(),
        PortView::U8(_) | PortView::I32(_) => panic!("expected an fp16 view"),
    }
}

/// Names of the logged calls (the first word of each line).
fn calls(log: &[String]) -> Vec<&str> {
    log.iter().map(|l| l.split(' ').next().unwrap()).collect()
}

#[test]
fn check_resolves_every_symbol_and_probes_both_async_spellings() {
    let Some((_g, _fake)) = fake_e5rt::fake() else {
        return;
    };
    Ane::default().check().unwrap();
    let e5 = library().unwrap();
    let spelling = |n: &str| {
        e5.symbols
            .iter()
            .find(|s| s.name == n)
            .unwrap()
            .spelling
            .clone()
    };
    for name in REQUIRED {
        assert_eq!(spelling(name).as_deref(), Some("plain"), "{name}");
    }
    assert_eq!(REQUIRED.len(), 31);
    assert_eq!(e5.symbols.len(), 35);
    assert_eq!(
        spelling("e5rt_get_last_error_message").as_deref(),
        Some("plain")
    );
    assert_eq!(
        spelling("e5rt_execution_stream_submit_async").as_deref(),
        Some("plain")
    );
    assert_eq!(spelling("e5rt_execution_stream_async_submit"), None);
}

#[test]
fn full_sequence_in_order_with_encode_deferred_and_reverse_release() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let p = program(
        "sequence",
        &[(None, input(&[1, 3, 7]).unwrap().relu().unwrap())],
    );
    let d = p.1.display().to_string();
    let mut net = load(&Ane::default(), &p).unwrap();
    assert_eq!(live_programs(), 1);
    assert_eq!(
        f16_view(net.input_view(0).unwrap()),
        vec![0.0; 21],
        "buffers are zeroed (the fake fills them with 0xA5)"
    );
    let x = ramp(21);
    net.set_input(0, PortData::F32(&x)).unwrap();
    let loaded = fake.log().len();
    for _ in 0..3 {
        net.execute().unwrap();
    }
    let mut y = vec![0.0; 21];
    net.read_output(0, &mut y).unwrap();
    assert_eq!(y, x.iter().map(|&v| plus_one(v)).collect::<Vec<_>>());
    drop(net);
    assert_eq!(live_programs(), 0);
    let expected = format!(
        "e5rt_e5_compiler_config_options_create
e5rt_e5_compiler_config_options_set_cache_bundle_location {d}/cache
e5rt_e5_compiler_create_with_config
e5rt_e5_compiler_options_create
e5rt_e5_compiler_options_set_compute_device_types_mask 0x4
e5rt_e5_compiler_options_set_force_recompilation 1
e5rt_e5_compiler_options_set_segmenter graph
e5rt_e5_compiler_compile {d}/model.mil
e5rt_e5_compiler_options_release options#2
e5rt_e5_compiler_release compiler#1
e5rt_e5_compiler_config_options_release config#0
e5rt_program_library_retain_program_function main
e5rt_precompiled_compute_op_create_options_create_with_program_function
e5rt_precompiled_compute_op_create_options_set_operation_name main
e5rt_precompiled_compute_op_create_options_set_allocate_intermediate_buffers 1
e5rt_execution_stream_operation_create_precompiled_compute_operation_with_options
e5rt_execution_stream_operation_retain_input_port x0
e5rt_buffer_object_alloc 64 0
e5rt_buffer_object_get_data_ptr
e5rt_io_port_bind_buffer_object x0 buffer#8
e5rt_execution_stream_operation_retain_output_port y0
e5rt_buffer_object_alloc 64 0
e5rt_buffer_object_get_data_ptr
e5rt_io_port_bind_buffer_object y0 buffer#10
e5rt_execution_stream_create
e5rt_execution_stream_encode_operation
e5rt_execution_stream_execute_sync
e5rt_execution_stream_execute_sync
e5rt_execution_stream_execute_sync
e5rt_execution_stream_release stream#11
e5rt_buffer_object_release buffer#8
e5rt_io_port_release port#7
e5rt_buffer_object_release buffer#10
e5rt_io_port_release port#9
e5rt_execution_stream_operation_release op#6
e5rt_precompiled_compute_op_create_options_release op_options#5
e5rt_program_function_release function#4
e5rt_program_library_release library#3"
    );
    assert_eq!(fake.log().join("\n"), expected);
    assert_eq!(
        calls(&fake.log()[..loaded])
            .iter()
            .filter(|c| c.contains("encode"))
            .count(),
        0,
        "encoding waits for the first execute"
    );
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
    assert!(
        p.1.join("cache/fake.bundle/analytics.mil").is_file(),
        "the cache bundle location is <dir>/cache"
    );
}

#[test]
fn buffer_sizes_round_up_to_64_bytes_per_port() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let x = input_port(&[1, 3, 7], DType::Fp16, Some("x")).unwrap(); // 42 bytes
    let b = input_port(&[40], DType::Fp16, Some("b")).unwrap(); // 80 bytes
    let img = image_input(&[1, 3, 5, 5], &[1.0], &[0.0], Some("img")).unwrap(); // 75 uint8 -> 76
    let big = input_port(&[64], DType::Fp16, Some("big")).unwrap(); // 128 exactly
    let outs = [
        (Some("y".into()), x.relu().unwrap()),
        (Some("c".into()), b.mul_scalar(2.0).unwrap()),
        (Some("i".into()), img),
        (Some("g".into()), big.abs().unwrap()),
    ];
    let p = program("sizes", &outs);
    let net = load(&Ane::default(), &p).unwrap();
    let allocs: Vec<String> = fake
        .log()
        .iter()
        .filter(|l| l.starts_with("e5rt_buffer_object_alloc"))
        .cloned()
        .collect();
    let sizes: Vec<&str> = allocs
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    // inputs x, b, img, big, then outputs y, c, i (fp16 [1,3,5,5] = 150 bytes), g
    assert_eq!(
        sizes,
        ["64", "128", "128", "128", "64", "128", "192", "128"]
    );
    assert!(
        allocs.iter().all(|l| l.ends_with(" 0")),
        "host buffers are type 0: {allocs:?}"
    );
    assert_eq!(
        (net.inputs()[2].dtype, net.inputs()[2].numel()),
        (DType::Uint8, 75)
    );
    drop(net);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn views_alias_the_device_buffers_for_fp16_and_uint8_ports() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let p = program(
        "views",
        &[(
            None,
            image_input(&[1, 1, 2, 3], &[1.0], &[0.0], Some("img")).unwrap(),
        )],
    );
    let mut net = load(&Ane::default(), &p).unwrap();
    match net.input_view(0).unwrap() {
        PortView::U8(b) => b.copy_from_slice(&[0, 1, 2, 100, 254, 255]),
        PortView::F16(_) | PortView::I32(_) => panic!("uint8 port"),
    }
    net.execute().unwrap();
    assert_eq!(
        f16_view(net.output_view(0).unwrap()),
        [1.0, 2.0, 3.0, 101.0, 255.0, 256.0]
    );
    assert!(matches!(net.output_view(1), Err(Error::Value { .. })));
    drop(net);
    let p = program(
        "views16",
        &[(None, input(&[2, 2]).unwrap().relu().unwrap())],
    );
    let mut net = load(&Ane::default(), &p).unwrap();
    if let PortView::F16(v) = net.input_view(0).unwrap() {
        v.copy_from_slice(&[-2.0, 0.5, 7.0, 1000.0].map(f16::from_f32));
    }
    net.execute().unwrap();
    assert_eq!(
        f16_view(net.output_view(0).unwrap()),
        [-1.0, 1.5, 8.0, 1001.0]
    );
    drop(net);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

/// Load `x' = x + 1` on `ex`, alias it onto itself, and read the input after each of 4 executes.
fn count(ex: &dyn Executor, name: &str) -> Vec<Vec<f32>> {
    let p = program(
        name,
        &[(
            Some("next".into()),
            input_port(&[1, 8], DType::Fp16, Some("state"))
                .unwrap()
                .add_scalar(1.0)
                .unwrap(),
        )],
    );
    let mut net = ex.load(&p.0, &p.1, Precision::Fp16).unwrap();
    net.alias("next", "state").unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        net.execute().unwrap();
        seen.push(f16_view(net.input_view(0).unwrap()));
    }
    let e = net.alias("next", "state").unwrap_err();
    assert!(
        matches!(e, Error::Value { .. }) && e.to_string().contains("before the first execute"),
        "{e}"
    );
    seen
}

#[test]
fn aliased_counter_counts_on_the_fake_and_the_reference_alike() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let want: Vec<Vec<f32>> = (1..=4).map(|k| vec![k as f32; 8]).collect();
    assert_eq!(count(&Reference, "count-ref"), want);
    assert_eq!(count(&Ane::default(), "count-ane"), want);
    let log = fake.log();
    let binds: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("e5rt_io_port_bind_buffer_object"))
        .collect();
    assert_eq!(binds.len(), 3, "{binds:?}");
    assert_eq!(
        binds[2],
        &binds[1].replace(" next ", " state "),
        "the input port is rebound to the output's buffer"
    );
    let first_encode = calls(&log)
        .iter()
        .position(|c| *c == "e5rt_execution_stream_encode_operation")
        .unwrap();
    assert!(
        calls(&log)[first_encode..]
            .iter()
            .all(|c| *c != "e5rt_io_port_bind_buffer_object"),
        "no binding after encode"
    );
    assert_eq!(
        log.iter()
            .filter(|l| l.starts_with("e5rt_buffer_object_release"))
            .count(),
        2,
        "each buffer released once, the displaced one too"
    );
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn alias_rejects_unknown_ports_and_mismatched_shapes() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let x = input_port(&[1, 8], DType::Fp16, Some("x")).unwrap();
    let p = program(
        "alias-bad",
        &[
            (Some("y".into()), x.relu().unwrap()),
            (Some("s".into()), x.reshape(&[8, 1]).unwrap()),
        ],
    );
    let mut net = load(&Ane::default(), &p).unwrap();
    let e = net.alias("nope", "x").unwrap_err().to_string();
    assert!(
        e.contains("no output port named 'nope'") && e.contains("[\"y\", \"s\"]"),
        "{e}"
    );
    let e = net.alias("s", "x").unwrap_err();
    assert!(
        matches!(e, Error::Shape { .. })
            && e.to_string().contains("[8, 1]")
            && e.to_string().contains("[1, 8]"),
        "{e}"
    );
    drop(net);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn every_failing_call_is_a_typed_error_with_function_and_message_and_leaks_nothing() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let p = program("fail", &[(None, input(&[1, 4]).unwrap().relu().unwrap())]);
    let load_path = [
        "e5rt_e5_compiler_config_options_create",
        "e5rt_e5_compiler_config_options_set_cache_bundle_location",
        "e5rt_e5_compiler_create_with_config",
        "e5rt_e5_compiler_options_create",
        "e5rt_e5_compiler_options_set_compute_device_types_mask",
        "e5rt_e5_compiler_options_set_force_recompilation",
        "e5rt_e5_compiler_options_set_segmenter",
        "e5rt_e5_compiler_compile",
        "e5rt_program_library_retain_program_function",
        "e5rt_precompiled_compute_op_create_options_create_with_program_function",
        "e5rt_precompiled_compute_op_create_options_set_operation_name",
        "e5rt_precompiled_compute_op_create_options_set_allocate_intermediate_buffers",
        "e5rt_execution_stream_operation_create_precompiled_compute_operation_with_options",
        "e5rt_execution_stream_operation_retain_input_port",
        "e5rt_execution_stream_operation_retain_output_port",
        "e5rt_buffer_object_alloc",
        "e5rt_buffer_object_get_data_ptr",
        "e5rt_io_port_bind_buffer_object",
        "e5rt_execution_stream_create",
    ];
    for (k, f) in load_path.iter().enumerate() {
        fake.reset();
        fake.fail(f, 1, 7 + k as i64);
        match load(&Ane::default(), &p) {
            Err(Error::E5rt {
                function,
                status,
                message,
            }) => {
                assert_eq!((function, status), (*f, 7 + k as i64));
                assert_eq!(message, format!("fake e5rt: injected failure in {f}"));
            }
            Err(e) => panic!("{f}: {e}"),
            Ok(_) => panic!("{f}: loaded"),
        }
        assert_eq!(
            (fake.live(), fake.bad_releases(), live_programs()),
            (0, 0, 0),
            "{f} leaked"
        );
    }
    for f in [
        "e5rt_execution_stream_encode_operation",
        "e5rt_execution_stream_execute_sync",
    ] {
        fake.reset();
        fake.fail(f, 1, 11);
        let mut net = load(&Ane::default(), &p).unwrap();
        let e = net.execute().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{f} failed with status 11: fake e5rt: injected failure in {f}")
        );
        net.execute().unwrap();
        drop(net);
        assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
    }
    fake.reset();
    let before = handles::release_failures();
    fake.fail("e5rt_io_port_release", 2, 3);
    drop(load(&Ane::default(), &p).unwrap());
    assert_eq!(handles::release_failures(), before + 1);
    assert_eq!(fake.live(), 1, "the port whose release failed");
}

#[test]
fn compile_errors_and_bad_port_names_carry_e5rts_message() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let p = program("badmil", &[(None, input(&[1, 4]).unwrap().relu().unwrap())]);
    std::fs::write(p.1.join("model.mil"), "program(1.3) { }").unwrap();
    let e = load(&Ane::default(), &p).err().unwrap();
    assert_eq!(e.to_string(), format!("e5rt_e5_compiler_compile failed with status 11: fake e5rt: cannot compile {}/model.mil: no 'func main(' found", p.1.display()));
    let p = program(
        "renamed",
        &[(None, input(&[1, 4]).unwrap().relu().unwrap())],
    );
    let mil = std::fs::read_to_string(p.1.join("model.mil")).unwrap();
    std::fs::write(p.1.join("model.mil"), mil.replace("x0", "z0")).unwrap();
    let e = load(&Ane::default(), &p).err().unwrap();
    assert_eq!(e.to_string(), "e5rt_execution_stream_operation_retain_input_port failed with status 1: fake e5rt: the operation has no input port 'x0'");
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn status_convention_switch_low32_ignores_upper_garbage_full64_does_not() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let p = program("status", &[(None, input(&[1, 4]).unwrap().relu().unwrap())]);
    fake.mode(true, false);
    let (_, upper0) = aneforge::exec::ane::e5rt::status_stats();
    let mut net = load(&Ane::default(), &p).unwrap();
    net.execute().unwrap();
    drop(net);
    let (_, upper1) = aneforge::exec::ane::e5rt::status_stats();
    // load: 8 compile + 3 releases + 5 function/op + 2 × 4 per port + stream = 25; execute: encode
    // + execute_sync; teardown: 9 releases. Every success carried garbage in the upper half.
    assert_eq!(upper1 - upper0, 36);
    let full64 = Ane {
        conventions: Conventions {
            status: StatusWidth::Full64,
            ..Conventions::default()
        },
        ..Ane::default()
    };
    match load(&full64, &p) {
        Err(Error::E5rt {
            function, status, ..
        }) => assert_eq!(
            (function, status),
            (
                "e5rt_e5_compiler_config_options_create",
                0x5A5A_5A5A_0000_0000
            )
        ),
        _ => panic!("a 64-bit reading must reject the garbage"),
    }
    assert_eq!(fake.bad_releases(), 0);
}

#[test]
fn release_convention_switch_by_value_and_by_address() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let p = program(
        "release",
        &[(None, input(&[1, 4]).unwrap().relu().unwrap())],
    );
    let by_value = Ane {
        conventions: Conventions {
            release: ReleaseBy::Value,
            ..Conventions::default()
        },
        ..Ane::default()
    };
    fake.mode(false, true);
    drop(load(&by_value, &p).unwrap());
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
    fake.reset();
    fake.mode(false, true);
    let before = handles::release_failures();
    drop(load(&Ane::default(), &p).unwrap());
    assert_eq!(
        handles::release_failures() - before,
        12,
        "every release by address is refused by a by-value library"
    );
    assert_eq!((fake.live(), fake.bad_releases()), (12, 12));
}

#[test]
fn library_variants_missing_symbol_underscore_spelling_no_message() {
    let Some(omit) = fake_e5rt::build("fake_omit", &["-DFAKE_OMIT_ENCODE"]) else {
        return;
    };
    let (step, reason) = E5rt::open(&omit).err().unwrap();
    assert_eq!(step, "symbol");
    assert!(
        reason.starts_with("e5rt_execution_stream_encode_operation is not exported by "),
        "{reason}"
    );
    let under = fake_e5rt::build("fake_underscore", &["-DFAKE_UNDERSCORE_EXECUTE"]).unwrap();
    let e5 = E5rt::open(&under).unwrap();
    let s = e5
        .symbols
        .iter()
        .find(|s| s.name == "e5rt_execution_stream_execute_sync")
        .unwrap();
    assert_eq!(s.spelling.as_deref(), Some("underscore"));
    let quiet = fake_e5rt::build("fake_quiet", &["-DFAKE_NO_LAST_ERROR"]).unwrap();
    let e5 = E5rt::open(&quiet).unwrap();
    assert!(e5.get_last_error_message.is_none());
    assert_eq!(
        e5.last_error(),
        "(no message: e5rt_get_last_error_message is not exported)"
    );
    let (step, reason) = E5rt::open(Path::new("/nonexistent/Espresso"))
        .err()
        .unwrap();
    assert_eq!(step, "framework");
    assert!(
        reason.starts_with("dlopen /nonexistent/Espresso: "),
        "{reason}"
    );
}

#[test]
fn live_program_budget_is_enforced_and_slots_come_back() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let p = program("budget", &[(None, input(&[1, 4]).unwrap().relu().unwrap())]);
    std::env::set_var("ANEFORGE_MAX_PROGRAMS", "2");
    let a = load(&Ane::default(), &p).unwrap();
    let b = load(&Ane::default(), &p).unwrap();
    let e = load(&Ane::default(), &p).err().unwrap();
    assert!(matches!(e, Error::Runtime { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("2 ANE programs are already loaded")
            && msg.contains("ANEFORGE_MAX_PROGRAMS=2")
            && msg.contains("restart the process"),
        "{msg}"
    );
    assert_eq!(live_programs(), 2);
    drop(a);
    let c = load(&Ane::default(), &p).unwrap();
    std::env::set_var("ANEFORGE_MAX_PROGRAMS", "zero");
    let e = load(&Ane::default(), &p).err().unwrap().to_string();
    assert_eq!(e, "ANEFORGE_MAX_PROGRAMS: 'zero' is not a positive integer");
    std::env::remove_var("ANEFORGE_MAX_PROGRAMS");
    drop((b, c));
    assert_eq!(live_programs(), 0);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn device_selection_argument_then_env_then_check() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let dev = |device: Device, precision: Precision| {
        let y = input(&[1, 4]).unwrap().relu().unwrap();
        compile(
            &[(None, y)],
            &CompileOptions {
                device,
                precision,
                build_dir: Some(scratch("device")),
                ..Default::default()
            },
        )
        .map(|c| c.device())
    };
    assert_eq!(
        dev(Device::Auto, Precision::Fp16).unwrap(),
        "ane",
        "auto takes the ANE when its check passes"
    );
    assert_eq!(dev(Device::Auto, Precision::Fp32).unwrap(), "reference");
    std::env::set_var("ANEFORGE_DEVICE", "cpu");
    assert_eq!(dev(Device::Auto, Precision::Fp16).unwrap(), "reference");
    assert_eq!(
        dev(Device::Ane, Precision::Fp16).unwrap(),
        "ane",
        "an explicit device wins over ANEFORGE_DEVICE"
    );
    std::env::set_var("ANEFORGE_DEVICE", "gpu");
    assert_eq!(
        dev(Device::Auto, Precision::Fp16).unwrap_err().to_string(),
        "ANEFORGE_DEVICE: 'gpu' is not a device (expected auto, ane, reference or cpu)"
    );
    assert_eq!(
        dev(Device::Reference, Precision::Fp16).unwrap(),
        "reference"
    );
    std::env::remove_var("ANEFORGE_DEVICE");
    assert!(dev(Device::Ane, Precision::Fp32)
        .unwrap_err()
        .to_string()
        .contains("fp32"));
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn target_architecture_reaches_the_compiler_and_is_validated() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let p = program("target", &[(None, input(&[1, 4]).unwrap().relu().unwrap())]);
    drop(
        load(
            &Ane {
                target: Some("h16".into()),
                ..Ane::default()
            },
            &p,
        )
        .unwrap(),
    );
    assert!(fake.log().contains(
        &"e5rt_e5_compiler_options_set_custom_ane_compiler_options TargetArchitecture=h16"
            .to_string()
    ));
    let e = load(
        &Ane {
            target: Some("h99".into()),
            ..Ane::default()
        },
        &p,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.starts_with("ane load: unknown target 'h99' (known: h11, h12"),
        "{e}"
    );
    let mask1 = load(
        &Ane {
            mask: 0x1,
            ..Ane::default()
        },
        &p,
    )
    .unwrap();
    assert!(fake
        .log()
        .contains(&"e5rt_e5_compiler_options_set_compute_device_types_mask 0x1".to_string()));
    drop(mask1);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}
