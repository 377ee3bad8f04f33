"""MobileNetV3-small (torchvision's layout: 224x224, batch 1, 1000 classes) as an ONNX model
built with onnx.helper from seeded random weights, for the benchmarks: aneforge runs it through
its ONNX importer (`af.load_onnx`), ONNX Runtime runs the same bytes. Every conv is followed by a
BatchNormalization (both runtimes fold it); squeeze-excite blocks use GlobalAveragePool, two
1x1 convs, ReLU / HardSigmoid and Mul; activations are ReLU and HardSwish.

Run as a script it times aneforge (reference executor) against ONNX Runtime on that model, batch 1,
at 1 and 2 threads, each thread count in its own process (RAYON_NUM_THREADS=n and
af.set_num_threads(n); ORT intra_op_num_threads=n), calls alternating; CPU time
(time.process_time) and wall time, median of --runs calls, then the median over --rounds processes.

Usage: python bench/mobilenetv3.py [--runs N] [--rounds R] [--out BENCHMARKS.md (appended)]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# (kernel, expanded channels, out channels, squeeze-excite, activation, stride) after the stem.
BLOCKS = [
    (3, 16, 16, True, "Relu", 2),
    (3, 72, 24, False, "Relu", 2),
    (3, 88, 24, False, "Relu", 1),
    (5, 96, 40, True, "HardSwish", 2),
    (5, 240, 40, True, "HardSwish", 1),
    (5, 240, 40, True, "HardSwish", 1),
    (5, 120, 48, True, "HardSwish", 1),
    (5, 144, 48, True, "HardSwish", 1),
    (5, 288, 96, True, "HardSwish", 2),
    (5, 576, 96, True, "HardSwish", 1),
    (5, 576, 96, True, "HardSwish", 1),
]


def divisible(v, d=8):
    """torchvision's _make_divisible: round v to a multiple of d, never below 90 % of v."""
    new = max(d, int(v + d / 2) // d * d)
    return new + d if new < 0.9 * v else new


def onnx_model(seed=0):
    """The network as an ONNX ModelProto (opset 17): input "x" [1, 3, 224, 224], output "y" [1, 1000]."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    counter = iter(range(10**6))

    def name(prefix):
        return f"{prefix}{next(counter)}"

    def init(arr):
        n = name("w")
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), n))
        return n

    def node(op, ins, **attrs):
        out = name(op.lower())
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def conv(x, cin, cout, k, stride=1, groups=1, bias=False):
        w = rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / (cin // groups * k * k))
        ins = [x, init(w)] + ([init(rng.normal(0, 0.01, cout))] if bias else [])
        p = (k - 1) // 2
        return node("Conv", ins, kernel_shape=[k, k], strides=[stride] * 2, pads=[p] * 4, group=groups)

    def conv_bn(x, cin, cout, k, stride=1, groups=1, act=None):
        y = conv(x, cin, cout, k, stride, groups)
        stats = [
            rng.uniform(0.5, 1.5, cout),
            rng.normal(0, 0.1, cout),
            rng.normal(0, 0.1, cout),
            rng.uniform(0.5, 1.5, cout),
        ]
        y = node("BatchNormalization", [y, *map(init, stats)], epsilon=1e-3)
        return node(act, [y]) if act else y

    def squeeze_excite(x, c):
        s = divisible(c // 4)
        h = node("Relu", [conv(node("GlobalAveragePool", [x]), c, s, 1, bias=True)])
        h = node("HardSigmoid", [conv(h, s, c, 1, bias=True)], alpha=1.0 / 6, beta=0.5)
        return node("Mul", [x, h])

    x = conv_bn("x", 3, 16, 3, 2, act="HardSwish")
    cin = 16
    for k, exp, cout, se, act, stride in BLOCKS:
        h = conv_bn(x, cin, exp, 1, act=act) if exp != cin else x
        h = conv_bn(h, exp, exp, k, stride, groups=exp, act=act)
        h = squeeze_excite(h, exp) if se else h
        h = conv_bn(h, exp, cout, 1)
        x = node("Add", [h, x]) if stride == 1 and cin == cout else h
        cin = cout
    x = conv_bn(x, cin, 576, 1, act="HardSwish")
    x = node("Flatten", [node("GlobalAveragePool", [x])])
    x = node(
        "HardSwish", [node("Gemm", [x, init(rng.standard_normal((1024, 576)) / 24), init(np.zeros(1024))], transB=1)]
    )
    nodes.append(
        helper.make_node(
            "Gemm", [x, init(rng.standard_normal((1000, 1024)) / 32), init(np.zeros(1000))], ["y"], transB=1
        )
    )
    io = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("x", [1, 3, 224, 224]), ("y", [1, 1000]))
    ]
    graph = helper.make_graph(nodes, "mobilenet_v3_small", io[:1], io[1:], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def worker(threads, runs):
    """Print one JSON object: medians over `runs` alternating calls of aneforge and ORT, in CPU
    seconds and wall seconds."""
    import aneforge as af
    from models import ort_session

    af.set_num_threads(threads)
    m = onnx_model()
    net = af.load_onnx(m.SerializeToString(), device="reference")
    sess = ort_session(m, threads)
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    calls = {"aneforge": lambda: net(x), "ort": lambda: sess.run(None, {"x": x})}
    times = {k: ([], []) for k in calls}
    for _ in range(2):
        for f in calls.values():
            f()
    for _ in range(runs):
        for k, f in calls.items():
            c, w = time.process_time(), time.perf_counter()
            f()
            times[k][0].append(time.process_time() - c)
            times[k][1].append(time.perf_counter() - w)
    print(json.dumps({k: [float(np.median(v[0])), float(np.median(v[1]))] for k, v in times.items()}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", type=int)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    here = Path(__file__).resolve().parent
    if args.worker:
        sys.path.insert(0, str(here))
        worker(args.worker, args.runs)
        return
    from emit import emit

    load = os.getloadavg()[0]
    per = {1: [], 2: []}
    for _ in range(args.rounds):
        for t in per:
            env = dict(os.environ, RAYON_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t), ANEFORGE_QUIET="1")
            cmd = [sys.executable, __file__, "--worker", str(t), "--runs", str(args.runs)]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            per[t].append(json.loads(res.stdout.strip().splitlines()[-1]))
    rows = [
        "| threads | aneforge CPU | ORT CPU | aneforge / ORT (CPU) | aneforge wall | ORT wall | aneforge / ORT (wall) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t, rs in per.items():
        med = {k: [float(np.median([r[k][i] for r in rs])) for i in (0, 1)] for k in ("aneforge", "ort")}
        (ac, aw), (oc, ow) = med["aneforge"], med["ort"]
        rows.append(
            f"| {t} | {ac * 1e3:.2f} ms | {oc * 1e3:.2f} ms | {ac / oc:.2f}× | {aw * 1e3:.2f} ms | {ow * 1e3:.2f} ms | {aw / ow:.2f}× |"
        )
    emit(
        "\n".join(
            [
                "## MobileNetV3-small vs ONNX Runtime (bench/mobilenetv3.py)",
                "",
                *rows,
                "",
                f"- 224×224, batch 1; each cell: median over {args.rounds} processes of the median of {args.runs} calls "
                "alternating aneforge / ONNX Runtime.",
                f"- Load average when the run started: {load:.1f} on {os.cpu_count()} cores.",
                "",
            ]
        ),
        args.out,
    )


if __name__ == "__main__":
    main()
