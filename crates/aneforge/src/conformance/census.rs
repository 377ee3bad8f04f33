//! The capability census: one entry per MIL op the op registry prints ([`crate::ops::mil_op_names`],
//! so new ops appear without a hand list), with its IR family, its MIL spelling, the opsets that
//! have it, its status on each ANE family (targets floors), the result of a reference-executor
//! check run now on its conformance-corpus case, and its hardware status from a selfcheck report
//! ("unverified" without one). `aneforge ops` prints it; `docs/op-catalog.md` is [`markdown`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Serialize;

use crate::conformance::corpus::conformance;
use crate::conformance::selfcheck::{self, errors, feed, outputs, Report, TOLERANCE};
use crate::error::Result;
use crate::exec::{reference::Reference, Executor, Precision};
use crate::graph::Graph;
use crate::mil::{parse, MilInputs};
use crate::ops::{mil_op_names, Op};
use crate::program::Program;
use crate::targets::{op_status, Family, Opset, Target};

/// The ANE families that run MIL programs (OLDER rejects every op).
pub const FAMILIES: [Family; 4] = [Family::A13, Family::A14, Family::A15, Family::A16];

/// The reference-executor check of an op's conformance case, run when the census is built: the
/// case lowers, `parse(print(p)) == p`, and its fp16 run agrees with the unrounded fp32 run
/// within the selfcheck tolerance (max |fp16 − fp32| / max(1, max |fp32|) ≤ 1e-2).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Conformance {
    /// The corpus case used (the op's own case, else the first case whose program contains it).
    pub case: Option<&'static str>,
    /// `pass`, `fail` (over the tolerance or round trip differs), `error` (with `detail`) or `no case`.
    pub result: &'static str,
    /// max |fp16 − fp32| / max(1, max |fp32|) when both runs finished.
    pub rel_error: Option<f64>,
    pub detail: Option<String>,
}

/// One op of the census.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpCapability {
    /// MIL op name.
    pub name: &'static str,
    /// The IR op family (the `Op` variant) that prints it, from its corpus case.
    pub family: String,
    /// Its MIL spelling: tensor arguments, then compile-time parameters after `;`.
    pub mil: String,
    /// The opsets that print it with our signature.
    pub opsets: Vec<&'static str>,
    /// `native`, `decompose` or `reject` per ANE family name.
    pub status: BTreeMap<&'static str, &'static str>,
    /// Status on the requested target's family (only with a target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_status: Option<&'static str>,
    pub reference: Conformance,
    /// From a hardware selfcheck report: `pass (...)`, `fail (...)`, else `unverified`.
    pub hardware: String,
}

/// The census of every registered MIL op, with hardware results from `report` and, with `target`, its family's status.
pub fn census(report: Option<&Report>, target: Option<Target>) -> Result<Vec<OpCapability>> {
    let cases = conformance()?;
    let graphs: Vec<Graph> = cases
        .iter()
        .map(|(_, t)| Graph::from_outputs(&[(None, t.clone())]))
        .collect::<Result<_>>()?;
    let hardware: HashMap<&str, String> = selfcheck::census(report).into_iter().collect();
    let mut checks: HashMap<usize, Conformance> = HashMap::new();
    let mut out = Vec::new();
    for name in mil_op_names() {
        let node_of = |g: &Graph| {
            g.nodes
                .iter()
                .find(|n| n.op.family().mil().op == name)
                .map(|n| n.op.clone())
        };
        let found = cases
            .iter()
            .position(|(c, _)| *c == name)
            .filter(|&i| node_of(&graphs[i]).is_some())
            .or_else(|| graphs.iter().position(|g| node_of(g).is_some()));
        let op = found.and_then(|i| node_of(&graphs[i]));
        let reference = match found {
            Some(i) => checks
                .entry(i)
                .or_insert_with(|| check(cases[i].0, &graphs[i]))
                .clone(),
            None => Conformance {
                case: None,
                result: "no case",
                rel_error: None,
                detail: None,
            },
        };
        out.push(OpCapability {
            name,
            family: op.as_ref().map_or("unknown".into(), variant),
            mil: op.as_ref().map_or(format!("{name}(…)"), spelling),
            opsets: Opset::ALL
                .into_iter()
                .filter(|o| o.prints(name))
                .map(Opset::name)
                .collect(),
            status: FAMILIES
                .iter()
                .map(|&f| (f.name(), op_status(name, f).name()))
                .collect(),
            target_status: target.map(|t| op_status(name, t.family).name()),
            reference,
            hardware: hardware
                .get(name)
                .cloned()
                .unwrap_or_else(|| "unverified".into()),
        });
    }
    Ok(out)
}

