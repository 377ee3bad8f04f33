//! `model.mil` text (+ weights.bin) → [`Graph`], for the dialect [`super::print`] writes.
//! Every statement's declared output types are checked against the op's shape rule, and
//! every error names the file and the line.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::blob::{BlobReader, BlobType};
use super::literal::{parse_float, round_f16, Literal};
use super::{MilArgs, MilInputs};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{Graph, Node, Value};
use crate::ops::{io, Op, TensorType};

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(String),
    Str(String),
    Punct(char),
    Arrow,
}

struct Lexer<'a> {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    file: &'a Path,
}

fn lex<'a>(src: &str, file: &'a Path) -> Result<Lexer<'a>> {
    let mut toks = Vec::new();
    let b = src.as_bytes();
    let (mut i, mut line) = (0, 1);
    while i < b.len() {
        let c = b[i] as char;
        let start = i;
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c == '/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == '-' && b.get(i + 1) == Some(&b'>') {
            toks.push((Tok::Arrow, line));
            i += 2;
        } else if c.is_ascii_alphabetic() || c == '_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push((Tok::Ident(src[start..i].to_string()), line));
        } else if c.is_ascii_digit() || (c == '-' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit() || *d == b'i')) {
            i += 1;
            while i < b.len() {
                let d = b[i];
                let exp_sign = (d == b'+' || d == b'-') && matches!(b[i - 1], b'p' | b'P' | b'e' | b'E');
                if d.is_ascii_alphanumeric() || d == b'.' || exp_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            toks.push((Tok::Num(src[start..i].to_string()), line));
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += 1;
            }
            if i >= b.len() || b[i] != b'"' {
                return Err(Error::format(file, None, format!("line {line}: unterminated string")));
            }
            toks.push((Tok::Str(src[start + 1..i].to_string()), line));
            i += 1;
        } else if "()[]{}<>,=;".contains(c) {
            toks.push((Tok::Punct(c), line));
            i += 1;
        } else {
            return Err(Error::format(file, None, format!("line {line}: unexpected character '{c}'")));
        }
    }
    Ok(Lexer { toks, pos: 0, file })
}

impl Lexer<'_> {
    fn line(&self) -> usize {
        self.toks.get(self.pos).or(self.toks.last()).map_or(0, |t| t.1)
    }
    fn err(&self, msg: impl Into<String>) -> Error {
        Error::format(self.file, None, format!("line {}: {}", self.line(), msg.into()))
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn next(&mut self) -> Result<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone()).ok_or_else(|| self.err("unexpected end of file"))?;
        self.pos += 1;
        Ok(t)
    }
    fn punct(&mut self, c: char) -> Result<()> {
        match self.next()? {
            Tok::Punct(p) if p == c => Ok(()),
            t => Err(self.err(format!("expected '{c}', found {t:?}"))),
        }
    }
    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }
    fn ident(&mut self) -> Result<String> {
        match self.next()? {
            Tok::Ident(s) => Ok(s),
            t => Err(self.err(format!("expected a name, found {t:?}"))),
        }
    }
    fn keyword(&mut self, k: &str) -> Result<()> {
        let s = self.ident()?;
        if s != k {
            return Err(self.err(format!("expected '{k}', found '{s}'")));
        }
        Ok(())
    }
    fn num(&mut self) -> Result<String> {
        match self.next()? {
            Tok::Num(s) => Ok(s),
            Tok::Ident(s) if s == "inf" => Ok(s),
            t => Err(self.err(format!("expected a number, found {t:?}"))),
        }
    }
    fn int(&mut self) -> Result<i64> {
        let s = self.num()?;
        s.parse().map_err(|_| self.err(format!("'{s}' is not an integer")))
    }
    fn string(&mut self) -> Result<String> {
        match self.next()? {
            Tok::Str(s) => Ok(s),
            t => Err(self.err(format!("expected a string, found {t:?}"))),
        }
    }
    /// Skip a balanced bracketed group starting at the current `open` token.
    fn skip_group(&mut self, open: char, close: char) -> Result<()> {
        self.punct(open)?;
        let mut depth = 1;
        while depth > 0 {
            match self.next()? {
                Tok::Punct(c) if c == open => depth += 1,
                Tok::Punct(c) if c == close => depth -= 1,
                _ => {}
            }
        }
        Ok(())
    }
    /// `tensor<dtype, [d, ...]>` or a scalar dtype name.
    fn ty(&mut self) -> Result<(String, Vec<usize>)> {
        let t = self.ident()?;
        if t != "tensor" {
            return Ok((t, vec![]));
        }
        self.punct('<')?;
        let dt = self.ident()?;
        self.punct(',')?;
        self.punct('[')?;
        let mut dims = Vec::new();
        while !self.is_punct(']') {
            let d = self.int()?;
            dims.push(usize::try_from(d).map_err(|_| self.err(format!("negative extent {d}")))?);
            if !self.is_punct(']') {
                self.punct(',')?;
            }
        }
        self.punct(']')?;
        self.punct('>')?;
        Ok((dt, dims))
    }
}

