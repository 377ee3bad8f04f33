//! ONNX import (feature `onnx`): a ModelProto (read with prost from the schema subset in
//! `proto/onnx.proto`) becomes graph input ports and output tensors built with the graph
//! builders, so it compiles like any other graph. Shapes are static (symbolic input dims come
//! from `input_shapes`); shape subgraphs fold on the host (`fold.rs`); a BatchNormalization
//! right after a Conv/Gemm folds into its weights. Unsupported ops are listed all at once.

pub mod bind;
pub mod fold;
mod gelu_fold;
mod int_layout;
mod mask_fill;
pub mod node;
pub mod ops;
mod ops_attention;
mod ops_elementwise;
mod ops_grid;
mod ops_index;
mod ops_int;
mod ops_layout;
mod ops_loss;
mod ops_nd;
mod ops_nn;
mod ops_recurrent;
mod ops_reduce;
mod ops_resize;
mod ops_signal;
mod ops_values;
pub mod qdq;
pub mod tensor;
pub mod weights;

use std::collections::HashMap;
use std::path::Path;

use prost::bytes::Bytes;
use prost::Message;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::build::io::input_port;
use crate::graph::Tensor;
pub use bind::InputValue;
use node::{display_name, topo_order, Node};
use ops::{bn_affine, lookup, missing_reason, output_graph, Args, Value};
use proto::type_proto;
use tensor::{decode, unsupported, Elem};
use weights::RawF32;

/// Messages of package `onnx` (ModelProto, GraphProto, NodeProto, TensorProto ...).
#[allow(clippy::all, missing_docs)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

/// The encoded `google.protobuf.FileDescriptorSet` of `proto/onnx.proto` (the schema-drift test reads it).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/onnx_subset.fds.pb"));

/// Oldest default-domain opset the importer reads.
pub const MIN_OPSET: i64 = 6;
/// Newest default-domain opset the importer reads (onnx 1.23's).
pub const MAX_OPSET: i64 = 28;

/// One imported port: the ONNX value name, the port name in the program (an identifier
/// derived from it) and the tensor.
#[derive(Clone, Debug)]
pub struct Port {
    pub onnx_name: String,
    pub name: String,
    pub tensor: Tensor,
}

/// An imported model: input ports in ONNX order and output tensors (float outputs are fp16,
/// bool outputs are fp16 0/1).
#[derive(Clone, Debug)]
pub struct Imported {
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
}

impl Imported {
    /// The outputs as the (name, tensor) list `compile` / `export` take.
    pub fn named_outputs(&self) -> Vec<(Option<String>, Tensor)> {
        self.outputs
            .iter()
            .map(|p| (Some(p.name.clone()), p.tensor.clone()))
            .collect()
    }
}

/// Import the .onnx file at `path` (external data is read from its folder); `input_shapes`
/// fixes symbolic input dims by input name.
pub fn import_file(path: &Path, input_shapes: &[(String, Vec<usize>)]) -> Result<Imported> {
    import_file_with_values(path, input_shapes, &[])
}

/// [`import_file`] with `input_values` bound to constants before folding (see [`InputValue`]).
pub fn import_file_with_values(
    path: &Path,
    input_shapes: &[(String, Vec<usize>)],
    input_values: &[InputValue],
) -> Result<Imported> {
    let bytes = crate::program::files::map_regular(path)?;
    import_model(bytes, path, path.parent(), input_shapes, input_values)
}

/// Import serialized ModelProto `bytes`; external data (if any) is read from `base_dir`.
pub fn import_bytes(
    bytes: &[u8],
    base_dir: Option<&Path>,
    input_shapes: &[(String, Vec<usize>)],
) -> Result<Imported> {
    import_bytes_with_values(bytes, base_dir, input_shapes, &[])
}

/// [`import_bytes`] with `input_values` bound to constants before folding (see [`InputValue`]).
pub fn import_bytes_with_values(
    bytes: &[u8],
    base_dir: Option<&Path>,
    input_shapes: &[(String, Vec<usize>)],
    input_values: &[InputValue],
) -> Result<Imported> {
    import_model(
        Bytes::copy_from_slice(bytes),
        Path::new("<onnx bytes>"),
        base_dir,
        input_shapes,
        input_values,
    )
}

