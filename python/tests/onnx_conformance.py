"""Run ONNX's own backend tests through ``af.load_onnx`` on the reference executor.

Each case ends as ``pass``, ``unsupported`` (a NotImplementedError from the importer naming a
genuine limit, or inputs/expected outputs outside fp16) or ``fail`` (a wrong answer, or any
other error). Expected outputs come from the ``onnx`` package (its reference implementation
and NumPy), never from aneforge. ``coverage_markdown`` renders docs/onnx-coverage.md.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import os
import re
import warnings

import aneforge as af
import numpy as np
from aneforge import _core

FP16_MAX = 65504.0
# Above 2048, fp16 spacing exceeds 1: inputs there are not what the test meant.
FP16_EXACT = 2048.0
# fp16 contract: inputs and every op output are rounded to fp16 (11-bit significand).
RTOL = 1e-2
ATOL_SCALE = 5e-3


@dataclasses.dataclass
class Result:
    name: str
    op: str
    status: str  # pass | unsupported | fail
    reason: str = ""
    # Inputs bound to the case's own values at import (the importer asked for them by name).
    bound: tuple[str, ...] = ()


# The importer's error for a shape-/attribute-determining input left runtime; names the input.
NEEDS_VALUE = re.compile(r"needs its value at import: pass input_values=\{'([^']*)'")


def _to_numpy(v):
    import onnx.numpy_helper as nh

    if hasattr(v, "SerializeToString"):
        return nh.to_array(v)
    return v


def _outside_fp16(a) -> bool:
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return False
    return bool(np.any(~np.isfinite(a)) or np.any(np.abs(a) > FP16_MAX))


def _outside_int32(a) -> bool:
    a = np.asarray(a)
    if a.dtype.kind not in "iu" or not a.size:
        return False
    return bool(a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max)


def _feed(x) -> np.ndarray:
    """A test input as the port takes it: integers and bools as int32, floats as float32."""
    a = np.asarray(_to_numpy(x))
    return a.astype(np.int32 if a.dtype.kind in "biu" else np.float32)


def _short(msg: str) -> str:
    msg = str(msg).splitlines()[0] if str(msg) else ""
    m = re.search(r"unsupported: (.*)", msg)
    return (m.group(1) if m else msg)[:160]


def compare(ours: np.ndarray, expected: np.ndarray) -> str | None:
    """None when `ours` matches `expected` (fp16-contract tolerance for floats, exact otherwise)."""
    expected = np.asarray(expected)
    ours = np.asarray(ours)
    if ours.size != expected.size:
        return f"size {ours.shape} vs expected {expected.shape}"
    ours = ours.reshape(expected.shape)
    if expected.dtype.kind in "biu":
        if not np.array_equal(ours.astype(np.float64), expected.astype(np.float64)):
            bad = int(np.sum(ours.astype(np.float64) != expected.astype(np.float64)))
            return f"{bad} of {expected.size} integer/bool values differ"
        return None
    e = expected.astype(np.float64)
    atol = ATOL_SCALE * max(1.0, float(np.max(np.abs(e))) if e.size else 1.0)
    err = np.abs(ours.astype(np.float64) - e)
    if np.all(err <= atol + RTOL * np.abs(e)):
        return None
    return f"max abs error {float(np.max(err)):.4g} (atol {atol:.3g}, rtol {RTOL})"


LIMIT_PATTERNS = ("rank must be 1..=", "every extent must be in 1..=")
# The run-time error of the exact integer kernels for a result int64 holds but int32 cannot.
INT32_LIMIT = "holds but int32 cannot"
# Typed errors of the segmented plan (issue 12 limits): a bool region output feeding a host op,
# and a non-finite value arriving at a cut.
BOOL_CUT = "program outputs must be fp16 or int32"
INF_CUT = re.compile(r"\(region\): input 'cut\w*': element \d+ = -?inf is not finite")


FP32_REASON = "fp32; values outside fp16 cannot run on the ANE"


def run_model(
    name: str, op: str, model_bytes: bytes, data_sets, fp32_fallback: bool = False, precision="fp16"
) -> Result:
    """Import, compile on the reference executor and check every data set. With `fp32_fallback`
    (model tests), a model whose fp16 run overflows (onnx's reference evaluator peaks above fp16,
    or our fp16 output is inf/NaN where the shipped output is finite) is run again with
    precision="fp32" and passes as FP32_REASON when that run matches."""
    for inputs, outputs in data_sets:
        values = [_to_numpy(v) for v in list(inputs) + list(outputs)]
        if any(v is None or isinstance(v, list | tuple | dict) for v in values):
            return Result(name, op, "unsupported", "sequence/optional types")
        kinds = {np.asarray(v).dtype.kind for v in values}
        if kinds & {"O", "U", "S", "c"}:
            return Result(name, op, "unsupported", "string or complex tensors")
        if any(_outside_fp16(v) for v in values):
            return Result(name, op, "unsupported", "values outside fp16 (inf/NaN or |x| > 65504)")
        if any(np.asarray(v).dtype.kind == "f" and np.any(np.abs(v) > FP16_EXACT) for v in map(_to_numpy, inputs)):
            return Result(name, op, "unsupported", f"inputs beyond fp16's integer precision (|x| > {FP16_EXACT:g})")
        if any(_outside_int32(v) for v in values):
            return Result(name, op, "unsupported", "integer values outside int32 (runtime ints are int32)")
    names = _graph_input_names(model_bytes)
    bound: dict[str, np.ndarray] = {}
    try:
        # af.load_onnx's two steps, keeping the ONNX -> port names to feed inputs by name (an
        # input no output depends on, e.g. Shape's, is not a port of the program).
        while True:
            try:
                ins, outs = _core._onnx_import(model_bytes, [], _binding(bound))
                break
            except NotImplementedError as e:
                # Bind exactly the inputs the importer names as needed at import, from this data set.
                m = NEEDS_VALUE.search(str(e))
                if not m or m.group(1) not in names or m.group(1) in bound:
                    raise
                if len(data_sets) > 1:
                    return _per_data_set(name, op, model_bytes, data_sets, precision)
                bound[m.group(1)] = np.asarray(_to_numpy(data_sets[0][0][names.index(m.group(1))]))
        model = af.compile({port: t for _, port, t in outs}, device="reference", precision=precision)
    except NotImplementedError as e:
        return Result(name, op, "unsupported", _short(e))
    except ValueError as e:
        if any(p in str(e) for p in LIMIT_PATTERNS):
            return Result(name, op, "unsupported", "IR limit: rank 1..5, extents 1..65536")
        return Result(name, op, "fail", f"{type(e).__name__}: {_short(e)}")
    except TypeError as e:
        if BOOL_CUT in str(e):
            return Result(name, op, "unsupported", "a bool value crossing a host cut (plans carry fp16/int32)")
        return Result(name, op, "fail", f"{type(e).__name__}: {_short(e)}")
    except Exception as e:  # noqa: BLE001 - every other error is a failure, recorded with its type
        return Result(name, op, "fail", f"{type(e).__name__}: {_short(e)}")
    except BaseException as e:  # a Rust panic (pyo3 PanicException) is a failure too
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        return Result(name, op, "fail", f"panic: {_short(e)}")
    for inputs, outputs in data_sets:
        by_name = dict(zip(names, inputs))
        ports = {p[0]: tuple(p[1]) for p in model.inputs}
        feeds = {port: _feed(by_name[onnx_name]).reshape(ports[port]) for onnx_name, port, _ in ins if port in ports}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = model(**feeds)
        except ValueError as e:
            if INT32_LIMIT in str(e):
                return Result(name, op, "unsupported", "an integer result outside int32 (runtime ints are int32)")
            if INF_CUT.search(str(e)):
                return Result(name, op, "unsupported", "±inf crossing a host cut (plan slots carry finite fp16)")
            return Result(name, op, "fail", f"run: ValueError: {_short(e)}")
        except Exception as e:  # noqa: BLE001
            return Result(name, op, "fail", f"run: {type(e).__name__}: {_short(e)}")
        except BaseException as e:  # a Rust panic while running
            if isinstance(e, KeyboardInterrupt | SystemExit):
                raise
            return Result(name, op, "fail", f"run: panic: {_short(e)}")
        got = list(got.values()) if isinstance(got, dict) else [got]
        if len(got) != len(outputs):
            return Result(name, op, "fail", f"{len(got)} outputs, expected {len(outputs)}")
        for k, (g, e) in enumerate(zip(got, outputs)):
            bad = compare(g, _to_numpy(e))
            if bad and precision == "fp32":
                return Result(name, op, "fail", f"output {k} (precision fp32): {bad}")
            if bad:
                overflow = not np.all(np.isfinite(g)) and np.all(np.isfinite(_to_numpy(e)))
                peak = _reference_peak(model_bytes, {n: _to_numpy(x) for n, x in by_name.items()})
                if fp32_fallback and (overflow or peak > FP16_MAX):
                    r = run_model(name, op, model_bytes, data_sets, precision="fp32")
                    return Result(name, op, r.status, FP32_REASON if r.status == "pass" else r.reason)
                if peak > FP16_MAX:
                    return Result(
                        name,
                        op,
                        "unsupported",
                        f"intermediate values outside fp16 (onnx reference peak |x| = {peak:.3g})",
                    )
                return Result(name, op, "fail", f"output {k}: {bad}")
    return Result(name, op, "pass", bound=tuple(bound))


def _graph_input_names(model_bytes: bytes) -> list[str]:
    """The model's runtime inputs in order (the order of a data set's inputs)."""
    import onnx

    g = onnx.load_from_string(model_bytes).graph
    inits = {i.name for i in g.initializer}
    return [x.name for x in g.input if x.name not in inits]


def _binding(bound: dict[str, np.ndarray]) -> list[tuple[str, list[int], list[float]]]:
    return [(k, list(a.shape), a.astype(np.float64).ravel().tolist()) for k, a in bound.items()]


def _per_data_set(name: str, op: str, model_bytes: bytes, data_sets, precision: str) -> Result:
    """A case whose bound inputs differ per data set: one import per data set, all must pass."""
    results = [run_model(name, op, model_bytes, [ds], precision=precision) for ds in data_sets]
    return next((r for r in results if r.status != "pass"), results[0])


def _reference_peak(model_bytes: bytes, feeds: dict) -> float:
    """Largest |value| of any float intermediate in onnx's own reference evaluator (fp32)."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = ReferenceEvaluator(onnx.load_from_string(model_bytes)).run(None, feeds, intermediate=True)
    floats = [np.abs(v) for v in values.values() if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size]
    return max((float(np.max(np.where(np.isfinite(v), v, np.inf))) for v in floats), default=0.0)


