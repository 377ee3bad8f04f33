//! `model.mil` text (+ its weight files) → [`Graph`]. Accepts the dialect [`super::print`]
//! writes and the same dialect produced elsewhere: `program(1.0)` … `program(1.5)`, `ios16` …
//! `ios18` functions, `const()` statements, `BLOBFILE` references to any weight file under
//! `@model_path/`, tuple arguments and outputs, literals inline in arguments, and both literal
//! spellings (`string("x")`, `fp16(0x1p+0)`, `uint64(64)` and the older `tensor<string, []>("x")`,
//! `tensor<fp16, []>(0x1p+0)`, `tensor<uint64, []>(64)`), with any whitespace. Every statement's
//! declared output types are checked against the op's shape rule, every op against the opset,
//! and every error names the file, the line and the column; no input makes it panic.

mod build;
mod lex;

use std::borrow::Cow;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use half::f16;

use super::blob::{BlobReader, BlobType};
use super::literal::{parse_float, Literal};
use super::{MilArgs, MilInputs};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{Graph, Node, Value};
use crate::ops::{io, Op, TensorType};
use crate::targets::Opset;
use build::build;
use lex::{error_at, lex, Lexer, Pos, Tok};

/// A parsed program: its graph, function opset and `program(…)` version.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    pub graph: Graph,
    pub opset: Opset,
    pub version: String,
}

/// One weight file: its bytes and its path (named in errors).
pub type WeightFile<'w> = (Cow<'w, [u8]>, PathBuf);

/// Program header versions accepted (`program(1.5)` is recorded on M5 machines).
const VERSIONS: &[&str] = &["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"];

/// Highest rank of an inline blob argument (a rank-5 weight's palette has rank 7).
const MAX_BLOB_RANK: usize = 7;

/// One literal atom inside a typed value.
#[derive(Clone, Debug)]
enum Atom {
    Num(String),
    Word(String),
    Str(String),
}

/// A typed value as written, before we know its use.
#[derive(Clone, Debug)]
enum Typed {
    /// `fp16(…)`, `tensor<int32, [2]>([1, 2])`, `tensor<string, []>("x")`: atoms in C order.
    Inline {
        dtype: String,
        shape: Vec<usize>,
        atoms: Vec<Atom>,
    },
    /// `tensor<fp16, [4]>(BLOBFILE(path = …, offset = …))`.
    Blob {
        dtype: String,
        shape: Vec<usize>,
        path: String,
        offset: u64,
    },
}

/// A constant: a compile-time literal, an inline fp16 tensor, or an fp16 tensor in a weight file.
#[derive(Clone, Debug)]
enum ConstVal {
    Lit(Literal),
    Dense(Vec<usize>, Arc<Vec<f16>>),
    Blob {
        shape: Vec<usize>,
        path: String,
        offset: u64,
    },
}

/// One argument: (keyword, referenced names, written as a tuple).
type Arg = (String, Vec<String>, bool);
/// One inline `BLOBFILE` tensor argument: (keyword, dtype, shape, weight path, descriptor offset).
type BlobArg = (String, String, Vec<usize>, String, u64);

/// One op statement.
struct Stmt {
    outs: Vec<(String, Vec<usize>, String)>, // (dtype, shape, name)
    op: String,
    args: Vec<Arg>,
    blobs: Vec<BlobArg>,
    name: String,
    at: Pos,
}

/// The syntax of one program: header facts, ports, constants and statements in order.
struct Syntax {
    version: String,
    opset: Opset,
    params: Vec<(String, Vec<usize>, String, Pos)>,
    consts: HashMap<String, (ConstVal, Pos)>,
    order: Vec<Result<String, Stmt>>, // Ok(const name) | Err(op statement)
    outputs: Vec<(String, Pos)>,
}

/// Parse MIL text (`mil_file` names it in errors) whose `BLOBFILE`s all reference
/// `@model_path/weights.bin`, given as `weights` (`weights_file` in errors), into a graph.
pub fn parse(text: &str, mil_file: &Path, weights: &[u8], weights_file: &Path) -> Result<Graph> {
    let mut one = |path: &str| {
        if path != super::print::WEIGHTS_PATH {
            return Err(Error::format(
                mil_file,
                None,
                format!(
                    "BLOBFILE path '{path}' is not {}",
                    super::print::WEIGHTS_PATH
                ),
            ));
        }
        Ok((Cow::Borrowed(weights), weights_file.to_path_buf()))
    };
    parse_program(text, mil_file, &mut one).map(|p| p.graph)
}

