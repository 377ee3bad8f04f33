"""aneforge quickstart: build a tiny conv net, compile it into one program, run it."""

import time

import aneforge as af
import numpy as np

rng = np.random.default_rng(0)
W = rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.1  # [Cout, Cin, kH, kW]

x = af.input((1, 3, 32, 32))
y = af.conv(x, W, pad=1).relu().mean((2, 3))  # -> (1, 16, 1, 1)
net = af.compile(y)

img = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
out = net(img)
print("output", out.shape, out.ravel()[:4])
print("device", net.device)
print("program", net.program_dir)

times = []
for _ in range(200):
    t0 = time.perf_counter()
    net(img)
    times.append(time.perf_counter() - t0)
print(f"median per call: {np.median(times) * 1e6:.1f} us")