/// Decode and import; initializer raw_data are zero-copy slices of `bytes`.
fn import_model(
    bytes: Bytes,
    file: &Path,
    base_dir: Option<&Path>,
    input_shapes: &[(String, Vec<usize>)],
    input_values: &[InputValue],
) -> Result<Imported> {
    let model = proto::ModelProto::decode(bytes).map_err(|e| Error::Format {
        file: file.to_path_buf(),
        offset: None,
        msg: format!("not a valid ONNX ModelProto: {e}"),
    })?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain().is_empty() || o.domain() == "ai.onnx")
        .map(|o| o.version())
        .unwrap_or(MIN_OPSET);
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(Error::NotImplemented(format!(
            "{}: unsupported: default-domain opset {opset} (the importer reads {MIN_OPSET}..={MAX_OPSET})",
            file.display()
        )));
    }
    let graph = model.graph.as_ref().ok_or_else(|| Error::Format {
        file: file.to_path_buf(),
        offset: None,
        msg: "the model has no graph".into(),
    })?;
    Importer::new(graph, opset, base_dir)?.run(input_shapes, input_values)
}

/// Identifier-safe, unique port names for ONNX value names.
#[derive(Default)]
struct PortNames(std::collections::HashSet<String>);

impl PortNames {
    fn name(&mut self, onnx: &str) -> String {
        let mut s: String = onnx
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(56)
            .collect();
        if !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            s.insert_str(0, "v_");
        }
        let mut name = s.clone();
        let mut k = 1;
        while !self.0.insert(name.clone()) {
            name = format!("{s}_{k}");
            k += 1;
        }
        name
    }
}

struct Importer<'g> {
    graph: &'g proto::GraphProto,
    opset: i64,
    values: HashMap<String, Value>,
    /// Float32 initializers still as raw bytes: weight slots take them as they are, any other
    /// reader decodes them into `values` on first use.
    raw: HashMap<String, RawF32>,
    order: Vec<usize>,
}

impl<'g> Importer<'g> {
    fn new(graph: &'g proto::GraphProto, opset: i64, base_dir: Option<&Path>) -> Result<Self> {
        let order = topo_order(graph)?;
        let (mut values, mut raw) = (HashMap::new(), HashMap::new());
        for t in &graph.initializer {
            // Names are unique (checked by topo_order).
            let name = t.name().to_string();
            match RawF32::of(t) {
                Some(r) => {
                    raw.insert(name, r);
                }
                None => {
                    values.insert(name, Value::host(decode(t, base_dir)?));
                }
            }
        }
        Ok(Importer {
            graph,
            opset,
            values,
            raw,
            order,
        })
    }

    /// Whether `name` is a constant known before the import runs (an initializer or a folded
    /// value).
    fn is_const(&self, name: &str) -> bool {
        self.raw.contains_key(name) || matches!(self.values.get(name), Some(Value::Host(_)))
    }

    /// The value of a one-element constant `name` of rank 0 or 1 (a higher rank would broadcast
    /// its reader to that rank): an initializer, or the output of `producer` when that is a
    /// Constant node (folded as its import would fold it).
    fn scalar(&self, name: &str, producer: Option<&proto::NodeProto>) -> Option<f64> {
        let host = match (self.raw.get(name), self.values.get(name), producer) {
            (Some(raw), _, _) => (raw.numel() == 1).then(|| raw.decode())?,
            (None, Some(Value::Host(h)), _) => (**h).clone(),
            (None, None, Some(p)) if p.op_type() == "Constant" => {
                let node = Node::new(p, self.opset);
                let args = Args {
                    node: &node,
                    vals: Vec::new(),
                    bn: None,
                    weight: None,
                };
                match fold::fold(&args).ok()??.first()? {
                    Value::Host(h) => (**h).clone(),
                    Value::Graph { .. } => return None,
                }
            }
            _ => return None,
        };
        (host.numel() == 1 && host.dims.len() <= 1).then(|| host.data[0])
    }

