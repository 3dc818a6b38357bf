# tests/stage05.sh — stage 05's suite, sourced by tests/run.sh (which defines
# `run NAME COMMAND...`, $BUILD and $log).
#
# tests/test_pp.c: the checker on every generated schedule and on broken ones;
# then each schedule on 2-4 stages, m = 1..8 micro-batches, against one process
# with gradient accumulation (the loss and every gradient but the tied wte's
# bitwise; weights after 5 AdamW steps within 1e-5), the activation ledger against
# the micro-batches in flight, and the two copies of the tied embedding bitwise.
run pp-checker "$BUILD/tests/test_pp" --checker
for p in 1 2 3 4; do
    for s in gpipe 1f1b; do run "pp-$s-p$p" "$BUILD/tests/test_pp" --np "$p" --schedule "$s" --timeout 20; done
done
for p in 2 4; do run "pp-interleaved-p$p" "$BUILD/tests/test_pp" --np "$p" --schedule interleaved --timeout 20; done
# The zero-bubble schedule: the backward in two passes, the same bits as 1F1B.
for p in 1 2 3 4; do run "pp-zb-h1-p$p" "$BUILD/tests/test_pp" --np "$p" --schedule zb-h1 --timeout 20; done
run pp-zb-h1-p2-dp2 "$BUILD/tests/test_pp" --np 4 --dp 2 --schedule zb-h1 --timeout 20
# The meshes: DP x PP, TP x PP (with and without SP), and DP x TP x PP on 8 ranks,
# against one process with dp x B rows per micro-batch (other summation orders:
# loss 1e-5, gradients 1e-4, weights 1e-5 relative, as stage 04's tolerances).
run pp-1f1b-p2-dp2 "$BUILD/tests/test_pp" --np 4 --dp 2 --schedule 1f1b --timeout 20
run pp-1f1b-p2-t2 "$BUILD/tests/test_pp" --np 4 --tp 2 --schedule 1f1b --timeout 20
run pp-gpipe-p2-t2-sp "$BUILD/tests/test_pp" --np 4 --tp 2 --sp --schedule gpipe --timeout 20
run pp-1f1b-p2-t2-dp2 "$BUILD/tests/test_pp" --np 8 --tp 2 --dp 2 --schedule 1f1b --timeout 20
run pp-interleaved-p2-t2-sp-dp2 "$BUILD/tests/test_pp" --np 8 --tp 2 --sp --dp 2 --schedule interleaved --timeout 20

export S5_DIR="$log/stage05"
mkdir -p "$S5_DIR"
S5_MODEL="--layers 8 --width 32 --heads 4 --seq 8 --vocab 61"
S5_TRAIN="--steps 4 --batch 2 --grad-accum 4 --lr 1e-3 --log-every 100 --warmup 0 --peak-tflops 1"
export S5_MODEL S5_TRAIN

# The driver (the trainer's loop, the pipeline strategy) ends where build/train
# ends with the same global batch: 1e-5 (||a - b|| / ||b||; the tied wte's two
# halves are summed in another order, which is all that differs without DP or TP).
s5_driver() {  # s5_driver NAME NP [FLAGS...]
    local name=$1 np=$2 f="$S5_DIR/$1" ref="$S5_DIR/ref"; shift 2
    echo "PLAN pp.driver.$name"
    [ -f "$ref.safetensors" ] || "$BUILD/train" $S5_MODEL $S5_TRAIN --save-params "$ref.safetensors" >"$ref.log" 2>&1
    if "$BUILD/pp_train" --np "$np" --timeout 20 $S5_MODEL $S5_TRAIN "$@" \
            --save-params "$f.safetensors" >"$f.log" 2>&1; then
        "$BUILD/tests/compare_params" "$f.safetensors" "$ref.safetensors" 1e-5 "pp.driver.$name"
    else
        echo "FAIL pp.driver.$name  the run failed: $(grep -m1 -E 'error|killed' "$f.log" | cut -c1-300)"
        tail -n 5 "$f.log"
    fi
}
run pp-driver-1f1b s5_driver 1f1b.p4 4 --pp 4 --schedule 1f1b
run pp-driver-interleaved s5_driver interleaved.p2 2 --pp 2 --schedule interleaved --chunks 2
# With flash attention (its own summation order, ~1e-7 here: well within the 1e-5),
# through ZB-H1's split backward (the input pass recomputes the tiles from lse).
run pp-driver-zbh1-flash s5_driver zbh1.p2.flash 2 --pp 2 --schedule zb-h1 --attention flash

