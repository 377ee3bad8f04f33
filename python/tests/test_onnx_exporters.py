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


F32_MIN = float(np.finfo(np.float32).min)


def _int_model(b, inputs, output, out_shape, opset, out_type=TensorProto.FLOAT):
    g = helper.make_graph(
        b.nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.INT64, s) for n, s in inputs],
        [helper.make_tensor_value_info(output, out_type, out_shape)],
        initializer=b.inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def _hf_mask(b, mask):
    """(1 - mask[:, None, None, :].float()) * finfo(float32).min, as transformers writes it."""
    m4 = b.op("Cast", [b.op("Unsqueeze", [mask, b.ints([1, 2])])], to=TensorProto.FLOAT)
    return b.op("Mul", [b.op("Sub", [b.const(np.float32(1.0)), m4]), b.const(np.float32(F32_MIN))])


def _ids(rng, shape, vocab):
    return rng.integers(0, vocab, shape).astype(np.int64)


@pytest.mark.parametrize("opset", [14, 17])
def test_hf_bert_with_int64_ids_and_finfo_min_mask(opset):
    """BertModel as torch.onnx.export writes it: int64 input_ids / token_type_ids /
    attention_mask with dynamic axes, embeddings gathered at runtime, position ids sliced from a
    buffer by Shape, and the finfo(float32).min extended attention mask."""
    b, d, heads, vocab = Builder(11), 32, 2, 3000
    ids, types, mask = "input_ids", "token_type_ids", "attention_mask"
    seq = b.dim(ids, 1)
    pos_ids = b.op(
        "Slice", [b.const(np.arange(64, dtype=np.int64)[None], "position_ids"), b.ints([0]), seq, b.ints([1])]
    )
    emb = b.op("Gather", [b.weight((vocab, d), 0.5, "word"), ids], axis=0)
    emb = b.op("Add", [emb, b.op("Gather", [b.weight((2, d), 0.5, "type"), types], axis=0)])
    emb = b.op("Add", [emb, b.op("Gather", [b.weight((64, d), 0.5, "pos"), pos_ids], axis=0)])
    h = b.layer_norm(emb, d, opset)
    a = b.attention(b.linear(h, d, d), b.linear(h, d, d), b.linear(h, d, d), heads, d, mask_add=_hf_mask(b, mask))
    out = b.layer_norm(b.op("Add", [b.linear(a, d, d), h]), d, opset)
    dyn = ["batch", "sequence"]
    m = _int_model(b, [(ids, dyn), (types, dyn), (mask, dyn)], out, ["batch", "sequence", d], opset)
    rng = np.random.default_rng(12)
    am = np.ones((2, 6), np.int64)
    am[1, 4:] = 0
    feeds = {ids: _ids(rng, (2, 6), vocab), types: _ids(rng, (2, 6), 2), mask: am}
    _agree(m, feeds, {k: (2, 6) for k in feeds})


