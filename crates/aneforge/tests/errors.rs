//! Bad input gives typed errors naming the op and the values, never a panic.

mod common;

use aneforge::conv2d;
use aneforge::exec::reference::Reference;
use aneforge::ops::conv::ConvOptions;
use aneforge::{
    constant, input, input_port, DType, Error, Executor, Graph, HostArray, HostData, PortData,
    Precision, Program,
};

fn shape_err(r: aneforge::Result<aneforge::Tensor>, needles: &[&str]) {
    match r {
        Err(e @ (Error::Shape { .. } | Error::Value { .. })) => {
            let s = e.to_string();
            assert!(
                needles.iter().all(|n| s.contains(n)),
                "'{s}' lacks {needles:?}"
            );
        }
        Err(e) => panic!("wrong error kind: {e:?}"),
        Ok(t) => panic!("accepted: {:?}", t.shape()),
    }
}

#[test]
fn construction_checks_rank_extent_and_broadcast() {
    shape_err(input(&[]), &["input", "rank"]);
    shape_err(
        input(&[1, 1, 1, 1, 1, 1]),
        &["input", "rank", "[1, 1, 1, 1, 1, 1]"],
    );
    shape_err(input(&[0, 3]), &["input", "extent", "0"]);
    shape_err(input(&[65537]), &["input", "65537"]);
    let a = input(&[2, 3]).unwrap();
    shape_err(
        a.add(&input(&[4, 3]).unwrap()),
        &["add", "[2, 3]", "[4, 3]"],
    );
    shape_err(
        a.matmul_weight(common::W::new(&[4, 2], 1).arr()),
        &["matmul", "[2, 3]"],
    );
    shape_err(a.reshape(&[5, -1]), &["reshape", "[2, 3]"]);
    shape_err(a.softmax(2), &["softmax", "axis 2"]);
    shape_err(a.clip(1.0, -1.0), &["clip"]);
    let img = input(&[1, 3, 8, 8]).unwrap();
    shape_err(
        conv2d(
            &img,
            common::W::new(&[4, 2, 3, 3], 2).arr(),
            None,
            ConvOptions::default(),
        ),
        &["conv"],
    );
    shape_err(
        conv2d(
            &img,
            common::W::new(&[4, 3, 1, 16], 2).arr(),
            None,
            ConvOptions::default(),
        ),
        &["conv", "16", "15"],
    );
    assert!(matches!(
        input_port(&[2], DType::Bool, None),
        Err(Error::DType { .. })
    ));
    assert!(matches!(
        input_port(&[2], DType::Fp16, Some("1bad")),
        Err(Error::Value { .. })
    ));
}

#[test]
fn non_finite_or_overflowing_weights_are_rejected() {
    for bad in [f32::NAN, f32::INFINITY, 1e6] {
        let d = [0.0, bad, 1.0];
        let e = constant("linear", HostArray::f32(&[3], &d))
            .unwrap_err()
            .to_string();
        assert!(e.contains("linear") && e.contains("element 1"), "{e}");
    }
    let d = [1.0f64, f64::NEG_INFINITY];
    assert!(constant(
        "w",
        HostArray {
            shape: &[2],
            data: HostData::F64(&d)
        }
    )
    .is_err());
    assert!(constant("w", HostArray::f32(&[4], &[1.0, 2.0]))
        .unwrap_err()
        .to_string()
        .contains("2 elements"));
}

#[test]
fn call_time_inputs_are_checked() {
    let x = input(&[1, 4]).unwrap();
    let p = Program::lower(Graph::from_outputs(&[(None, x.relu().unwrap())]).unwrap()).unwrap();
    let mut l = Reference
        .load(&p, std::path::Path::new("."), Precision::Fp16)
        .unwrap();
    let e = l.set_input(0, PortData::F32(&[1.0; 3])).unwrap_err();
    assert!(
        matches!(e, Error::Shape { .. }) && e.to_string().contains("input 'x0'"),
        "{e}"
    );
    for (v, what) in [
        (f32::NAN, "not finite"),
        (f32::INFINITY, "not finite"),
        (70000.0, "overflows"),
    ] {
        let e = l
            .set_input(0, PortData::F32(&[0.0, v, 0.0, 0.0]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("element 1") && e.contains(what), "{e}");
    }
    assert!(matches!(
        l.set_input(0, PortData::U8(&[1; 4])),
        Err(Error::DType { .. })
    ));
    assert!(l.set_input(3, PortData::F32(&[0.0; 4])).is_err());
    let mut o = [0.0; 3];
    assert!(l.read_output(0, &mut o).is_err());
}

#[test]
fn graphs_that_output_inputs_or_bools_are_handled() {
    let x = input(&[3]).unwrap();
    let g = Graph::from_outputs(&[(None, x.clone()), (None, x.clone())]).unwrap();
    let p = Program::lower(g).unwrap();
    assert_eq!(
        p.graph.n_ops(),
        2,
        "each pass-through output gets its own copy op"
    );
    let mut l = Reference
        .load(&p, std::path::Path::new("."), Precision::Fp16)
        .unwrap();
    l.set_input(0, PortData::F32(&[1.0, 2.0, 3.0])).unwrap();
    l.execute().unwrap();
    let mut o = [0.0; 3];
    l.read_output(1, &mut o).unwrap();
    assert_eq!(o, [1.0, 2.0, 3.0]);
    let b = x
        .compare_scalar(aneforge::ops::elementwise::Compare::Greater, 0.0)
        .unwrap();
    assert!(matches!(
        Graph::from_outputs(&[(None, b)]),
        Err(Error::DType { .. })
    ));
    let dup = Graph::from_outputs(&[
        (Some("a".into()), x.relu().unwrap()),
        (Some("a".into()), x.abs().unwrap()),
    ]);
    assert!(dup.unwrap_err().to_string().contains("'a' is used twice"));
}