/// A `const()` value before we know whether it is a parameter or a tensor operand.
#[derive(Clone, Debug)]
enum ConstVal {
    Lit(Literal),
    Blob { shape: Vec<usize>, offset: u64, line: usize },
}

/// One argument: (keyword, referenced names, written as a tuple).
type Arg = (String, Vec<String>, bool);
/// One inline `BLOBFILE` tensor argument: (keyword, dtype, shape, descriptor offset).
type BlobArg = (String, String, Vec<usize>, u64);

struct Stmt {
    outs: Vec<(String, Vec<usize>, String)>, // (dtype, shape, name)
    op: String,
    args: Vec<Arg>,
    blobs: Vec<BlobArg>,
    name: String,
    line: usize,
}

fn scalar_literal(lx: &mut Lexer, dt: &str) -> Result<Literal> {
    lx.keyword(dt)?;
    lx.punct('(')?;
    let lit = match dt {
        "fp16" => {
            let s = lx.num()?;
            let v = parse_float(&s).ok_or_else(|| lx.err(format!("'{s}' is not a float")))?;
            let r = round_f16(v as f32);
            if !r.is_finite() || r as f64 != v {
                return Err(lx.err(format!("fp16 literal {s} is not a finite fp16 value")));
            }
            Literal::Fp16(r)
        }
        "fp32" => {
            let s = lx.num()?;
            let v = parse_float(&s).ok_or_else(|| lx.err(format!("'{s}' is not a float")))?;
            if !(v as f32).is_finite() || (v as f32) as f64 != v {
                return Err(lx.err(format!("fp32 literal {s} is not a finite fp32 value")));
            }
            Literal::Fp32(v as f32)
        }
        "int32" => Literal::Int32(i32::try_from(lx.int()?).map_err(|_| lx.err("int32 literal out of range"))?),
        "int8" => Literal::Int8(i8::try_from(lx.int()?).map_err(|_| lx.err("int8 literal out of range"))?),
        "uint32" => Literal::Uint32(u32::try_from(lx.int()?).map_err(|_| lx.err("uint32 literal out of range"))?),
        "bool" => Literal::Bool(match lx.ident()?.as_str() {
            "true" => true,
            "false" => false,
            o => return Err(lx.err(format!("'{o}' is not a bool"))),
        }),
        "string" => Literal::Str(lx.string()?),
        o => return Err(lx.err(format!("unsupported literal type '{o}'"))),
    };
    lx.punct(')')?;
    Ok(lit)
}

fn const_value(lx: &mut Lexer, dt: &str, shape: &[usize]) -> Result<ConstVal> {
    let line = lx.line();
    let (vdt, vshape) = if lx.peek() == Some(&Tok::Ident("tensor".into())) { lx.ty()? } else { (dt.to_string(), vec![]) };
    if vdt != dt || vshape != shape {
        return Err(lx.err("const value type differs from the declared type"));
    }
    if shape.is_empty() {
        return Ok(ConstVal::Lit(scalar_literal(lx, dt)?));
    }
    lx.punct('(')?;
    let v = if lx.is_punct('[') {
        if dt != "int32" || shape.len() != 1 {
            return Err(lx.err(format!("inline tensor literals must be rank-1 int32, got {dt} {shape:?}")));
        }
        lx.punct('[')?;
        let mut items = Vec::new();
        while !lx.is_punct(']') {
            items.push(i32::try_from(lx.int()?).map_err(|_| lx.err("int32 out of range"))?);
            if !lx.is_punct(']') {
                lx.punct(',')?;
            }
        }
        lx.punct(']')?;
        if items.len() != shape[0] {
            return Err(lx.err(format!("{} values for a tensor of shape {shape:?}", items.len())));
        }
        ConstVal::Lit(Literal::Ints(items))
    } else {
        if dt != "fp16" {
            return Err(lx.err(format!("BLOBFILE constants must be fp16, got {dt}")));
        }
        ConstVal::Blob { shape: shape.to_vec(), offset: blobfile(lx)?, line }
    };
    lx.punct(')')?;
    Ok(v)
}