# A rank computes one chunk at a time, so its chunks share one gradient workspace
# (gpt_alloc_workspace_shared): the workspace of an interleaved rank with 2 chunks is
# that of a 1F1B rank (the MEM lines' ledger peaks, every rank).
s5_workspace() {
    local f="$S5_DIR/workspace" s w
    echo "PLAN pp.memory.workspace_per_rank"
    for s in 1f1b interleaved; do
        if ! "$BUILD/pp_train" --np 2 --pp 2 --schedule "$s" --chunks $([ "$s" = 1f1b ] && echo 1 || echo 2) \
                --timeout 20 $S5_MODEL $S5_TRAIN --steps 1 >"$f.$s.log" 2>&1; then
            echo "FAIL pp.memory.workspace_per_rank  the $s run failed: $(grep -m1 -E 'error|killed' "$f.$s.log")"
            return 1
        fi
    done
    w=$(grep -h '^MEM' "$f.1f1b.log" "$f.interleaved.log" | grep -oE 'workspace=[0-9]+' | sort -u)
    if [ "$(grep -c '^MEM' "$f.interleaved.log")" = 2 ] && [[ "$w" =~ ^workspace=[1-9][0-9]*$ ]]; then
        echo "PASS pp.memory.workspace_per_rank  1f1b and interleaved (2 chunks), every rank: $w bytes"
    else
        echo "FAIL pp.memory.workspace_per_rank  want one workspace, not 0, on every rank (2 MEM lines each): got $(echo ${w:-no workspace= field})"
        return 1
    fi
}
run pp-memory-workspace s5_workspace

# The messages' buffers (MEM_COMM) are freed each step: the peak after 3 steps is the
# peak after 1, on every rank (a gradient message the first stage never frees grows
# it by a message per micro-batch per step): pp.memory.comm_steady[.S]. And within a
# step they are freed as the schedule goes, not at its end: with 8 micro-batches the
# peak is that of 4, on every rank (a first stage that keeps every gradient it
# received until the step ends holds m of them): pp.memory.comm_bounded.S. Every
# schedule that bounds what is in flight (GPipe's last stage holds its m gradients
# until the first stage takes them, by design).
s5_comm_peaks() {  # s5_comm_peaks SCHED STEPS M: "rank=R comm=B" lines, sorted
    local f="$S5_DIR/comm.$1.$2.$3"
    # shellcheck disable=SC2086
    "$BUILD/pp_train" --np 2 --pp 2 --schedule "$1" --timeout 20 $S5_MODEL $S5_TRAIN \
        --steps "$2" --grad-accum "$3" >"$f.log" 2>&1 || { echo "FAILED: $(grep -m1 -E 'error|killed' "$f.log")"; return; }
    grep -h '^MEM' "$f.log" | grep -oE 'rank=[0-9]+|comm=[0-9]+' | paste -d' ' - - | sort | tr '\n' ' '
}
export -f s5_comm_peaks
s5_comm() {  # s5_comm SCHED
    local steady="pp.memory.comm_steady.$1" bounded="pp.memory.comm_bounded.$1" a b c
    [ "$1" = 1f1b ] && steady=pp.memory.comm_steady
    printf 'PLAN %s\nPLAN %s\n' "$steady" "$bounded"
    a=$(s5_comm_peaks "$1" 1 4) b=$(s5_comm_peaks "$1" 3 4) c=$(s5_comm_peaks "$1" 1 8)
    if [ "$(wc -w <<<"$a")" = 4 ] && [ "$a" = "$b" ] && ! grep -q 'comm=0 ' <<<"$a "; then
        echo "PASS $steady  $1: peak comm after 1 and after 3 steps: $a"
    else
        echo "FAIL $steady  $1: peak comm after 1 step: ${a:-none}; after 3: ${b:-none} (a message buffer not freed grows it every step)"
    fi
    if [ "$(wc -w <<<"$c")" = 4 ] && [ "$a" = "$c" ]; then
        echo "PASS $bounded  $1: peak comm with 4 and with 8 micro-batches: $c"
    else
        echo "FAIL $bounded  $1: peak comm with 4 micro-batches: ${a:-none}; with 8: ${c:-none} (a message buffer kept until the step's end grows it with the micro-batches)"
    fi
}
export -f s5_comm
for s in 1f1b zb-h1 interleaved; do run "pp-memory-comm-$s" s5_comm "$s"; done

