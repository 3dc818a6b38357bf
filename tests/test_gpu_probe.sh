#!/usr/bin/env bash
# tests/test_gpu_probe.sh BUILD — the GPU tests tell "no GPU" (skip) from "a
# broken GPU" (fail), and refuse ranks that cannot share a GPU. Runs anywhere:
# the hooks of common/cuda_probe.h replace the probe's answer before any GPU
# is touched, so on a GPU machine too nothing here uses the GPU.
#
#   1. a CUDA error other than "no device" FAILS test_gpu and test_gpu_comm,
#      naming the error (COURSE_FAKE_CUDA_ERROR), and "no device" skips them;
#   2. on a machine with no GPU, the real probe skips them with "no CUDA
#      device"; with no driver but an NVIDIA GPU on the PCI bus it fails them;
#   3. ranks that would share a GPU in exclusive-process mode: test_gpu_comm
#      skips, naming the mode, and ddp_train and pp_train refuse before launching;
#   4. the rank-to-GPU map reads LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
#      SLURM_LOCALID (in that order), and not under the built-in launcher.
#   5. the CUDA backend is a library the programs load when a run asks for the
#      GPU: no program needs cuBLAS or NCCL to start, and a program whose
#      library is missing fails the GPU tests, naming the file.
#
# One PASS/FAIL line per check, for tests/run.sh. A build without CUDA: SKIP.
set -u
# Each check sets the hooks it needs; none may leak in from outside.
unset COURSE_FAKE_CUDA_ERROR COURSE_FAKE_CUDA_DEVICES COURSE_FAKE_PCI_ROOT
B=${1:-build}
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fails=0