def node_results() -> list[Result]:
    """Every node case of the installed onnx package, run through the importer."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases("")
    results = []
    for c in cases:
        ops = [n.op_type for n in c.model.graph.node]
        op = ops[-1] if len(ops) and all(o == ops[-1] for o in ops) else (ops[0] if ops else "?")
        results.append(run_model(c.name, op, c.model.SerializeToString(), c.data_sets))
    return results


def data_dir() -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def model_dir_results(kind: str) -> list[Result]:
    """The `kind` model tests the onnx package ships (model.onnx + test_data_set_*)."""
    import onnx

    out = []
    for d in sorted(glob.glob(os.path.join(data_dir(), kind, "test_*"))):
        model_path = os.path.join(d, "model.onnx")
        if not os.path.exists(model_path):
            continue
        sets = []
        for s in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
            ins = [_load_pb(p) for p in sorted(glob.glob(os.path.join(s, "input_*.pb")))]
            outs = [_load_pb(p) for p in sorted(glob.glob(os.path.join(s, "output_*.pb")))]
            sets.append((ins, outs))
        m = onnx.load(model_path)
        ops = sorted({n.op_type for n in m.graph.node})
        with open(model_path, "rb") as f:
            out.append(
                run_model(f"{kind}/{os.path.basename(d)}", "+".join(ops[:3]), f.read(), sets, fp32_fallback=True)
            )
    return out


def _load_pb(path: str):
    import onnx

    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def light_results() -> list[Result]:
    """The light zoo models: inputs as onnx's runner makes them (arange / n), shipped outputs."""
    import onnx

    out = []
    for path in sorted(glob.glob(os.path.join(data_dir(), "light", "light_*.onnx"))):
        m = onnx.load(path)
        inits = {i.name for i in m.graph.initializer}
        ins = []
        for x in m.graph.input:
            if x.name in inits:
                continue
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            ins.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        prefix = os.path.splitext(path)[0]
        outs = [_load_pb(f"{prefix}_output_{i}.pb") for i in range(len(m.graph.output))]
        with open(path, "rb") as f:
            out.append(run_model(os.path.basename(prefix), "model", f.read(), [(ins, outs)], fp32_fallback=True))
    return out