def test_hf_gpt2_with_int64_ids_causal_where_and_mask():
    """GPT2Model as exported: input_ids.view(-1, seq) (runtime int Reshape), position ids from
    Range + Unsqueeze, a bool causal buffer sliced by Shape and applied by Where with a
    finfo(float32).min scalar, and the padding mask added as (1 - m) * finfo.min."""
    b, d, heads, vocab, n_ctx = Builder(13), 24, 2, 50257, 16
    ids, mask = "input_ids", "attention_mask"
    seq = b.dim(ids, 1)
    flat_ids = b.op("Reshape", [ids, b.op("Concat", [b.ints([-1]), seq], axis=0)])
    seq_scalar = b.op("Squeeze", [seq, b.ints([0])])
    positions = b.op(
        "Unsqueeze", [b.op("Range", [b.const(np.int64(0)), seq_scalar, b.const(np.int64(1))]), b.ints([0])]
    )
    h = b.op(
        "Add",
        [
            b.op("Gather", [b.weight((vocab, d), 0.5, "wte"), flat_ids], axis=0),
            b.op("Gather", [b.weight((n_ctx, d), 0.5, "wpe"), positions], axis=0),
        ],
    )
    bias = b.const(np.tril(np.ones((n_ctx, n_ctx), bool))[None, None], "bias")
    causal = b.op("Slice", [bias, b.ints([0, 0]), b.op("Concat", [seq, seq], axis=0), b.ints([2, 3])])
    ln = b.layer_norm(h, d, 14)
    q, k, v = b.op("Split", [b.linear(ln, d, 3 * d), b.ints([d, d, d])], n_out=3, axis=2)
    dh = d // heads
    qh, vh, kt = b.heads(q, heads, dh), b.heads(v, heads, dh), b.heads(k, heads, dh, perm=(0, 2, 3, 1))
    s = b.op("Div", [b.op("MatMul", [qh, kt]), b.const(np.float32(np.sqrt(dh)))])
    s = b.op("Where", [causal, s, b.const(np.float32(F32_MIN))])
    batch_mask = b.op("Reshape", [mask, b.op("Concat", [b.dim(ids, 0), b.ints([-1])], axis=0)])
    s = b.op("Add", [s, _hf_mask(b, batch_mask)])
    a = b.merge_heads(b.op("MatMul", [b.op("Softmax", [s], axis=-1), vh]), d)
    out = b.op("Add", [b.linear(a, d, d), h])
    dyn = ["batch", "sequence"]
    m = _int_model(b, [(ids, dyn), (mask, dyn)], out, ["batch", "sequence", d], 14)
    am = np.ones((2, 7), np.int64)
    am[1, 5:] = 0  # right padding: every query keeps an unmasked key (see ARCHITECTURE.md)
    feeds = {ids: _ids(np.random.default_rng(14), (2, 7), vocab), mask: am}
    _agree(m, feeds, {ids: (2, 7), mask: (2, 7)})


def test_runtime_int64_ids_through_layout_ops_exactly():
    """Token ids beyond fp16's exact range (> 2048) through Transpose, Concat, Slice, Expand,
    Tile and Gather along an axis stay exact (host int32 data movement)."""
    b = Builder(15)
    ids = "input_ids"
    t = b.op("Transpose", [ids], perm=[1, 0])  # [5, 2]
    tail = b.op("Slice", [t, b.ints([-2]), b.ints([100]), b.ints([0])])  # [2, 2]
    cat = b.op("Concat", [t, tail, b.ints([[7, 8]])], axis=0)  # [8, 2]
    last = b.op("Gather", [cat, b.const(np.array([1], np.int64), "idx")], axis=1)  # [8, 1]
    wide = b.op("Expand", [last, b.ints([8, 3])])
    out = b.op("Tile", [wide, b.ints([1, 2])])  # [8, 6]
    m = _int_model(b, [(ids, ["batch", "sequence"])], out, [8, 6], 17, TensorProto.INT64)
    x = np.array([[50256, 1, 2047, 2049, 40000], [3, 65535, 12345, 0, 31999]], np.int64)
    want = ReferenceEvaluator(m).run(None, {ids: x})[0]
    got = af.load_onnx(m.SerializeToString(), input_shapes={ids: (2, 5)}, device="reference")(x)
    got = np.asarray(list(got.values())[0] if isinstance(got, dict) else got)
    assert want.max() > 2048  # beyond fp16's exact integers
    np.testing.assert_array_equal(got, want)


def test_finfo_min_outside_a_softmax_mask_is_still_refused():
    """The saturation is exact only before a Softmax: the same fill feeding an output is an error."""
    b = Builder(16)
    y = b.op("Mul", [b.op("Sub", [b.const(np.float32(1.0)), "x"]), b.const(np.float32(F32_MIN))])
    m = b.model([("x", [2, 3])], y, [2, 3], 17)
    with pytest.raises(NotImplementedError, match="outside fp16"):
        af.load_onnx(m.SerializeToString(), device="reference")