/// Parse MIL text into a graph plus its opset and version; `weights` maps each distinct
/// `BLOBFILE` path (as written) to the file's bytes and its path for errors (called once per path).
pub fn parse_program<'w>(
    text: &str,
    mil_file: &Path,
    weights: &mut dyn FnMut(&str) -> Result<WeightFile<'w>>,
) -> Result<Parsed> {
    let syn = syntax(&mut lex(text, mil_file)?)?;
    let mut files: BTreeMap<String, WeightFile<'w>> = BTreeMap::new();
    let const_paths = syn.consts.values().filter_map(|(c, at)| {
        if let ConstVal::Blob { path, .. } = c {
            Some((path, *at))
        } else {
            None
        }
    });
    let arg_paths = syn
        .order
        .iter()
        .filter_map(|o| o.as_ref().err())
        .flat_map(|s| s.blobs.iter().map(|b| (&b.3, s.at)));
    let uses: Vec<(String, Pos)> = const_paths
        .chain(arg_paths)
        .map(|(p, at)| (p.clone(), at))
        .collect();
    for (p, at) in uses {
        if let Entry::Vacant(slot) = files.entry(p) {
            // Errors about the path itself point at its first use.
            let file = weights(slot.key()).map_err(|e| match e {
                Error::Format {
                    file,
                    msg,
                    offset: None,
                } if file == mil_file => error_at(mil_file, at, msg),
                e => e,
            })?;
            slot.insert(file);
        }
    }
    let mut readers = HashMap::new();
    for (p, (bytes, file)) in &files {
        readers.insert(p.as_str(), BlobReader::new(bytes, file)?);
    }
    let graph = build(&syn, mil_file, &readers)?;
    Ok(Parsed {
        graph,
        opset: syn.opset,
        version: syn.version,
    })
}

/// The file a `BLOBFILE` path (`@model_path/<relative path>`) names inside program directory
/// `dir`; paths outside `@model_path`, absolute or climbing out with `..` are a format error of `mil_file`.
pub fn weight_file(dir: &Path, mil_file: &Path, path: &str) -> Result<PathBuf> {
    let rel = path.strip_prefix("@model_path/").map(Path::new);
    match rel {
        Some(r)
            if r.components().count() > 0
                && r.components().all(|c| matches!(c, Component::Normal(_))) =>
        {
            Ok(dir.join(r))
        }
        _ => Err(Error::format(
            mil_file,
            None,
            format!("BLOBFILE path '{path}' is not a file under @model_path/"),
        )),
    }
}

/// Read one atom: a number, a word (`true`, `inf`) or a string.
fn atom(lx: &mut Lexer) -> Result<Atom> {
    let at = lx.at();
    match lx.next()? {
        Tok::Num(s) => Ok(Atom::Num(s)),
        Tok::Ident(s) => Ok(Atom::Word(s)),
        Tok::Str(s) => Ok(Atom::Str(s)),
        t => Err(error_at(
            lx.file,
            at,
            format!("expected a value, found {t:?}"),
        )),
    }
}

/// Atoms of a possibly nested `[…]` list, flattened in C order.
fn atoms(lx: &mut Lexer, out: &mut Vec<Atom>, depth: usize) -> Result<()> {
    if depth > MAX_BLOB_RANK {
        return Err(lx.err(format!("lists nested deeper than {MAX_BLOB_RANK}")));
    }
    if !lx.is_punct('[') {
        out.push(atom(lx)?);
        return Ok(());
    }
    lx.punct('[')?;
    lx.list(']', |lx| atoms(lx, out, depth + 1))?;
    Ok(())
}

