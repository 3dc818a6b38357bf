# tests/stage03.sh — stage 03's suite, sourced by tests/run.sh (which defines
# `run NAME COMMAND...`, $BUILD and $log). 03_bucketing_zero/exercises/parts.txt
# grades the checks named buckets.*, sharded.equiv.* and sharded.memory.*.
#
# The model: L=2 C=49 NH=7 T=12 V=97, Ψ = 64,337 parameters, which no world size
# from 2 to 5 divides, so every shard is padded. 5 AdamW steps; the gradient norm
# is above the clipping threshold (1.0) at every step, so clipping is active.
S3_MODEL=(--layers 2 --width 49 --heads 7 --seq 12 --vocab 97)
# (--peak-tflops: MFU against a given peak, so that no run spends 0.3 s measuring one.)
S3_TRAIN=(--steps 5 --lr 1e-3 --log-every 1 --warmup 0 --timeout 20 --peak-tflops 1)
export S3_DIR="$log/stage03"      # references and logs, shared by the checks below
mkdir -p "$S3_DIR"
export S3_MODEL_STR="${S3_MODEL[*]}" S3_TRAIN_STR="${S3_TRAIN[*]}"  # arrays do not export

# The pieces: partitions, bucket assignment, collectives over blocks, async.
for n in 1 2 3 5; do run "sharded-pieces-np$n" "$BUILD/tests/test_sharded" --np "$n" --timeout 20; done

# Stage 02's DDP with the naive all-reduce (sums in rank order): the reference (when
# grading, build-ex/ holds stage 02's reference, not your stage-02 exercise: make
# grade-3 builds the stages before 03 from their reference sources).
s3_reference() {  # s3_reference N ACCUM -> path of the weights
    local n=$1 accum=$2 f="$S3_DIR/ref-np$1-accum$2" model=($S3_MODEL_STR) train=($S3_TRAIN_STR)
    if [ ! -f "$f.safetensors" ]; then
        "$BUILD/ddp_train" --np "$n" --algo naive "${model[@]}" "${train[@]}" \
            --batch $((2 / accum)) --grad-accum "$accum" --save-params "$f.safetensors" \
            >"$f.log" 2>&1 || { echo "the reference run failed:" >&2; tail -n 5 "$f.log" >&2; }
    fi
    echo "$f.safetensors"
}
export -f s3_reference

