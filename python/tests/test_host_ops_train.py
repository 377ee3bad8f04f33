"""Training across cuts: a bag-of-embeddings text classifier whose forward pass runs an embedding
lookup on runtime int32 token ids and a topk values path (both host ops, so the training step is
a segmented plan) learns a seeded synthetic task with af.Trainer; its gradients through the cuts
match finite differences of a float64 NumPy implementation of the same model."""

from __future__ import annotations

import aneforge as af
import numpy as np
import pytest

VOCAB, LENGTH, DIM, CLASSES, BATCH = 16, 6, 8, 2, 32
SIGNAL = 4  # tokens 0..3 mark class 1; the rest are noise


def dataset(n, seed):
    """ids [n, LENGTH] of noise tokens; class-1 rows get one signal token at a random place."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(SIGNAL, VOCAB, size=(n, LENGTH))
    labels = rng.integers(0, CLASSES, size=n)
    rows = np.flatnonzero(labels == 1)
    ids[rows, rng.integers(0, LENGTH, size=rows.size)] = rng.integers(0, SIGNAL, size=rows.size)
    return ids.astype(np.int32), labels


def logits_graph(table, weight, bias, ids):
    emb = af.embedding(ids, table)  # [N, L, D]
    top, _ = af.topk(emb, 2, axis=1)  # [N, 2, D]: the two largest values per feature
    feat = top.sum([1], keepdims=False) * 0.5
    return feat @ weight + bias


def logits_numpy(table, weight, bias, ids):
    emb = table[ids]
    top = -np.sort(-emb, axis=1)[:, :2]
    return top.sum(1) * 0.5 @ weight + bias


def test_bag_of_embeddings_classifier_trains_through_embedding_and_topk():
    rng = np.random.default_rng(0)
    table = af.parameter(rng.normal(size=(VOCAB, DIM)) * 0.5, name="table")
    weight = af.parameter(rng.normal(size=(DIM, CLASSES)) * 0.5, name="weight")
    bias = af.parameter(np.zeros(CLASSES), name="bias")
    # Token ids go straight to an int32 port (no in-graph cast): the Trainer feeds int32 data
    # inputs as int32.
    ids = af.input((BATCH, LENGTH), dtype="int32")
    target = af.input((BATCH, CLASSES))
    logits = logits_graph(table, weight, bias, ids)
    tr = af.Trainer(
        loss=af.softmax_cross_entropy(logits, target),
        params=[table, weight, bias],
        lr=0.5,
        device="reference",
        precision="fp32",
    )
    x, y = dataset(512, 1)
    losses = []
    for epoch in range(12):
        order = np.random.default_rng(epoch).permutation(len(x))
        for b in range(0, len(x), BATCH):
            sel = order[b : b + BATCH]
            losses.append(tr.step(x[sel], np.eye(CLASSES)[y[sel]]))
    tr.sync()
    first, last = np.mean(losses[:16]), np.mean(losses[-16:])
    assert last < 0.5 * first, (first, last)
    xt, yt = dataset(512, 2)
    trained = [af.value(p).astype(np.float64) for p in (table, weight, bias)]
    accuracy = float((logits_numpy(*trained, xt).argmax(1) == yt).mean())
    # Stated goal: >= 95 % held-out accuracy (chance is 50 %).
    assert accuracy >= 0.95, accuracy


def test_gradients_through_the_cuts_match_finite_differences():
    rng = np.random.default_rng(5)
    vals = [rng.normal(size=(VOCAB, DIM)), rng.normal(size=(DIM, CLASSES)), rng.normal(size=CLASSES)]
    # Distinct tokens per row: no tie at the top-2 boundary, where the loss has a kink.
    ids_v = np.stack([rng.permutation(VOCAB)[:LENGTH] for _ in range(4)]).astype(np.int32)
    r = rng.normal(size=(4, CLASSES)).astype(np.float16).astype(np.float64)  # baked as fp16
    params = [af.input(v.shape) for v in vals]
    ids = af.input((4, LENGTH), dtype="int32")
    loss = (logits_graph(*params, ids) * af.constant(r)).sum()
    grads = af.backward(loss, params)
    net = af.compile([grads[p] for p in params], device="reference", precision="fp32")
    assert "host" in [s["kind"] for s in net.stages]
    got = net(*(v.astype(np.float32) for v in vals), ids_v)

    def f(*vs):
        return float((logits_numpy(*vs, ids_v) * r).sum())

    for k, v in enumerate(vals):
        fd = np.zeros_like(v)
        for i in range(v.size):
            plus, minus = [w.copy() for w in vals], [w.copy() for w in vals]
            plus[k].flat[i] += 1e-4
            minus[k].flat[i] -= 1e-4
            fd.flat[i] = (f(*plus) - f(*minus)) / 2e-4
        np.testing.assert_allclose(got[k], fd, rtol=1e-3, atol=1e-3)


def test_int32_data_inputs_take_integer_ids_only():
    table = af.parameter(np.ones((VOCAB, DIM)), name="table")
    ids = af.input((2, LENGTH), dtype="int32")
    tr = af.Trainer(loss=af.embedding(ids, table).sum(), params=[table], lr=0.1, device="reference", precision="fp32")
    # d loss / d table = count of each token: one step of plain SGD lowers each row by 0.1 * count.
    good = np.array([[0, 1, 1, 2, 2, 2], [3, 3, 3, 3, 0, 0]], np.int32)
    tr.step(good)
    tr.sync()
    counts = np.bincount(good.ravel(), minlength=VOCAB)[:, None]
    np.testing.assert_allclose(af.value(table), 1.0 - 0.1 * counts * np.ones((1, DIM)), rtol=1e-6)
    with pytest.raises(ValueError, match=r"int32 input '.*': element 1 = 0.5 is not an integer"):
        tr.step(np.array([[0, 0.5, 0, 0, 0, 0], [0] * 6]))
    with pytest.raises(ValueError, match="index 16 out of range|16"):
        tr.step(np.full((2, LENGTH), VOCAB, np.int32))