def _conv_bn(b, x, cin, cout, k, group=1, stride=1, act="silu"):
    """Conv (no bias) + BatchNormalization (folded at import) + SiLU (Sigmoid·Mul) / ReLU / none."""
    w = b.weight((cout, cin // group, k, k), np.sqrt(2.0 / (cin // group * k * k)))
    y = b.op("Conv", [x, w], kernel_shape=[k, k], pads=[k // 2] * 4, group=group, strides=[stride] * 2)
    stats = [
        b.const(b.rng.uniform(0.5, 1.5, cout).astype(np.float32), "g"),
        b.weight((cout,), 0.1, "beta"),
        b.weight((cout,), 0.1, "mean"),
        b.const(b.rng.uniform(0.5, 1.5, cout).astype(np.float32), "var"),
    ]
    y = b.op("BatchNormalization", [y, *stats], epsilon=1e-3)
    if act == "silu":
        return b.op("Mul", [y, b.op("Sigmoid", [y])])
    return b.op("Relu", [y]) if act == "relu" else y


def _squeeze_excite(b, x, c, squeezed, act):
    s = b.op("GlobalAveragePool", [x])
    s = _conv(b, s, c, squeezed, 1)
    s = b.op("Mul", [s, b.op("Sigmoid", [s])]) if act == "silu" else b.op("Relu", [s])
    return b.op("Mul", [x, b.op("Sigmoid", [_conv(b, s, squeezed, c, 1)])])


@pytest.mark.parametrize(("k", "stride"), [(3, 1), (5, 2)])
def test_efficientnet_mbconv_block(k, stride):
    """torchvision EfficientNet MBConv: expand 1x1, depthwise kxk, squeeze-excite with SiLU,
    project 1x1 (BN folded), residual when the stride is 1."""
    b, c, e = Builder(17), 16, 64
    x = "input"
    h = _conv_bn(b, x, c, e, 1)
    h = _conv_bn(b, h, e, e, k, group=e, stride=stride)
    h = _squeeze_excite(b, h, e, 4, "silu")
    out = _conv_bn(b, h, e, c, 1, act=None)
    if stride == 1:
        out = b.op("Add", [out, x])
    side = 14 // stride
    m = b.model([(x, ["batch", c, 14, 14])], out, ["batch", c, side, side], 17)
    feeds = {x: np.random.default_rng(18).standard_normal((2, c, 14, 14)).astype(np.float32)}
    _agree(m, feeds, {x: (2, c, 14, 14)})


def test_regnety_block():
    """torchvision RegNetY bottleneck: 1x1, grouped 3x3 with stride 2 (group width 8),
    squeeze-excite with ReLU, 1x1, a projected shortcut, ReLU after the add."""
    b, cin, w = Builder(19), 16, 32
    x = "input"
    h = _conv_bn(b, x, cin, w, 1, act="relu")
    h = _conv_bn(b, h, w, w, 3, group=w // 8, stride=2, act="relu")
    h = _squeeze_excite(b, h, w, cin // 4, "relu")
    h = _conv_bn(b, h, w, w, 1, act=None)
    short = _conv_bn(b, x, cin, w, 1, stride=2, act=None)
    out = b.op("Relu", [b.op("Add", [h, short])])
    m = b.model([(x, ["batch", cin, 12, 12])], out, ["batch", w, 6, 6], 17)
    feeds = {x: np.random.default_rng(20).standard_normal((1, cin, 12, 12)).astype(np.float32)}
    _agree(m, feeds, {x: (1, cin, 12, 12)})


def _gelu_graph(spelling):
    """One exact-GELU spelling over x [4, 300]: returns (model, name of the Erf output)."""
    b = Builder()
    half, one = b.const(np.float32(0.5)), b.const(np.float32(1.0))
    if spelling == "div-inner-half":  # torch.onnx export of nn.GELU: x·(1 + erf(x/√2))·½
        e = b.op("Erf", [b.op("Div", ["x", b.const(np.float32(np.sqrt(2.0)))])])
        y = b.op("Mul", [b.op("Mul", ["x", b.op("Add", [e, one])]), half])
    elif spelling == "mul-half-first":  # (x·½)·(1 + erf(x·(1/√2))), constants on the left
        e = b.op("Erf", [b.op("Mul", [b.const(np.float32(1 / np.sqrt(2.0))), "x"])])
        y = b.op("Mul", [b.op("Mul", [half, "x"]), b.op("Add", [one, e])])
    else:  # constants as Constant nodes (a tensor value and a value_float): x·((1 + erf(x/√2))·½)
        c = lambda v: b.op("Constant", [], value=numpy_helper.from_array(np.array(v, np.float32)))  # noqa: E731
        e = b.op("Erf", [b.op("Div", ["x", c(np.sqrt(2.0))])])
        y = b.op("Mul", ["x", b.op("Mul", [b.op("Add", [e, c(1.0)]), b.op("Constant", [], value_float=0.5)])])
    return b.model([("x", [4, 300])], y, [4, 300], 17), e


@pytest.mark.parametrize("spelling", ["div-inner-half", "mul-half-first", "constant-nodes"])
def test_erf_gelu_imports_as_one_gelu_rounded_once(spelling):
    """Every spelling runs as one `gelu` step, each output within 2 fp16 ulps of float64 GELU of
    the fp16 input (the gelu kernel's f32 1 + erf cancels for negative x; one rounding after)."""
    m, _ = _gelu_graph(spelling)
    x = np.linspace(-6, 6, 1200, dtype=np.float32).reshape(4, 300)
    net = af.load_onnx(m.SerializeToString(), device="reference")
    names = [r["name"] for r in net.profile(x, repeat=1)["rows"] if r["leaf"]]
    assert names == ["gelu"], names
    x16 = x.astype(np.float16).astype(np.float64)
    want = 0.5 * x16 * (1 + np.vectorize(__import__("math").erf)(x16 / np.sqrt(2.0)))
    got = np.asarray(list(net(x).values())[0], np.float64)
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got - want) <= 2 * ulp), float(np.max(np.abs(got - want) / ulp))


def test_erf_gelu_steps_read_elsewhere_are_still_computed():
    """When the Erf value is also a graph output, the GELU is still one `gelu` op and the Erf
    output is erf(x/√2) of the same inputs."""
    m, e = _gelu_graph("div-inner-half")
    m.graph.output.append(helper.make_tensor_value_info(e, TensorProto.FLOAT, [4, 300]))
    x = np.linspace(-3, 3, 1200, dtype=np.float32).reshape(4, 300)
    want = ReferenceEvaluator(m).run(None, {"x": x})
    got = list(af.load_onnx(m.SerializeToString(), device="reference")(x).values())
    assert len(got) == 2
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), w, atol=2e-3, rtol=2e-3)


def test_erf_gelu_with_a_rank_raising_constant_keeps_the_broadcast_shape():
    """A ½ of shape [1, 1, 1] makes the product rank 3: not a GELU of x [4, 300] (its shape
    would be lost), so the steps import one by one, with onnx's reference evaluator's shape."""
    b = Builder()
    e = b.op("Erf", [b.op("Div", ["x", b.const(np.float32(np.sqrt(2.0)))])])
    half = b.const(np.full((1, 1, 1), 0.5, np.float32))
    y = b.op("Mul", [b.op("Mul", ["x", b.op("Add", [e, b.const(np.float32(1.0))])]), half])
    m = b.model([("x", [4, 300])], y, [1, 4, 300], 17)
    x = np.linspace(-3, 3, 1200, dtype=np.float32).reshape(4, 300)
    net = af.load_onnx(m.SerializeToString(), device="reference")
    assert "gelu" not in [r["name"] for r in net.profile(x, repeat=1)["rows"] if r["leaf"]]
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = np.asarray(list(net(x).values())[0], np.float64)
    assert got.shape == want.shape == (1, 4, 300)
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=2e-3)