# A rank killed mid-pipeline: the launcher names it, its neighbour names what it
# waited for, within the timeout, no hang.
s5_kill() {
    local out start rc elapsed
    out=$(mktemp); start=$(date +%s)
    "$BUILD/pp_train" --np 3 --pp 3 --schedule 1f1b $S5_MODEL $S5_TRAIN --kill-rank 1 --kill-at 5 \
        --timeout 5 >"$out" 2>&1
    rc=$?; elapsed=$(( $(date +%s) - start ))
    if [ "$rc" -ne 0 ] && [ "$elapsed" -le 25 ] && grep -q "rank 1 (pid [0-9]*) was killed by signal 9" "$out" \
            && grep -q "point-to-point" "$out"; then
        echo "PASS pp.fault.killed_mid_pipeline  exit $rc after ${elapsed}s: $(grep -m1 'point-to-point' "$out" | cut -c1-200)"
    else
        echo "FAIL pp.fault.killed_mid_pipeline  exit $rc after ${elapsed}s; output: $(tail -n 4 "$out")"
    fi
    rm -f "$out"
}
run pp-fault-kill s5_kill

# Bad layouts are refused before any rank starts, naming the flags.
s5_refuse() {  # s5_refuse NAME PATTERN FLAGS...
    local name=$1 pattern=$2 out rc; shift 2
    out=$("$BUILD/pp_train" --steps 1 --peak-tflops 1 "$@" 2>&1); rc=$?
    if [ "$rc" -eq 2 ] && echo "$out" | grep -q -- "$pattern" && ! echo "$out" | grep -q "model:"; then
        echo "PASS pp.refuses.$name  exit 2: $(echo "$out" | grep -m1 -- "$pattern" | cut -c1-200)"
    else
        echo "FAIL pp.refuses.$name  exit $rc; output: $(echo "$out" | tail -n 2)"
    fi
}
run pp-refuse-layers s5_refuse layers "need at least as many --layers" --np 4 --pp 4 --chunks 2 \
    --schedule interleaved --preset tiny
run pp-refuse-interleaved-m s5_refuse interleaved_m "a multiple of --pp" --np 2 --pp 2 \
    --schedule interleaved --grad-accum 3 --preset tiny --layers 4
run pp-refuse-np s5_refuse np "does not divide the 3 ranks" --np 3 --pp 2 --preset tiny
run pp-refuse-zero1 s5_refuse zero1_one_replica "there is one (use --np 4 --pp 2" --np 2 --pp 2 \
    --zero1 --preset tiny

# The timeline: Chrome JSON with every rank's forwards and backwards.
s5_trace() {
    local p="$S5_DIR/trace"
    "$BUILD/pp_train" --np 2 --pp 2 --schedule 1f1b $S5_MODEL $S5_TRAIN --trace "$p" >"$p.log" 2>&1 ||
        { echo "FAIL pp.timeline  the run failed"; tail -n 5 "$p.log"; return; }
    "$PY" - "$p.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
per = {}
for e in ev:
    per.setdefault(e["pid"], []).append(e["name"])
want = {f"{k}{i}" for k in "FB" for i in range(4)}
ok = sorted(per) == [0, 1] and all(want <= set(v) for v in per.values())
print(f"{'PASS' if ok else 'FAIL'} pp.timeline.chrome_json  ranks {sorted(per)}: "
      + "; ".join(f"{r}: {' '.join(n for n in v if n[0] in 'FB')}" for r, v in sorted(per.items())))
PY
}
run pp-timeline s5_trace

# Messages larger than the shm channel (shrunk to 16 KiB; the activations here are
# 32 KiB): a send can only finish while its receiver takes it, so an engine that
# waits for its sends where the schedule does not say so deadlocks here (and the
# timeout names it) while small messages would hide it.
run pp-1f1b-p2-large env COURSE_SHM_CHANNEL_BYTES=16384 "$BUILD/tests/test_pp" --np 2 \
    --schedule 1f1b --width 128 --seq 16 --batch 4 --max-micro-batches 4 --timeout 4
