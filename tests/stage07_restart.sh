# tests/stage07_restart.sh — stage 07's restarts (sourced by tests/stage07.sh): the
# supervisor that restarts a failed job from its latest checkpoint, its wrapper for
# other launchers (supervise.sh), and elastic restarts.

# The supervisor (--max-restarts): a rank killed at step 8 takes the job down, the
# launcher names it and starts every rank again; the job resumes from step 6, says
# what the failure cost, and ends bitwise where the uninterrupted run ends. A hung
# rank is noticed by the other's timeout (stage 02's diagnostic), killed, and the
# job restarted the same way.
s7_supervisor() {  # s7_supervisor NAME FAULT TIMEOUT    (S7_MPI=1: under mpirun)
    local name=$1 fault=$2 d="$S7_DIR/sup.$1" ref="$S7_DIR/ref.ddp.safetensors"
    rm -rf "$d" && mkdir -p "$d"
    s7_reference ddp ddp_train --np 2 --batch 2 || return 1  # -> $ref
    local job=("$BUILD/ddp_train" --np 2 --max-restarts 2)
    # Under mpirun the wrapper supervises (07_fault_tolerance/supervise.sh).
    [ -n "${S7_MPI:-}" ] && job=(07_fault_tolerance/supervise.sh --max-restarts 2 --
        tests/mpirun.sh -np 2 "$BUILD/ddp_train" --transport mpi)
    # shellcheck disable=SC2086
    "${job[@]}" --batch 2 $S7_TRAIN --ckpt-dir "$d/ck" --ckpt-every 3 \
        --inject "$fault" --timeout "$3" --save-params "$d/out.safetensors" >"$d/run.log" 2>&1
    local rc=$? how lost
    how=$(grep -h -m1 -E 'was killed by signal|error: timeout|mpirun noticed' "$d/run.log" |
          sed 's/.*\(launcher: \|error: \|mpirun noticed that \)//' | cut -c1-90)
    lost=$(grep -h -m1 -o 'had reached step [0-9]*: [0-9]* steps\? lost' "$d/run.log")
    if [ "$rc" -eq 0 ] && grep -q 'supervisor: attempt 1 failed' "$d/run.log" &&
       grep -q 'supervisor: the job finished after 1 restart' "$d/run.log" &&
       grep -q 'resumed from .*step-0000000' "$d/run.log" && cmp -s "$d/out.safetensors" "$ref"; then
        echo "PASS s7.supervisor.$name  --inject $fault: $how; restarted once; $lost; final weights bitwise"
    else
        echo "FAIL s7.supervisor.$name  exit $rc: $(grep -h -E 'supervisor|resumed' "$d/run.log" | tr '\n' ' ' | cut -c1-300)"
        return 1
    fi
}
run ft-supervisor-kill s7_supervisor kill "kill,step=8,rank=1" 5

# The wrapper around the built-in launcher (its ranks' attempt numbers count on from the
# wrapper's: the restart resumes, and a fault meant for attempt 0 does not strike again).
# A new run refuses a --ckpt-dir that already holds checkpoints, naming --resume.
s7_wrapper_builtin() {
    local d="$S7_DIR/wrap" ref="$S7_DIR/ref.ddp.safetensors" out
    rm -rf "$d" && mkdir -p "$d"
    s7_reference ddp ddp_train --np 2 --batch 2 || return 1  # -> $ref
    # shellcheck disable=SC2086
    07_fault_tolerance/supervise.sh --max-restarts 1 -- "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN \
        --ckpt-dir "$d/ck" --ckpt-every 3 --inject kill,step=5,rank=1 --timeout 5 \
        --save-params "$d/out.safetensors" >"$d/run.log" 2>&1
    local rc=$?
    # shellcheck disable=SC2086
    out=$("$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/ck" 2>&1)
    if [ "$rc" -eq 0 ] && grep -q 'resumed from .*step-00000003' "$d/run.log" && cmp -s "$d/out.safetensors" "$ref" &&
       grep -q -- "already holds checkpoints (an earlier run's): --resume continues" <<<"$out"; then
        echo "PASS s7.supervisor.wrapper_builtin  restarted once, resumed from step 3, final weights bitwise; a new run into the folder refused"
    else
        echo "FAIL s7.supervisor.wrapper_builtin  exit $rc: $(grep -h -E 'resumed|supervisor|error' "$d/run.log" | tr '\n' ' ' | cut -c1-250) | new run: $(grep -m1 error <<<"$out" | cut -c1-150)"
        return 1
    fi
}
run ft-supervisor-wrapper s7_wrapper_builtin
run ft-supervisor-hang s7_supervisor hang "hang,step=5,rank=1" 1
if mpi_built; then
    S7_MPI=1 run ft-supervisor-mpi-kill s7_supervisor mpi_kill "kill,step=8,rank=1" 5
    S7_MPI=1 run ft-supervisor-mpi-hang s7_supervisor mpi_hang "hang,step=5,rank=1" 1
