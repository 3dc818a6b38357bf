#!/usr/bin/env bash
# supervise.sh — the restarting supervisor for jobs another launcher starts.
#
#   07_fault_tolerance/supervise.sh --max-restarts 3 -- \
#       mpirun -np 8 build/ddp_train --transport mpi --ckpt-dir ck --ckpt-every 50 ...
#
# The course's own launcher (--np N --max-restarts R) supervises its ranks itself
# (common/comm.c). Under mpirun (or a cluster's scheduler) the launcher is someone
# else's, and a rank that dies takes the whole job down with it: mpirun kills the
# others and exits non-zero. This wrapper is the supervisor then: it runs the
# command, and when it fails starts it again, up to --max-restarts times. Each
# attempt sees COURSE_RESTART=k (0 the first time); a trainer with --ckpt-dir
# resumes from its newest good checkpoint when k > 0 and says how many steps the
# failure cost. A hung rank is not this script's to find: every rank's --timeout
# watchdog names the peer it waited for and exits, which ends the job the same way.
#
# mpirun starts remote ranks without this shell's environment, so "-x
# COURSE_RESTART" is added after the mpirun of the command. The job's exit status
# is the last attempt's. Exit status 2 is the course's programs' "bad input" (a flag,
# a folder): no restart, which would be refused the same way (or, for a folder holding
# an earlier run's checkpoints, would resume that run).
set -u
max=0
while [ $# -gt 0 ]; do
    case "$1" in
        --max-restarts) max=${2:?--max-restarts needs a number}; shift 2 ;;
        --) shift; break ;;
        *) echo "supervise.sh: unknown flag '$1' (usage: supervise.sh --max-restarts N -- COMMAND...)" >&2
           exit 2 ;;
    esac
done
[[ "$max" =~ ^[0-9]+$ ]] || { echo "supervise.sh: --max-restarts '$max' is not a count" >&2; exit 2; }
[ $# -gt 0 ] || { echo "supervise.sh: no command (usage: supervise.sh --max-restarts N -- COMMAND...)" >&2; exit 2; }
cmd=("$@")
if [ "$(basename "$1")" = mpirun ] || [ "$(basename "$1")" = mpiexec ]; then
    cmd=("$1" -x COURSE_RESTART "${@:2}")
fi

attempt=0
while :; do
    export COURSE_RESTART=$attempt
    t0=$(date +%s.%N)
    "${cmd[@]}"
    status=$?
    secs=$(echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1 - $2}')
    if [ "$status" -eq 0 ]; then
        [ "$attempt" -gt 0 ] && echo "supervisor: the job finished after $attempt restart$([ "$attempt" = 1 ] || echo s)" >&2
        exit 0
    fi
    if [ "$status" -eq 2 ]; then  # the course's programs' "bad input": a restart is refused too
        echo "supervisor: the command refused its input (exit status 2, above); not restarting" >&2
        exit 2
    fi
    how="exit status $status"
    [ "$status" -gt 128 ] && how="killed by signal $((status - 128))"
    if [ "$attempt" -ge "$max" ]; then
        echo "supervisor: attempt $((attempt + 1)) failed after $secs s ($how); giving up after $attempt restart$([ "$attempt" = 1 ] || echo s) (--max-restarts $max)" >&2
        exit "$status"
    fi
    attempt=$((attempt + 1))
    echo "supervisor: attempt $attempt failed after $secs s ($how; above: which rank, and how); restart $attempt of at most $max, from the latest good checkpoint" >&2
done