def coverage_markdown(nodes: list[Result], models: list[Result]) -> str:
    """docs/onnx-coverage.md: totals, then per op type cases / pass / unsupported with reasons."""
    by_op: dict[str, list[Result]] = collections.defaultdict(list)
    for r in nodes:
        by_op[r.op].append(r)
    count = collections.Counter(r.status for r in nodes)
    mcount = collections.Counter(r.status for r in models)
    lines = [
        "# ONNX coverage",
        "",
        "Generated by `python/tests/test_onnx_node.py` from the backend tests of the installed `onnx`",
        "package, run through `af.load_onnx` on the reference executor (regenerate:",
        "`ANEFORGE_UPDATE_ONNX_COVERAGE=1 .venv/bin/python -m pytest python/tests/test_onnx_node.py`).",
        "",
        f"Node cases: {len(nodes)}; pass {count['pass']}, unsupported {count['unsupported']}, fail {count['fail']}.",
        f"Of the passes, {sum(1 for r in nodes if r.status == 'pass' and r.bound)} bind inputs the importer needs at import",
        "(axes, shapes, pads, Resize sizes/scales, TopK/Trilu k, depth, sequence_lens; also",
        "ConvTranspose's runtime weight and Q/DQ scales and zero points) to the case's own values",
        "(`input_values`, asked for by name by the importer); they are still checked against the",
        "expected outputs. Column `bound` counts them per op.",
        f"Model tests: {len(models)}; pass {mcount['pass']}, unsupported {mcount['unsupported']}, fail {mcount['fail']}.",
        "",
        "| op | cases | pass | bound | unsupported | fail | reasons (unsupported / fail) |",
        "|---|---|---|---|---|---|---|",
    ]
    for op in sorted(by_op):
        rs = by_op[op]
        c = collections.Counter(r.status for r in rs)
        reasons = sorted({r.reason for r in rs if r.status != "pass"})
        shown = "; ".join(x.replace("|", "/") for x in reasons[:3]) + (
            f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else ""
        )
        nb = sum(1 for r in rs if r.status == "pass" and r.bound)
        lines.append(f"| {op} | {len(rs)} | {c['pass']} | {nb} | {c['unsupported']} | {c['fail']} | {shown} |")
    lines += ["", "## Model tests", "", "| model | status | reason |", "|---|---|---|"]
    for r in models:
        lines.append(f"| {r.name} | {r.status} | {r.reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n"
