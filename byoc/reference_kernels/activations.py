"""Elementwise float64 math: erf, gelu (and its tanh form) and the activations (relu, sigmoid, ..., prelu, clip).

Speed: erf and gelu call math.erf / math.erfc per element (about 7M elements/s on the 2-core machine).
"""

from __future__ import annotations

import math

import numpy as np

from .. import shape_linear_norm
from .arrays import f64

SELU_ALPHA = 1.67326319217681884765625  # ONNX's defaults
SELU_GAMMA = 1.05070102214813232421875


_ERF = np.frompyfunc(math.erf, 1, 1)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


def erf(x) -> np.ndarray:
    """math.erf per element (within an ulp or so; numpy has no erf and scipy is not a dependency)."""
    return np.asarray(_ERF(f64(x)), dtype=np.float64)  # a 0-d input gives a Python float


def gelu(x) -> np.ndarray:
    """x * Phi(x) = x/2 * erfc(-x/sqrt(2)); erfc keeps the tail for x << 0 where 1 + erf(x) cancels."""
    x = f64(x)
    return 0.5 * x * np.asarray(_ERFC(-x / math.sqrt(2.0)), dtype=np.float64)


GELU_TANH_SCALE = 2.0 * math.sqrt(2.0 / math.pi)
"""Twice sqrt(2/pi): gelu_tanh(x) = x sigmoid(GELU_TANH_SCALE (x + 0.044715 x^3))."""


def gelu_tanh(x) -> np.ndarray:
    """Gelu's tanh approximation, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3),
    as x sigmoid(2u): equal in exact arithmetic (1 + tanh(u) = 2 sigmoid(2u)), and free of
    the cancellation of 1 + tanh(u) where x << 0."""
    x = f64(x)
    with np.errstate(over="ignore", invalid="ignore"):
        return x * sigmoid(GELU_TANH_SCALE * (x + 0.044715 * x * x * x))


def relu(x) -> np.ndarray:
    return np.maximum(f64(x), 0.0)


def sigmoid(x) -> np.ndarray:
    """1 / (1 + exp(-x)), evaluated without overflow for either sign."""
    x = f64(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def tanh(x) -> np.ndarray:
    return np.tanh(f64(x))


def softplus(x) -> np.ndarray:
    """log(1 + exp(x)) without overflow."""
    return np.logaddexp(0.0, f64(x))


def softsign(x) -> np.ndarray:
    x = f64(x)
    return x / (1.0 + np.abs(x))


def elu(x, *, alpha: float = 1.0) -> np.ndarray:
    x = f64(x)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def selu(x, *, alpha: float = SELU_ALPHA, gamma: float = SELU_GAMMA) -> np.ndarray:
    x = f64(x)
    return gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def hard_sigmoid(x, *, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    return np.clip(alpha * f64(x) + beta, 0.0, 1.0)


def leaky_relu(x, *, alpha: float = 0.01) -> np.ndarray:
    x = f64(x)
    return np.where(x >= 0, x, alpha * x)


def prelu(x, slope) -> np.ndarray:
    """x where x >= 0, else slope * x; slope broadcasts to x (ONNX). For Relay's per-channel alpha of
    shape (C,) on NCHW, pass slope reshaped to (C, 1, 1)."""
    shape_linear_norm.prelu(np.shape(x), np.shape(slope))
    x = f64(x)
    return np.where(x >= 0, x, f64(slope) * x)


def clip(x, *, min: float | None = None, max: float | None = None) -> np.ndarray:  # ONNX's names
    """ONNX Clip: min(max(x, min), max), so min > max gives max everywhere; NaN stays NaN."""
    x = f64(x)
    if min is not None:
        x = np.where(x < min, min, x)
    if max is not None:
        x = np.where(x > max, max, x)
    return x
