# tests/stage02.sh — stage 02's suite, sourced by tests/run.sh (which defines
# `run NAME COMMAND...` and $BUILD). 02_ddp_allreduce/exercises/parts.txt grades
# the checks named coll.*.ring.* and ddp.*; the rest test code that is not an
# exercise (the naive and recursive-doubling algorithms, the comm layer), and
# coll.all_to_all.pairwise.* (exercises/alltoall.c).

# Every collective and algorithm against a serial sum, world sizes 1-8 (odd too),
# one collective per run: a crash in one leaves the others' verdicts standing.
OPS="reduce_scatter all_gather allreduce broadcast all_to_all"
for n in 1 2 3 4 5 7 8; do
    for op in $OPS; do
        run "collectives-np$n-$op" "$BUILD/tests/test_collectives" --np "$n" --op "$op" --timeout 10
    done
done
# One message whose every shard is larger than the shm channel: a ring that waits
# for its send before posting its receive deadlocks here (and only here), and the
# comm layer's timeout reports it within 5 s.
for n in 2 3 4; do
    for op in reduce_scatter all_gather allreduce all_to_all; do
        run "collectives-large-np$n-$op" "$BUILD/tests/test_collectives" --np "$n" --op "$op" \
            --large --timeout 5
    done
done
# On subgroups (the even and the odd world ranks, each in descending order), as the
# later stages run the collectives: a group's ranks and size are not the world's.
for n in 4 5; do
    for op in reduce_scatter all_gather allreduce all_to_all; do
        run "collectives-strided-np$n-$op" "$BUILD/tests/test_collectives" --np "$n" --op "$op" \
            --strided --timeout 10
    done
done
# The shm transport's streaming-store copy (used from 4 MiB) on every count, aligned or not.
for n in 2 3; do
    run "collectives-np$n-streaming" "$BUILD/tests/test_collectives" --np "$n" --timeout 10 \
        --shm-stores streaming
done

# The single copy refused by the kernel (a strict ptrace policy, seccomp), as every
# receiver's first read of a sender's memory fails: each channel falls back to its two
# copies, large messages included (COURSE_SHM_DIRECT=refused, common/comm_shm.c).
s2_refused() {
    COURSE_SHM_DIRECT=refused "$BUILD/tests/test_collectives" --np 3 --large --timeout 10 |
        sed 's/^\(PLAN\|PASS\|FAIL\) \(coll\.[^ ]*\)/\1 \2.refused/'
}
run collectives-large-np3-direct-refused s2_refused

# The same under mpirun over the MPI transport, which adds the MPI_Allreduce baseline.
if mpi_built; then
    for n in 2 3; do
        for op in $OPS; do
            run "collectives-mpi-np$n-$op" tests/mpirun.sh -np "$n" "$BUILD/tests/test_collectives" \
                --transport mpi --op "$op" --timeout 5
        done
    done
fi

# The hierarchical all-reduce (collectives.c's ALGO_HIER: reduced inside each node to
# its leader, the leaders' all-reduce across the nodes, back inside), its nodes given by
# COURSE_NODE_RANKS: 3 nodes of 2, 2 nodes of 4 (pipelined over chunks), and 2 nodes of 4
# under subgroups (uneven there: the flat ring). Each rank's bytes inside and across the nodes are the hierarchy's.
run collectives-hier-np6-nodes2 "$BUILD/tests/test_collectives" --np 6 --node-ranks 2 --timeout 10
run collectives-hier-np8-nodes4 "$BUILD/tests/test_collectives" --np 8 --node-ranks 4 --op allreduce \
    --timeout 20  # 2 nodes of 4: the pipelined path with a ring inside each node
run collectives-hier-np8-nodes4-strided "$BUILD/tests/test_collectives" --np 8 --node-ranks 4 \
    --strided --timeout 10
# Every collective over two nodes of two ranks (--nodes 2): shm between the ranks of a
# node, TCP over the loopback between nodes (the transport chosen per peer), the
# hierarchical all-reduce's bytes counted on the links they took.
for op in $OPS; do  # one test per collective: one that crashes leaves the others' verdicts
    run "collectives-np4-2nodes-$op" "$BUILD/tests/test_collectives" --np 4 --nodes 2 --op "$op" \
        --timeout 10
