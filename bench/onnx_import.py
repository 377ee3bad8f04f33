"""ONNX import benchmark: a ResNet-50-shaped fp32 ONNX file (torchvision layout, Conv + BN +
ReLU, seeded random He-init weights, ~100 MB, built with onnx.helper) is imported and compiled
to a program directory by aneforge (`aneforge::onnx` + export, BN folded into the convs) and
loaded into an ONNX Runtime InferenceSession (1 thread), in the same run; then both outputs are
compared (cosine) on one input, the aneforge side on the fp16 reference executor.

Usage: python bench/onnx_import.py [--out BENCHMARKS.md] [--repeat 7]
"""

import argparse
import datetime
import os
import platform
import shutil
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

os.environ.setdefault("ANEFORGE_QUIET", "1")
import aneforge as af  # noqa: E402
from aneforge import _core  # noqa: E402

STAGES = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]


def resnet50(seed=0) -> onnx.ModelProto:
    """ResNet-50 v1.5 (stride in the 3x3 conv) for [1, 3, 224, 224] inputs, opset 17."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def conv_bn(x, name, cout, cin, k, stride, relu=True):
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        stats = [
            rng.uniform(0.5, 1.5, cout),
            rng.normal(0.0, 0.1, cout),
            rng.normal(0.0, 0.1, cout),
            rng.uniform(0.5, 1.5, cout),
        ]
        inits.append(numpy_helper.from_array(w, name + ".w"))
        for s, suffix in zip(stats, ("g", "b", "m", "v")):
            inits.append(numpy_helper.from_array(s.astype(np.float32), f"{name}.{suffix}"))
        p = k // 2
        nodes.append(helper.make_node("Conv", [x, name + ".w"], [name + ".c"], strides=[stride] * 2, pads=[p] * 4))
        bn_in = [name + ".c"] + [f"{name}.{s}" for s in ("g", "b", "m", "v")]
        nodes.append(helper.make_node("BatchNormalization", bn_in, [name + ".bn"]))
        if not relu:
            return name + ".bn"
        nodes.append(helper.make_node("Relu", [name + ".bn"], [name + ".r"]))
        return name + ".r"

    x = conv_bn("x", "stem", 64, 3, 7, 2)
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    x, cin = "pool", 64
    for s, (width, n, stride) in enumerate(STAGES):
        for b in range(n):
            p = f"l{s}.{b}"
            st = stride if b == 0 else 1
            y = conv_bn(x, p + ".c1", width, cin, 1, 1)
            y = conv_bn(y, p + ".c2", width, width, 3, st)
            y = conv_bn(y, p + ".c3", width * 4, width, 1, 1, relu=False)
            short = conv_bn(x, p + ".down", width * 4, cin, 1, st, relu=False) if b == 0 else x
            nodes.append(helper.make_node("Add", [y, short], [p + ".add"]))
            nodes.append(helper.make_node("Relu", [p + ".add"], [p + ".out"]))
            x, cin = p + ".out", width * 4
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    inits.append(
        numpy_helper.from_array((rng.standard_normal((1000, 2048)) / np.sqrt(2048)).astype(np.float32), "fc.w")
    )
    inits.append(numpy_helper.from_array(rng.normal(0, 0.01, 1000).astype(np.float32), "fc.b"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes,
        "resnet50",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="onnx-bench-")
    try:
        path = os.path.join(tmp, "resnet50.onnx")
        onnx.save_model(resnet50(), path)
        size_mb = os.path.getsize(path) / 1e6
        af_s, ort_s, af_cpu, ort_cpu, imp_s, imp_cpu = [], [], [], [], [], []
        for r in range(args.repeat):
            build = os.path.join(tmp, f"prog{r}")
            t, c = time.perf_counter(), time.process_time()
            _, outs = _core._onnx_import(path, [])
            imp_s.append(time.perf_counter() - t)
            imp_cpu.append(time.process_time() - c)
            af.export({port: tensor for _, port, tensor in outs}, build_dir=build)
            af_s.append(time.perf_counter() - t)
            af_cpu.append(time.process_time() - c)
            del outs
            shutil.rmtree(build, ignore_errors=True)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            t, c = time.perf_counter(), time.process_time()
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            ort_s.append(time.perf_counter() - t)
            ort_cpu.append(time.process_time() - c)
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        want = sess.run(None, {"x": x})[0].ravel().astype(np.float64)
        got = np.asarray(af.load_onnx(path, device="reference")(x)["logits"]).ravel().astype(np.float64)
        cos = float(got @ want / np.linalg.norm(got) / np.linalg.norm(want))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [
        "",
        f"## ONNX import: ResNet-50 fp32 ({datetime.date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} cores)",
        "",
        f"`bench/onnx_import.py`: a {size_mb:.0f} MB ResNet-50-shaped ONNX file (seeded random weights, opset 17),",
        f"median of {args.repeat}. aneforge: import (BN folded into the convs) + export of the program directory;",
        "ONNX Runtime: InferenceSession creation (CPU provider, 1 intra-op thread).",
        "",
        "| step | median wall s | min wall s | median CPU s (process) |",
        "|---|---|---|---|",
        f"| aneforge import + compile to a program directory | {np.median(af_s):.2f} | {min(af_s):.2f} | {np.median(af_cpu):.2f} |",
        f"| &nbsp;&nbsp;of which import (parse, map, weights to fp16) | {np.median(imp_s):.2f} | {min(imp_s):.2f} | {np.median(imp_cpu):.2f} |",
        f"| &nbsp;&nbsp;of which export (lower, hash, write weights.bin) | {np.median(np.subtract(af_s, imp_s)):.2f} | {min(np.subtract(af_s, imp_s)):.2f} | {np.median(np.subtract(af_cpu, imp_cpu)):.2f} |",
        f"| ONNX Runtime InferenceSession | {np.median(ort_s):.2f} | {min(ort_s):.2f} | {np.median(ort_cpu):.2f} |",
        "",
        f"Ratio aneforge / ONNX Runtime (medians, same process, alternating rounds): wall {np.median(af_s) / np.median(ort_s):.2f}, CPU {np.median(af_cpu) / np.median(ort_cpu):.2f}.",
        "",
        f"Load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times include waiting for a core).",
        "",
        f"Outputs on one input: cosine(aneforge reference executor, ONNX Runtime) = {cos:.6f}.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "a") as f:
        f.write(text)


if __name__ == "__main__":
    main()
