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
#   patch              applies the graders' mutants (make grade-check)
#
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is not a Debian package here: the build uses
# it when it finds it under /usr/local/cuda (or CUDA_HOME / NCCL_HOME).
set -eu
PKGS="build-essential libopenblas-dev libopenmpi-dev openmpi-bin gnuplot-nox python3-torch patch"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present ($PKGS)"
    exit 0
fi
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
