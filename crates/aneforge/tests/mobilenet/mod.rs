//! MobileNetV3-small (torchvision's layout, batch 1, 1000 classes) as an ONNX ModelProto with
//! seeded weights, built like `bench/mobilenetv3.py`: every conv is followed by a
//! BatchNormalization (the importer folds it), squeeze-excite blocks are GlobalAveragePool, two
//! 1×1 convs with bias, Relu / HardSigmoid and Mul, activations are Relu and HardSwish.

use aneforge::conformance::corpus::data;
use aneforge::onnx::proto::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto,
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use prost::Message;

/// (kernel, expanded channels, out channels, squeeze-excite, activation, stride) after the stem.
const BLOCKS: [(usize, usize, usize, bool, &str, usize); 11] = [
    (3, 16, 16, true, "Relu", 2),
    (3, 72, 24, false, "Relu", 2),
    (3, 88, 24, false, "Relu", 1),
    (5, 96, 40, true, "HardSwish", 2),
    (5, 240, 40, true, "HardSwish", 1),
    (5, 240, 40, true, "HardSwish", 1),
    (5, 120, 48, true, "HardSwish", 1),
    (5, 144, 48, true, "HardSwish", 1),
    (5, 288, 96, true, "HardSwish", 2),
    (5, 576, 96, true, "HardSwish", 1),
    (5, 576, 96, true, "HardSwish", 1),
];

/// torchvision's `_make_divisible(v, 8)`.
fn divisible(v: usize) -> usize {
    let new = ((v + 4) / 8 * 8).max(8);
    if (new as f64) < 0.9 * v as f64 {
        new + 8
    } else {
        new
    }
}

/// Nodes and initializers under construction; `seed` advances once per tensor.
#[derive(Default)]
struct Builder {
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    count: usize,
    seed: u64,
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(i),
        ..Default::default()
    }
}

fn ints_attr(name: &str, v: &[usize]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.iter().map(|&x| x as i64).collect(),
        ..Default::default()
    }
}

fn float_attr(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(f),
        ..Default::default()
    }
}