# One training run, several checks: the weights against stage 02's DDP (TOL 0 =
# bit for bit; the naive sums are in rank order, like the reference's), and with
# MEMORY=1 the ledger against the stage-01 calculator, with BYTES=1 the traffic
# against the formula (tests/sharded_check.py says both).
s3_case() {  # s3_case VARIANT TOL N ACCUM ALGO STRATEGY [FLAGS...]
    local variant=$1 tol=$2 n=$3 accum=$4 algo=$5 strategy=$6; shift 6
    local name="sharded.equiv.$strategy${variant:+.$variant}.$algo.np$n"
    local model=($S3_MODEL_STR) train=($S3_TRAIN_STR) k=1 shard=0 zero=0 reshard= f
    echo "PLAN $name"
    [ "${MEMORY:-0}" = 1 ] && echo "PLAN sharded.memory.$strategy.np$n"
    [ "${BYTES:-0}" = 1 ] && echo "PLAN sharded.bytes.$strategy${variant:+.$variant}.np$n"
    [ "${PREFETCH:-0}" = 1 ] && echo "PLAN sharded.prefetch.$strategy.$variant.np$n"
    local ref; ref=$(s3_reference "$n" "$accum")
    f="$S3_DIR/$name"
    local cmd=("$BUILD/sharded_train" --np "$n" --strategy "$strategy" --algo "$algo" "${model[@]}"
               "${train[@]}" --batch $((2 / accum)) --grad-accum "$accum" "$@")
    if ! "${cmd[@]}" --save-params "$f.safetensors" >"$f.log" 2>&1; then
        echo "FAIL $name  the run failed: $(grep -m1 -E 'error|killed' "$f.log" | cut -c1-300)"
        echo "  the run: ${cmd[*]}"
        tail -n 6 "$f.log"
        return
    fi
    # The gradient norm of every step (logged to 3 decimals) is the reference's: a
    # gradient scaled by a constant (a mean over the wrong group) would pass the
    # weights, since clipping (active at every step: above 1.0) and Adam divide it out.
    local norms
    norms=$(paste -d' ' <(grep -o 'norm [0-9.]*' "${ref%.safetensors}.log" | cut -d' ' -f2) \
                        <(grep -o 'norm [0-9.]*' "$f.log" | cut -d' ' -f2))
    if ! awk 'NF != 2 || $2 < $1 * 0.999 - 0.0015 || $2 > $1 * 1.001 + 0.0015 {bad = 1} END {exit bad || NR != 5}' <<<"$norms"; then
        echo "FAIL $name  the gradient norms of the 5 steps (reference, this run): $(tr '\n' ';' <<<"$norms")$(awk 'NF == 2 && $1 > 0 {r = $2 / $1; if (NR == 1) f = r; else if (r < f * 0.99 || r > f * 1.01) c = 1} END {if (NR && !c && (f < 0.99 || f > 1.01)) printf " (off by the same factor %.3f every step: a mean or a norm over the wrong set of ranks? which ranks hold different shards, which the same?)", f}' <<<"$norms")"
    else
        "$BUILD/tests/compare_params" "$f.safetensors" "$ref" "$tol" "$name"
    fi
    if ! grep -q 'norm' "$f.log" || grep -o 'norm [0-9.]*' "$f.log" | awk '$2 <= 1.0 {bad = 1} END {exit !bad}'; then
        echo "FAIL $name.clipping  the gradient norm fell to the clipping threshold: clipping was not active at every step"
    fi
    for a in "$@"; do case "$a" in --fsdp-unit-layers) k=next ;; --shard-size) shard=next ;;
        --no-reshard) reshard=noreshard ;; *)
        [ "$k" = next ] && k=$a; [ "$shard" = next ] && shard=$a ;; esac; done
    case "$strategy" in zero1) zero=1 ;; zero2) zero=2 ;; zero3) zero=3 ;; esac
    if [ "${MEMORY:-0}" = 1 ]; then
        "$BUILD/memcalc" "${model[@]/--width/--hidden}" --recipe course --micro-batch $((2 / accum)) \
            --zero "$zero" --dp "$n" --json >"$f.calc.json"
        "$PY" tests/sharded_check.py memory "$f.log" "sharded.memory.$strategy.np$n" \
            "$strategy" "$n" "$k" "$shard" "$f.calc.json" 2 49 97 12
    fi
    if [ "${BYTES:-0}" = 1 ]; then
        "$PY" tests/sharded_check.py bytes "$f.log" "sharded.bytes.$strategy${variant:+.$variant}.np$n" \
            "$strategy" "$n" "$k" "$shard" 2 49 97 12 $reshard
    fi
    # Prefetch's order (sharded.c counts, after every use, whether the next unit the
    # model will need is already travelling): with units of several groups, a prefetch
    # that looked at the next use only starts it a group late, the same peak memory
    # and the same weights.
    if [ "${PREFETCH:-0}" = 1 ]; then
        local late; late=$(sed -n 's/^PREFETCH rank=[0-9]* late=//p' "$f.log" | sort -u | tr '\n' ' ')
        if [ "$(grep -c '^PREFETCH' "$f.log")" -eq "$n" ] && [ "$late" = "0 " ]; then
            echo "PASS sharded.prefetch.$strategy.$variant.np$n  after every use the next unit was already being gathered (units of $k groups)"
        else
            echo "FAIL sharded.prefetch.$strategy.$variant.np$n  uses after which the next unit the model needs was still FREE: ${late:-no PREFETCH lines} (want 0 on every rank): prefetch the first later use whose unit is another one, not just the next use"
        fi
    fi
}

export -f s3_case  # run through `env ... bash -c`, which sets MEMORY / BYTES / PREFETCH for it

# Every strategy at 1-5 ranks, naive: bit for bit stage 02's DDP; memory exact.
for n in 1 2 3 4 5; do
    for st in ddp zero1 zero2 zero3 fsdp; do
        run "sharded-$st-np$n" env MEMORY=1 bash -c 's3_case "" 0 "$@"' _ "$n" 1 naive "$st"
    done
