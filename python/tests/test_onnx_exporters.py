"""Models shaped as torch.onnx.export / optimum write them, built with onnx.helper (no PyTorch):
BERT-family encoder layers (Shape→Gather→Unsqueeze→Concat→Reshape heads, attention-mask
arithmetic, Erf GELU, LayerNormalization or its opset-14 decomposition), a GPT-2 block (fused
QKV split by Split or Slice, Trilu/Where causal mask, tanh GELU), MobileNetV2/V3 blocks
(Clip-ReLU6, HardSwish, depthwise conv, squeeze-excite with HardSigmoid), a ConvNeXt block
(LayerNorm over channels via Transpose) and a ViT embedding (patch conv, Shape-driven flatten,
Transpose, Expand-ed class token). Dynamic axes are fixed by ``input_shapes``. Oracle: onnx's
own reference evaluator (``onnx.reference.ReferenceEvaluator``, fp32) on the same model;
agreement by cosine >= 0.9999 on the fp16 reference executor."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import aneforge as af  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402


class Builder:
    """Nodes and seeded fp32 initializers of one graph; each method returns its output name."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.k = [], [], 0

    def name(self, hint):
        self.k += 1
        return f"{hint}_{self.k}"

    def const(self, value, hint="c"):
        n = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(self, shape, scale=None, hint="w"):
        scale = scale if scale is not None else 1.0 / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else shape[0])
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), hint)

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def ints(self, values):
        return self.const(np.array(values, np.int64), "i")

    def dim(self, x, i):
        """Unsqueeze(Gather(Shape(x), i)): the [1]-shaped dim exporters build shapes from."""
        g = self.op("Gather", [self.op("Shape", [x]), self.const(np.array(i, np.int64), "idx")], axis=0)
        return self.op("Unsqueeze", [g, self.ints([0])])

    def linear(self, x, din, dout):
        return self.op("Add", [self.op("MatMul", [x, self.weight((din, dout))]), self.weight((dout,), 0.1, "b")])

    def layer_norm(self, x, d, opset, axis=-1):
        gamma = self.const((1 + 0.1 * self.rng.standard_normal(d)).astype(np.float32), "g")
        beta = self.weight((d,), 0.1, "beta")
        if opset >= 17:
            return self.op("LayerNormalization", [x, gamma, beta], axis=axis, epsilon=1e-5)
        mean = self.reduce_mean(x, axis, opset)
        c = self.op("Sub", [x, mean])
        var = self.reduce_mean(self.op("Pow", [c, self.const(np.float32(2.0))]), axis, opset)
        std = self.op("Sqrt", [self.op("Add", [var, self.const(np.float32(1e-5))])])
        return self.op("Add", [self.op("Mul", [self.op("Div", [c, std]), gamma]), beta])

    def reduce_mean(self, x, axis, opset):
        if opset >= 18:
            return self.op("ReduceMean", [x, self.ints([axis])], keepdims=1)
        return self.op("ReduceMean", [x], axes=[axis], keepdims=1)

    def gelu_erf(self, x):
        e = self.op("Erf", [self.op("Div", [x, self.const(np.float32(np.sqrt(2.0)))])])
        half = self.op("Mul", [x, self.const(np.float32(0.5))])
        return self.op("Mul", [half, self.op("Add", [e, self.const(np.float32(1.0))])])

    def gelu_tanh(self, x):
        cube = self.op("Pow", [x, self.const(np.float32(3.0))])
        inner = self.op("Add", [x, self.op("Mul", [cube, self.const(np.float32(0.044715))])])
        t = self.op("Tanh", [self.op("Mul", [inner, self.const(np.float32(np.sqrt(2 / np.pi)))])])
        return self.op(
            "Mul", [self.op("Mul", [x, self.const(np.float32(0.5))]), self.op("Add", [t, self.const(np.float32(1.0))])]
        )

    def heads(self, x, n_heads, head_dim, perm=(0, 2, 1, 3)):
        """[B, S, H·Dh] → [B, H, S, Dh] through a Shape-built Reshape target."""
        shape = self.op("Concat", [self.dim(x, 0), self.dim(x, 1), self.ints([n_heads]), self.ints([head_dim])], axis=0)
        return self.op("Transpose", [self.op("Reshape", [x, shape])], perm=list(perm))

    def merge_heads(self, x, d):
        t = self.op("Transpose", [x], perm=[0, 2, 1, 3])
        shape = self.op("Concat", [self.dim(t, 0), self.dim(t, 1), self.ints([d])], axis=0)
        return self.op("Reshape", [t, shape])

    def attention(self, q, k, v, n_heads, d, mask_add=None, causal_where=None):
        dh = d // n_heads
        q, v = self.heads(q, n_heads, dh), self.heads(v, n_heads, dh)
        kt = self.heads(k, n_heads, dh, perm=(0, 2, 3, 1))
        s = self.op("Div", [self.op("MatMul", [q, kt]), self.const(np.float32(np.sqrt(dh)))])
        if mask_add is not None:
            s = self.op("Add", [s, mask_add])
        if causal_where is not None:
            s = self.op("Where", [causal_where, s, self.const(np.float32(-10000.0))])
        p = self.op("Softmax", [s], axis=-1)
        return self.merge_heads(self.op("MatMul", [p, v]), d)

    def model(self, inputs, output, out_shape, opset):
        g = helper.make_graph(
            self.nodes,
            "g",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)],
            initializer=self.inits,
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        onnx.checker.check_model(m)
        return m