/// `BLOBFILE(path = string("@model_path/weights.bin"), offset = uint64(N))` → N.
fn blobfile(lx: &mut Lexer) -> Result<u64> {
    lx.keyword("BLOBFILE")?;
    lx.punct('(')?;
    lx.keyword("path")?;
    lx.punct('=')?;
    lx.keyword("string")?;
    lx.punct('(')?;
    let path = lx.string()?;
    if path != super::print::WEIGHTS_PATH {
        return Err(lx.err(format!("BLOBFILE path '{path}' is not {}", super::print::WEIGHTS_PATH)));
    }
    lx.punct(')')?;
    lx.punct(',')?;
    lx.keyword("offset")?;
    lx.punct('=')?;
    lx.keyword("uint64")?;
    lx.punct('(')?;
    let off = lx.int()?;
    lx.punct(')')?;
    lx.punct(')')?;
    u64::try_from(off).map_err(|_| lx.err("negative offset"))
}

/// Highest rank of an inline blob argument (a rank-5 weight's palette has rank 7).
const MAX_BLOB_RANK: usize = 7;

/// Parse MIL text (`mil_file` names it in errors) with its weight blob into a graph.
pub fn parse(text: &str, mil_file: &Path, weights: &[u8], weights_file: &Path) -> Result<Graph> {
    let lx = &mut lex(text, mil_file)?;
    lx.keyword("program")?;
    lx.skip_group('(', ')')?;
    if lx.is_punct('[') {
        lx.skip_group('[', ']')?;
    }
    lx.punct('{')?;
    lx.keyword("func")?;
    let fname = lx.ident()?;
    if fname != "main" {
        return Err(lx.err(format!("function is '{fname}', expected 'main'")));
    }
    lx.punct('<')?;
    let opset = lx.ident()?;
    if opset != super::print::OPSET {
        return Err(lx.err(format!("opset '{opset}' is not supported (expected {})", super::print::OPSET)));
    }
    lx.punct('>')?;
    lx.punct('(')?;
    let mut params = Vec::new();
    while !lx.is_punct(')') {
        let (dt, shape) = lx.ty()?;
        params.push((dt, shape, lx.ident()?));
        if !lx.is_punct(')') {
            lx.punct(',')?;
        }
    }
    lx.punct(')')?;
    lx.punct('{')?;

    let mut consts: HashMap<String, ConstVal> = HashMap::new();
    let mut order: Vec<Result<String, Stmt>> = Vec::new(); // Ok(const name) | Err(op statement)
    while !lx.is_punct('}') {
        let line = lx.line();
        let mut outs = Vec::new();
        loop {
            let (dt, shape) = lx.ty()?;
            outs.push((dt, shape, lx.ident()?));
            if lx.is_punct('=') {
                break;
            }
            lx.punct(',')?;
        }
        lx.punct('=')?;
        let op = lx.ident()?;
        lx.punct('(')?;
        let (mut args, mut blobs) = (Vec::new(), Vec::new());
        while !lx.is_punct(')') {
            let k = lx.ident()?;
            lx.punct('=')?;
            if lx.peek() == Some(&Tok::Ident("tensor".into())) {
                let (dt, shape) = lx.ty()?;
                lx.punct('(')?;
                blobs.push((k, dt, shape, blobfile(lx)?));
                lx.punct(')')?;
            } else if lx.is_punct('(') {
                lx.punct('(')?;
                let mut vs = Vec::new();
                while !lx.is_punct(')') {
                    vs.push(lx.ident()?);
                    if !lx.is_punct(')') {
                        lx.punct(',')?;
                    }
                }
                lx.punct(')')?;
                args.push((k, vs, true));
            } else {
                args.push((k, vec![lx.ident()?], false));
            }
            if !lx.is_punct(')') {
                lx.punct(',')?;
            }
        }
        lx.punct(')')?;
        lx.punct('[')?;
        lx.keyword("name")?;
        lx.punct('=')?;
        lx.keyword("string")?;
        lx.punct('(')?;
        let name = lx.string()?;
        lx.punct(')')?;
        if op == "const" {
            if outs.len() != 1 || !args.is_empty() || !blobs.is_empty() {
                return Err(lx.err("const takes no arguments and has one output"));
            }
            lx.punct(',')?;
            lx.keyword("val")?;
            lx.punct('=')?;
            let (dt, shape, cname) = &outs[0];
            let v = const_value(lx, dt, shape)?;
            if consts.insert(cname.clone(), v).is_some() {
                return Err(lx.err(format!("'{cname}' is defined twice")));
            }
            order.push(Ok(cname.clone()));
        } else {
            order.push(Err(Stmt { outs, op, args, blobs, name, line }));
        }
        lx.punct(']')?;
        lx.punct(';')?;
    }
    lx.punct('}')?;
    match lx.next()? {
        Tok::Arrow => {}
        t => return Err(lx.err(format!("expected '->', found {t:?}"))),
    }
    lx.punct('(')?;
    let mut out_names = Vec::new();
    while !lx.is_punct(')') {
        out_names.push(lx.ident()?);
        if !lx.is_punct(')') {
            lx.punct(',')?;
        }
    }
    lx.punct(')')?;
    lx.punct(';')?;
    lx.punct('}')?;
    if lx.peek().is_some() {
        return Err(lx.err("text after the end of the program"));
    }

    let blob = BlobReader::new(weights, weights_file)?;
    let ferr = |line: usize, msg: String| Error::format(mil_file, None, format!("line {line}: {msg}"));
    let dtype_of = |s: &str, line: usize| DType::parse("mil", s).map_err(|_| ferr(line, format!("unsupported dtype '{s}'")));

    // Pass 1: rebuild each op to learn which argument names are tensor operands.
    let mut operand_consts: HashSet<String> = HashSet::new();
    let mut ops: Vec<Option<(Op, Vec<Arg>)>> = Vec::with_capacity(order.len());
    for item in &order {
        let Err(st) = item else {
            ops.push(None);
            continue;
        };
        let mut margs = MilArgs::new(mil_file, st.name.clone(), BTreeMap::new());
        let mut tensor_args = Vec::new();
        let mut scalar_candidates = Vec::new();
        for (k, vs, tuple) in &st.args {
            match consts.get(&vs[0]) {
                Some(ConstVal::Lit(l)) if !tuple => {
                    if matches!(l, Literal::Fp16(_)) {
                        scalar_candidates.push((k.clone(), vs.clone(), false));
                    }
                    margs.params.insert(k.clone(), l.clone());
                }
                _ => tensor_args.push((k.clone(), vs.clone(), *tuple)),
            }
        }
        for (k, dt, shape, offset) in &st.blobs {
            let ty = BlobType::parse(dt).ok_or_else(|| ferr(st.line, format!("argument '{k}': {dt} is not a blob tensor type (fp16, int8, uint4, uint1)")))?;
            // Palettes have rank + 2 axes, so these shapes may exceed the graph's rank limit.
            let n = shape.iter().try_fold(1usize, |a, &d| if d == 0 { None } else { a.checked_mul(d) }).filter(|_| (1..=MAX_BLOB_RANK).contains(&shape.len()));
            let n = n.ok_or_else(|| ferr(st.line, format!("argument '{k}': {shape:?} is not a tensor shape (rank 1..={MAX_BLOB_RANK}, extents >= 1)")))?;
            let payload = blob.read(*offset, ty, n)?;
            if margs.blobs.insert(k.clone(), (shape.clone(), payload)).is_some() {
                return Err(ferr(st.line, format!("{}: argument '{k}' is given twice", st.op)));
            }
        }
        let op = Op::from_mil(&st.op, &mut margs).ok_or_else(|| ferr(st.line, format!("unknown op '{}'", st.op)))??;
        // fp16 scalars the op did not claim as parameters are tensor operands (`mul(x, y = 2.5)`).
        for cand in scalar_candidates {
            if margs.params.remove(&cand.0).is_some() {
                tensor_args.push(cand);
            }
        }
        if let Some(k) = margs.params.keys().chain(margs.blobs.keys()).next() {
            return Err(ferr(st.line, format!("{}: unexpected argument '{k}'", st.op)));
        }
        for (_, vs, _) in &tensor_args {
            operand_consts.extend(vs.iter().filter(|v| consts.contains_key(*v)).cloned());
        }
        ops.push(Some((op, tensor_args)));
    }

    // Pass 2: build the graph in statement order.
    let mut nodes: Vec<Node> = Vec::new();
    let mut values: HashMap<String, Value> = HashMap::new();
    let mut inputs = Vec::new();
    for (dt, shape, name) in params {
        let ty = TensorType { dtype: dtype_of(&dt, 1)?, shape };
        crate::shape::check(&format!("input '{name}'"), &ty.shape)?;
        values.insert(name.clone(), Value { node: nodes.len(), port: 0 });
        inputs.push(nodes.len());
        nodes.push(Node { op: Op::Input(io::Input { name: Some(name), ty: ty.clone() }), inputs: vec![], outputs: vec![ty] });
    }
    for (item, op) in order.iter().zip(ops) {
        match (item, op) {
            (Ok(cname), _) => {
                if !operand_consts.contains(cname) {
                    continue;
                }
                let (shape, values_f16) = match &consts[cname] {
                    ConstVal::Lit(Literal::Fp16(v)) => (vec![], Arc::new(vec![half::f16::from_f32(*v)])),
                    ConstVal::Blob { shape, offset, line } => {
                        crate::shape::check(&format!("const '{cname}' (line {line})"), shape)?;
                        (shape.clone(), blob.read_fp16(*offset, crate::shape::numel(shape))?)
                    }
                    ConstVal::Lit(l) => return Err(Error::format(mil_file, None, format!("const '{cname}' ({}) is used as a tensor", l.mil_value()))),
                };
                if let Some(bad) = values_f16.iter().position(|v| !v.is_finite()) {
                    return Err(Error::format(weights_file, None, format!("const '{cname}': element {bad} is not finite")));
                }
                values.insert(cname.clone(), Value { node: nodes.len(), port: 0 });
                let ty = TensorType::fp16(shape.clone());
                nodes.push(Node { op: Op::Const(io::Const { shape, values: values_f16 }), inputs: vec![], outputs: vec![ty] });
            }
            (Err(st), Some((op, targs))) => {
                let m = op.family().mil();
                let lookup = |n: &String| values.get(n).copied().ok_or_else(|| ferr(st.line, format!("'{n}' is not defined before use")));
                let node_inputs: Vec<Value> = match &m.inputs {
                    MilInputs::Named(keys) => {
                        if let Some((k, _, _)) = targs.iter().find(|(k, _, t)| *t || !keys.contains(&k.as_str())) {
                            return Err(ferr(st.line, format!("{}: unexpected argument '{k}'", st.op)));
                        }
                        let mut v = Vec::new();
                        for key in keys {
                            match targs.iter().find(|(k, _, _)| k == key) {
                                Some((_, vs, _)) => v.push(lookup(&vs[0])?),
                                None => break,
                            }
                        }
                        if v.len() != targs.len() {
                            return Err(ferr(st.line, format!("{}: arguments {:?} are incomplete", st.op, targs.iter().map(|t| &t.0).collect::<Vec<_>>())));
                        }
                        v
                    }
                    MilInputs::Tuple(key) => match targs.as_slice() {
                        [(k, vs, true)] if k == key => vs.iter().map(lookup).collect::<Result<_>>()?,
                        _ => return Err(ferr(st.line, format!("{}: expects one tuple argument '{key}'", st.op))),
                    },
                };
                let in_types: Vec<TensorType> = node_inputs.iter().map(|v| nodes[v.node].outputs[v.port].clone()).collect();
                let outputs = op.family().infer(&in_types).map_err(|e| ferr(st.line, e.to_string()))?;
                let declared: Vec<TensorType> = st.outs.iter().map(|(dt, s, _)| Ok(TensorType { dtype: dtype_of(dt, st.line)?, shape: s.clone() })).collect::<Result<_>>()?;
                if declared != outputs {
                    return Err(ferr(st.line, format!("declared output types {declared:?} differ from the inferred {outputs:?}")));
                }
                for (port, (_, _, n)) in st.outs.iter().enumerate() {
                    if values.insert(n.clone(), Value { node: nodes.len(), port }).is_some() {
                        return Err(ferr(st.line, format!("'{n}' is defined twice")));
                    }
                }
                nodes.push(Node { op, inputs: node_inputs, outputs });
            }
            (Err(_), None) => unreachable!("every op statement was rebuilt in pass 1"),
        }
    }
    let outputs = out_names
        .into_iter()
        .map(|n| values.get(&n).map(|v| (n.clone(), *v)).ok_or_else(|| Error::format(mil_file, None, format!("output '{n}' is not defined"))))
        .collect::<Result<Vec<_>>>()?;
    Ok(Graph { nodes, inputs, outputs })
}
