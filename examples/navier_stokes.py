"""2-D incompressible Navier-Stokes (vorticity form) on the periodic box [0, 2pi)^2, pseudo-spectral,
with every FFT running through a compiled aneforge program (af.fft.fft2), plus a passive dye
(N <= 128 keeps every fp16 spectrum below 65504).

    .venv/bin/python examples/navier_stokes.py [--n 64] [--steps 400] [--out navier_stokes_dye.png] [--check]

    w_t + u . grad w = nu lap w,    c_t + u . grad c = kappa lap c,    u = (psi_y, -psi_x), lap psi = -w

Double shear layer initial condition (two tanh jets with a small sinusoidal kick), Heun (RK2)
time stepping with exact integrating-factor diffusion, 2/3-rule dealiasing. fp16 range: every
field or spectrum is fed to the graph scaled to max |.| = 1 (the host undoes the scale), spectra
are kept normalised (divided by N^2), and the inverse transform is conj(fft2(conj(X / N^2))). Writes a PNG of the
final dye field (zlib + struct, no plotting library). ``--check`` reruns the same scheme with
numpy.fft in float64 and prints the relative L2 difference of the final dye fields.
"""

from __future__ import annotations

import argparse
import struct
import time
import zlib
from collections.abc import Callable

import aneforge as af
import numpy as np

Transform = Callable[[np.ndarray], np.ndarray]


def _unit(x: np.ndarray) -> np.ndarray:
    """Per-field scale (max |field|, 1 for a zero field) shaped to broadcast over [.., n, n]."""
    s = np.abs(x).max(axis=(-2, -1), keepdims=True)
    return np.where(s > 0, s, 1.0)


def graph_fft2(x: np.ndarray) -> np.ndarray:
    """Unnormalised forward 2-D DFT of a stack of real fields on the graph; each field is fed
    scaled to max |x| = 1 (so every spectrum stays <= N^2) and the scale is undone on the host."""
    s = _unit(x)
    return af.fft.fft2(x / s).astype(np.complex128) * s


def graph_synth(xn: np.ndarray) -> np.ndarray:
    """Physical fields from normalised spectra (X / N^2) as conj(fft2(conj(.))) on the graph,
    each spectrum fed scaled to max |X| = 1."""
    s = _unit(xn)
    return np.conj(af.fft.fft2(np.conj(xn / s))).real.astype(np.float64) * s


def numpy_fft2(x: np.ndarray) -> np.ndarray:
    return np.fft.fft2(x)


def numpy_synth(xn: np.ndarray) -> np.ndarray:
    return np.fft.ifft2(xn * xn.shape[-1] * xn.shape[-2]).real


def simulate(n: int, steps: int, dt: float, nu: float, fwd: Transform, synth: Transform) -> np.ndarray:
    """Run the scheme with the given transforms; returns the final dye field [n, n]."""
    x = np.arange(n) * 2 * np.pi / n
    xx, yy = np.meshgrid(x, x, indexing="xy")  # axis 0 = y, axis 1 = x
    k = np.fft.fftfreq(n, 1.0 / n)
    kx, ky = np.meshgrid(k, k, indexing="xy")
    k2 = kx**2 + ky**2
    k2_inv = np.where(k2 == 0, 0.0, 1.0 / np.where(k2 == 0, 1.0, k2))
    dealias = (np.abs(kx) < n / 3) & (np.abs(ky) < n / 3)
    delta = np.pi / 15
    u0 = np.where(yy <= np.pi, np.tanh((yy - np.pi / 2) / delta), np.tanh((3 * np.pi / 2 - yy) / delta))
    v0 = 0.05 * np.sin(xx)
    norm = float(n * n)
    spec = lambda f: fwd(f) / norm  # noqa: E731  (normalised spectra)
    u_hat, v_hat = spec(u0), spec(v0)
    w_hat = 1j * kx * v_hat - 1j * ky * u_hat
    c0 = 0.5 * (np.tanh((yy - np.pi / 2) / delta) - np.tanh((yy - 3 * np.pi / 2) / delta))
    c_hat = spec(c0)
    decay = np.exp(-nu * k2 * dt)

    def rhs(w_h: np.ndarray, c_h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        psi = w_h * k2_inv
        fields = np.stack([1j * ky * psi, -1j * kx * psi, 1j * kx * w_h, 1j * ky * w_h, 1j * kx * c_h, 1j * ky * c_h])
        u, v, wx, wy, cx, cy = synth(fields)
        nonlinear = spec(np.stack([-(u * wx + v * wy), -(u * cx + v * cy)]))
        return nonlinear[0] * dealias, nonlinear[1] * dealias

    for _ in range(steps):
        a_w, a_c = rhs(w_hat, c_hat)
        w1, c1 = (w_hat + dt * a_w) * decay, (c_hat + dt * a_c) * decay
        b_w, b_c = rhs(w1, c1)
        w_hat = w_hat * decay + 0.5 * dt * (a_w * decay + b_w)
        c_hat = c_hat * decay + 0.5 * dt * (a_c * decay + b_c)
    return synth(c_hat[None])[0]


def write_png(path: str, field: np.ndarray, zoom: int = 4) -> None:
    """An RGB PNG of `field` (each cell zoom x zoom pixels) with a blue-white-red colour map (row 0 at the bottom)."""
    t = np.clip((field - field.min()) / max(float(np.ptp(field)), 1e-12), 0, 1)[::-1]
    t = np.repeat(np.repeat(t, zoom, axis=0), zoom, axis=1)
    r = np.clip(2 * t, 0, 1)
    b = np.clip(2 - 2 * t, 0, 1)
    g = np.minimum(r, b)
    rgb = (np.stack([r, g, b], -1) * 255).astype(np.uint8)
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[i].tobytes() for i in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )
    with open(path, "wb") as f:
        f.write(png)


def main() -> None:
    ap = argparse.ArgumentParser(description="2-D pseudo-spectral Navier-Stokes with every FFT on the aneforge graph")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--dt", type=float, default=0.02)
    ap.add_argument("--nu", type=float, default=5e-4)
    ap.add_argument("--out", default="navier_stokes_dye.png")
    ap.add_argument("--check", action="store_true", help="also run with numpy.fft (float64) and compare")
    args = ap.parse_args()
    t0 = time.time()
    before = af.fft.compile_count()
    dye = simulate(args.n, args.steps, args.dt, args.nu, graph_fft2, graph_synth)
    print(
        f"{args.steps} steps at {args.n}x{args.n} in {time.time() - t0:.1f} s; {af.fft.compile_count() - before} FFT programs compiled"
    )
    write_png(args.out, dye)
    print(f"wrote {args.out}; dye in [{dye.min():.3f}, {dye.max():.3f}]")
    if args.check:
        ref = simulate(args.n, args.steps, args.dt, args.nu, numpy_fft2, numpy_synth)
        print(
            f"relative L2 difference of the dye field vs numpy.fft float64: {np.linalg.norm(dye - ref) / np.linalg.norm(ref):.2e}"
        )


if __name__ == "__main__":
    main()