run pp-1f1b-p3-large env COURSE_SHM_CHANNEL_BYTES=16384 "$BUILD/tests/test_pp" --np 3 \
    --schedule 1f1b --width 128 --seq 16 --batch 4 --max-micro-batches 4 --timeout 4
# Interleaved too: its last stage sends activations (to the first, for the next
# chunk), where 1F1B's never does, so only here does waiting on them deadlock.
run pp-interleaved-p2-large env COURSE_SHM_CHANNEL_BYTES=16384 "$BUILD/tests/test_pp" --np 2 \
    --schedule interleaved --width 128 --seq 16 --batch 4 --max-micro-batches 4 --timeout 4
run pp-interleaved-p3-large env COURSE_SHM_CHANNEL_BYTES=16384 "$BUILD/tests/test_pp" --np 3 \
    --schedule interleaved --width 128 --seq 16 --batch 4 --max-micro-batches 6 --timeout 4
run pp-interleaved-p3 "$BUILD/tests/test_pp" --np 3 --schedule interleaved --timeout 20

# Stage 01's calculator, --recipe course with --pp, against every rank's ledger: one
# step of S5_MODEL (--batch 2, m = 4 micro-batches); params, grads, optimizer,
# activations (in flight x one micro-batch's set) and workspace to the byte, and the
# micro-batches in flight, stage by stage.
s5_memory_calc() {  # s5_memory_calc P SCHEDULE
    local p=$1 sched=$2 name="pp.memory_calc.$2.p$1" f="$S5_DIR/memcalc.$2.p$1" bad="" detail="" line
    echo "PLAN $name"
    if ! "$BUILD/pp_train" --np "$p" --pp "$p" --schedule "$sched" --timeout 20 $S5_MODEL \
            --batch 2 --grad-accum 4 --steps 1 --log-every 100 --peak-tflops 1 >"$f.log" 2>&1; then
        echo "FAIL $name  the run failed: $(grep -m1 -E 'error|killed' "$f.log" | cut -c1-300)"
        tail -n 5 "$f.log"
        return
    fi
    [ "$(grep -c '^MEM rank=' "$f.log")" -eq "$p" ] || bad="$bad; $(grep -c '^MEM rank=' "$f.log") MEM lines (want $p)"
    while read -r line; do
        local st k json cat got want
        st=$(sed -n 's/.* stage=\([0-9]*\) .*/\1/p' <<<"$line")
        k=$(sed -n 's/.* in_flight=\([0-9]*\) .*/\1/p' <<<"$line")
        json=$("$BUILD/memcalc" --layers 8 --hidden 32 --heads 4 --seq 8 --vocab 61 --recipe course \
            --micro-batch 2 --pp "$p" --schedule "$sched" --microbatches 4 --stage "$st" --json 2>&1)
        want=$(sed -n 's/.*"in_flight": \([0-9]*\).*/\1/p' <<<"$json")
        [ "$k" = "$want" ] || bad="$bad; stage $st in_flight $k (memcalc '$want')"
        for cat in params grads optimizer activations workspace; do
            got=$(sed -n "s/.* $cat=\([0-9]*\).*/\1/p" <<<"$line")
            want=$(sed -n "s/.*\"bytes_$cat\": \([0-9]*\).*/\1/p" <<<"$json")
            [ -n "$got" ] && [ "$got" = "$want" ] || bad="$bad; stage $st $cat $got (memcalc '$want')"
        done
        detail="$detail stage $st: $k in flight, activations $(sed -n 's/.* activations=\([0-9]*\).*/\1/p' <<<"$line"), params $(sed -n 's/.* params=\([0-9]*\).*/\1/p' <<<"$line");"
    done < <(grep '^MEM rank=' "$f.log" | sort -t= -k3 -n)
    if [ -z "$bad" ]; then echo "PASS $name $detail every category = memcalc --stage"
    else echo "FAIL $name  ${bad#; }"; fi
}
run pp-memory-calc-1f1b-p2 s5_memory_calc 2 1f1b
run pp-memory-calc-gpipe-p3 s5_memory_calc 3 gpipe
run pp-memory-calc-1f1b-p4 s5_memory_calc 4 1f1b
# The 3-D mesh with ZeRO-1 over its data-parallel dimension (2 x 2 x 2 on 8 ranks).
run pp-1f1b-p2-t2-dp2-zero1 "$BUILD/tests/test_pp" --np 8 --tp 2 --dp 2 --zero1 --schedule 1f1b \
    --timeout 20