/// A typed value: `dtype(atom)`, `tensor<…>(atom | […] | BLOBFILE(…))`.
fn typed(lx: &mut Lexer) -> Result<Typed> {
    let tensor_form = lx.is_ident("tensor");
    let (dtype, shape) = lx.ty()?;
    lx.punct('(')?;
    let v = if lx.is_ident("BLOBFILE") {
        if !tensor_form || shape.is_empty() {
            return Err(lx.err("BLOBFILE needs a tensor type of rank >= 1"));
        }
        let at = lx.at();
        lx.keyword("BLOBFILE")?;
        lx.punct('(')?;
        let fields = lx.list(')', |lx| {
            let k = lx.ident()?;
            lx.punct('=')?;
            Ok((k, typed(lx)?))
        })?;
        let field = |k: &str| {
            fields
                .iter()
                .find(|(n, _)| n == k)
                .map(|f| &f.1)
                .ok_or_else(|| error_at(lx.file, at, format!("BLOBFILE has no '{k}'")))
        };
        let path = scalar(field("path")?, "string").and_then(|a| match a {
            Atom::Str(s) => Ok(s.clone()),
            _ => Err("path must be a string".into()),
        });
        let path = path.map_err(|m| error_at(lx.file, at, format!("BLOBFILE {m}")))?;
        let offset = scalar(field("offset")?, "uint64").and_then(|a| match a {
            Atom::Num(n) => n
                .parse::<u64>()
                .map_err(|_| format!("offset '{n}' is not a uint64")),
            _ => Err("offset must be a uint64".into()),
        });
        let offset = offset.map_err(|m| error_at(lx.file, at, format!("BLOBFILE {m}")))?;
        Typed::Blob {
            dtype,
            shape,
            path,
            offset,
        }
    } else {
        let mut out = Vec::new();
        atoms(lx, &mut out, 0)?;
        Typed::Inline {
            dtype,
            shape,
            atoms: out,
        }
    };
    lx.punct(')')?;
    Ok(v)
}

/// The one atom of a rank-0 inline value of type `dtype`.
fn scalar<'t>(t: &'t Typed, dtype: &str) -> std::result::Result<&'t Atom, String> {
    match t {
        Typed::Inline {
            dtype: d,
            shape,
            atoms,
        } if d == dtype && shape.is_empty() && atoms.len() == 1 => Ok(&atoms[0]),
        _ => Err(format!("value must be a {dtype} scalar")),
    }
}

/// An fp16 value from an atom: hex floats must be exact fp16 values, decimals round to nearest.
fn fp16_of(a: &Atom) -> std::result::Result<f16, String> {
    let s = match a {
        Atom::Num(s) | Atom::Word(s) => s,
        Atom::Str(s) => return Err(format!("\"{s}\" is not a number")),
    };
    let v = parse_float(s).ok_or_else(|| format!("'{s}' is not a float"))?;
    let h = f16::from_f64(v);
    let hex = s.trim_start_matches(['-', '+']).starts_with("0x");
    if !h.is_finite() || (hex && h.to_f64() != v) {
        return Err(format!("fp16 literal {s} is not a finite fp16 value"));
    }
    Ok(h)
}

/// An integer of type `T` from an atom.
fn int_of<T: TryFrom<i64>>(a: &Atom, dtype: &str) -> std::result::Result<T, String> {
    match a {
        Atom::Num(s) => s
            .parse::<i64>()
            .ok()
            .and_then(|v| T::try_from(v).ok())
            .ok_or_else(|| format!("'{s}' is not a {dtype} value")),
        _ => Err(format!("expected a {dtype} value")),
    }
}

/// A scalar literal of `dtype` from its atom.
fn literal(dtype: &str, a: &Atom) -> std::result::Result<Literal, String> {
    Ok(match dtype {
        "fp16" => Literal::Fp16(fp16_of(a)?.to_f32()),
        "fp32" => {
            let Atom::Num(s) = a else {
                return Err("expected an fp32 value".into());
            };
            let v = parse_float(s).ok_or_else(|| format!("'{s}' is not a float"))?;
            if !(v as f32).is_finite() || (v as f32) as f64 != v {
                return Err(format!("fp32 literal {s} is not a finite fp32 value"));
            }
            Literal::Fp32(v as f32)
        }
        "int32" => Literal::Int32(int_of(a, dtype)?),
        "int8" => Literal::Int8(int_of(a, dtype)?),
        "uint32" => Literal::Uint32(int_of(a, dtype)?),
        "bool" => match a {
            Atom::Word(w) if w == "true" => Literal::Bool(true),
            Atom::Word(w) if w == "false" => Literal::Bool(false),
            _ => return Err("expected true or false".into()),
        },
        "string" => match a {
            Atom::Str(s) => Literal::Str(s.clone()),
            _ => return Err("expected a string".into()),
        },
        o => return Err(format!("unsupported literal type '{o}'")),
    })
}

