#!/usr/bin/env bash
# test_transports.sh — the comm layer (tests/test_comm.c) under every launcher and
# transport: built-in (shm), mpirun (mpi, and tcp), torchrun's convention (tcp; and,
# given LOCAL_WORLD_SIZE, shm between the ranks of a node).
# Then the failure paths: a rank that never comes, and ranks that disagree on a
# message size, must end the job within seconds with a diagnostic, never hang.
#
#   bash tests/test_transports.sh [BUILD]     prints PASS/FAIL/SKIP lines, exits 0
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
BIN="$BUILD/tests/test_comm"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A port for MASTER_PORT per job, below Linux's ephemeral range (32768+) so it
# does not collide with outgoing connections; $$ keeps parallel runs apart.
port=$((20000 + $$ % 10000))
next_port() { port=$((port + 1)); }
MPIRUN=(tests/mpirun.sh)  # mpirun as every suite runs it (the file says why)
have_mpi=$(command -v mpirun)

ms() { date +%s%3N; }
# What a run said besides its checks: its error lines first (mpirun adds banners).
said() {
    { grep -h 'error' "$@"; grep -h -v -E '^(PASS|FAIL|SKIP) |error|^-*$' "$@"; } 2>/dev/null |
        head -n 3 | tr '\n' ' ' | cut -c1-400
}

# ok NAME COMMAND...: the run must exit 0; test_comm's PASS/FAIL lines are passed on.
ok() {
    local name=$1; shift
    timeout -k 5 120 "$@" >"$dir/out" 2>&1
    local rc=$?
    grep -E '^(PASS|FAIL) ' "$dir/out"
    if grep -q "built without MPI" "$dir/out"; then
        echo "SKIP transports.$name  this build has no MPI (mpicc was not found)"
    elif [ "$rc" -ne 0 ]; then  # (a failed check already said FAIL: exit 1 is its echo)
        grep -q '^FAIL ' "$dir/out" || echo "FAIL transports.$name  exit $rc: $(said "$dir/out")"
    elif ! grep -q '^PASS ' "$dir/out"; then
        echo "FAIL transports.$name  exit 0 but no checks reported: $(said "$dir/out")"
    else
        echo "PASS transports.$name  exit 0"
    fi
}

# torchrun N ARGS...: N ranks by the torchrun convention on $port, rank 0 started
# last (the others must wait for it); LWS=k sets LOCAL_WORLD_SIZE (nodes of k ranks).
# Outputs in $dir/rank<r>, exit codes in rcs.
torchrun() {
    local n=$1 r; shift
    local pids=()
    for ((r = n - 1; r >= 0; r--)); do
        env RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port ${LWS:+LOCAL_WORLD_SIZE=$LWS} \
            timeout -k 5 60 "$BIN" "$@" >"$dir/rank$r" 2>&1 &
        pids[r]=$!
        sleep 0.1
    done
    rcs=()
    for ((r = 0; r < n; r++)); do wait "${pids[r]}"; rcs[r]=$?; done
    next_port
}

# ---------------------------------------------------------------- working runs
for n in 1 2 3 4; do ok "fork.shm.np$n" "$BIN" --np "$n" --timeout 30; done

if [ -n "$have_mpi" ]; then
    for n in 2 3 4; do
        ok "mpirun.mpi.np$n" "${MPIRUN[@]}" -np "$n" "$BIN" --transport mpi --timeout 30
    done
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port ok "mpirun.tcp.np3" \
        "${MPIRUN[@]}" -np 3 -x MASTER_ADDR -x MASTER_PORT "$BIN" --transport tcp --timeout 30
    next_port
else
    echo "SKIP transports.mpirun  mpirun not found (install openmpi-bin)"
fi

