#!/usr/bin/python3
"""torch_moe.py -- the mixture-of-experts layer (common/moe.h) in PyTorch, against what
tests/test_moe --dump wrote: the router's choices, the layer's output, its two losses
and, by autograd, the gradients of L = sum(out * R) + aux + z for the input and every
weight. One PASS/FAIL line per check; exit 0 iff all pass.

  torch_moe.py DUMP.safetensors

PyTorch routes on its own (softmax, the k largest, capacity in token order); the
routing must come out the same as the C's. Tolerances, relative (||ours - torch|| /
||torch||): the output and losses 1e-5 (fp32 on both sides, other summation orders;
the C's GELU uses a tanh within 1e-7), the gradients 1e-4 (longer chains of sums, the
softmax's backward subtracting near-equal numbers).
"""
import math
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_gpt import load_safetensors  # noqa: E402


def moe(x, w, E, k, F, capacity, aux_weight, z_weight):
    """The layer, as moe.h describes it; returns out, aux + z and the routing."""
    N, C = x.shape
    wr = w[:E * C].view(E, C)
    o = E * C
    w1 = w[o:o + E * F * C].view(E, F, C); o += E * F * C
    b1 = w[o:o + E * F].view(E, F); o += E * F
    w2 = w[o:o + E * C * F].view(E, C, F); o += E * C * F
    b2 = w[o:o + E * C].view(E, C)
    logits = x @ wr.T
    probs = torch.softmax(logits, dim=1)
    top = torch.topk(probs.detach(), k, dim=1).indices          # falling probability
    chosen = probs.gather(1, top)
    gates = chosen / chosen.sum(dim=1, keepdim=True)
    cap = math.ceil(capacity * N * k / E) if capacity > 0 else N * k
    kept, rows = [0] * E, torch.full((N, k), -1, dtype=torch.int32)
    for n in range(N):                                           # token order
        for j in range(k):
            e = int(top[n, j])
            if kept[e] < cap:
                rows[n, j] = kept[e]
                kept[e] += 1
    out = torch.zeros_like(x)
    for n in range(N):
        for j in range(k):
            if rows[n, j] < 0:
                continue
            e = int(top[n, j])
            h = x[n] @ w1[e].T + b1[e]
            a = torch.nn.functional.gelu(h, approximate="tanh")
            out[n] = out[n] + gates[n, j] * (a @ w2[e].T + b2[e])
    f = torch.bincount(top.flatten(), minlength=E).to(x.dtype) / (N * k)
    aux = aux_weight * E * (f * probs.mean(dim=0)).sum()
    z = z_weight * (torch.logsumexp(logits, dim=1) ** 2).mean()
    return out, aux + z, top, rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    t, meta = load_safetensors(sys.argv[1])
    E, k, F = int(meta["E"]), int(meta["k"]), int(meta["F"])
    cfg = (E, k, F, float(meta["capacity"]), float(meta["aux_weight"]), float(meta["z_weight"]))
    x = torch.tensor(np.array(t["x"]), requires_grad=True)
    w = torch.tensor(np.array(t["w"]), requires_grad=True)
    R = torch.tensor(np.array(t["R"]))
    out, losses, top, rows = moe(x, w, *cfg)
    (torch.sum(out * R) + losses).backward()
    ok = True

    def check(name, ours, theirs, tol):
        nonlocal ok
        ours = torch.tensor(np.array(ours), dtype=torch.float64)
        theirs = theirs.detach().to(torch.float64)
        den = theirs.norm().item()
        err = (ours - theirs).norm().item() / den if den > 0 else math.inf
        good = err <= tol
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} torch.moe.{name}  rel err {err:.2e} (tol {tol:.0e})")

    same = np.array_equal(np.array(t["expert"]), top.numpy()) and \
        np.array_equal(np.array(t["row"]) >= 0, rows.numpy() >= 0)
    ok &= same
    dropped = int((rows < 0).sum())
    print(f"{'PASS' if same else 'FAIL'} torch.moe.routing  the same k experts per token, in the "
          f"same order, and the same {dropped} of {rows.numel()} assignments dropped")
    check("out", t["out"], out, 1e-5)
    check("losses", t["losses"], losses.reshape(1), 1e-5)
    check("dx", t["dx"], x.grad, 1e-4)
    check("dw", t["dw"], w.grad, 1e-4)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