done

# DDP's broadcast and gradient mean, each against one process (tests/test_ddp.c).
for n in 2 3 4; do run "ddp-collectives-np$n" "$BUILD/tests/test_ddp" --np "$n" --timeout 10; done
# The path a GPU run takes (a host copy of the buffer, the collective, the copy back),
# taken on the CPU: a DDP that forgets ddp_back_to_device is right here only by luck.
run ddp-collectives-staged-np3 "$BUILD/tests/test_ddp" --np 3 --staged --timeout 10
run ddp-collectives-strided-staged-np4 "$BUILD/tests/test_ddp" --np 4 --strided --staged --timeout 10
# And the path of a GPU run with a GpuComm (NCCL, CUDA IPC: ddp_on_gpu), its collectives
# run on the host by tests/gpu_comm_host.c's stand-in: that branch is graded on a CPU too.
run ddp-collectives-gpucomm-np3 "$BUILD/tests/test_ddp" --np 3 --gpu-comm-on-host --timeout 10
run ddp-collectives-strided-gpucomm-np4 "$BUILD/tests/test_ddp" --np 4 --strided --gpu-comm-on-host \
    --timeout 10
# ... and over subgroups, as over a mesh's data-parallel group: the group's root and size.
for n in 4 5; do
    run "ddp-collectives-strided-np$n" "$BUILD/tests/test_ddp" --np "$n" --strided --timeout 10
done

# DDP: N ranks with batch B end with the weights of one process with batch N*B.
# The whole training loop: N ranks with batch B end with the weights of one process
# with batch N*B after 5 AdamW steps. The naive all-reduce: this grades ddp.c, not ring.c.
ddp_equivalence() {  # ddp_equivalence N [ALGO]  (naive: no suffix; ring: ".ring"; NODES=k: ".knodes")
    local n=$1 algo=${2:-naive} dir name="ddp.equals_single_process${2:+.$2}.np$1${NODES:+.${NODES}nodes}"
    echo "PLAN $name"
    dir=$(mktemp -d)
    local common=(--preset tiny --steps 5 --lr 1e-3 --log-every 100 --warmup 0)
    local one=("$BUILD/train" "${common[@]}" --batch $((2 * n)) --save-params "$dir/one.safetensors")
    local ddp=("$BUILD/ddp_train" "${common[@]}" --np "$n" --batch 2 --algo "$algo" --timeout 30
               --save-params "$dir/ddp.safetensors" ${NODES:+--nodes "$NODES"})
    # What rank 0 sends in the 5 all-reduces of the 118,528-parameter model (4 bytes
    # each): the ring 2(N-1)/N buffers a call, the naive one (rank 0 its root) N - 1.
    local sent calls want
    want=$(awk -v n="$n" -v a="$algo" 'BEGIN { b = 5 * 4 * 118528 * (a == "ring" ? 2 * (n - 1) / n : n - 1); printf "%.2f", b / 1e6 }')
    if ! "${one[@]}" >"$dir/one.log" 2>&1; then
        echo "FAIL $name  the single process failed: ${one[*]}"; tail -n 5 "$dir/one.log"
    elif ! "${ddp[@]}" >"$dir/ddp.log" 2>&1; then
        echo "FAIL $name  the DDP run failed: ${ddp[*]}"; grep -v '^launcher: ' "$dir/ddp.log" | tail -n 5
    elif [ -n "${NODES:-}" ] && ! grep -q 'shm+tcp' "$dir/ddp.log"; then
        echo "FAIL $name  ddp_train --nodes $NODES did not say it ran over shm+tcp: $(grep -m1 'DDP over' "$dir/ddp.log")"
    # (hier's calls and bytes are its phases': coll.allreduce.hier.* count them per link.)
    elif [ "$algo" != hier ] && calls=$(grep -o 'all-reduce [0-9]* calls' "$dir/ddp.log" | grep -o '[0-9]*') &&
         [ "$calls" != 5 ]; then
        echo "FAIL $name  ddp_train made ${calls:-no} all-reduces in 5 steps (DDP makes one a step, in ddp_sync_grads): does ddp_broadcast_params use an all-reduce, or ddp_sync_grads more than one?"
    elif [ "$algo" != hier ] && sent=$(grep -o 'all-reduce [0-9]* calls, [0-9.]* MB sent' "$dir/ddp.log" | grep -o '[0-9.]* MB' | cut -d' ' -f1) &&
         [ "$sent" != "$want" ]; then
        echo "FAIL $name  rank 0 sent ${sent:-?} MB in its all-reduces, where 5 $algo all-reduces send $want MB: does ddp_sync_grads use d->algo?$([ "$algo" = ring ] && echo " Or does your ring (exercises/ring.c) send other than 2(p-1)/p of the buffer (coll.allreduce.ring.* count it)?")"
    else
        "$BUILD/tests/compare_params" "$dir/ddp.safetensors" "$dir/one.safetensors" 1e-5 "$name"
    fi
    rm -rf "$dir"
}
for n in 2 3 4; do run "ddp-np$n" ddp_equivalence "$n"; done
# The drivers' default, the ring: the broadcast of the weights has no ring algorithm.
run ddp-ring-np3 ddp_equivalence 3 ring
# Two nodes of two ranks (--nodes 2): shared memory inside each, TCP over the loopback
# between them, chosen per peer (common/comm_hybrid.c); the hierarchical all-reduce too.
export -f ddp_equivalence
run ddp-ring-np4-2nodes env NODES=2 bash -c 'ddp_equivalence 4 ring'
run ddp-hier-np4-2nodes env NODES=2 bash -c 'ddp_equivalence 4 hier'

