"""Training on the lazy graph: parameters, reverse-mode autograd (``backward``), losses, the
host optimizers (SGD, Adam, AdamW) and the ``Trainer``. Everything runs in the Rust core
(``aneforge::train``): a parameter is a ``Parameter`` Tensor owning its fp32 master weights, a
loss from ``mse`` / ``softmax_cross_entropy`` is a ``Loss`` Tensor remembering its logits, and
``Trainer`` wraps the core Trainer. This module keeps the Python signatures, the warnings and
the file logging; checkpoint and dataset files are in ``aneforge.train_io``.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from aneforge import _core
from aneforge.train_io import (
    load_mnist_5k,
    load_safetensors,
    read_cifar10,
    save_safetensors,
)

Parameter = _core.Parameter
Loss = _core.Loss

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "Loss",
    "Parameter",
    "Trainer",
    "backward",
    "conv2d",
    "conv_param",
    "load_mnist_5k",
    "load_safetensors",
    "mse",
    "parameter",
    "read_cifar10",
    "save_safetensors",
    "softmax_cross_entropy",
    "value",
]


def parameter(init, name: str | None = None) -> Parameter:
    """A trainable fp16 graph input of ``init``'s shape whose fp32 master copy (a copy of
    ``init``) lives in the core, freed with the returned ``Parameter``; named ``param<k>`` unless
    ``name`` is given. Non-finite values raise ValueError."""
    return _core._parameter(np.ascontiguousarray(init, np.float32), name)


def conv_param(w, name: str | None = None) -> Parameter:
    """A trainable convolution weight for ``conv2d`` from W [Cout, Cin, kH, kW]: stored flattened
    as [Cin·kH·kW, Cout] (row ci·kH·kW + ky·kW + kx)."""
    return _core._conv_param(np.ascontiguousarray(w, np.float32), name)


def conv2d(x, weight, stride: int = 1, pad: int = 0):
    """Convolution of x [N, Cin, H, W] with a ``conv_param`` weight [Cin·k·k, Cout] (square
    kernel k inferred from the row count), ``stride`` and zero padding ``pad`` on every side: the
    core conv op with the weight as a graph tensor; returns [N, Cout, H', W']."""
    return _core._conv2d(x, weight, stride, pad)


def _param(p) -> Parameter:
    if not isinstance(p, Parameter):
        raise TypeError(f"{p!r} is not a parameter (create it with af.parameter(init))")
    return p


def value(p) -> np.ndarray:
    """A float32 copy of parameter ``p``'s master weights (TypeError for a non-parameter)."""
    return _param(p).value()


def backward(loss, params, loss_scale: float = 1.0, stop=None) -> dict:
    """Gradients of ``loss`` w.r.t. ``params`` as a dict {param: gradient Tensor}, seeded with
    ``loss_scale``; gradient does not flow through tensors in ``stop``. Differentiating through
    an op without a gradient rule raises NotImplementedError naming the op."""
    params = list(params)
    grads = _core._backward(loss, params, float(loss_scale), list(stop) if stop is not None else None)
    return dict(zip(params, grads))


def mse(prediction, target) -> Loss:
    """Mean over all axes of (prediction - target)²; a [1, ..., 1] ``Loss`` Tensor."""
    return _core._mse(prediction, target)


def softmax_cross_entropy(logits, target) -> Loss:
    """Mean over the batch of -log softmax(logits)[label], computed stably as
    logsumexp(logits) - <onehot, logits>; ``logits`` is [N, K] and ``target`` either one-hot
    [N, K] or class indices [N] / [N, 1] (an fp16 input; indices are exact up to 2048). A [1, 1]
    ``Loss`` Tensor that remembers ``logits`` for ``Trainer.predict`` / ``accuracy``."""
    return _core._softmax_cross_entropy(logits, target)


def _warn_skip(skipped: int):
    """Warn on the first non-finite-gradient skip and every 100th."""
    if skipped == 1 or skipped % 100 == 0:
        warnings.warn(
            f"non-finite gradient: step skipped ({skipped} so far); lower loss_scale or lr",
            RuntimeWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------- host optimizers


class _HostOptimizer:
    """A core host optimizer over parameters' fp32 master weights."""

    _kind = ""

    def __init__(self, params, **kw):
        self.params = list(params)
        self._opt = _core._Optimizer(self._kind, self.params, **kw)

    @property
    def t(self) -> int:
        """Steps applied so far."""
        return self._opt.t

    @property
    def state(self) -> dict:
        """Float32 copies of the state buffers per parameter: ``buf`` (SGD momentum) or ``m``, ``v``."""
        names = {"sgd": ["buf"] if getattr(self, "momentum", 0.0) else [], "adam": ["m", "v"], "adamw": ["m", "v"]}[
            self._kind
        ]
        return {s: self._opt.state(s) for s in names}

    def step(self, grads) -> bool:
        """One update from the gradients (one per parameter, multiplied by the loss scale);
        returns False (and warns) when a gradient is not finite, leaving everything unchanged."""
        applied, skipped = self._opt.step([np.ascontiguousarray(g, np.float32) for g in grads])
        if not applied:
            _warn_skip(skipped)
        return applied


class SGD(_HostOptimizer):
    """w -= lr·(g/loss_scale + weight_decay·w), with optional momentum (buf = momentum·buf + grad);
    fp32 master weights. ``step(grads)`` returns False (and warns) when a gradient is not finite."""

    _kind = "sgd"

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0, loss_scale: float = 1.0):
        self.lr, self.momentum, self.weight_decay, self.loss_scale = lr, momentum, weight_decay, loss_scale
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay, loss_scale=loss_scale)