# Without LOCAL_WORLD_SIZE nothing says which ranks share a machine: TCP between every
# pair. With it (torchrun sets it), shared memory inside each node of LOCAL_WORLD_SIZE.
for run in 3:tcp 4:tcp 4:shm+tcp; do
    n=${run%%:*} t=${run#*:} lws=
    [ "$t" = tcp ] || lws=2
    LWS=$lws torchrun "$n" --timeout 30
    grep -h -E '^(PASS|FAIL) ' "$dir"/rank*
    all0=1
    for x in "${rcs[@]}"; do [ "$x" -eq 0 ] || all0=0; done
    if [ "$all0" -eq 1 ] && grep -q "^PASS comm\.torchrun\.$t\." "$dir/rank0"; then
        echo "PASS transports.torchrun.$t.np$n  all $n ranks exited 0${lws:+ (LOCAL_WORLD_SIZE=$lws)}"
    else
        echo "FAIL transports.torchrun.$t.np$n  exit codes ${rcs[*]}, transport wanted $t: $(said "$dir"/rank*)"
    fi
    rm -f "$dir"/rank*
done

# ---------------------------------------------------------------- failure paths
# expect_death NAME SECONDS PATTERN OUTPUT_FILES... : given rc, elapsed (ms): the
# run must have failed within SECONDS, printing PATTERN (extended regex).
expect_death() {
    local name=$1 limit=$2 pattern=$3; shift 3
    local msg
    msg=$(grep -h -m1 -E -- "$pattern" "$@" | cut -c1-240)
    if [ "$rc" -ne 0 ] && [ "$elapsed" -le $((limit * 1000)) ] && [ -n "$msg" ]; then
        echo "PASS transports.fails.$name  exit $rc after ${elapsed} ms: $msg"
    else
        echo "FAIL transports.fails.$name  exit $rc after ${elapsed} ms (want non-zero within" \
             "${limit} s, saying /$pattern/): $(said "$@")"
    fi
}

# A rank that never comes: rank 0 alone of WORLD_SIZE=2 gives up after --timeout 2.
t0=$(ms)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout -k 5 30 "$BIN" --timeout 2 \
    >"$dir/out" 2>&1
rc=$? elapsed=$(($(ms) - t0))
expect_death tcp_rank0_alone 5 "MASTER_PORT=$port.*rank\(s\) 1 never connected" "$dir/out"
next_port
# ... and rank 1 alone: nobody at MASTER_ADDR:MASTER_PORT.
t0=$(ms)
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout -k 5 30 "$BIN" --timeout 2 \
    >"$dir/out" 2>&1
rc=$? elapsed=$(($(ms) - t0))
expect_death tcp_rank1_alone 5 "rank 0 at 127.0.0.1:$port .*did not answer" "$dir/out"
next_port

# Bad torchrun environment: the error names the variable.
for bad in MASTER_ADDR=:no_master_addr MASTER_PORT=0:port_zero MASTER_PORT=http:port_not_a_number; do
    t0=$(ms)
    env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${bad%:*}" \
        timeout -k 5 30 "$BIN" --timeout 2 >"$dir/out" 2>&1
    rc=$? elapsed=$(($(ms) - t0))
    expect_death "tcp_env_${bad#*:}" 2 "${bad%%=*}" "$dir/out"
done

# Ranks that disagree: rank 0 sends 4096+8 bytes where rank 1 expects 4096.
t0=$(ms)
timeout -k 5 30 "$BIN" --np 2 --mismatch 8 --timeout 5 >"$dir/out" 2>&1
rc=$? elapsed=$(($(ms) - t0))
expect_death shm_size_mismatch 10 "ranks disagree.*4104 bytes" "$dir/out"

t0=$(ms)
torchrun 2 --mismatch 8 --timeout 5
rc=${rcs[1]} elapsed=$(($(ms) - t0))
expect_death tcp_size_mismatch 10 "ranks disagree.*4104 bytes" "$dir"/rank*
[ "${rcs[0]}" -ne 0 ] && echo "PASS transports.fails.tcp_mismatch_stops_rank0  exit ${rcs[0]}:" \
    "$(said "$dir/rank0")" || echo "FAIL transports.fails.tcp_mismatch_stops_rank0  rank 0 exited 0"
rm -f "$dir"/rank*

if [ -n "$have_mpi" ]; then
    for extra in 8 -8; do  # more than expected (MPI truncates) and fewer
        t0=$(ms)
        timeout -k 5 30 "${MPIRUN[@]}" -np 2 "$BIN" --transport mpi --mismatch "$extra" --timeout 5 \
            >"$dir/out" 2>&1
        rc=$? elapsed=$(($(ms) - t0))
        if grep -q "built without MPI" "$dir/out"; then
            echo "SKIP transports.fails.mpi_size_mismatch  this build has no MPI"
        else
            expect_death "mpi_size_mismatch_$((4096 + extra))" 15 "ranks disagree" "$dir/out"
        fi
    done
fi
exit 0