# The simulator (build/pp_sim, which the benchmark compares the measured bubble with)
# against the formulas: equal stages, no message time, three (tF, tB, tW) with
# tW <= min(tF, tB), p = 2..8; GPipe and 1F1B (p-1)/m at every m; interleaved (v = 2)
# (p-1)/(v m) where m is a multiple of p; ZB-H1 (p-1)(tF+tB-tW)/(m(tF+tB+tW)) for
# m >= p. The times are multiples of 1/4: every sum is exact, so 1e-6 is the printing's.
s5_sim_formula() {  # s5_sim_formula SCHEDULE
    local s=$1 p m t bad="" n=0 line
    for p in 2 3 4 8; do
        for m in 1 2 3 4 8 12 16 32; do
            [ "$s" != interleaved ] || [ $((m % p)) = 0 ] || continue
            [ "$s" != zb-h1 ] || [ "$m" -ge "$p" ] || continue
            for t in "1 1 1" "1 2 0.5" "2 1.5 1"; do
                set -- $t
                line=$("$BUILD/pp_sim" --pp "$p" --schedule "$s" --microbatches "$m" --tf "$1" --tb "$2" \
                    --tw "$3" | grep '^RESULT') || { bad="$bad; p $p m $m: pp_sim failed"; continue; }
                n=$((n + 1))
                bad=$bad$(awk -v d="p $p m $m t $t" '{for (i = 3; i <= NF; i++) {split($i, a, "="); f[a[1]] = a[2]}
                    e = f["bubble"] - f["formula"]; if (e < -1e-6 || e > 1e-6 || f["idle"] != f["bubble"])
                        printf "; %s: bubble %s idle %s, formula %s", d, f["bubble"], f["idle"], f["formula"]}' <<<"$line")
            done
        done
    done
    if [ -z "$bad" ] && [ "$n" -gt 0 ]; then echo "PASS pp.sim.formula.$s  $n configurations: bubble = idle = the formula"
    else echo "FAIL pp.sim.formula.$s  ${bad#; }"; fi
}
for s in gpipe 1f1b interleaved zb-h1; do run "pp-sim-formula-$s" s5_sim_formula "$s"; done
# Unequal stages (p = 2, stage 1 10 % slower, m = 8): the bubble is the fill and
# drain over the slowest stage's work, (tF0+tB0) / (m (tF1+tB1)) = 3/26.4; the faster
# rank also waits m (0.3) for the slower one, which idle counts and the bubble does not.
s5_sim_unequal() {
    local s line bad=""
    for s in gpipe 1f1b; do
        line=$("$BUILD/pp_sim" --pp 2 --schedule "$s" --microbatches 8 --tf 1,1.1 --tb 2,2.2 --tw 0 | grep '^RESULT')
        bad=$bad$(awk -v s="$s" '{for (i = 3; i <= NF; i++) {split($i, a, "="); f[a[1]] = a[2]}
            want_b = 3 / 26.4; want_i = (5.4 / 24 + 3 / 26.4) / 2
            if (f["step"] != 29.4 || (f["bubble"] - want_b)^2 > 1e-12 || (f["idle"] - want_i)^2 > 1e-12 ||
                (f["imbalance"] - 0.1)^2 > 1e-12)
                printf "; %s: step %s bubble %s idle %s imbalance %s (want 29.4, %.6f, %.6f, 0.1)", s, f["step"],
                       f["bubble"], f["idle"], f["imbalance"], want_b, want_i}' <<<"$line")
    done
    if [ -z "$bad" ]; then echo "PASS pp.sim.unequal_stages  GPipe and 1F1B: step 29.4, bubble 3/26.4, idle and imbalance as derived"
    else echo "FAIL pp.sim.unequal_stages  ${bad#; }"; fi
}
run pp-sim-unequal s5_sim_unequal