# expect NAME WANT_RC PATTERN -- COMMAND...: COMMAND (under a 60 s limit) must
# exit with WANT_RC ("nonzero" for any failure) and print PATTERN (grep -E).
expect() {
    local name=$1 want=$2 pat=$3 rc ok=1; shift 4
    timeout -k 5 60 "$@" >"$out/$name" 2>&1
    rc=$?
    if [ "$want" = nonzero ]; then [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || ok=0
    else [ "$rc" -eq "$want" ] || ok=0; fi
    grep -Eq -- "$pat" "$out/$name" || ok=0
    # The child's own "FAIL ..." lines are quoted, never echoed at the start of a
    # line: tests/run.sh counts those.
    local said
    said=$(grep -E -m1 -- "$pat" "$out/$name" || tail -n 1 "$out/$name")
    if [ "$ok" -eq 1 ]; then
        echo "PASS gpu.probe.$name  exit $rc: '${said:0:220}'"
    else
        echo "FAIL gpu.probe.$name  exit $rc (wanted $want and /$pat/); output:"
        sed 's/^/    | /' "$out/$name" | tail -n 6
        fails=$((fails + 1))
    fi
}

# absent NAME PATTERN WHAT: the output of check NAME must not match PATTERN.
absent() {
    if grep -Eq -- "$2" "$out/$1"; then
        echo "FAIL gpu.probe.$1.not  /$2/ matched: '$(grep -E -m1 -- "$2" "$out/$1" | cut -c1-200)'"
        fails=$((fails + 1))
    else
        echo "PASS gpu.probe.$1.not  $3"
    fi
}

"$B/tests/test_gpu" --probe >"$out/machine" 2>&1
machine=$?
if grep -q "this build has no CUDA" "$out/machine"; then
    echo "SKIP gpu-probe: this build has no CUDA (nothing to probe)"
    exit 77
fi
echo "# this machine: $(head -n 1 "$out/machine")"

# 1. A broken GPU fails the suite, naming the error; "no device" skips it.
expect fake_error_fails_test_gpu 1 '^FAIL gpu\.cuda_probe .*cudaErrorInsufficientDriver' -- \
    env COURSE_FAKE_CUDA_ERROR=insufficient-driver "$B/tests/test_gpu"
expect fake_error_fails_test_gpu_comm 1 '^FAIL gpu-comm\.cuda_probe .*cudaErrorInsufficientDriver' -- \
    env COURSE_FAKE_CUDA_ERROR=insufficient-driver "$B/tests/test_gpu_comm" --np 2 --timeout 10
expect fake_busy_fails_test_gpu 1 '^FAIL gpu\.cuda_probe .*cudaErrorDevicesUnavailable: .*busy or unavailable' -- \
    env COURSE_FAKE_CUDA_ERROR=devices-unavailable "$B/tests/test_gpu"
expect fake_oom_fails_test_gpu_comm 1 '^FAIL gpu-comm\.cuda_probe .*cudaErrorMemoryAllocation' -- \
    env COURSE_FAKE_CUDA_ERROR=memory-allocation "$B/tests/test_gpu_comm"
expect fake_no_device_skips 77 '^SKIP gpu: no CUDA device .*cudaErrorNoDevice' -- \
    env COURSE_FAKE_CUDA_ERROR=no-device "$B/tests/test_gpu"
expect fake_error_refuses_train nonzero 'error: --device cuda: CUDA is present but broken: .*cudaErrorInsufficientDriver' -- \
    env COURSE_FAKE_CUDA_ERROR=insufficient-driver "$B/train" --device cuda --preset tiny --steps 1

# 2. The machine's own answer. Without a GPU it must be a skip saying "no CUDA
# device" (CI: the toolkit, no driver, no GPU); with one, the probe is ready.
if [ "$machine" -eq 77 ]; then
    expect no_gpu_skips_test_gpu 77 '^SKIP gpu: no CUDA device' -- "$B/tests/test_gpu"
    expect no_gpu_skips_test_gpu_comm 77 '^SKIP gpu-comm: no CUDA device' -- \
        "$B/tests/test_gpu_comm" --np 2 --timeout 10
elif [ "$machine" -eq 0 ]; then
    echo "PASS gpu.probe.machine_ready  $(head -n 1 "$out/machine" | cut -c3-)"
else
    echo "FAIL gpu.probe.machine  this machine's GPU is broken: '$(head -n 1 "$out/machine")'"
    fails=$((fails + 1))
fi
if grep -q "no CUDA driver is installed" "$out/machine"; then
    # No driver: "no device" only while the PCI bus shows no NVIDIA GPU.
    pci="$out/pci" && mkdir -p "$pci/0000:65:00.0" && echo 0x10de >"$pci/0000:65:00.0/vendor" &&
        echo 0x030200 >"$pci/0000:65:00.0/class"
    expect gpu_without_driver_fails 1 '^FAIL gpu\.cuda_probe .*NVIDIA GPU is on the PCI bus but no CUDA driver' -- \
        env COURSE_FAKE_PCI_ROOT="$pci" "$B/tests/test_gpu"
else
    echo "SKIP gpu.probe.gpu_without_driver_fails: a CUDA driver is installed here"
fi

# 3. Exclusive-process mode: ranks cannot share the GPU. Skipped, or refused
# before any rank starts (no "[rank" line), naming the mode; never changed.
expect shared_exclusive_gpu_skips 77 '^SKIP gpu-comm: 2 ranks would share GPU 0, whose compute mode is exclusive-process' -- \
    env COURSE_FAKE_CUDA_DEVICES=1:exclusive-process "$B/tests/test_gpu_comm" --np 2 --timeout 10
expect shared_exclusive_gpu_refused nonzero '^error: --np 3 --device cuda on 1 GPU: 3 ranks would share GPU 0, whose compute mode is exclusive-process' -- \
    env COURSE_FAKE_CUDA_DEVICES=1:exclusive-process "$B/ddp_train" --np 3 --device cuda --preset tiny --steps 1
absent shared_exclusive_gpu_refused '^\[rank|^launcher' "refused before any rank was started"
# Stage 05's driver checks the same before it launches its pipeline.
expect pp_shared_exclusive_gpu_refused nonzero '^error: --np 2 --device cuda on 1 GPU: 2 ranks would share GPU 0, whose compute mode is exclusive-process' -- \
    env COURSE_FAKE_CUDA_DEVICES=1:exclusive-process "$B/pp_train" --np 2 --pp 2 --device cuda --preset tiny --steps 1
absent pp_shared_exclusive_gpu_refused '^\[rank|^launcher' "pp_train refused before any rank was started"
# One rank per GPU shares nothing: not refused (the ranks start, then fail here
# on the faked second GPU).
expect own_gpus_not_refused nonzero 'launcher: rank' -- \
    env COURSE_FAKE_CUDA_DEVICES=2:exclusive-process "$B/ddp_train" --np 2 --device cuda --preset tiny --steps 1 --timeout 5
absent own_gpus_not_refused 'would share' "one rank per GPU is not refused"

# 4. Which GPU a rank takes (4 faked GPUs; the rank then fails to create its
# context on this machine, after saying which GPU it took).
expect slurm_localid_picks_gpu nonzero 'GPU 2 of 4 \(from SLURM_LOCALID=6\)' -- \
    env COURSE_FAKE_CUDA_DEVICES=4 SLURM_LOCALID=6 "$B/ddp_train" --device cuda --preset tiny --steps 1 --timeout 10
expect local_rank_before_slurm nonzero 'GPU 1 of 4 \(from LOCAL_RANK=5\)' -- \
    env COURSE_FAKE_CUDA_DEVICES=4 SLURM_LOCALID=6 LOCAL_RANK=5 "$B/ddp_train" --device cuda --preset tiny --steps 1 --timeout 10
expect ompi_before_slurm nonzero 'GPU 3 of 4 \(from OMPI_COMM_WORLD_LOCAL_RANK=3\)' -- \
    env COURSE_FAKE_CUDA_DEVICES=4 SLURM_LOCALID=6 OMPI_COMM_WORLD_LOCAL_RANK=3 "$B/ddp_train" --device cuda --preset tiny --steps 1 --timeout 10
expect builtin_launcher_ignores_env nonzero 'launcher: rank' -- \
    env COURSE_FAKE_CUDA_DEVICES=4 SLURM_LOCALID=6 "$B/ddp_train" --np 2 --device cuda --preset tiny --steps 1 --timeout 5
absent builtin_launcher_ignores_env 'from SLURM_LOCALID' "forked ranks take GPU rank % GPUs, not the launcher's SLURM_LOCALID"

# 5. The backend's library: loaded on demand, never linked in.
expect train_needs_no_cuda_libs 0 'libc\.so' -- ldd "$B/train"
absent train_needs_no_cuda_libs 'libcublas|libnccl|libcudart' "build/train starts without cuBLAS, NCCL or the CUDA runtime"
expect backend_has_the_cuda_libs 0 'libcublas' -- ldd "$B/libcourse_cuda.so"
mkdir -p "$out/alone/tests"
cp "$B/tests/test_gpu" "$out/alone/tests/"
expect missing_backend_fails 1 '^FAIL gpu\.cuda_probe  the CUDA backend libcourse_cuda\.so is in neither' -- \
    "$out/alone/tests/test_gpu"
[ "$fails" -eq 0 ]
