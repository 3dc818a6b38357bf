#!/usr/bin/env bash
# tests/mpirun.sh — mpirun as every suite runs it: tests/mpirun.sh -np N PROGRAM ...
#   - mpirun refuses to run as root without the two OMPI_ALLOW variables (containers
#     often run as root);
#   - under `make sanitize`, LeakSanitizer would report OpenMPI's own allocations:
#     tests/lsan.supp names its libraries, and the slow unwinder (MPI runs only) finds
#     them on the stack; leaks of ours are still reported;
#   - --oversubscribe: more ranks than this machine's cores.
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
exec mpirun --oversubscribe "$@"