    /// The value named `name`, decoding a raw initializer on first use.
    fn value(&mut self, name: &str) -> Option<Value> {
        if let Some(v) = self.values.get(name) {
            return Some(v.clone());
        }
        let v = Value::host(self.raw.get(name)?.decode());
        self.values.insert(name.to_string(), v.clone());
        Some(v)
    }

    /// Input 1 of `node` as raw f32 bytes when the node's mapping takes its weight that way
    /// (see [`ops::Args::weight`]).
    fn raw_weight(&self, node: &Node) -> Result<Option<RawF32>> {
        let Some(w) = node.proto.input.get(1).and_then(|s| self.raw.get(s)) else {
            return Ok(None);
        };
        let takes = match node.op() {
            "Conv" => true,
            "Gemm" => node.int("transB", 0)? != 0 && w.dims.len() == 2,
            "MatMul" => w.dims.len() == 2,
            _ => false,
        };
        Ok(takes.then(|| w.clone()))
    }

    /// Every node whose op has no mapping, listed at once.
    fn check_ops(&self) -> Result<()> {
        let mut missing = Vec::new();
        for n in &self.graph.node {
            let domain_ok = n.domain().is_empty() || n.domain() == "ai.onnx";
            let known = domain_ok
                && (lookup(n.op_type()).is_some()
                    || fold::is_source(n.op_type())
                    || qdq::is_qdq(n.op_type()));
            if !known {
                let reason = if domain_ok {
                    missing_reason(n.op_type())
                } else {
                    format!("domain '{}'", n.domain())
                };
                missing.push(format!(
                    "{} node '{}' (opset {}): {reason}",
                    n.op_type(),
                    display_name(n),
                    self.opset
                ));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        Err(Error::NotImplemented(format!(
            "onnx: unsupported: {} node(s): {}",
            missing.len(),
            missing.join("; ")
        )))
    }

    fn inputs(
        &mut self,
        shapes: &[(String, Vec<usize>)],
        names: &mut PortNames,
    ) -> Result<Vec<Port>> {
        for (name, _) in shapes {
            if !self.graph.input.iter().any(|v| v.name() == name) {
                return Err(Error::value(
                    "onnx input_shapes",
                    format!("the model has no input '{name}'"),
                ));
            }
        }
        let mut ports = Vec::new();
        for v in &self.graph.input {
            if self.values.contains_key(v.name()) || self.raw.contains_key(v.name()) {
                continue; // an initializer listed as an input (IR < 4)
            }
            let what = format!("input '{}'", v.name());
            let Some(type_proto::Value::TensorType(tt)) =
                v.r#type.as_ref().and_then(|t| t.value.as_ref())
            else {
                return Err(unsupported(&what, "sequence/map/optional/sparse types"));
            };
            let elem = Elem::from_code(tt.elem_type(), &what)?;
            // Integer and bool inputs are int32 ports (their ops run on the host, exactly).
            let dtype = if elem.is_float() {
                DType::Fp16
            } else {
                DType::Int32
            };
            let given = shapes
                .iter()
                .find(|(n, _)| n == v.name())
                .map(|(_, s)| s.clone());
            let dims = tt
                .shape
                .as_ref()
                .map(|s| s.dim.as_slice())
                .unwrap_or_default();
            let shape: Vec<usize> = match given {
                Some(s) => {
                    if !dims.is_empty() && s.len() != dims.len() {
                        return Err(Error::shape(&what, format!("input_shapes gives {s:?} for a rank-{} input", dims.len())));
                    }
                    s
                }
                None => dims
                    .iter()
                    .enumerate()
                    .map(|(i, d)| match d.value {
                        Some(proto::tensor_shape_proto::dimension::Value::DimValue(x)) if x > 0 => Ok(x as usize),
                        Some(proto::tensor_shape_proto::dimension::Value::DimValue(0)) => Err(unsupported(&what, "zero-size tensors")),
                        Some(proto::tensor_shape_proto::dimension::Value::DimValue(x)) => Err(Error::shape(&what, format!("dim {i} is negative ({x})"))),
                        _ => Err(Error::shape(
                            &what,
                            format!("dim {i} is symbolic ({:?}); give it in input_shapes={{'{}': (...)}}", d.value, v.name()),
                        )),
                    })
                    .collect::<Result<_>>()?,
            };
            if tt.shape.is_none() && shape.is_empty() {
                return Err(Error::shape(
                    &what,
                    format!(
                        "has no shape; give it in input_shapes={{'{}': (...)}}",
                        v.name()
                    ),
                ));
            }
            // A rank-0 runtime input is a [1] port (the IR has no rank-0 tensors); broadcasting agrees.
            let shape = if shape.is_empty() { vec![1] } else { shape };
            let name = names.name(v.name());
            let t = input_port(&shape, dtype, Some(&name))
                .map_err(|e| Error::shape(&what, e.to_string()))?;
            self.values
                .insert(v.name().to_string(), Value::Graph { t: t.clone(), elem });
            ports.push(Port {
                onnx_name: v.name().to_string(),
                name,
                tensor: t,
            });
        }
        Ok(ports)
    }

    /// Conv/Gemm node index → BatchNormalization node index for the BNs that fold.
    fn bn_folds(&self) -> HashMap<usize, usize> {
        let mut uses: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in self.graph.node.iter().enumerate() {
            for inp in &n.input {
                uses.entry(inp.as_str()).or_default().push(i);
            }
        }
        let outputs: Vec<&str> = self.graph.output.iter().map(|o| o.name()).collect();
        let mut folds = HashMap::new();
        for (i, n) in self.graph.node.iter().enumerate() {
            if !matches!(n.op_type(), "Conv" | "Gemm")
                || n.output.len() != 1
                || outputs.contains(&n.output[0].as_str())
            {
                continue;
            }
            if let Some([j]) = uses.get(n.output[0].as_str()).map(|v| v.as_slice()) {
                let bn = &self.graph.node[*j];
                let consts = bn.input.len() == 5 && bn.input[1..].iter().all(|s| self.is_const(s));
                let plain = bn.output.iter().skip(1).all(|o| o.is_empty())
                    && !bn
                        .attribute
                        .iter()
                        .any(|a| a.name() == "training_mode" && a.i() != 0);
                if bn.op_type() == "BatchNormalization"
                    && bn.input.first() == n.output.first()
                    && consts
                    && plain
                {
                    folds.insert(i, *j);
                }
            }
        }
        folds
    }

    fn args<'n, 'a>(&mut self, node: &'n Node<'a>) -> Result<Args<'n, 'a>> {
        let weight = self.raw_weight(node)?;
        let vals = node
            .proto
            .input
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if s.is_empty() || (i == 1 && weight.is_some()) {
                    Ok(None)
                } else {
                    self.value(s)
                        .map(Some)
                        .ok_or_else(|| node.bad(format!("input '{s}' is undefined")))
                }
            })
            .collect::<Result<_>>()?;
        Ok(Args {
            node,
            vals,
            bn: None,
            weight,
        })
    }