/// The `Op` variant name (`Unary`, `Conv` ...).
fn variant(op: &Op) -> String {
    format!("{op:?}")
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// `conv(x, weight, bias; dilations, groups, pad, pad_type, strides)` (parameters as the family lists them).
fn spelling(op: &Op) -> String {
    let m = op.family().mil();
    let mut args: Vec<String> = match &m.inputs {
        MilInputs::Named(keys) => keys.iter().map(|k| k.to_string()).collect(),
        MilInputs::Tuple(key) => vec![format!("{key} = (…)")],
    };
    args.extend(m.blobs.iter().map(|(k, ..)| k.to_string()));
    let params: Vec<&str> = m.params.iter().map(|(k, _)| *k).collect();
    if params.is_empty() {
        format!("{}({})", m.op, args.join(", "))
    } else {
        format!("{}({}; {})", m.op, args.join(", "), params.join(", "))
    }
}

/// Lower case `name`'s graph, check the parse round trip, and compare its fp16 and fp32 reference runs.
fn check(name: &'static str, g: &Graph) -> Conformance {
    let run = || -> Result<(bool, f64)> {
        let p = Program::lower(g.clone())?;
        let back = parse::parse(
            &p.mil,
            Path::new("model.mil"),
            &p.weights.to_bytes(),
            Path::new("weights.bin"),
        )?;
        let mut got = Vec::new();
        for precision in [Precision::Fp16, Precision::Fp32] {
            let mut net = Reference.load(&p, Path::new("."), precision)?;
            feed(net.as_mut())?;
            net.execute()?;
            got.push(outputs(net.as_ref())?);
        }
        Ok((back == p.graph, errors(&got[0], &got[1]).1))
    };
    match run() {
        Ok((round_trip, rel)) => {
            let pass = round_trip && rel <= TOLERANCE;
            let detail = (!round_trip).then(|| "parse(print(p)) differs from p".to_string());
            Conformance {
                case: Some(name),
                result: if pass { "pass" } else { "fail" },
                rel_error: rel.is_finite().then_some(rel),
                detail,
            }
        }
        Err(e) => Conformance {
            case: Some(name),
            result: "error",
            rel_error: None,
            detail: Some(e.to_string()),
        },
    }
}

/// The census as pretty-printed JSON (a list of objects, fields as in [`OpCapability`]).
pub fn json(caps: &[OpCapability]) -> String {
    serde_json::to_string_pretty(caps).expect("census entries serialise") + "\n"
}

/// The census as a fixed-width text table; with a target only its family's column.
pub fn table(caps: &[OpCapability], target: Option<Target>) -> String {
    let families: Vec<String> = match target {
        Some(t) => vec![t.to_string()],
        None => FAMILIES.iter().map(|f| f.name().to_string()).collect(),
    };
    let mut out = format!("{:<32} {:<12} {:<10}", "op", "family", "opsets");
    for f in &families {
        out += &format!(" {f:<10}");
    }
    out += &format!(" {:<10} hardware\n", "reference");
    for c in caps {
        out += &format!("{:<32} {:<12} {:<10}", c.name, c.family, opset_range(c));
        match c.target_status {
            Some(s) => out += &format!(" {s:<width$}", width = families[0].len().max(10)),
            None => FAMILIES
                .iter()
                .for_each(|f| out += &format!(" {:<10}", c.status[f.name()])),
        }
        out += &format!(" {:<10} {}\n", c.reference.result, c.hardware);
    }
    out
}

/// `ios16+`, `ios18+`, or `none`.
fn opset_range(c: &OpCapability) -> String {
    c.opsets.first().map_or("none".into(), |o| format!("{o}+"))
}

/// `docs/op-catalog.md`: the census without a hardware report, as a Markdown document.
pub fn markdown(caps: &[OpCapability]) -> String {
    let mut out = String::from(
        "# Op catalog\n\n\
         Generated by `aneforge ops --markdown` from the op registry; do not edit by hand \
         (`cargo test -p aneforge --test census` fails when this file differs from the generated one).\n\n\
         - **family**: the IR op family that prints the op; **MIL**: its spelling, tensor arguments then `;` compile-time parameters.\n\
         - **opsets**: the first MIL function opset that has the op with this signature (older opsets decompose or reject it).\n\
         - **A13 … A16**: status per ANE family (native, decompose = rewritten from other ops, reject); OLDER rejects every op.\n\
         - **reference**: the reference-executor check of the op's conformance case, run when this file was generated: \
         parse(print(p)) == p and the fp16 run within 1e-2 (relative) of the unrounded fp32 run. \
         The NumPy-oracle results are in `python/tests/test_conformance.py`.\n\
         - **hardware**: `unverified` unless a selfcheck report from a Mac's ANE is given (`aneforge ops --report FILE`).\n\n",
    );
    out += "| op | family | MIL | opsets | A13 | A14 | A15 | A16 | reference | hardware |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for c in caps {
        let statuses: Vec<&str> = FAMILIES.iter().map(|f| c.status[f.name()]).collect();
        let reference = match c.reference.case {
            Some(case) if case != c.name => format!("{} (case `{case}`)", c.reference.result),
            _ => c.reference.result.to_string(),
        };
        out += &format!(
            "| {} | {} | `{}` | {} | {} | {reference} | {} |\n",
            c.name,
            c.family,
            c.mil,
            opset_range(c),
            statuses.join(" | "),
            c.hardware
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_op_is_listed_with_a_passing_reference_check() {
        let caps = census(None, None).unwrap();
        let names: Vec<&str> = caps.iter().map(|c| c.name).collect();
        assert_eq!(names, mil_op_names());
        let failing: Vec<(&str, &Conformance)> = caps
            .iter()
            .filter(|c| c.reference.result != "pass")
            .map(|c| (c.name, &c.reference))
            .collect();
        assert!(failing.is_empty(), "{failing:?}");
        let relu = caps.iter().find(|c| c.name == "relu").unwrap();
        assert_eq!(
            (
                relu.family.as_str(),
                relu.mil.as_str(),
                relu.hardware.as_str()
            ),
            ("Unary", "relu(x)", "unverified")
        );
        let sin = caps.iter().find(|c| c.name == "sin").unwrap();
        assert_eq!(
            sin.status.values().copied().collect::<Vec<_>>(),
            ["decompose", "decompose", "native", "native"]
        );
        let blockwise = caps
            .iter()
            .find(|c| c.name == "constexpr_blockwise_shift_scale")
            .unwrap();
        assert_eq!(blockwise.opsets, ["ios18"]);
        let conv = caps.iter().find(|c| c.name == "conv").unwrap();
        assert_eq!(
            conv.mil,
            "conv(x, weight, bias; dilations, groups, pad, pad_type, strides)"
        );
    }

    #[test]
    fn a_case_that_overflows_fp16_fails_the_check() {
        // x·10⁵ overflows fp16 (max 65504) for |x| > 0.66 but not fp32: the check must fail, not pass.
        let x = crate::input(&[64]).unwrap();
        let g = Graph::from_outputs(&[(
            None,
            x.mul_scalar(100.0).unwrap().mul_scalar(1000.0).unwrap(),
        )])
        .unwrap();
        let c = check("mul", &g);
        assert_eq!((c.result, c.rel_error), ("fail", None), "{c:?}");
        let fine = Graph::from_outputs(&[(None, x.mul_scalar(100.0).unwrap())]).unwrap();
        assert_eq!(check("mul", &fine).result, "pass");
    }
}
