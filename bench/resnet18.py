"""ResNet-18 (224x224, batch 1) with seeded random He-init weights, built twice from the same
numpy arrays: as an aneforge graph and as an ONNX model (onnx.helper), for the benchmarks.
``depth=50`` gives ResNet-50 (bottleneck blocks) the same way."""

import numpy as np

STAGES = [(64, 1), (128, 2), (256, 2), (512, 2)]
EPS = 1e-5


def weights(seed=0, depth=18):
    """Every parameter as float32 numpy arrays, keyed by layer name."""
    rng = np.random.default_rng(seed)
    w = {}

    def conv(name, cout, cin, k):
        w[name] = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        w[name + ".bn"] = (
            rng.normal(0.0, 0.1, cout).astype(np.float32),  # running mean
            rng.uniform(0.5, 1.5, cout).astype(np.float32),  # running var
            rng.uniform(0.5, 1.5, cout).astype(np.float32),  # gamma
            rng.normal(0.0, 0.1, cout).astype(np.float32),  # beta
        )

    conv("conv1", 64, 3, 7)
    for p, cin, cout, _, down in blocks(depth):
        for name, co, ci, k, _ in convs(p, cin, cout, 1, depth):
            conv(name, co, ci, k)
        if down:
            conv(p + ".down", cout, cin, 1)
    cf = blocks(depth)[-1][2]
    w["fc.w"] = (rng.standard_normal((1000, cf)) * np.sqrt(1.0 / cf)).astype(np.float32)
    w["fc.b"] = rng.normal(0.0, 0.01, 1000).astype(np.float32)
    return w


def blocks(depth=18):
    """(prefix, in channels, out channels, stride, has 1x1 downsample) of the residual blocks
    (ResNet-18: 2 basic blocks per stage; ResNet-50: 3, 4, 6, 3 bottlenecks, 4x expansion)."""
    counts, expand = {18: ([2, 2, 2, 2], 1), 50: ([3, 4, 6, 3], 4)}[depth]
    out, cin = [], 64
    for s, ((c, stride), n) in enumerate(zip(STAGES, counts)):
        for b in range(n):
            st = stride if b == 0 else 1
            out.append((f"layer{s + 1}.{b}", cin, c * expand, st, st != 1 or cin != c * expand))
            cin = c * expand
    return out


def convs(p, cin, cout, stride, depth=18):
    """(name, out channels, in channels, kernel, (stride, pad)) of a block's main path."""
    if depth == 18:
        return [(p + ".conv1", cout, cin, 3, (stride, 1)), (p + ".conv2", cout, cout, 3, (1, 1))]
    m = cout // 4
    return [(p + ".conv1", m, cin, 1, (1, 0)), (p + ".conv2", m, m, 3, (stride, 1)), (p + ".conv3", cout, m, 1, (1, 0))]


def aneforge_graph(af, w, depth=18):
    """The network as an aneforge graph: returns the output tensor (logits [1, 1000])."""

    def conv_bn(x, name, stride, pad):
        mean, var, gamma, beta = w[name + ".bn"]
        return af.batch_norm(af.conv(x, w[name], stride=stride, pad=pad), mean, var, gamma, beta, EPS)

    x = af.input([1, 3, 224, 224])
    y = conv_bn(x, "conv1", 2, 3).relu().max_pool(3, 2, 1)
    for p, cin, cout, stride, down in blocks(depth):
        path = convs(p, cin, cout, stride, depth)
        h = y
        for i, (name, *_, (st, pad)) in enumerate(path):
            h = conv_bn(h, name, st, pad)
            h = h.relu() if i + 1 < len(path) else h
        y = (h + (conv_bn(y, p + ".down", stride, 0) if down else y)).relu()
    return y.mean((2, 3)).reshape(1, w["fc.w"].shape[1]).linear(w["fc.w"], w["fc.b"])


def onnx_model(w, depth=18):
    """The same network as an ONNX ModelProto (opset 17)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    counter = iter(range(10**6))

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(op, inputs, **attrs):
        out = f"t{next(counter)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv_bn(x, name, stride, pad):
        k = w[name].shape[2]
        y = node("Conv", [x, init(name, w[name])], kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4)
        mean, var, gamma, beta = w[name + ".bn"]
        bn = [init(f"{name}.{n}", a) for n, a in zip(("gamma", "beta", "mean", "var"), (gamma, beta, mean, var))]
        return node("BatchNormalization", [y, *bn], epsilon=EPS)

    y = node("Relu", [conv_bn("x", "conv1", 2, 3)])
    y = node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for p, cin, cout, stride, down in blocks(depth):
        path = convs(p, cin, cout, stride, depth)
        h = y
        for i, (name, *_, (st, pad)) in enumerate(path):
            h = conv_bn(h, name, st, pad)
            h = node("Relu", [h]) if i + 1 < len(path) else h
        y = node("Relu", [node("Add", [h, conv_bn(y, p + ".down", stride, 0) if down else y])])
    y = node("Flatten", [node("GlobalAveragePool", [y])])
    nodes.append(helper.make_node("Gemm", [y, init("fc.w", w["fc.w"]), init("fc.b", w["fc.b"])], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes,
        "resnet18",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