    /// Per position in `order`: the values whose last reader is the node there (graph outputs
    /// are never listed), so their host data is freed as soon as the import is past them. A
    /// GELU's final node (`gelus`) reads its x too.
    fn last_reads<'a>(&self, gelus: &'a HashMap<usize, String>) -> Vec<Vec<&'a str>>
    where
        'g: 'a,
    {
        let graph = self.graph;
        let mut last: HashMap<&'a str, usize> = HashMap::new();
        for (pos, &i) in self.order.iter().enumerate() {
            for inp in graph.node[i].input.iter().chain(gelus.get(&i)) {
                last.insert(inp.as_str(), pos);
            }
        }
        for o in &graph.output {
            last.remove(o.name());
        }
        let mut drops = vec![Vec::new(); self.order.len()];
        for (name, pos) in last {
            drops[pos].push(name);
        }
        drops
    }

    fn run(mut self, shapes: &[(String, Vec<usize>)], bound: &[InputValue]) -> Result<Imported> {
        self.check_ops()?;
        bind::bind(self.graph, bound, &mut self.values)?;
        let mut names = PortNames::default();
        let inputs = self.inputs(shapes, &mut names)?;
        let folds = self.bn_folds();
        let folded: Vec<usize> = folds.values().copied().collect();
        let masks = mask_fill::mask_nodes(self.graph);
        let gelus = gelu_fold::gelu_nodes(self.graph, |name, producer| self.scalar(name, producer));
        let drops = self.last_reads(&gelus);
        for (pos, &i) in self.order.clone().iter().enumerate() {
            match gelus.get(&i) {
                Some(x) => self.gelu(i, x)?,
                None if !folded.contains(&i) => self.node(i, &folds, masks.contains(&i))?,
                None => {}
            }
            for name in &drops[pos] {
                self.values.remove(*name);
                self.raw.remove(*name);
            }
        }
        self.outputs(inputs, names)
    }

    /// Import node `i`, the final Mul of an exact GELU of the value `x` (see `gelu_fold.rs`), as
    /// one `gelu` op.
    fn gelu(&mut self, i: usize, x: &str) -> Result<()> {
        let out = match self.value(x) {
            Some(Value::Graph { t, elem }) => Value::Graph {
                t: t.unary_named("gelu", &[])?,
                elem,
            },
            _ => return self.node(i, &HashMap::new(), false),
        };
        if let Some(name) = self.graph.node[i].output.first() {
            self.values.insert(name.clone(), out);
        }
        Ok(())
    }

    /// Import node `i` (with the BatchNormalization that folds into it, if any); `mask` marks
    /// an attention-mask node whose constant fills saturate (see `mask_fill.rs`).
    fn node(&mut self, i: usize, folds: &HashMap<usize, usize>, mask: bool) -> Result<()> {
        let graph = self.graph;
        let proto = &graph.node[i];
        let node = Node::new(proto, self.opset);
        let mut args = self.args(&node)?;
        if mask {
            args.vals = args
                .vals
                .iter()
                .map(|v| v.as_ref().map(mask_fill::saturate))
                .collect();
        }
        let mut targets: Vec<&str> = proto.output.iter().map(|s| s.as_str()).collect();
        if let Some(&j) = folds.get(&i) {
            let bn_proto = &graph.node[j];
            let bn_node = Node::new(bn_proto, self.opset);
            // Its data input is this node's output (not built yet): only the statistics are read.
            let vals = bn_proto.input.iter().map(|s| self.value(s)).collect();
            args.bn = Some(bn_affine(&Args {
                node: &bn_node,
                vals,
                bn: None,
                weight: None,
            })?);
            targets = vec![bn_proto.output[0].as_str()];
        }
        let outs = match fold::fold(&args)? {
            Some(v) => v,
            None if qdq::is_qdq(node.op()) => qdq::map(&args)?,
            None => {
                let f = lookup(node.op())
                    .ok_or_else(|| node.unsupported(&missing_reason(node.op())))?;
                let on_ints = if int_layout::is_int_layout(node.op()) {
                    int_layout::map(&args, f)?
                } else {
                    None
                };
                match on_ints {
                    Some(v) => v,
                    None => f(&args)?,
                }
            }
        };
        for (k, name) in targets.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let v = outs
                .get(k)
                .cloned()
                .ok_or_else(|| node.unsupported(&format!("output {k} ('{name}')")))?;
            self.values.insert(name.to_string(), v);
        }
        Ok(())
    }

    /// The graph outputs as ports (bool as fp16 0/1, rank 0 as [1]).
    fn outputs(&mut self, inputs: Vec<Port>, mut names: PortNames) -> Result<Imported> {
        let mut outputs = Vec::new();
        let graph = self.graph;
        for o in &graph.output {
            let v = self.value(o.name()).ok_or_else(|| {
                Error::value("onnx graph", format!("output '{}' is undefined", o.name()))
            })?;
            let stub = proto::NodeProto {
                name: Some(format!("output {}", o.name())),
                op_type: Some("Output".into()),
                ..Default::default()
            };
            let t = output_graph(&Node::new(&stub, self.opset), &v)?;
            outputs.push(Port {
                onnx_name: o.name().to_string(),
                name: names.name(o.name()),
                tensor: t,
            });
        }
        Ok(Imported { inputs, outputs })
    }
}
