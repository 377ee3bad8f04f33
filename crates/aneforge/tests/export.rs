//! `.mlpackage` export: every conformance program is written as a package, decoded back with
//! prost and checked against the program it came from (ports, op list, output types, name
//! bindings, weight payloads, manifest); plus image ports, the error cases and the CLI subcommand.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use aneforge::mil::blob::{BlobReader, BlobType};
use aneforge::mlpackage::proto::specification::mil_spec as mil;
use aneforge::mlpackage::proto::specification::{self as spec, feature_type, model};
use aneforge::mlpackage::write_mlpackage;
use aneforge::ops::{Op, TensorType};
use aneforge::{image_input, input, DType, Error, Graph, Program};
use prost::Message;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aneforge-export-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn lower(t: aneforge::Tensor) -> Program {
    Program::lower(Graph::from_outputs(&[(None, t)]).unwrap()).unwrap()
}

/// (dtype, shape) of a decoded value type.
fn tensor_of(t: &Option<mil::ValueType>) -> (i32, Vec<u64>) {
    let Some(mil::value_type::Type::TensorType(t)) = t.as_ref().and_then(|t| t.r#type.as_ref())
    else {
        panic!("not a tensor type: {t:?}")
    };
    assert_eq!(t.rank as usize, t.dimensions.len());
    let dims = t.dimensions.iter().map(|d| match d.dimension {
        Some(mil::dimension::Dimension::Constant(c)) => c.size,
        None => panic!("dimension without a size"),
    });
    (t.data_type, dims.collect())
}

fn expect_type(t: &TensorType) -> (i32, Vec<u64>) {
    let dtype = match t.dtype {
        DType::Fp16 => mil::DataType::Float16,
        DType::Uint8 => mil::DataType::Uint8,
        DType::Bool => mil::DataType::Bool,
        DType::Int32 => mil::DataType::Int32,
    };
    (dtype as i32, t.shape.iter().map(|&d| d as u64).collect())
}

/// Ports as (name, dtype, shape) from a decoded description: FLOAT16 multi-arrays are fp16
/// ports, RGB / GRAYSCALE images are uint8 [1, 3 or 1, H, W] ports.
fn described(features: &[spec::FeatureDescription]) -> Vec<(String, DType, Vec<usize>)> {
    use spec::image_feature_type::ColorSpace;
    features
        .iter()
        .map(
            |f| match f.r#type.as_ref().and_then(|t| t.r#type.as_ref()) {
                Some(feature_type::Type::MultiArrayType(a)) => {
                    assert_eq!(
                        a.data_type,
                        spec::array_feature_type::ArrayDataType::Float16 as i32,
                        "{}",
                        f.name
                    );
                    (
                        f.name.clone(),
                        DType::Fp16,
                        a.shape.iter().map(|&d| d as usize).collect(),
                    )
                }
                Some(feature_type::Type::ImageType(im)) => {
                    let c = match ColorSpace::try_from(im.color_space).unwrap() {
                        ColorSpace::Rgb => 3,
                        ColorSpace::Grayscale => 1,
                        other => panic!("{}: unexpected color space {other:?}", f.name),
                    };
                    (
                        f.name.clone(),
                        DType::Uint8,
                        vec![1, c, im.height as usize, im.width as usize],
                    )
                }
                other => panic!("{}: unexpected feature type {other:?}", f.name),
            },
        )
        .collect()
}

/// The blob values of one op (attributes and inline bindings), by argument name.
fn blob_values(op: &mil::Operation) -> Vec<(String, &mil::Value)> {
    let attrs = op.attributes.iter().map(|(k, v)| (k.clone(), v));
    let inline = op.inputs.iter().flat_map(|(k, a)| {
        a.arguments.iter().filter_map(move |b| match &b.binding {
            Some(mil::argument::binding::Binding::Value(v)) => Some((k.clone(), v)),
            _ => None,
        })
    });
    attrs
        .chain(inline)
        .filter(|(_, v)| matches!(v.value, Some(mil::value::Value::BlobFileValue(_))))
        .collect()
}

fn blob_type(dtype: i32) -> BlobType {
    match mil::DataType::try_from(dtype).unwrap() {
        mil::DataType::Float16 => BlobType::Fp16,
        mil::DataType::Int8 => BlobType::Int8,
        mil::DataType::Uint4 => BlobType::Uint4,
        mil::DataType::Uint1 => BlobType::Uint1,
        other => panic!("unexpected blob dtype {other:?}"),
    }
}

