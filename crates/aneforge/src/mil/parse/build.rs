//! Parsed syntax → [`Graph`]: resolves names, reads weights, rebuilds each op through
//! [`Op::from_mil`] and checks declared types against the op's shape rule.

use super::*;

/// The graph of a program's syntax, reading weights through `readers` (one per BLOBFILE path).
pub(super) fn build(
    syn: &Syntax,
    mil_file: &Path,
    readers: &HashMap<&str, BlobReader>,
) -> Result<Graph> {
    let ferr = |at: Pos, msg: String| error_at(mil_file, at, msg);
    // Shape errors become format errors at `at`; resource errors stay resource errors (MemoryError).
    let located = |e: Error, at: Pos| match e {
        Error::Resource { what, msg } => Error::Resource {
            what: format!(
                "{}: line {}, column {}: {what}",
                mil_file.display(),
                at.line,
                at.col
            ),
            msg,
        },
        e => ferr(at, message(e)),
    };
    let dtype_of = |s: &str, at: Pos| {
        DType::parse("mil", s).map_err(|_| {
            ferr(
                at,
                format!("unsupported dtype '{s}' (expected fp16, uint8 or bool)"),
            )
        })
    };
    let reader = |path: &str| {
        readers
            .get(path)
            .ok_or_else(|| Error::format(mil_file, None, format!("no weight file for '{path}'")))
    };

    let limits = crate::limits::Limits::current()?;
    // Pass 1: rebuild each op to learn which argument names are tensor operands.
    let mut operand_consts: HashSet<&str> = HashSet::new();
    let mut ops: Vec<Option<(Op, Vec<Arg>)>> = Vec::with_capacity(syn.order.len());
    for item in &syn.order {
        let Err(st) = item else {
            ops.push(None);
            continue;
        };
        let mut margs = MilArgs::new(mil_file, st.name.clone(), BTreeMap::new());
        let mut tensor_args = Vec::new();
        let mut scalar_candidates = Vec::new();
        for (k, vs, tuple) in &st.args {
            match vs.first().and_then(|v| syn.consts.get(v)) {
                Some((ConstVal::Lit(l), _)) if !tuple => {
                    if matches!(l, Literal::Fp16(_)) {
                        scalar_candidates.push((k.clone(), vs.clone(), false));
                    }
                    margs.params.insert(k.clone(), l.clone());
                }
                _ => tensor_args.push((k.clone(), vs.clone(), *tuple)),
            }
        }
        for (k, dt, shape, path, offset) in &st.blobs {
            let ty = BlobType::parse(dt).ok_or_else(|| {
                ferr(
                    st.at,
                    format!(
                        "argument '{k}': {dt} is not a blob tensor type (fp16, int8, uint4, uint1)"
                    ),
                )
            })?;
            // Palettes have rank + 2 axes, so these shapes may exceed the graph's rank limit.
            let n = shape
                .iter()
                .try_fold(1usize, |a, &d| if d == 0 { None } else { a.checked_mul(d) })
                .filter(|_| (1..=MAX_BLOB_RANK).contains(&shape.len()));
            let n = n.ok_or_else(|| ferr(st.at, format!("argument '{k}': {shape:?} is not a tensor shape (rank 1..={MAX_BLOB_RANK}, extents >= 1)")))?;
            limits
                .tensor(&format!("{}: argument '{k}'", st.op), shape, 1)
                .map_err(|e| located(e, st.at))?;
            margs.blobs.insert(
                k.clone(),
                (shape.clone(), reader(path)?.read(*offset, ty, n)?),
            );
        }
        let op = Op::from_mil(&st.op, &mut margs)
            .ok_or_else(|| ferr(st.at, format!("unknown op '{}'", st.op)))?;
        syn.opset
            .require(&st.op)
            .map_err(|e| ferr(st.at, message(e)))?;
        let op = op.map_err(|e| ferr(st.at, message(e)))?;
        // fp16 scalars the op did not claim as parameters are tensor operands (`mul(x, y = 2.5)`).
        for cand in scalar_candidates {
            if margs.params.remove(&cand.0).is_some() {
                tensor_args.push(cand);
            }
        }
        if let Some(k) = margs.params.keys().chain(margs.blobs.keys()).next() {
            return Err(ferr(st.at, format!("{}: unexpected argument '{k}'", st.op)));
        }
        for (_, vs, _) in &tensor_args {
            operand_consts.extend(
                vs.iter()
                    .filter_map(|v| syn.consts.get_key_value(v))
                    .map(|(k, _)| k.as_str()),
            );
        }
        ops.push(Some((op, tensor_args)));
    }

    // Pass 2: build the graph in statement order.
    let mut nodes: Vec<Node> = Vec::new();
    let mut values: HashMap<&str, Value> = HashMap::new();
    let mut inputs = Vec::new();
    for (dt, shape, name, at) in &syn.params {
        let ty = TensorType {
            dtype: dtype_of(dt, *at)?,
            shape: shape.clone(),
        };
        crate::shape::check(&format!("input '{name}'"), &ty.shape).map_err(|e| located(e, *at))?;
        values.insert(
            name,
            Value {
                node: nodes.len(),
                port: 0,
            },
        );
        inputs.push(nodes.len());
        nodes.push(Node {
            op: Op::Input(io::Input {
                name: Some(name.clone()),
                ty: ty.clone(),
            }),
            inputs: vec![],
            outputs: vec![ty],
        });
    }
    for (item, op) in syn.order.iter().zip(ops) {
        match (item, op) {
            (Ok(cname), _) => {
                if !operand_consts.contains(cname.as_str()) {
                    continue;
                }
                let (c, at) = &syn.consts[cname];
                let (shape, vals) = match c {
                    ConstVal::Lit(Literal::Fp16(v)) => (vec![], Arc::new(vec![f16::from_f32(*v)])),
                    ConstVal::Dense(shape, v) => {
                        crate::shape::check(&format!("const '{cname}'"), shape)
                            .map_err(|e| located(e, *at))?;
                        (shape.clone(), v.clone())
                    }
                    ConstVal::Blob {
                        shape,
                        path,
                        offset,
                    } => {
                        crate::shape::check(&format!("const '{cname}'"), shape)
                            .map_err(|e| located(e, *at))?;
                        (
                            shape.clone(),
                            reader(path)?.read_fp16(*offset, crate::shape::numel(shape))?,
                        )
                    }
                    ConstVal::Lit(l) => {
                        return Err(ferr(
                            *at,
                            format!("const '{cname}' ({}) is used as a tensor", l.mil_value()),
                        ))
                    }
                };
                if let Some(bad) = vals.iter().position(|v| !v.is_finite()) {
                    return Err(ferr(
                        *at,
                        format!("const '{cname}': element {bad} is not finite"),
                    ));
                }
                values.insert(
                    cname,
                    Value {
                        node: nodes.len(),
                        port: 0,
                    },
                );
                let ty = TensorType::fp16(shape.clone());
                nodes.push(Node {
                    op: Op::Const(io::Const {
                        shape,
                        values: vals,
                    }),
                    inputs: vec![],
                    outputs: vec![ty],
                });
            }
            (Err(st), Some((op, targs))) => {
                let m = op.family().mil();
                let lookup = |n: &String| {
                    values
                        .get(n.as_str())
                        .copied()
                        .ok_or_else(|| ferr(st.at, format!("'{n}' is not defined before use")))
                };
                let node_inputs: Vec<Value> = match &m.inputs {
                    MilInputs::Named(keys) => {
                        if let Some((k, _, _)) = targs
                            .iter()
                            .find(|(k, _, t)| *t || !keys.contains(&k.as_str()))
                        {
                            return Err(ferr(
                                st.at,
                                format!("{}: unexpected argument '{k}'", st.op),
                            ));
                        }
                        let mut v = Vec::new();
                        for key in keys {
                            match targs.iter().find(|(k, _, _)| k == key) {
                                Some((_, vs, _)) => v.push(lookup(&vs[0])?),
                                None => break,
                            }
                        }
                        if v.len() != targs.len() {
                            return Err(ferr(
                                st.at,
                                format!(
                                    "{}: arguments {:?} are incomplete",
                                    st.op,
                                    targs.iter().map(|t| &t.0).collect::<Vec<_>>()
                                ),
                            ));
                        }
                        v
                    }
                    MilInputs::Tuple(key) => match targs.as_slice() {
                        [(k, vs, true)] if k == key => {
                            vs.iter().map(lookup).collect::<Result<_>>()?
                        }
                        _ => {
                            return Err(ferr(
                                st.at,
                                format!("{}: expects one tuple argument '{key}'", st.op),
                            ))
                        }
                    },
                };
                let in_types: Vec<TensorType> = node_inputs
                    .iter()
                    .map(|v| nodes[v.node].outputs[v.port].clone())
                    .collect();
                let outputs = op
                    .family()
                    .infer(&in_types)
                    .map_err(|e| located(e, st.at))?;
                // The builder's per-tensor limits (extents, elements) hold for loaded programs too.
                for o in &outputs {
                    crate::shape::check(&st.op, &o.shape).map_err(|e| located(e, st.at))?;
                }
                let declared: Vec<TensorType> = st
                    .outs
                    .iter()
                    .map(|(dt, s, _)| {
                        Ok(TensorType {
                            dtype: dtype_of(dt, st.at)?,
                            shape: s.clone(),
                        })
                    })
                    .collect::<Result<_>>()?;
                if declared != outputs {
                    return Err(ferr(st.at, format!("declared output types {declared:?} differ from the inferred {outputs:?}")));
                }
                for (port, (_, _, n)) in st.outs.iter().enumerate() {
                    values.insert(
                        n,
                        Value {
                            node: nodes.len(),
                            port,
                        },
                    );
                }
                nodes.push(Node {
                    op,
                    inputs: node_inputs,
                    outputs,
                });
            }
            (Err(st), None) => return Err(ferr(st.at, "internal: statement not rebuilt".into())),
        }
    }
    let outputs = syn
        .outputs
        .iter()
        .map(|(n, at)| {
            values
                .get(n.as_str())
                .map(|v| (n.clone(), *v))
                .ok_or_else(|| ferr(*at, format!("output '{n}' is not defined")))
        })
        .collect::<Result<Vec<_>>>()?;
    let graph = Graph {
        nodes,
        inputs,
        outputs,
    };
    graph.check_limits(&limits, &mil_file.display().to_string())?;
    Ok(graph)
}
