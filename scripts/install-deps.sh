#!/usr/bin/env bash
# install-deps.sh — installs the Debian packages the course uses. Idempotent:
# does nothing when everything is present. Not root: prints the exact
# apt-get command to run and stops.
#
#   build-essential    gcc, make
#   libopenblas-dev    CPU GEMM (cblas_sgemm)
#   libopenmpi-dev, openmpi-bin   MPI baselines and mpirun launches
#   gnuplot-nox        the plots
#   python3-torch      PyTorch reference values, tests only (Debian's /usr/bin/python3)
#   python3-venv       .venv/: Debian's Python and its torch, plus the `safetensors`
#                      package from PyPI (Debian 12 has none), which stage 07's tests
#                      open the checkpoint shards with
#   patch              applies the graders' mutants (make grade-check)
#
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is not a Debian package here: the build uses
# it when it finds it under /usr/local/cuda (or CUDA_HOME / NCCL_HOME).
#
#   bash scripts/install-deps.sh           the packages, then .venv/
#   bash scripts/install-deps.sh --venv    .venv/ only (stage 07's tests make it when missing)
set -eu
venv_only=0
[ "${1:-}" = --venv ] && venv_only=1
PKGS="build-essential libopenblas-dev libopenmpi-dev openmpi-bin gnuplot-nox python3-torch python3-venv patch"
missing=""
[ "$venv_only" = 1 ] && PKGS=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ "$venv_only" = 1 ]; then
    :
elif [ -n "$missing" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing:$missing"
        echo "install-deps: run as root:  apt-get update && apt-get install -y$missing"
        exit 1
    fi
    echo "install-deps: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing
else
    echo "install-deps: all packages present ($PKGS)"
fi

# .venv/ (git-ignored): /usr/bin/python3 with its site packages (torch, numpy) and
# PyTorch's `safetensors` package from PyPI. tests/run.sh prefers it. Without a
# network the tests that need the package say SKIP; nothing else depends on it.
cd "$(dirname "$0")/.."
if ! .venv/bin/python3 -c 'import safetensors.torch' 2>/dev/null; then
    { /usr/bin/python3 -m venv --system-site-packages .venv &&
      .venv/bin/python3 -m pip install -q --disable-pip-version-check safetensors &&
      echo "install-deps: created .venv/ and installed the safetensors package into it"; } ||
        echo "install-deps: could not install the safetensors package into .venv/ (no network?):" \
             "stage 07's check that PyTorch's package opens the shards will be skipped"
fi
