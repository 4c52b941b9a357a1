#!/usr/bin/env python3
"""torch_mlp.py - the PyTorch reference for sgdlab's `local` throughput.

The same training as `sgdlab run` with engine local: an MLP (ReLU hidden
layers, softmax cross-entropy), SGD with momentum, on Fashion-MNIST read
from its IDX files (gzip or plain) by this script itself, the whole
training set kept on the device.  One process, fp32, TF32 off unless
--tf32.  Prints one line per timing mode:

  torch_mlp: dims=784-2048-2048-10 batch=256 device=cuda tf32=0 sync=none
             steps=600 samples/s=204076

sync=none: no host synchronisation inside the timed loop (the loss stays on
the device); sync=step: loss.item() every step, as sgdlab records a loss
per step.  --check-data parses the IDX files and prints their shapes only
(no torch needed).
"""
import argparse
import gzip
import os
import struct
import sys
import time


def read_idx(path):
    """(dims, bytes) of an IDX file of unsigned bytes, .gz or plain."""
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                data = f.read()
            break
    else:
        raise SystemExit("torch_mlp: %s(.gz): no such file" % path)
    if len(data) < 4:
        raise SystemExit("torch_mlp: %s: too short for an IDX header" % path)
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08 or ndim < 1:
        raise SystemExit("torch_mlp: %s: not an IDX file of unsigned bytes" % path)
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    body = data[4 + 4 * ndim:]
    count = 1
    for d in dims:
        count *= d
    if len(body) != count:
        raise SystemExit("torch_mlp: %s: %d bytes of data, header says %d" % (path, len(body), count))
    return dims, body


def load(data_dir):
    xd, xb = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte"))
    yd, yb = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte"))
    if xd[0] != yd[0]:
        raise SystemExit("torch_mlp: %d images but %d labels" % (xd[0], yd[0]))
    return xd, xb, yb


def timed(model, opt, X, Y, batch, steps, sync, torch):
    n = X.shape[0]
    lossf = torch.nn.CrossEntropyLoss()
    gen = torch.Generator(device=X.device)
    gen.manual_seed(1)
    perm = torch.randperm(n, device=X.device, generator=gen)
    spe = n // batch

    def step(t):
        nonlocal perm
        i = t % spe
        if i == 0 and t > 0:
            perm = torch.randperm(n, device=X.device, generator=gen)
        idx = perm[i * batch:(i + 1) * batch]
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(X[idx]), Y[idx])
        loss.backward()
        opt.step()
        return loss.item() if sync else loss

    for t in range(30):  # warm-up: cuBLAS heuristics, allocator
        step(t)
    if X.is_cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for t in range(steps):
        step(t)
    if X.is_cuda:
        torch.cuda.synchronize()
    return steps * batch / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--hidden", default="2048,2048")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tf32", type=int, default=0)
    ap.add_argument("--check-data", action="store_true")
    a = ap.parse_args()
    xd, xb, yb = load(a.data)
    if a.check_data:
        print("torch_mlp: data %s: %d images of %s, %d labels" %
              (a.data, xd[0], "x".join(map(str, xd[1:])), len(yb)))
        return 0
    import torch
    torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32)
    torch.backends.cudnn.allow_tf32 = bool(a.tf32)
    torch.manual_seed(1)
    d = 1
    for v in xd[1:]:
        d *= v
    dev = torch.device(a.device)
    X = torch.frombuffer(bytearray(xb), dtype=torch.uint8).reshape(xd[0], d).to(dev).float() / 255
    Y = torch.frombuffer(bytearray(yb), dtype=torch.uint8).to(dev).long()
    dims = [d] + [int(h) for h in a.hidden.split(",") if h] + [10]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i + 2 < len(dims):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    for sync in (0, 1):
        sps = timed(model, opt, X, Y, a.batch, a.steps, sync, torch)
        print("torch_mlp: dims=%s batch=%d device=%s tf32=%d sync=%s steps=%d samples/s=%.0f" %
              ("-".join(map(str, dims)), a.batch, a.device, a.tf32,
               "step" if sync else "none", a.steps, sps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