done
# HSDP: shards inside groups, replicas across them (the sums then group by shard
# group first: not the reference's order, so within 1e-6; one group = FSDP, bitwise).
run sharded-hsdp-np2 env MEMORY=1 bash -c 's3_case shard1 1e-6 2 1 naive hsdp --shard-size 1'
run sharded-hsdp-np4 env MEMORY=1 bash -c 's3_case shard2 1e-6 4 1 naive hsdp --shard-size 2'
run sharded-hsdp-np5 env MEMORY=1 bash -c 's3_case shard5 0 5 1 naive hsdp --shard-size 5'
# What buckets exist for: the gradients of a bucket go while the backward pass is still
# computing the earlier groups. With a bucket per layer group (--bucket-mb 0) every
# bucket is launched from the gradient hook, during the backward pass, and no rank
# waits for a bucket's collective while fewer than MAX_IN_FLIGHT are in flight. Timing
# cannot decide this: under COURSE_LATE_COMPLETION=1 a collective reports done only
# when it is waited for, so a wait during the backward pass is a wait, on any machine.
s3_overlap() {  # s3_overlap STRATEGY
    local name="sharded.overlap.$1.np2" f="$S3_DIR/overlap-$1" model=($S3_MODEL_STR) train=($S3_TRAIN_STR)
    echo "PLAN $name"
    if ! COURSE_LATE_COMPLETION=1 "$BUILD/sharded_train" --np 2 --strategy "$1" --bucket-mb 0 \
            "${model[@]}" "${train[@]}" --steps 2 --batch 2 >"$f.log" 2>&1; then
        echo "FAIL $name  the run failed: $(grep -m1 -E 'error|killed' "$f.log" | cut -c1-300)"
        return 1
    fi
    local lines launched early
    lines=$(grep '^BUCKETS' "$f.log")
    launched=$(grep -o 'launched_in_backward=[0-9]*' <<<"$lines" | cut -d= -f2 | sort -n | head -n 1)
    early=$(grep -o 'early_waits=[0-9]*' <<<"$lines" | cut -d= -f2 | sort -n | tail -n 1)
    if [ "$(wc -l <<<"$lines")" = 2 ] && [ "${launched:-0}" -gt 0 ] && [ "${early:-1}" = 0 ]; then
        echo "PASS $name  every rank launched $launched buckets during the backward passes and waited for none early"
    elif [ "${launched:-0}" = 0 ]; then
        echo "FAIL $name  no bucket was launched during the backward pass (launched_in_backward=${launched:-?}): the gradient hook must launch a bucket as its last group completes, or nothing overlaps"
    else
        echo "FAIL $name  a rank waited for a bucket's collective during the backward pass while fewer than MAX_IN_FLIGHT were in flight ($early time(s)): each such wait stalls the compute the collective should hide behind"
    fi
}
export -f s3_overlap
for st in ddp zero2 fsdp; do run "sharded-$st-overlap" s3_overlap "$st"; done
# Buckets in flight are bounded: with one group a bucket (--bucket-mb 0) and 8 layers,
# ZeRO-2 holds at most MAX_IN_FLIGHT (2) layer buckets at once (a new one is made only
# after the oldest launched ones are retired down to one), beside the tied embedding's
# bucket (filled from the head's backward to the embedding's) and ln_f's: the pool's
# buffers, MEM_COMM, hold exactly that at the peak. One more in flight (> for >=), or
# none retired by force, shows as whole layers more.
s3_comm_bound() {
    local name=sharded.memory.zero2.bucket0.l8.np2 f="$S3_DIR/comm-bound" model=($S3_MODEL_STR)
    echo "PLAN $name"
    model[1]=8  # --layers 8
    # (One step of two micro-batches: two backwards, each a chance for one bucket too
    # many to show, and the check needs nothing of zero_step.c, the next part, whose
    # starter would leave a step's buckets pending into the next step.)
    if ! "$BUILD/sharded_train" --np 2 --strategy zero2 --bucket-mb 0 "${model[@]}" --steps 1 \
            --grad-accum 2 --batch 1 --lr 1e-3 \
            --warmup 0 --timeout 20 --peak-tflops 1 >"$f.log" 2>&1; then
        echo "FAIL $name  the run failed: $(grep -m1 -E 'error|killed' "$f.log" | cut -c1-300)"
        return 1
    fi
    local layer=$((12 * 49 * 49 + 13 * 49)) emb=$(((97 + 12) * 49)) lnf=$((2 * 49)) comm bound
    bound=$((4 * (2 * layer + emb + lnf)))
    comm=$(grep '^MEM' "$f.log" | grep -o 'comm=[0-9]*' | cut -d= -f2 | sort -n | tail -1)
    if [ "$(grep -c '^MEM' "$f.log")" = 2 ] && [ -n "$comm" ] && [ "$comm" -gt 0 ] &&
       [ "$comm" -le "$bound" ]; then
        echo "PASS $name  peak comm $comm B per rank: at most 2 layer buckets + the embedding's + ln_f's ($bound B)"
    else
        echo "FAIL $name  peak comm ${comm:-?} B on some rank, above 2 layer buckets + the embedding's + ln_f's ($bound B; one layer's is $((4 * layer)) B): while MAX_IN_FLIGHT are launched, retire the oldest before making another"
        return 1
    fi
}
run sharded-zero2-comm-bound s3_comm_bound
# A mixed-bf16 run sends bf16 on the wire (stage 06: --grad-comm/--param-comm auto):
# the gradients' reduce-scatter and the step's all-gather of the weights (zero_step.c
# calls weights_all_gather, which knows the wire) each at 2 bytes an element:
# 2Ψ(N-1)/N x 2 B. A step that gathers the weights in fp32 itself sends 3/4 of fp32's.
s3_wire_bytes() {  # s3_wire_bytes STRATEGY
    local name="sharded.bytes.$1.bf16.np3" f="$S3_DIR/wire-$1" model=($S3_MODEL_STR)
    echo "PLAN $name"
    if ! "$BUILD/sharded_train" --np 3 --strategy "$1" --algo ring "${model[@]}" --steps 1 --lr 1e-3 \
            --warmup 0 --timeout 20 --peak-tflops 1 --batch 2 --precision mixed-bf16 \
            --grad-comm auto --param-comm auto >"$f.log" 2>&1; then
        echo "FAIL $name  the run failed: $(grep -m1 -E 'error|killed' "$f.log" | cut -c1-300)"
        return 1
    fi
    "$PY" tests/sharded_check.py bytes "$f.log" "$name" "$1" 3 1 0 2 49 97 12 bf16
}
export -f s3_wire_bytes
for st in zero1 zero2; do run "sharded-$st-wire-bf16" s3_wire_bytes "$st"; done
# The ring: another summation order, so within 1e-5 (fp32, the ring's order against
# the reference's; stage 02's DDP meets the same tolerance); the bytes per step.
for n in 3 4; do
    for st in ddp zero1 zero2 zero3 fsdp; do
        run "sharded-$st-ring-np$n" env BYTES=1 bash -c 's3_case "" 1e-5 "$@"' _ "$n" 1 ring "$st"
    done
