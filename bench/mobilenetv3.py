"""MobileNetV3-small (torchvision's layout: 224x224, batch 1, 1000 classes) as an ONNX model
built with onnx.helper from seeded random weights, for the benchmarks: aneforge runs it through
its ONNX importer (`af.load_onnx`), ONNX Runtime runs the same bytes. Every conv is followed by a
BatchNormalization (both runtimes fold it); squeeze-excite blocks use GlobalAveragePool, two
1x1 convs, ReLU / HardSigmoid and Mul; activations are ReLU and HardSwish."""

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