class Adam(_HostOptimizer):
    """Bias-corrected Adam on fp32 master weights (L2 ``weight_decay`` added to the gradient);
    gradients arrive multiplied by ``loss_scale``. ``step(grads)`` returns False (and warns) when
    a gradient is not finite."""

    _kind = "adam"

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        loss_scale: float = 1.0,
    ):
        self.lr, self.betas, self.eps, self.weight_decay, self.loss_scale = (
            lr,
            tuple(betas),
            eps,
            weight_decay,
            loss_scale,
        )
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, loss_scale=loss_scale)


class AdamW(Adam):
    """Adam with decoupled weight decay (w -= lr·weight_decay·w, then the Adam step without L2);
    otherwise as ``Adam``."""

    _kind = "adamw"

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        loss_scale: float = 1.0,
    ):
        super().__init__(params, lr, betas, eps, weight_decay, loss_scale)


# ---------------------------------------------------------------- Trainer


class Trainer:
    """Compiles a training step for ``loss`` (a Tensor; from ``mse`` / ``softmax_cross_entropy``
    or any scalar-shaped graph) over ``params`` and runs it (the core ``Trainer``).

    Modes: default = forward + backward program, update on the host in fp32 (master weights);
    ``device_optimizer=True`` = the update is its own compiled program whose parameter and moment
    buffers are aliased output → input (state resident; gradients and the learning rate are
    written per step); ``resident_state=True`` = forward + backward + update in one program with
    all state aliased, so a step writes only the batch and the learning rate. ``optimizer`` is
    "sgd", "adam" or "adamw". ``step(*arrays)`` takes the loss graph's data inputs in creation
    order (labels as class indices or one-hot, converted to the target input's form) and returns
    the loss as a Python float (for cross-entropy: recomputed on the host from the program's
    logits and the last data array, which must be the target; otherwise the program's fp16 loss).
    A non-finite gradient skips the step with a RuntimeWarning.
    """

    def __init__(
        self,
        loss,
        params,
        lr: float = 1e-3,
        optimizer: str = "sgd",
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        loss_scale: float = 1.0,
        device_optimizer: bool = False,
        resident_state: bool = False,
        logits=None,
        **options,
    ):
        self.params = [_param(p) for p in params]
        self.lr, self.kind = lr, optimizer
        self._tr = _core._Trainer(
            loss,
            self.params,
            lr,
            optimizer,
            momentum,
            weight_decay,
            tuple(betas),
            eps,
            loss_scale,
            device_optimizer,
            resident_state,
            logits,
            **options,
        )

    @property
    def t(self) -> int:
        """Steps applied so far."""
        return self._tr.t

    @property
    def batch(self) -> int:
        """The compiled batch size (leading extent of the first data input)."""
        return self._tr.batch

    @property
    def data_inputs(self) -> list:
        """[(name, shape)] of the arrays ``step`` takes, in order."""
        return self._tr.data_inputs

    @property
    def device(self) -> str:
        """The executor running the training program."""
        return self._tr.device

    def step(self, *arrays) -> float:
        """One training step on a batch: the data inputs' arrays in creation order (an int32 input such
        as token ids takes integers within +-2**24, fed as int32; a non-integer is a ValueError).
        Returns the loss."""
        loss, skipped = self._tr.step(list(arrays))
        if skipped is not None:
            _warn_skip(skipped)
        return loss

    def release(self):
        """Free the compiled programs now (later calls raise RuntimeError)."""
        self._tr.release()

    def sync(self):
        """Copy device-resident parameters back into the fp32 master copies (a no-op in host mode)."""
        self._tr.sync()

    def predict(self, x) -> np.ndarray:
        """The logits for any number of examples, in batches of the compiled size (last one padded)."""
        return self._tr.predict(x)

    def accuracy(self, x, labels) -> float:
        """Fraction of examples whose argmax logit equals the label (class indices or one-hot)."""
        return self._tr.accuracy(x, _labels(labels))

    def fit(self, x, y, epochs: int = 1, seed: int = 0, test=None, log_every: int = 50, file=sys.stderr) -> dict:
        """Minibatch training over (x, y) for ``epochs`` (reshuffled per epoch from ``seed``; the
        last partial batch of each epoch is dropped), logging loss (and test accuracy at each
        epoch end when ``test=(x, labels)``) to ``file``. Returns {"loss": [...], "accuracy": [...]}."""
        t = None if test is None else (test[0], _labels(test[1]))
        loss, acc = self._tr.fit(x, y, epochs, seed, t, log_every, lambda line: print(line, file=file))
        return {"loss": loss, "accuracy": acc}

    def state_dict(self) -> dict:
        """Parameters and optimizer state as fp32 arrays keyed by position: ``params.<k>`` for
        the k-th parameter, ``m.<k>`` / ``v.<k>`` (Adam, AdamW) or ``buf.<k>`` (SGD momentum)."""
        return self._tr.state_dict()[0]

    def save(self, path):
        """Write parameters, optimizer state, the step count and the parameter names to a safetensors file."""
        self._tr.save(str(path))

    def load(self, path):
        """Restore parameters (by position), optimizer state and the step count written by ``save``;
        every tensor must be present with the same shape (ValueError naming the file and tensor)."""
        self._tr.load(str(path))


def _labels(labels) -> list:
    """Class indices from indices or one-hot rows."""
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] > 1:
        labels = labels.argmax(axis=1)
    return [int(v) for v in labels.reshape(-1)]