/// Decode `pkg` and check it against `p` end to end.
fn check_package(case: &str, p: &Program, pkg: &Path) {
    let data = pkg.join("Data/com.apple.CoreML");
    let bytes = std::fs::read(data.join("model.mlmodel")).unwrap();
    let m = spec::Model::decode(bytes.as_slice()).unwrap();
    assert_eq!(m.specification_version, 9, "{case}");
    let Some(model::Type::MlProgram(prog)) = &m.r#type else {
        panic!("{case}: no mlProgram")
    };
    assert_eq!(prog.version, 1);
    let f = &prog.functions["main"];
    assert_eq!(f.opset, "CoreML8", "{case}");
    let block = f
        .block_specializations
        .get("CoreML8")
        .unwrap_or_else(|| panic!("{case}: no CoreML8 block"));

    // Ports: description == function signature == program.
    let d = m.description.as_ref().unwrap();
    let ports = |ps: Vec<aneforge::PortSpec>| {
        ps.into_iter()
            .map(|p| (p.name, p.dtype, p.shape))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        described(&d.input),
        ports(p.inputs()),
        "{case}: description inputs"
    );
    assert_eq!(
        described(&d.output),
        ports(p.outputs()),
        "{case}: description outputs"
    );
    let fn_inputs: Vec<(String, (i32, Vec<u64>))> = f
        .inputs
        .iter()
        .map(|n| (n.name.clone(), tensor_of(&n.r#type)))
        .collect();
    // Core ML feeds image pixels as fp32: a uint8 port is an fp32 function input.
    let fn_type = |s: &aneforge::PortSpec| match s.dtype {
        DType::Uint8 => (
            mil::DataType::Float32 as i32,
            s.shape.iter().map(|&d| d as u64).collect(),
        ),
        dtype => expect_type(&TensorType {
            dtype,
            shape: s.shape.clone(),
        }),
    };
    let want: Vec<(String, (i32, Vec<u64>))> = p
        .inputs()
        .iter()
        .map(|s| (s.name.clone(), fn_type(s)))
        .collect();
    assert_eq!(fn_inputs, want, "{case}: function inputs");
    assert_eq!(
        block.outputs,
        p.outputs().into_iter().map(|s| s.name).collect::<Vec<_>>(),
        "{case}: block outputs"
    );

    // Ops: the non-const ops are the graph's compute nodes, in order, with the same output types.
    let g = &p.graph;
    let nodes: Vec<&aneforge::graph::Node> = g
        .nodes
        .iter()
        .filter(|n| !matches!(n.op, Op::Input(_) | Op::Const(_)))
        .collect();
    let ops: Vec<&mil::Operation> = block
        .operations
        .iter()
        .filter(|o| o.r#type != "const")
        .collect();
    assert_eq!(
        ops.iter().map(|o| o.r#type.as_str()).collect::<Vec<_>>(),
        nodes
            .iter()
            .map(|n| n.op.family().name())
            .collect::<Vec<_>>(),
        "{case}"
    );
    for (o, n) in ops.iter().zip(&nodes) {
        let got: Vec<(i32, Vec<u64>)> = o.outputs.iter().map(|t| tensor_of(&t.r#type)).collect();
        assert_eq!(
            got,
            n.outputs.iter().map(expect_type).collect::<Vec<_>>(),
            "{case}: outputs of {}",
            o.r#type
        );
    }

    // Every name binding refers to a function input or an earlier op's output; every op is named once.
    let mut defined: HashSet<String> = f.inputs.iter().map(|n| n.name.clone()).collect();
    for o in &block.operations {
        for (k, a) in &o.inputs {
            for b in &a.arguments {
                if let Some(mil::argument::binding::Binding::Name(n)) = &b.binding {
                    assert!(
                        defined.contains(n),
                        "{case}: {} argument {k} names undefined '{n}'",
                        o.r#type
                    );
                }
            }
        }
        let Some(mil::value::Value::ImmediateValue(_)) = o.attributes["name"].value else {
            panic!("{case}: op name is not inline")
        };
        for out in &o.outputs {
            assert!(
                defined.insert(out.name.clone()),
                "{case}: '{}' defined twice",
                out.name
            );
        }
    }
    for out in &block.outputs {
        assert!(
            defined.contains(out),
            "{case}: block output '{out}' undefined"
        );
    }

    // Constexpr forms: the iOS16 affine op takes attributes only, the iOS18 ones inline values only.
    for o in ops.iter().filter(|o| o.r#type.starts_with("constexpr_")) {
        if o.r#type == "constexpr_affine_dequantize" {
            assert!(o.inputs.is_empty(), "{case}");
            let mut keys: Vec<&str> = o.attributes.keys().map(String::as_str).collect();
            keys.sort();
            assert_eq!(
                keys,
                ["axis", "name", "quantized_data", "scale", "zero_point"]
            );
        } else {
            assert_eq!(o.attributes.len(), 1, "{case}");
            assert!(
                o.inputs.values().all(|a| matches!(
                    a.arguments[..],
                    [mil::argument::Binding {
                        binding: Some(mil::argument::binding::Binding::Value(_))
                    }]
                )),
                "{case}"
            );
        }
    }

    // Weights: every blob value decodes at its offset with its declared type and element count;
    // fp16 consts equal the graph's constants bit for bit.
    let wpath = data.join("weights/weight.bin");
    let wbytes = std::fs::read(&wpath).unwrap();
    let reader = BlobReader::new(&wbytes, &wpath).unwrap();
    let names = aneforge::mil::print::value_names(g).unwrap();
    let consts: HashMap<&str, &aneforge::ops::io::Const> = g
        .nodes
        .iter()
        .zip(&names)
        .filter_map(|(n, name)| {
            if let Op::Const(c) = &n.op {
                Some((name[0].as_str(), c))
            } else {
                None
            }
        })
        .collect();
    let mut n_blobs = 0;
    for o in &block.operations {
        for (arg, v) in blob_values(o) {
            let Some(mil::value::Value::BlobFileValue(b)) = &v.value else {
                unreachable!()
            };
            assert_eq!(b.file_name, "@model_path/weights/weight.bin");
            let (dtype, shape) = tensor_of(&v.r#type);
            let n = shape.iter().product::<u64>() as usize;
            let payload = reader
                .read(b.offset, blob_type(dtype), n)
                .unwrap_or_else(|e| panic!("{case}: {} {arg}: {e}", o.r#type));
            if o.r#type == "const" {
                let c = consts[o.outputs[0].name.as_str()];
                let aneforge::mil::blob::Payload::Fp16(vals) = payload else {
                    panic!("const is not fp16")
                };
                assert_eq!(
                    vals.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    c.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{case}: const {}",
                    o.outputs[0].name
                );
            }
            n_blobs += 1;
        }
    }
    assert_eq!(
        reader.count() as usize,
        n_blobs,
        "{case}: weight.bin holds exactly the referenced payloads"
    );

    // Manifest: the root item is the model, both item paths exist.
    let man: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(pkg.join("Manifest.json")).unwrap()).unwrap();
    let items = man["itemInfoEntries"].as_object().unwrap();
    assert_eq!(
        items[man["rootModelIdentifier"].as_str().unwrap()]["path"],
        "com.apple.CoreML/model.mlmodel"
    );
    for item in items.values() {
        assert!(
            pkg.join("Data")
                .join(item["path"].as_str().unwrap())
                .exists(),
            "{case}: {item}"
        );
    }
}

#[test]
fn every_corpus_program_exports_a_consistent_package() {
    let root = tmp("corpus");
    let mut exported = 0;
    for (i, (case, t)) in common::op_cases().into_iter().enumerate() {
        let p = lower(t);
        let pkg = root.join(format!("{i}-{case}.mlpackage"));
        assert_eq!(
            write_mlpackage(&p, &pkg).unwrap_or_else(|e| panic!("{case}: {e}")),
            pkg
        );
        check_package(case, &p, &pkg);
        exported += 1;
    }
    assert_eq!(exported, common::op_cases().len());
    let leftovers: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary directories left behind: {leftovers:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn multi_output_programs_keep_every_port() {
    let x = input(&[2, 6]).unwrap();
    let parts = x.split_sizes(&[2, 4], 1).unwrap();
    let g = Graph::from_outputs(&[
        (Some("a".into()), parts[0].relu().unwrap()),
        (Some("b".into()), parts[1].clone()),
        (Some("c".into()), x.sigmoid().unwrap()),
    ])
    .unwrap();
    let p = Program::lower(g).unwrap();
    let root = tmp("multi");
    let pkg = root.join("m.mlpackage");
    write_mlpackage(&p, &pkg).unwrap();
    check_package("multi", &p, &pkg);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn image_ports_export_as_images_with_fp32_pixels() {
    let root = tmp("image");
    for (c, cs) in [
        (3, spec::image_feature_type::ColorSpace::Rgb),
        (1, spec::image_feature_type::ColorSpace::Grayscale),
    ] {
        let p = lower(
            image_input(&[1, c, 4, 6], &[1.0 / 255.0], &[-0.5], None)
                .unwrap()
                .relu()
                .unwrap(),
        );
        let pkg = root.join(format!("img{c}.mlpackage"));
        write_mlpackage(&p, &pkg).unwrap();
        check_package("image", &p, &pkg);
        let m = spec::Model::decode(
            std::fs::read(pkg.join("Data/com.apple.CoreML/model.mlmodel"))
                .unwrap()
                .as_slice(),
        )
        .unwrap();
        let Some(feature_type::Type::ImageType(im)) = &m.description.as_ref().unwrap().input[0]
            .r#type
            .as_ref()
            .unwrap()
            .r#type
        else {
            panic!("not an image")
        };
        assert_eq!((im.width, im.height, im.color_space), (6, 4, cs as i32));
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn bad_targets_are_clear_errors() {
    let root = tmp("errors");
    let p = lower(input(&[1, 4]).unwrap().relu().unwrap());
    let pkg = root.join("a.mlpackage");
    write_mlpackage(&p, &pkg).unwrap();
    // An existing path is never replaced.
    let e = write_mlpackage(&p, &pkg).unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, source } if path == &pkg && source.kind() == std::io::ErrorKind::AlreadyExists),
        "{e}"
    );
    std::fs::write(root.join("file.mlpackage"), b"x").unwrap();
    let e = write_mlpackage(&p, &root.join("file.mlpackage")).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    // A parent that is a file.
    std::fs::write(root.join("plain"), b"x").unwrap();
    let e = write_mlpackage(&p, &root.join("plain").join("b.mlpackage")).unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if path.ends_with("plain")),
        "{e}"
    );
    // The wrong extension.
    let e = write_mlpackage(&p, &root.join("c.pkg")).unwrap_err();
    assert!(
        matches!(&e, Error::Value { .. }) && e.to_string().contains(".mlpackage"),
        "{e}"
    );
    assert!(!root.join("c.pkg").exists());
    // uint8 ports export only as [1, 1 or 3, H, W] images (Core ML has no uint8 multi-array).
    for shape in [[1, 4, 2, 2], [2, 3, 2, 2]] {
        let img = lower(
            image_input(&shape, &[1.0 / 255.0], &[0.0], None)
                .unwrap()
                .relu()
                .unwrap(),
        );
        let e = write_mlpackage(&img, &root.join("img.mlpackage")).unwrap_err();
        assert!(
            matches!(&e, Error::NotImplemented(m) if m.contains("uint8") && m.contains(&format!("{shape:?}"))),
            "{e}"
        );
    }
    let left: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[cfg(feature = "cli")]
#[test]
fn cli_exports_a_program_directory() {
    let root = tmp("cli");
    let p = lower(
        input(&[3, 5])
            .unwrap()
            .linear(common::W::new(&[4, 5], 3).arr(), None)
            .unwrap()
            .gelu()
            .unwrap(),
    );
    let dir = p.write_to(&root.join("prog")).unwrap();
    let out = root.join("x.mlpackage");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_aneforge"))
            .args(args)
            .output()
            .unwrap()
    };
    let ok = run(&[
        "export".as_ref(),
        dir.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout).trim(),
        out.display().to_string()
    );
    check_package("cli", &Program::load_dir(&dir).unwrap(), &out);
    let again = run(&[
        "export".as_ref(),
        dir.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    let missing = run(&[
        "export".as_ref(),
        root.join("nope").as_os_str(),
        "-o".as_ref(),
        root.join("y.mlpackage").as_os_str(),
    ]);
    assert!(!missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("nope"));
    let _ = std::fs::remove_dir_all(&root);
}