done
run sharded-hsdp-ring-np4 env BYTES=1 bash -c 's3_case shard2 1e-5 4 1 ring hsdp --shard-size 2'
# The switches, bit for bit at 3 ranks.
run sharded-ddp-bucket0 bash -c 's3_case bucket0 0 3 1 naive ddp --bucket-mb 0'
run sharded-ddp-bucket005 bash -c 's3_case bucket005 0 3 1 naive ddp --bucket-mb 0.05'
run sharded-ddp-nooverlap bash -c 's3_case nooverlap 0 3 1 naive ddp --no-overlap'
run sharded-zero2-bucket0 bash -c 's3_case bucket0 0 3 1 naive zero2 --bucket-mb 0'
run sharded-zero2-nooverlap bash -c 's3_case nooverlap 0 3 1 naive zero2 --no-overlap --bucket-mb 0'
run sharded-zero3-nooverlap bash -c 's3_case nooverlap 0 3 1 naive zero3 --no-overlap --bucket-mb 0'
# The other extreme: every collective's data move inside its start call
# (COURSE_EAGER_COLLECTIVES=1, async_coll.c), the earliest a GPU could move them.
# Equal under both, a buffer was final at its start and untouched until its wait.
for st in ddp zero2 fsdp; do
    run "sharded-$st-eager" env COURSE_EAGER_COLLECTIVES=1 \
        bash -c 's3_case eager 0 3 1 naive "$1" --bucket-mb 0' _ "$st"