/// The constant a typed value denotes.
fn const_of(t: Typed) -> std::result::Result<ConstVal, String> {
    match t {
        Typed::Blob {
            dtype,
            shape,
            path,
            offset,
        } if dtype == "fp16" => Ok(ConstVal::Blob {
            shape,
            path,
            offset,
        }),
        Typed::Blob { dtype, .. } => Err(format!("BLOBFILE constants must be fp16, got {dtype}")),
        Typed::Inline {
            dtype,
            shape,
            atoms,
        } if shape.is_empty() => match atoms.as_slice() {
            [a] => literal(&dtype, a).map(ConstVal::Lit),
            _ => Err(format!("{} values for a scalar", atoms.len())),
        },
        Typed::Inline {
            dtype,
            shape,
            atoms,
        } => {
            let n = shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .ok_or("tensor too large")?;
            if atoms.len() != n {
                return Err(format!(
                    "{} values for a tensor of shape {shape:?}",
                    atoms.len()
                ));
            }
            match (dtype.as_str(), shape.len()) {
                ("int32", 1) => atoms
                    .iter()
                    .map(|a| int_of(a, "int32"))
                    .collect::<std::result::Result<_, _>>()
                    .map(|v| ConstVal::Lit(Literal::Ints(v))),
                ("fp16", _) => atoms
                    .iter()
                    .map(fp16_of)
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map(|v| ConstVal::Dense(shape, Arc::new(v))),
                _ => Err(format!(
                    "inline tensor literals must be rank-1 int32 or fp16, got {dtype} {shape:?}"
                )),
            }
        }
    }
}

/// `[key = value, ...]` attributes of a statement.
fn attributes(lx: &mut Lexer) -> Result<Vec<(String, Typed, Pos)>> {
    lx.punct('[')?;
    lx.list(']', |lx| {
        let at = lx.at();
        let k = lx.ident()?;
        lx.punct('=')?;
        Ok((k, typed(lx)?, at))
    })
}