def _agree(m, feeds, input_shapes):
    want = ReferenceEvaluator(m).run(None, feeds)[0].astype(np.float64)
    got = af.load_onnx(m.SerializeToString(), input_shapes=input_shapes, device="reference")(**feeds)
    got = np.asarray(list(got.values())[0] if isinstance(got, dict) else got, np.float64)
    assert got.shape == want.shape
    cos = float(got.ravel() @ want.ravel() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos >= 0.9999, cos
    np.testing.assert_allclose(got, want, atol=0.05 * np.abs(want).max(), rtol=0.05)


@pytest.mark.parametrize("opset", [14, 17, 18])
def test_bert_encoder_layer(opset):
    b, d, heads, ff = Builder(1), 64, 4, 128
    h = "hidden_states"
    # Extended attention mask: (1 - mask[:, None, None, :]) * -10000.
    m4 = b.op("Unsqueeze", ["attention_mask", b.ints([1, 2])])
    ext = b.op("Mul", [b.op("Sub", [b.const(np.float32(1.0)), m4]), b.const(np.float32(-10000.0))])
    a = b.attention(b.linear(h, d, d), b.linear(h, d, d), b.linear(h, d, d), heads, d, mask_add=ext)
    x = b.layer_norm(b.op("Add", [b.linear(a, d, d), h]), d, opset)
    y = b.linear(b.gelu_erf(b.linear(x, d, ff)), ff, d)
    out = b.layer_norm(b.op("Add", [y, x]), d, opset)
    m = b.model([(h, ["batch", "seq", d]), ("attention_mask", ["batch", "seq"])], out, ["batch", "seq", d], opset)
    rng = np.random.default_rng(2)
    mask = np.ones((2, 7), np.float32)
    mask[1, 5:] = 0
    feeds = {h: rng.standard_normal((2, 7, d)).astype(np.float32), "attention_mask": mask}
    _agree(m, feeds, {h: (2, 7, d), "attention_mask": (2, 7)})


@pytest.mark.parametrize(("opset", "qkv"), [(14, "Split"), (17, "Slice"), (18, "Split")])
def test_gpt2_block(opset, qkv):
    b, d, heads = Builder(3), 48, 3
    x = "input"
    ln = b.layer_norm(x, d, opset)
    fused = b.linear(ln, d, 3 * d)
    if qkv == "Split" and opset >= 18:
        q, k, v = b.op("Split", [fused], n_out=3, axis=2, num_outputs=3)
    elif qkv == "Split":
        q, k, v = b.op("Split", [fused, b.ints([d, d, d])], n_out=3, axis=2)
    else:
        q, k, v = (b.op("Slice", [fused, b.ints([i * d]), b.ints([(i + 1) * d]), b.ints([2])]) for i in range(3))
    # Causal mask: Trilu over ones(seq, seq) whose shape comes from Shape(input).
    seq = b.dim(x, 1)
    ones = b.op(
        "ConstantOfShape", [b.op("Concat", [seq, seq], axis=0)], value=numpy_helper.from_array(np.ones(1, np.float32))
    )
    causal = b.op("Cast", [b.op("Trilu", [ones], upper=0)], to=TensorProto.BOOL)
    a = b.op("Add", [b.linear(b.attention(q, k, v, heads, d, causal_where=causal), d, d), x])
    y = b.linear(b.gelu_tanh(b.linear(b.layer_norm(a, d, opset), d, 4 * d)), 4 * d, d)
    out = b.op("Add", [y, a])
    m = b.model([(x, ["batch", "seq", d])], out, ["batch", "seq", d], opset)
    feeds = {x: np.random.default_rng(4).standard_normal((1, 9, d)).astype(np.float32)}
    _agree(m, feeds, {x: (1, 9, d)})


def _conv(b, x, cin, cout, k, group=1, stride=1):
    w = b.weight((cout, cin // group, k, k), np.sqrt(2.0 / (cin // group * k * k)))
    return b.op(
        "Conv",
        [x, w, b.weight((cout,), 0.1, "b")],
        kernel_shape=[k, k],
        pads=[k // 2] * 4,
        group=group,
        strides=[stride] * 2,
    )


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_mobilenet_block(version):
    b, c, e = Builder(5), 16, 64
    x = "input"
    if version == "v2":
        act = lambda t: b.op("Clip", [t, b.const(np.float32(0.0)), b.const(np.float32(6.0))])  # noqa: E731
    else:
        act = lambda t: b.op("HardSwish", [t])  # noqa: E731
    h = act(_conv(b, x, c, e, 1))
    h = act(_conv(b, h, e, e, 3, group=e))
    if version == "v3":
        se = b.op("Relu", [_conv(b, b.op("GlobalAveragePool", [h]), e, e // 4, 1)])
        gate = b.op("HardSigmoid", [_conv(b, se, e // 4, e, 1)], alpha=1.0 / 6, beta=0.5)
        h = b.op("Mul", [h, gate])
    out = b.op("Add", [_conv(b, h, e, c, 1), x])
    m = b.model([(x, ["batch", c, 12, 12])], out, ["batch", c, 12, 12], 17)
    feeds = {x: np.random.default_rng(6).standard_normal((1, c, 12, 12)).astype(np.float32)}
    _agree(m, feeds, {x: (1, c, 12, 12)})


def test_convnext_block():
    b, c = Builder(7), 32
    x = "input"
    h = b.op("Transpose", [_conv(b, x, c, c, 7, group=c)], perm=[0, 2, 3, 1])
    h = b.layer_norm(h, c, 17)
    h = b.linear(b.gelu_erf(b.linear(h, c, 4 * c)), 4 * c, c)
    h = b.op("Mul", [h, b.const(np.full(c, 0.5, np.float32))])  # layer scale
    y = b.op("Add", [b.op("Transpose", [h], perm=[0, 3, 1, 2]), x])
    # The downsampling LayerNorm2d: statistics over the channel axis of NCHW.
    out = b.layer_norm(y, 1, 14, axis=1)
    m = b.model([(x, ["batch", c, 10, 10])], out, ["batch", c, 10, 10], 17)
    feeds = {x: np.random.default_rng(8).standard_normal((1, c, 10, 10)).astype(np.float32)}
    _agree(m, feeds, {x: (1, c, 10, 10)})


def test_vit_embedding_and_layer():
    b, c, d, p, heads = Builder(9), 3, 32, 4, 2
    x = "pixel_values"
    patches = b.op("Conv", [x, b.weight((d, c, p, p)), b.weight((d,), 0.1, "b")], kernel_shape=[p, p], strides=[p, p])
    flat = b.op("Reshape", [patches, b.op("Concat", [b.dim(patches, 0), b.dim(patches, 1), b.ints([-1])], axis=0)])
    tokens = b.op("Transpose", [flat], perm=[0, 2, 1])
    cls = b.op("Expand", [b.weight((1, 1, d), 0.5, "cls"), b.op("Concat", [b.dim(x, 0), b.ints([1, d])], axis=0)])
    n_tok = (16 // p) ** 2 + 1
    h = b.op("Add", [b.op("Concat", [cls, tokens], axis=1), b.weight((1, n_tok, d), 0.5, "pos")])
    ln = b.layer_norm(h, d, 17)
    a = b.op(
        "Add", [b.linear(b.attention(b.linear(ln, d, d), b.linear(ln, d, d), b.linear(ln, d, d), heads, d), d, d), h]
    )
    cls_out = b.op("Gather", [b.layer_norm(a, d, 17), b.const(np.array(0, np.int64), "idx")], axis=1)
    m = b.model([(x, ["batch", c, 16, 16])], cls_out, ["batch", d], 17)
    feeds = {x: np.random.default_rng(10).standard_normal((2, c, 16, 16)).astype(np.float32)}
    _agree(m, feeds, {x: (2, c, 16, 16)})