done
s3_rank0_comm() { grep -h -m1 -o '^MEM rank=0 .*comm=[0-9]*' "$1" | sed 's/.*comm=//'; }  # rank 0's peak MEM_COMM
export -f s3_rank0_comm
# The peaks of MEM_COMM below are compared between two runs, so they must not depend on
# this machine's timing: a bucket retired as soon as coll_test finds it done frees its
# buffer for the pool's next best fit earlier or later, and a loaded machine drew a
# different pool (CI, 2026-11-29: prefetch 513,912 B against the usual 631,708 B). Under
# COURSE_LATE_COMPLETION=1 nothing is found done before it is waited for: one history.
# Without the progress thread the sharded strategies still reduce each bucket as
# backward completes it (the collectives run in order when waited for), so a rank
# holds the same few buckets as when overlapped: the same peak of MEM_COMM, not
# every bucket at once (a bucket per layer group here: 4 of them).
s3_nooverlap_comm() {  # s3_nooverlap_comm STRATEGY
    local f="$S3_DIR/nooverlap-comm-$1" model=($S3_MODEL_STR) train=($S3_TRAIN_STR) a b
    for o in overlap no-overlap; do
        COURSE_LATE_COMPLETION=1 "$BUILD/sharded_train" --np 3 --strategy "$1" --bucket-mb 0 \
            "${model[@]}" "${train[@]}" --batch 2 $([ $o = no-overlap ] && echo --no-overlap) \
            >"$f.$o.log" 2>&1
    done
    a=$(s3_rank0_comm "$f.overlap.log")
    b=$(s3_rank0_comm "$f.no-overlap.log")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
        echo "PASS sharded.no_overlap_comm.$1  rank 0's peak comm $b B, as overlapped"
    else
        echo "FAIL sharded.no_overlap_comm.$1  rank 0's peak comm ${b:-?} B without overlap, ${a:-?} B with"
    fi
}
export -f s3_nooverlap_comm
run sharded-zero2-nooverlap-comm s3_nooverlap_comm zero2
run sharded-zero3-nooverlap-comm s3_nooverlap_comm zero3
# Prefetching holds one unit more: the next one, whole, while this one computes. So a
# rank's peak MEM_COMM without prefetch is about one unit lower (a layer's here,
# 4 x 29,449 = 117,796 B; the pool's best-fit reuse of the smaller buffers moves the
# difference by a few hundred bytes). Required: at least half a layer's unit lower. A
# rank that gathers before freeing holds the freed unit and the gathered one at once,
# as if it prefetched: no lower without prefetch.
s3_prefetch_comm() {  # s3_prefetch_comm STRATEGY
    local name="sharded.memory.prefetch.$1.np2" f="$S3_DIR/prefetch-comm-$1" model=($S3_MODEL_STR) a b
    local half=$((2 * (12 * 49 * 49 + 13 * 49)))
    echo "PLAN $name"
    for o in prefetch no-prefetch; do
        COURSE_LATE_COMPLETION=1 "$BUILD/sharded_train" --np 2 --strategy "$1" "${model[@]}" \
            --steps 2 --lr 1e-3 --warmup 0 --timeout 20 --peak-tflops 1 --batch 2 \
            $([ $o = no-prefetch ] && echo --no-prefetch) >"$f.$o.log" 2>&1
    done
    a=$(s3_rank0_comm "$f.prefetch.log")
    b=$(s3_rank0_comm "$f.no-prefetch.log")
    if [ -n "$a" ] && [ -n "$b" ] && [ "$((a - b))" -ge "$half" ]; then
        echo "PASS $name  rank 0's peak comm $b B without prefetch, $a B with: $((a - b)) B less (>= $half, half a layer's unit)"
    else
        echo "FAIL $name  rank 0's peak comm ${b:-?} B without prefetch, ${a:-?} B with: prefetch's unit must be the difference (>= $half B, half a layer's unit). Free the units no longer needed before gathering this one"
    fi
}
export -f s3_prefetch_comm
for st in zero3 fsdp; do run "sharded-$st-prefetch-comm" s3_prefetch_comm "$st"; done
run sharded-zero3-noprefetch bash -c 's3_case noprefetch 0 3 1 naive zero3 --no-prefetch'
run sharded-zero3-noreshard bash -c 's3_case noreshard 0 3 1 naive zero3 --no-reshard'
run sharded-fsdp-units2 env PREFETCH=1 bash -c 's3_case units2 0 3 1 naive fsdp --fsdp-unit-layers 2'
run sharded-fsdp-unitsall env PREFETCH=1 bash -c 's3_case unitsall 0 3 1 naive fsdp --fsdp-unit-layers 4'
run sharded-fsdp-noreshard bash -c 's3_case noreshard 0 3 1 naive fsdp --no-reshard --no-prefetch'
# Without resharding every unit is gathered once, in forward: the bytes are ZeRO-2's
# (the ring: the formulas count its bytes; within 1e-5 of the reference, as above).
for st in zero3 fsdp; do
    run "sharded-$st-noreshard-ring" env BYTES=1 bash -c 's3_case noreshard 1e-5 3 1 ring "$1" --no-reshard' _ "$st"
