"""ckpt_shards.py — opens every shard of a stage-07 checkpoint from outside the C code.

    python3 tests/ckpt_shards.py STEP_DIR             # the course's Python reader
    python3 tests/ckpt_shards.py --package STEP_DIR   # and PyTorch's safetensors package

The course's reader (tests/torch_gpt.py's load_safetensors, independent of the C
one) opens each shard listed in the manifest: every piece an F32 matrix named
kind/tensor@r0,c0, one per piece the manifest lists; beside them a rank's own state
(local/*: fp8's scaling F32, the loss-spike history F64). With --package, PyTorch's own
`safetensors` package (PyPI) opens them too, and every tensor must equal the
course's reader's. Prints one PASS line; an assertion names what is wrong.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import load_safetensors  # noqa: E402

package = sys.argv[1] == "--package"
d = sys.argv[-1]
m = json.load(open(os.path.join(d, "manifest.json")))
n = 0
for f in m["files"]:
    path = os.path.join(d, f["name"])
    ours, _ = load_safetensors(path)
    local = [k for k in ours if k.startswith("local/")]  # a rank's own state, not pieces
    for k, v in ours.items():
        assert k in local or re.fullmatch(r"(params|exp_avg|exp_avg_sq|master)/[a-z0-9_.]+@\d+,\d+", k), k
        want = "float64" if k == "local/loss_history" else "float32"
        assert str(v.dtype) == want and v.ndim == 2, (k, v.dtype, v.shape)
    assert len(ours) - len(local) == len(f["pieces"]), (f["name"], len(ours), len(f["pieces"]))
    if package:
        import torch
        from safetensors.torch import load_file
        theirs = load_file(path)
        assert sorted(theirs) == sorted(ours), (f["name"], sorted(set(theirs) ^ set(ours))[:3])
        for k, v in theirs.items():
            want = torch.float64 if k == "local/loss_history" else torch.float32
            assert v.dtype == want and torch.equal(v, torch.as_tensor(ours[k])), (f["name"], k)
    n += len(ours)
if package:
    import safetensors
    import torch
    print(f"PASS s7.shards_safetensors_package  safetensors {safetensors.__version__} (torch "
          f"{torch.__version__}) opened {len(m['files'])} shards, {n} tensors, each equal to the "
          f"course's reader's")
else:
    print(f"PASS s7.shards_readable  {len(m['files'])} shards, {n} tensors opened by Python's reader; "
          f"each listed in the manifest with its rectangle")