fn value_info(name: &str, shape: &[usize]) -> ValueInfoProto {
    let dim = shape
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(tensor_shape_proto::dimension::Value::DimValue(d as i64)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(DataType::Float as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Builder {
    fn name(&mut self, prefix: &str) -> String {
        self.count += 1;
        format!("{prefix}{}", self.count)
    }

    /// An initializer of `shape` with values base + spread·u, u seeded in [-1, 1).
    fn init(&mut self, shape: &[usize], base: f32, spread: f32) -> String {
        self.seed += 1;
        let n = self.name("w");
        let numel = shape.iter().product();
        self.inits.push(TensorProto {
            dims: shape.iter().map(|&d| d as i64).collect(),
            data_type: Some(DataType::Float as i32),
            float_data: data(numel, self.seed)
                .iter()
                .map(|v| base + spread * v)
                .collect(),
            name: Some(n.clone()),
            ..Default::default()
        });
        n
    }

    fn node(&mut self, op: &str, ins: &[String], attrs: Vec<AttributeProto>) -> String {
        let out = self.name(&op.to_lowercase());
        self.nodes.push(NodeProto {
            input: ins.to_vec(),
            output: vec![out.clone()],
            op_type: Some(op.into()),
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    /// A k×k conv (He-scaled uniform weights), "same" padding, optional bias.
    #[allow(clippy::too_many_arguments)]
    fn conv(
        &mut self,
        x: &str,
        cin: usize,
        cout: usize,
        k: usize,
        stride: usize,
        groups: usize,
        bias: bool,
    ) -> String {
        let fan_in = cin / groups * k * k;
        let w = self.init(
            &[cout, cin / groups, k, k],
            0.0,
            (6.0 / fan_in as f32).sqrt(),
        );
        let mut ins = vec![x.to_string(), w];
        if bias {
            ins.push(self.init(&[cout], 0.0, 0.02));
        }
        let p = (k - 1) / 2;
        let attrs = vec![
            ints_attr("kernel_shape", &[k, k]),
            ints_attr("strides", &[stride, stride]),
            ints_attr("pads", &[p; 4]),
            int_attr("group", groups as i64),
        ];
        self.node("Conv", &ins, attrs)
    }

    /// Conv, BatchNormalization (eps 1e-3, seeded statistics), then `act` if any.
    #[allow(clippy::too_many_arguments)]
    fn conv_bn(
        &mut self,
        x: &str,
        cin: usize,
        cout: usize,
        k: usize,
        stride: usize,
        groups: usize,
        act: Option<&str>,
    ) -> String {
        let y = self.conv(x, cin, cout, k, stride, groups, false);
        let stats = [(1.0, 0.5), (0.0, 0.1), (0.0, 0.1), (1.0, 0.5)];
        let mut ins = vec![y];
        ins.extend(stats.map(|(b, s)| self.init(&[cout], b, s)));
        let y = self.node(
            "BatchNormalization",
            &ins,
            vec![float_attr("epsilon", 1e-3)],
        );
        match act {
            Some(a) => self.node(a, &[y], vec![]),
            None => y,
        }
    }

    fn squeeze_excite(&mut self, x: &str, c: usize) -> String {
        let s = divisible(c / 4);
        let pooled = self.node("GlobalAveragePool", &[x.to_string()], vec![]);
        let h = self.conv(&pooled, c, s, 1, 1, 1, true);
        let h = self.node("Relu", &[h], vec![]);
        let h = self.conv(&h, s, c, 1, 1, 1, true);
        let gate = vec![float_attr("alpha", 1.0 / 6.0), float_attr("beta", 0.5)];
        let h = self.node("HardSigmoid", &[h], gate);
        self.node("Mul", &[x.to_string(), h], vec![])
    }

    /// Gemm with a [cout, cin] weight (transB) and a bias.
    fn linear(&mut self, x: &str, cin: usize, cout: usize) -> String {
        let w = self.init(&[cout, cin], 0.0, (3.0 / cin as f32).sqrt());
        let b = self.init(&[cout], 0.0, 0.01);
        self.node("Gemm", &[x.to_string(), w, b], vec![int_attr("transB", 1)])
    }
}

/// The serialized model: input "x" [1, 3, size, size], output [1, 1000] (opset 17).
pub fn onnx_bytes(size: usize) -> Vec<u8> {
    let mut b = Builder::default();
    let mut x = b.conv_bn("x", 3, 16, 3, 2, 1, Some("HardSwish"));
    let mut cin = 16;
    for (k, exp, cout, se, act, stride) in BLOCKS {
        let mut h = if exp != cin {
            b.conv_bn(&x, cin, exp, 1, 1, 1, Some(act))
        } else {
            x.clone()
        };
        h = b.conv_bn(&h, exp, exp, k, stride, exp, Some(act));
        if se {
            h = b.squeeze_excite(&h, exp);
        }
        h = b.conv_bn(&h, exp, cout, 1, 1, 1, None);
        x = if stride == 1 && cin == cout {
            b.node("Add", &[h, x], vec![])
        } else {
            h
        };
        cin = cout;
    }
    x = b.conv_bn(&x, cin, 576, 1, 1, 1, Some("HardSwish"));
    let pooled = b.node("GlobalAveragePool", &[x], vec![]);
    x = b.node("Flatten", &[pooled], vec![]);
    x = b.linear(&x, 576, 1024);
    x = b.node("HardSwish", &[x], vec![]);
    let y = b.linear(&x, 1024, 1000);
    let graph = GraphProto {
        node: b.nodes,
        name: Some("mobilenet_v3_small".into()),
        initializer: b.inits,
        input: vec![value_info("x", &[1, 3, size, size])],
        output: vec![value_info(&y, &[1, 1000])],
        ..Default::default()
    };
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(graph),
        ..Default::default()
    }
    .encode_to_vec()
}