done
# Gradient accumulation (2 micro-batches of 1): DDP and ZeRO-1 reduce once, after the
# last, as the reference does: bit for bit. ZeRO-2 and beyond reduce-scatter each
# micro-batch into their shard: the sum over ranks of each micro-batch, then over
# micro-batches, is the reference's two sums in the other order: within 1e-6.
for st in ddp zero1; do
    run "sharded-$st-accum2" bash -c 's3_case accum2 0 3 2 naive "$1" --bucket-mb 0' _ "$st"
done
for st in zero2 zero3 fsdp; do
    run "sharded-$st-accum2" bash -c 's3_case accum2 1e-6 3 2 naive "$1" --bucket-mb 0' _ "$st"
done

# Switches of one strategy given to another would do nothing: refused, naming them.
s3_refuse() {  # s3_refuse NAME PATTERN BINARY FLAGS...  (run.sh's refused)
    local name=$1 pat=$2 bin=$3; shift 3
    refused "sharded.refuse.$name" "$pat" "$BUILD/$bin" --steps 1 --preset tiny --peak-tflops 1 "$@"
}
export -f s3_refuse
run sharded-refuse-prefetch s3_refuse no_prefetch_ddp "--no-prefetch is for zero3, fsdp and hsdp" sharded_train --np 2 --strategy ddp --no-prefetch
run sharded-refuse-unit-layers s3_refuse unit_layers_zero2 "--fsdp-unit-layers is for fsdp and hsdp" sharded_train --np 2 --strategy zero2 --fsdp-unit-layers 2

# Faults in the middle of an overlapped step: the stage-02 diagnostics, no hang.
s3_fault() {  # s3_fault NAME PATTERN FLAGS...
    local name=$1 pattern=$2 out start elapsed rc; shift 2
    out=$(mktemp); start=$(date +%s)
    "$BUILD/sharded_train" --steps 4 --log-every 100 --warmup 0 --preset tiny --peak-tflops 1 \
        "$@" >"$out" 2>&1
    rc=$?; elapsed=$(( $(date +%s) - start ))
    if [ "$rc" -ne 0 ] && [ "$elapsed" -le 25 ] && grep -q "$pattern" "$out"; then
        echo "PASS sharded.fault.$name  exit $rc after ${elapsed}s: $(grep -m1 "$pattern" "$out" | cut -c1-220)"
    else
        echo "FAIL sharded.fault.$name  exit $rc after ${elapsed}s; output: $(tail -n 4 "$out")"
    fi
    rm -f "$out"
}
run sharded-fault-kill s3_fault killed_mid_bucket "rank 1 (pid [0-9]*) was killed by signal 9" \
    --np 3 --strategy ddp --bucket-mb 0 --kill-rank 1 --kill-at 7 --timeout 5
run sharded-fault-kill-peer s3_fault peer_names_the_collective "all-reduce #7 on group world" \
    --np 3 --strategy ddp --bucket-mb 0 --kill-rank 1 --kill-at 7 --timeout 5