# Faults: a rank killed mid-collective, and ranks calling with different sizes,
# must end the job quickly with a diagnostic naming the collective (no hang).
fault_drill() {
    local name=$1 pattern=$2; shift 2
    local out start elapsed rc
    out=$(mktemp)
    start=$(date +%s)
    "$BUILD/tests/test_collectives" "$@" >"$out" 2>&1
    rc=$?
    elapsed=$(( $(date +%s) - start ))
    if [ "$rc" -ne 0 ] && [ "$elapsed" -le 20 ] && grep -q "$pattern" "$out"; then
        echo "PASS fault.$name  exit $rc after ${elapsed}s: $(grep -m1 "$pattern" "$out" | cut -c1-200)"
    else
        echo "FAIL fault.$name  exit $rc after ${elapsed}s; output: $(tail -n 4 "$out")"
    fi
    rm -f "$out"
}
run fault-kill fault_drill killed_rank_is_reported "all-reduce #3 on group world" \
    --np 3 --kill-rank 1 --kill-at 3 --timeout 5
run fault-kill-names-rank fault_drill launcher_names_dead_rank "rank 1 (pid [0-9]*) was killed by signal 9" \
    --np 3 --kill-rank 1 --kill-at 3 --timeout 5
run fault-stall fault_drill hung_rank_times_out "timeout after 2.0 s in all-reduce #1" \
    --np 3 --stall-rank 2 --timeout 2
run fault-mismatch fault_drill size_mismatch_is_reported "ranks disagree" \
    --np 2 --mismatch --timeout 5

# The benchmark refuses a collective and algorithm that do not go together (ring has no
# broadcast, rd no reduce-scatter) before it starts a rank, naming what it has.
s2_bench_refuse() {
    local out rc bad=0 args
    for args in "broadcast ring naive, rd, mpi" "reduce_scatter rd naive, ring, mpi"; do
        set -- $args
        out=$("$BUILD/bench_collectives" --np 2 --op "$1" --algo "$2" 2>&1); rc=$?
        if [ "$rc" -eq 2 ] && grep -q -- "--op $1 has no --algo $2: it has ${args#* * }" <<<"$out" &&
           ! grep -q '^\[rank' <<<"$out"; then
            echo "PASS bench.refuses.$1_$2  exit 2: $(head -c 120 <<<"$out")"
        else
            echo "FAIL bench.refuses.$1_$2  exit $rc: $(head -c 200 <<<"$out")"; bad=1
        fi
    done
    return $bad
}
run bench-refuse s2_bench_refuse

# Across the nodes of a cluster on this machine (scripts/cluster.sh: network
# namespaces joined by shaped links; root only, else skipped with the reason): DDP on
# 2 nodes x 2 ranks, started as torchrun starts them, over TCP, equals one process.
run cluster-ddp bash tests/test_cluster.sh "$BUILD"
