"""sharded_check.py — stage 03's memory and traffic against the formulas.

  sharded_check.py memory LOG NAME STRATEGY N K SHARD MEMCALC_JSON L C V T
  sharded_check.py bytes  LOG NAME STRATEGY N K SHARD L C V T [noreshard] [bf16]

LOG holds build/sharded_train's output: one "MEM rank=r ..." and one "BYTES rank=r
..." line per rank. Prints one PASS/FAIL line named NAME.

memory: every rank's ledger peaks against the stage-01 calculator (MEMCALC_JSON,
  `build/memcalc --recipe course --zero Z --dp N --json` for that model), category
  by category, exactly: weights, gradients and optimizer state (4, 4 and 8 bytes
  per element of what the strategy keeps), activations and workspace. FSDP/HSDP
  pad every unit, so there the model states are checked against Σu ceil(|u|/P)
  elements (P = the shard group) instead of the calculator's ceil(Ψ/N). The
  communication buffers and gathered units (MEM_COMM) are checked against the
  lesson's working set: none for DDP and ZeRO-1 (in place); at most the gradient
  buckets in flight (2 launched + 2 being filled) for ZeRO-2, plus at most three
  gathered units and the head's units for stage 3.

bytes: what each rank sent in the last step (ring collectives) against
  2Ψ(N-1)/N elements for DDP and ZeRO-1/2 (reduce-scatter + all-gather, or the
  all-reduce, which is both), and for stage 3 Ψ(N-1)/N each for the reduce-scatter
  and the forward's all-gathers, plus the backward's all-gathers of every unit
  but the head's (which stay gathered from forward to backward): (3Ψ - head)(N-1)/N
  with resharding, 2Ψ(N-1)/N without. The mean over the ranks, within 0.1 %: in
  a ring over blocks each rank sends the buffer less one block, so the ranks'
  bytes differ with their blocks' sizes (ZeRO's blocks of a unit are very uneven)
  while their sum is (N-1) buffers exactly; the norm's all-reduce adds 8 bytes.
"""
import json
import sys

MAX_IN_FLIGHT = 2  # 03_bucketing_zero/buckets.c


def groups(L, C, V, T):
    """Elements of each layer group: embeddings, L blocks, ln_f."""
    return [(V + T) * C] + [12 * C * C + 13 * C] * L + [2 * C]


def units(g, k):
    return [sum(g[i:i + k]) for i in range(0, len(g), k)]


def ceil_div(a, b):
    return (a + b - 1) // b


def parse(log, tag):
    out = {}
    for line in open(log, errors="replace"):
        if line.startswith(tag + " "):
            kv = dict(w.split("=", 1) for w in line.split()[1:])
            out[int(kv["rank"])] = kv
    return out


def report(ok, name, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name}  {detail}")


def memory(log, name, strategy, n, k, shard, calc, L, C, V, T):
    mem = parse(log, "MEM")
    if len(mem) != n:
        return report(False, name, f"{len(mem)} MEM lines for {n} ranks (a rank failed?)")
    c = json.load(open(calc))
    g = groups(L, C, V, T)
    psi = sum(g)
    want = {"activations": c["bytes_activations"], "workspace": c["bytes_workspace"]}
    if strategy in ("fsdp", "hsdp"):
        p = shard if strategy == "hsdp" and shard > 0 else n
        f = sum(ceil_div(u, p) for u in units(g, k))
        want.update(params=4 * f, grads=4 * f, optimizer=8 * f)
    else:
        want.update(params=c["bytes_params"], grads=c["bytes_grads"], optimizer=c["bytes_optimizer"])
    bad = []
    for r, kv in sorted(mem.items()):
        for cat, v in want.items():
            if int(kv[cat]) != v:
                bad.append(f"rank {r} {cat} {kv[cat]} != {v}")
    # The working set in MEM_COMM, as the lesson accounts for it.
    bucket = min(psi, max(max(g), 25 * 10**6 // 4))  # the largest a bucket can be (elements)
    u = units(g, k if strategy in ("fsdp", "hsdp") else 1)
    if strategy in ("fsdp", "hsdp"):
        bucket = max(u)
    head = u[0] + (u[-1] if len(u) > 1 else 0)
    bound = {"ddp": 0, "zero1": 0, "zero2": 4 * (MAX_IN_FLIGHT + 2) * bucket}.get(
        strategy, 4 * ((MAX_IN_FLIGHT + 2) * bucket + 3 * max(u) + head))
    for r, kv in sorted(mem.items()):
        comm = int(kv["comm"])
        if comm > bound or (strategy in ("zero3", "fsdp", "hsdp") and comm < 4 * max(u)):
            bad.append(f"rank {r} comm {comm} outside [{4 * max(u) if bound else 0}, {bound}]")
    report(not bad, name, (f"{n} ranks x 6 categories equal, comm within the working set "
                           f"(<= {bound} B)") if not bad else "; ".join(bad[:4]))


def traffic(log, name, strategy, n, k, shard, L, C, V, T, reshard=True, elem=4):
    sent = parse(log, "BYTES")
    if len(sent) != n:
        return report(False, name, f"{len(sent)} BYTES lines for {n} ranks (a rank failed?)")
    g = groups(L, C, V, T)
    psi = sum(g)
    u = units(g, k if strategy in ("fsdp", "hsdp") else 1)
    head = u[0] + (u[-1] if len(u) > 1 else 0)
    p = shard if strategy == "hsdp" and shard > 0 else n
    if strategy in ("ddp", "zero1", "zero2"):
        elems = 2 * psi * (n - 1) / n
        formula = "2Ψ(N-1)/N"
    elif not reshard:  # every unit gathered once, in forward, and kept to its backward
        elems = 2 * psi * (p - 1) / p
        formula = "2Ψ(N-1)/N (no resharding)"
    else:
        elems = (3 * psi - head) * (p - 1) / p
        formula = "(3Ψ - head)(N-1)/N"
        if strategy == "hsdp":  # + the all-reduce of each rank's shard across the replicas
            rep = n // p
            elems += 2 * (psi / p) * (rep - 1) / rep
            formula = "(3Ψ - head)(P-1)/P + 2(Ψ/P)(R-1)/R"
    want = elem * elems  # fp32 on the wire, or bf16 (2 bytes) for a mixed recipe's
    if elem == 2:
        formula += ", bf16"
    per_rank = [int(kv["sent_per_step"]) for _, kv in sorted(sent.items())]
    mean = sum(per_rank) / n
    off = abs(mean - want) / want if want else mean
    report(off <= 0.001, name, f"bytes per rank {', '.join(map(str, per_rank))}: mean {mean:.0f}; "
                               f"formula {formula} = {want:.0f} (Ψ = {psi}); {100 * off:.4f} % off "
                               f"(tol 0.1 %)")


if __name__ == "__main__":
    what, log, name, strategy = sys.argv[1:5]
    n, k, shard = (int(x) for x in sys.argv[5:8])
    if what == "memory":
        memory(log, name, strategy, n, k, shard, sys.argv[8], *(int(x) for x in sys.argv[9:13]))
    else:
        traffic(log, name, strategy, n, k, shard, *(int(x) for x in sys.argv[8:12]),
                reshard="noreshard" not in sys.argv[12:], elem=2 if "bf16" in sys.argv[12:] else 4)
