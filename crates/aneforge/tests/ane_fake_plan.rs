//! A segmented plan on the `Ane` executor against the fake e5rt library (which computes
//! output = input0 + 1 per region): two regions, two host stages. Checks the call order (each
//! region compiled from its own directory, regions executed in stage order), the values flowing
//! through the host stages, resident state across the plan, and that every object is released.
//! Nothing here runs on an ANE.

mod fake_e5rt;

use fake_e5rt::scratch;

use aneforge::exec::ane::live_programs;
use aneforge::{compile, input, CompileOptions, Compiled, Device, PortData, Tensor};

/// x [1, 6] → region (relu) → host sort (desc) → region (relu) → host topk(2).
fn plan(name: &str) -> Compiled {
    let x = input(&[1, 6]).unwrap();
    let sorted = x.relu().unwrap().sort(1, true).unwrap();
    let (v, i) = sorted.relu().unwrap().topk(2, 1, true, true).unwrap();
    let outs: Vec<(Option<String>, Tensor)> = vec![(Some("v".into()), v), (Some("i".into()), i)];
    let opts = CompileOptions {
        device: Device::Ane,
        build_dir: Some(scratch(name).join("plan")),
        ..Default::default()
    };
    compile(&outs, &opts).unwrap()
}

fn ints(c: &Compiled) -> Vec<i32> {
    let mut v = vec![0; 2];
    c.loaded.read_output_i32(1, &mut v).unwrap();
    v
}

#[test]
fn two_regions_and_two_host_stages_run_in_order_and_release_everything() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    let mut c = plan("order");
    assert_eq!(c.device(), "ane");
    assert_eq!(live_programs(), 2);
    let kinds = c.plan.as_ref().unwrap().stage_kinds();
    assert_eq!(kinds, ["region", "host", "region", "host"]);
    let log = fake.log();
    let compiled: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("e5rt_e5_compiler_compile "))
        .collect();
    assert_eq!(compiled.len(), 2);
    for (k, l) in compiled.iter().enumerate() {
        assert!(
            l.contains("/plan/regions/") && l.ends_with("/model.mil"),
            "region {k}: {l}"
        );
    }
    assert_ne!(compiled[0], compiled[1]);
    let before = log.len();
    // The fake region computes x + 1: sort desc of x + 1, then + 1, then top-2.
    let x = [0.5f32, -2.0, 3.0, 1.0, 0.0, 2.5];
    let out = c.run(&[PortData::F32(&x)]).unwrap();
    assert_eq!(out[0], vec![5.0, 4.5]);
    assert_eq!(ints(&c), vec![0, 1]);
    let run: Vec<String> = fake.log()[before..]
        .iter()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let executes = run
        .iter()
        .filter(|c| c.as_str() == "e5rt_execution_stream_execute_sync")
        .count();
    assert_eq!(executes, 2, "{run:?}");
    drop(c);
    assert_eq!(live_programs(), 0);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}

#[test]
fn resident_state_flows_across_a_plan() {
    let Some((_g, _fake)) = fake_e5rt::fake() else {
        return;
    };
    let x = input(&[1, 4]).unwrap();
    let s = x.sort(1, false).unwrap().relu().unwrap();
    let opts = CompileOptions {
        device: Device::Ane,
        build_dir: Some(scratch("resident").join("plan")),
        ..Default::default()
    };
    let mut c = compile(&[(Some("s".into()), s)], &opts).unwrap();
    c.loaded.alias("s", "x0").unwrap();
    c.loaded
        .set_input(0, PortData::F32(&[3.0, 1.0, 2.0, 0.0]))
        .unwrap();
    // Each call: sort, then the fake's + 1; the output becomes the next input.
    c.loaded.execute().unwrap();
    c.loaded.execute().unwrap();
    let mut y = vec![0.0; 4];
    c.loaded.read_output(0, &mut y).unwrap();
    assert_eq!(y, vec![2.0, 3.0, 4.0, 5.0]);
}

/// The buffer id bound by each `e5rt_io_port_bind_buffer_object` call naming port `name`.
fn binds(log: &[String], name: &str) -> Vec<String> {
    log.iter()
        .filter_map(|l| l.strip_prefix("e5rt_io_port_bind_buffer_object "))
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_value_between_two_regions_is_one_buffer_bound_to_both_ports() {
    let Some((_g, fake)) = fake_e5rt::fake() else {
        return;
    };
    // x → region A (relu) → r; host sort(r) → s; region B reads s and r (r straight from A).
    let x = input(&[1, 4]).unwrap();
    let r = x.relu().unwrap();
    let s = r.sort(1, true).unwrap();
    let y = s.relu().unwrap().add(&r).unwrap();
    let opts = CompileOptions {
        device: Device::Ane,
        build_dir: Some(scratch("adjacent").join("plan")),
        ..Default::default()
    };
    let mut c = compile(&[(Some("y".into()), y)], &opts).unwrap();
    let stages = &c.plan.as_ref().unwrap().stages;
    let port_names = |k: usize, input: bool| match &stages[k] {
        aneforge::plan::Stage::Region { program, .. } => {
            let ports = if input {
                program.inputs()
            } else {
                program.outputs()
            };
            ports.into_iter().map(|p| p.name).collect::<Vec<_>>()
        }
        _ => panic!("stage {k} is not a region"),
    };
    let (a_out, b_in) = (port_names(0, false), port_names(2, true));
    assert_eq!(a_out.len(), 1);
    let r_name = &a_out[0];
    assert!(b_in.contains(r_name), "{b_in:?} reads {r_name}");
    // A's output buffer is bound to A's output port, then to B's input port (replacing the
    // buffer B allocated for itself): one buffer, no copy between the regions.
    let bound = binds(&fake.log(), r_name);
    assert_eq!(bound.len(), 3, "{bound:?}");
    assert_eq!(bound[2], bound[0], "{bound:?}");
    assert_ne!(bound[1], bound[0]);
    let live_before = fake.live();
    let xv = [0.5f32, -2.0, 3.0, 1.0];
    let out = c.run(&[PortData::F32(&xv)]).unwrap();
    // The fake region computes input 0 + 1: A gives x + 1; B's input 0 is s (sorted A output)
    // or r (A's buffer itself).
    let a: Vec<f32> = xv.iter().map(|v| v + 1.0).collect();
    let mut sorted = a.clone();
    sorted.sort_by(|p, q| q.partial_cmp(p).unwrap());
    let b_input0 = if &b_in[0] == r_name { a } else { sorted };
    let want: Vec<f32> = b_input0.iter().map(|v| v + 1.0).collect();
    assert_eq!(out[0], want);
    assert_eq!(fake.live(), live_before);
    drop(c);
    assert_eq!((fake.live(), fake.bad_releases()), (0, 0));
}
