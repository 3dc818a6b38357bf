"""compare_params.py A.safetensors B.safetensors TOL NAME — the relative error
||a - b|| / ||b|| of two weight dumps (the "params" tensor written by
--save-params); prints one PASS/FAIL line named NAME."""
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_gpt import load_safetensors  # noqa: E402

a, b, tol, name = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
x = load_safetensors(a)[0]["params"].astype(np.float64)
y = load_safetensors(b)[0]["params"].astype(np.float64)
err = np.linalg.norm(x - y) / np.linalg.norm(y) if x.shape == y.shape else float("inf")
print(f"{'PASS' if err <= tol else 'FAIL'} {name}  rel_err {err:.3e} (tol {tol:.0e}, {y.size} params)")