fi
# The wrapper's bad input: named, exit 2, nothing run.
s7_supervise_flags() {
    local out bad=0 name args
    for case in "bad_count:--max-restarts x -- true" "no_command:--max-restarts 1" \
                "unknown_flag:--retries 2 -- true"; do
        name=${case%%:*} args=${case#*:}
        # shellcheck disable=SC2086
        out=$(07_fault_tolerance/supervise.sh $args 2>&1)
        if [ $? -eq 2 ] && echo "$out" | grep -q '^supervise.sh: '; then
            echo "PASS s7.supervise_flags.$name  supervise.sh $args: $out"
        else
            echo "FAIL s7.supervise_flags  supervise.sh $args: want exit 2 and a message, got: $out"; bad=1
        fi
    done
    # The command's own bad input (exit 2) is not restarted.
    out=$(07_fault_tolerance/supervise.sh --max-restarts 2 -- "$BUILD/train" --layers 0 2>&1)
    if [ $? -eq 2 ] && grep -q 'not restarting' <<<"$out" && ! grep -q 'restart 1 of' <<<"$out"; then
        echo "PASS s7.supervise_flags.command_refused  $(grep -m1 supervisor <<<"$out")"
    else
        echo "FAIL s7.supervise_flags.command_refused  a command that exits 2 (bad input) must not be restarted: $out"; bad=1
    fi
    return $bad
}
run ft-supervise-flags s7_supervise_flags

# Elastic restart: rank 2 of 3 dies as step 5 begins in every attempt (a node that
# stays dead). The supervisor restarts once; rank 2 fails first again, so it gives
# the rank up and goes on with 2 ranks from the step-4 checkpoint, resharded. The
# run ends bitwise where "3 ranks to step 4, then 2 ranks resumed from that
# checkpoint" ends.
s7_elastic() {
    local d="$S7_DIR/elastic"
    rm -rf "$d" && mkdir -p "$d"
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 3 --batch 2 $S7_TRAIN --ckpt-dir "$d/ck" --ckpt-every 2 --max-restarts 3 \
        --elastic --inject kill,step=5,rank=2,permanent --save-params "$d/out.safetensors" >"$d/run.log" 2>&1
    local rc=$?
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 3 --batch 2 $S7_TRAIN --ckpt-dir "$d/ref" --ckpt-every 2 \
        --inject kill,step=5,rank=2 >"$d/ref1.log" 2>&1
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/ref" --resume \
        --save-params "$d/ref.safetensors" >"$d/ref2.log" 2>&1
    if [ "$rc" -eq 0 ] && grep -q 'going on without it (--elastic), on 2 ranks in slots 0, 1 (slot 2' "$d/run.log" &&
       cmp -s "$d/out.safetensors" "$d/ref.safetensors"; then
        echo "PASS s7.elastic  rank 2 failed twice, given up; 2 ranks resumed from $(grep -h 'resumed from' "$d/run.log" | tail -n 1 | grep -o 'step-[0-9]*'), final weights bitwise those of 3 ranks to step 4 then 2"
    else
        echo "FAIL s7.elastic  exit $rc: $(grep -h -E 'supervisor|resumed' "$d/run.log" | tr '\n' ' ' | cut -c1-300)"
        return 1
    fi
}
run ft-elastic s7_elastic

# The rank given up keeps its slot (its core, its GPU: the suspects) out of the
# restarted job: with rank 1 of 3 dead for good, ranks 0 and 1 go on in slots 0 and
# 2, not 0 and 1 (comm_slot: the slot picks the rank's core and its GPU).
s7_elastic_slot() {
    local d="$S7_DIR/elastic_slot"
    rm -rf "$d" && mkdir -p "$d"
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 3 --batch 2 $S7_TRAIN --ckpt-dir "$d/ck" --ckpt-every 2 --max-restarts 3 \
        --elastic --inject kill,step=5,rank=1,permanent >"$d/run.log" 2>&1
    local rc=$?
    if [ "$rc" -eq 0 ] && grep -q 'on 2 ranks in slots 0, 2 (slot 1, its core and GPU, left out)' "$d/run.log"; then
        echo "PASS s7.elastic.slot_left_out  $(grep -h -o 'rank 1 failed first.*left out)' "$d/run.log")"
    else
        echo "FAIL s7.elastic.slot_left_out  exit $rc: $(grep -h 'supervisor' "$d/run.log" | tr '\n' ' ' | cut -c1-300)"
        return 1
    fi
}
run ft-elastic-slot s7_elastic_slot
run ft-refuse-elastic-tp s7_refuse elastic_tp "--elastic: a tensor-parallel layout cannot lose one rank" tp_train --np 2 --tp 2 --elastic --max-restarts 1 --ckpt-dir "$S7_DIR/etp"
run ft-refuse-elastic-alone s7_refuse elastic_needs_restarts "--elastic needs --max-restarts" ddp_train --np 2 --elastic