/// The whole text's syntax, checked for names defined twice.
fn syntax(lx: &mut Lexer) -> Result<Syntax> {
    lx.keyword("program")?;
    lx.punct('(')?;
    let at = lx.at();
    let version = match lx.next()? {
        Tok::Num(v) if VERSIONS.contains(&v.as_str()) => v,
        t => {
            return Err(error_at(
                lx.file,
                at,
                format!("program version {t:?} is not supported (expected 1.0 to 1.5)"),
            ))
        }
    };
    lx.punct(')')?;
    if lx.is_punct('[') {
        lx.skip_group('[', ']')?;
    }
    lx.punct('{')?;
    lx.keyword("func")?;
    let at = lx.at();
    let fname = lx.ident()?;
    if fname != "main" {
        return Err(error_at(
            lx.file,
            at,
            format!("function is '{fname}', expected 'main'"),
        ));
    }
    lx.punct('<')?;
    let at = lx.at();
    let opset = lx.ident()?;
    let opset = Opset::parse(&opset).map_err(|_| {
        error_at(
            lx.file,
            at,
            format!("opset '{opset}' is not supported (expected ios16, ios17 or ios18)"),
        )
    })?;
    lx.punct('>')?;
    lx.punct('(')?;
    let params = lx.list(')', |lx| {
        let at = lx.at();
        let (dt, shape) = lx.ty()?;
        Ok((dt, shape, lx.ident()?, at))
    })?;
    lx.punct('{')?;

    let mut defined: HashSet<String> = params.iter().map(|p| p.2.clone()).collect();
    if defined.len() != params.len() {
        return Err(lx.err("an input name is declared twice"));
    }
    let mut syn = Syntax {
        version,
        opset,
        params,
        consts: HashMap::new(),
        order: Vec::new(),
        outputs: Vec::new(),
    };
    while !lx.is_punct('}') {
        let at = lx.at();
        let mut outs = Vec::new();
        loop {
            let (dt, shape) = lx.ty()?;
            let name_at = lx.at();
            let n = lx.ident()?;
            if !defined.insert(n.clone()) {
                return Err(error_at(
                    lx.file,
                    name_at,
                    format!("'{n}' is defined twice"),
                ));
            }
            outs.push((dt, shape, n));
            if lx.is_punct('=') {
                break;
            }
            lx.punct(',')?;
        }
        lx.punct('=')?;
        let op = lx.ident()?;
        lx.punct('(')?;
        let (mut args, mut blobs): (Vec<Arg>, Vec<BlobArg>) = (Vec::new(), Vec::new());
        lx.list(')', |lx| {
            let k_at = lx.at();
            let k = lx.ident()?;
            if args.iter().any(|a| a.0 == k) || blobs.iter().any(|b| b.0 == k) {
                return Err(error_at(
                    lx.file,
                    k_at,
                    format!("{op}: argument '{k}' is given twice"),
                ));
            }
            lx.punct('=')?;
            let v_at = lx.at();
            if lx.is_punct('(') {
                lx.punct('(')?;
                let vs = lx.list(')', Lexer::ident)?;
                args.push((k, vs, true));
            } else if lx.is_ident("tensor") || lx.peek2() == Some(&Tok::Punct('(')) {
                match typed(lx)? {
                    Typed::Blob {
                        dtype,
                        shape,
                        path,
                        offset,
                    } => blobs.push((k, dtype, shape, path, offset)),
                    t => {
                        // An inline literal argument becomes an anonymous constant.
                        let name = format!("<{k} at line {}, column {}>", v_at.line, v_at.col);
                        let c = const_of(t)
                            .map_err(|m| error_at(lx.file, v_at, format!("argument '{k}': {m}")))?;
                        syn.consts.insert(name.clone(), (c, v_at));
                        syn.order.push(Ok(name.clone()));
                        args.push((k, vec![name], false));
                    }
                }
            } else {
                args.push((k, vec![lx.ident()?], false));
            }
            Ok(())
        })?;
        let (mut name, mut val) = (None, None);
        for (k, v, k_at) in attributes(lx)? {
            let slot = match k.as_str() {
                "name" => &mut name,
                "val" if op == io::CONST => &mut val,
                _ => {
                    return Err(error_at(
                        lx.file,
                        k_at,
                        format!("{op}: unexpected attribute '{k}'"),
                    ))
                }
            };
            if slot.replace((v, k_at)).is_some() {
                return Err(error_at(
                    lx.file,
                    k_at,
                    format!("{op}: attribute '{k}' is given twice"),
                ));
            }
        }
        let name = match name {
            Some((v, a)) => match scalar(&v, "string") {
                Ok(Atom::Str(s)) => s.clone(),
                _ => return Err(error_at(lx.file, a, "the name attribute must be a string")),
            },
            None => {
                return Err(error_at(
                    lx.file,
                    at,
                    format!("{op} statement has no name attribute"),
                ))
            }
        };
        if op == io::CONST {
            let (Some((v, v_at)), [(dt, shape, cname)], true, true) =
                (val, outs.as_slice(), args.is_empty(), blobs.is_empty())
            else {
                return Err(error_at(
                    lx.file,
                    at,
                    "const takes no arguments, one output and a 'val' attribute",
                ));
            };
            let (vdt, vshape) = match &v {
                Typed::Inline { dtype, shape, .. } | Typed::Blob { dtype, shape, .. } => {
                    (dtype, shape)
                }
            };
            if vdt != dt || vshape != shape {
                return Err(error_at(lx.file, v_at, format!("const value type {vdt} {vshape:?} differs from the declared type {dt} {shape:?}")));
            }
            let c = const_of(v).map_err(|m| error_at(lx.file, v_at, m))?;
            syn.consts.insert(cname.clone(), (c, at));
            syn.order.push(Ok(cname.clone()));
        } else {
            syn.order.push(Err(Stmt {
                outs,
                op,
                args,
                blobs,
                name,
                at,
            }));
        }
        lx.punct(';')?;
    }
    lx.punct('}')?;
    let at = lx.at();
    if lx.next()? != Tok::Arrow {
        return Err(error_at(
            lx.file,
            at,
            "expected '->' after the function body",
        ));
    }
    let outs_at = lx.at();
    lx.punct('(')?;
    syn.outputs = lx.list(')', |lx| {
        let at = lx.at();
        Ok((lx.ident()?, at))
    })?;
    if syn.outputs.is_empty() {
        return Err(error_at(lx.file, outs_at, "the function has no outputs"));
    }
    lx.punct(';')?;
    lx.punct('}')?;
    if lx.peek().is_some() {
        return Err(lx.err("text after the end of the program"));
    }
    Ok(syn)
}

/// The message of an error raised while rebuilding a statement, without its file prefix.
fn message(e: Error) -> String {
    match e {
        Error::Format { msg, .. } => msg,
        e => e.to_string(),
    }
}