run sharded-fault-stall s3_fault hung_rank_times_out "timeout after 2.0 s in all-gather" \
    --np 3 --strategy zero3 --stall-rank 2 --stall-at 12 --timeout 2

# Every rank must run the same configuration: a rank started with other flags is named.
# And the MPI library's collectives over blocks (MPI_Reduce_scatter, MPI_Allgatherv),
# called from the progress thread, under mpirun: within 1e-5 of stage 02's DDP.
if mpi_built; then
    s3_mpi_case() {  # s3_mpi_case STRATEGY
        local name="sharded.equiv.$1.mpi.np3" model=($S3_MODEL_STR) train=($S3_TRAIN_STR) ref f
        echo "PLAN $name"
        ref=$(s3_reference 3 1)
        f="$S3_DIR/$name"
        if tests/mpirun.sh -np 3 "$BUILD/sharded_train" --transport mpi --algo mpi --strategy "$1" "${model[@]}" \
               "${train[@]}" --batch 2 --save-params "$f.safetensors" >"$f.log" 2>&1; then
            "$BUILD/tests/compare_params" "$f.safetensors" "$ref" 1e-5 "$name"
        else
            echo "FAIL $name  the run failed: $(grep -m1 -E 'error' "$f.log" | cut -c1-300)"
            tail -n 6 "$f.log"
        fi
    }
    for st in zero2 fsdp; do run "sharded-$st-mpi" s3_mpi_case "$st"; done
    s3_mismatch() {
        local out; out=$(tests/mpirun.sh -np 1 "$BUILD/sharded_train" --transport mpi --preset tiny \
            --steps 1 --peak-tflops 1 --bucket-mb 25 : -np 1 "$BUILD/sharded_train" \
            --transport mpi --preset tiny --steps 1 --peak-tflops 1 --bucket-mb 1 2>&1)
        if echo "$out" | grep -q "rank 0 has --bucket-mb=25, rank 1 has --bucket-mb=1"; then
            echo "PASS sharded.config_mismatch_named  $(echo "$out" | grep -m1 'different configurations' | cut -c1-200)"
        else
            echo "FAIL sharded.config_mismatch_named  output: $(echo "$out" | tail -n 3)"
        fi
    }
    run sharded-config-mismatch s3_mismatch
fi

# The timeline: Chrome trace JSON with the three lanes, from an overlapped step.
s3_trace() {
    local p="$S3_DIR/trace"
    "$BUILD/sharded_train" --np 2 --strategy zero3 --preset tiny --steps 2 --bucket-mb 0 \
        --peak-tflops 1 --trace "$p" --log-every 100 >"$p.log" 2>&1 || { echo "FAIL sharded.timeline  the run failed"; tail -n 5 "$p.log"; return; }
    "$PY" - "$p.json" "$p.dat" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in ev if e.get("ph") == "X"]
lanes = {(e["pid"], e["tid"]) for e in spans}
rows = [l for l in open(sys.argv[2]) if not l.startswith("#")]
ok = {(r, t) for r in (0, 1) for t in (0, 1)} <= lanes and len(rows) == len(spans) and all(e["dur"] >= 0 for e in spans)
print(f"{'PASS' if ok else 'FAIL'} sharded.timeline.chrome_json  {len(spans)} spans on lanes {sorted(lanes)}; table rows {len(rows)}")
PY
}
run sharded-timeline s3_trace

# A deep model without resharding keeps every unit gathered at the turn from forward to
# backward: the buffer pool grows to hold them (it once stopped at 64 buffers).
s3_deep() {
    local out
    out=$("$BUILD/sharded_train" --np 2 --strategy zero3 --no-reshard --layers 70 --width 8 \
          --heads 2 --seq 4 --vocab 61 --steps 2 --peak-tflops 1 --timeout 20 2>&1)
    if [ $? -eq 0 ] && grep -q '^RESULT' <<<"$out"; then
        echo "PASS sharded.deep_no_reshard  70 layers, zero3 --no-reshard: $(grep -m1 -o 'comm=[0-9]*' <<<"$out") bytes of units and buckets"
    else
        echo "FAIL sharded.deep_no_reshard  $(grep -m1 error <<<"$out" | cut -c1-200)"
    fi
}
run sharded-deep s3_deep
