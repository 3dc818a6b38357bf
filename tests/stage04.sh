# tests/stage04.sh — stage 04's suite, sourced by tests/run.sh (which defines
# `run NAME COMMAND...`, $BUILD and $log). 04_tensor_parallel/exercises/parts.txt
# grades the checks named tp.*.
#
# tests/test_tp.c does the work: the layers one by one, then the whole model
# against one process (logits 1e-5, gradients 1e-4, weights after 10 AdamW steps
# 1e-4), the bytes against the formula, the ledger against the stage-01
# calculator, and the replicated weights bitwise on every TP rank. Its model
# (L=2 C=48 NH=12 T=12 V=251) splits over t = 1, 2, 3, 4 and pads its vocabulary.

for t in 1 2 3 4; do
    run "tp-t$t" "$BUILD/tests/test_tp" --np "$t" --tp "$t" --timeout 20
    [ "$t" -gt 1 ] && run "tp-t$t-sp" "$BUILD/tests/test_tp" --np "$t" --tp "$t" --sp --timeout 20
done
# The dp x tp meshes: 2 x 2 on 4 ranks, 3 x 2 on 6, and 2 x 3 with SP on 6.
run tp-t2-dp2 "$BUILD/tests/test_tp" --np 4 --tp 2 --timeout 20
run tp-t2-sp-dp2 "$BUILD/tests/test_tp" --np 4 --tp 2 --sp --timeout 20
run tp-t2-dp3 "$BUILD/tests/test_tp" --np 6 --tp 2 --timeout 20
run tp-t3-sp-dp2 "$BUILD/tests/test_tp" --np 6 --tp 3 --sp --timeout 20

export S4_DIR="$log/stage04"
mkdir -p "$S4_DIR"
S4_MODEL="--layers 2 --width 48 --heads 12 --seq 12 --vocab 251"
S4_TRAIN="--steps 5 --batch 2 --lr 1e-3 --log-every 100 --warmup 0 --peak-tflops 1"
export S4_MODEL S4_TRAIN

# The driver: build/tp_train (the trainer's loop, the strategy of tp_model.c) ends
# where build/train ends, within 1e-5 (||a - b|| / ||b|| of the whole model; the
# split layers sum in another order), and every rank's ledger equals the
# calculator's activations, workspace and weights per rank.
s4_driver() {  # s4_driver NAME NP TP [FLAGS...]
    local name=$1 np=$2 tp=$3 f="$S4_DIR/$1"; shift 3
    local ref="$S4_DIR/ref-dp$((np / tp))"
    echo "PLAN tp.driver.$name"
    echo "PLAN tp.driver_memory.$name"
    if [ ! -f "$ref.safetensors" ]; then
        # One process with the whole global batch: dp x 2 rows.
        "$BUILD/train" $S4_MODEL $S4_TRAIN --batch $((2 * np / tp)) \
            --save-params "$ref.safetensors" >"$ref.log" 2>&1
    fi
    if ! "$BUILD/tp_train" --np "$np" --tp "$tp" --timeout 20 $S4_MODEL $S4_TRAIN "$@" \
            --save-params "$f.safetensors" >"$f.log" 2>&1; then
        echo "FAIL tp.driver.$name  the run failed: $(grep -m1 -E 'error|killed' "$f.log" | cut -c1-300)"
        grep -v "^launcher: " "$f.log" | tail -n 5  # the error, not the launcher's exit lines
        return
    fi
    "$BUILD/tests/compare_params" "$f.safetensors" "$ref.safetensors" 1e-5 "tp.driver.$name"
    local sp=""
    for a in "$@"; do [ "$a" = --sp ] && sp=--sp; done
    "$BUILD/memcalc" --layers 2 --hidden 48 --heads 12 --seq 12 --vocab 251 --recipe course \
        --micro-batch 2 --tp "$tp" $sp --json >"$f.calc.json"
    "$PY" - "$f.log" "$f.calc.json" "tp.driver_memory.$name" <<'PY'
import json, re, sys
log, calc, name = sys.argv[1:4]
c = json.load(open(calc))
want = {"activations": c["bytes_activations"], "workspace": c["bytes_workspace"],
        "params": c["bytes_params"], "grads": c["bytes_grads"], "optimizer": c["bytes_optimizer"]}
bad, ranks = [], 0
for line in open(log):
    if line.startswith("MEM "):
        ranks += 1
        got = dict(kv.split("=") for kv in line.split()[1:])
        bad += [f"rank {got['rank']} {k} {got[k]} != {int(v)}" for k, v in want.items() if int(got[k]) != int(v)]
ok = ranks > 0 and not bad
detail = "; ".join(bad[:3]) if bad else f"{ranks} ranks: activations {int(want['activations'])} B, workspace {int(want['workspace'])} B, weights {int(want['params'])} B each"
print(f"{'PASS' if ok else 'FAIL'} {name}  ledger = memcalc --recipe course per rank; {detail}")
PY
}
run tp-driver-t2 s4_driver t2 2 2
run tp-driver-t3-sp s4_driver t3.sp 3 3 --sp
run tp-driver-t2-dp2 s4_driver t2.dp2 4 2
# --attention flash under tensor parallelism (each rank its NH/t heads' tiles): the
# weights of one process with flash attention, within 1e-5, and every rank's ledger
# the materialised run's less exactly the (T,T) probabilities it no longer keeps
# (L layers of B x NH/t x T x (T - 1) floats, a log-sum-exp a row left) and their
# backward's scratch (B x NH/t x T x T).
s4_flash() {
    local f="$S4_DIR/flash" ref="$S4_DIR/flash-ref" L=2 B=2 NHl=6 T=12
    echo "PLAN tp.flash.weights"
    echo "PLAN tp.flash.memory"
    "$BUILD/train" $S4_MODEL $S4_TRAIN --attention flash --save-params "$ref.safetensors" \
        >"$ref.log" 2>&1
    for att in flash materialized; do
        "$BUILD/tp_train" --np 2 --tp 2 --sp --timeout 20 $S4_MODEL $S4_TRAIN --attention "$att" \
            --save-params "$f.$att.safetensors" >"$f.$att.log" 2>&1
    done
    "$BUILD/tests/compare_params" "$f.flash.safetensors" "$ref.safetensors" 1e-5 tp.flash.weights
    local want_a=$((4 * L * B * NHl * T * (T - 1))) want_w=$((4 * B * NHl * T * T))
    "$PY" - "$f.flash.log" "$f.materialized.log" "$want_a" "$want_w" <<'PY'
import sys
flash, mat, want_a, want_w = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def mem(path):
    return {int(d["rank"]): d for d in (dict(kv.split("=") for kv in l.split()[1:])
            for l in open(path) if l.startswith("MEM "))}
a, b = mem(flash), mem(mat)
bad = [f"rank {r}: activations {b[r]['activations']} -> {a[r]['activations']}, workspace "
       f"{b[r]['workspace']} -> {a[r]['workspace']}" for r in sorted(b)
       if r not in a or int(b[r]["activations"]) - int(a[r]["activations"]) != want_a
       or int(b[r]["workspace"]) - int(a[r]["workspace"]) != want_w]
ok = len(a) == 2 and len(b) == 2 and not bad
print(f"{'PASS' if ok else 'FAIL'} tp.flash.memory  every rank keeps {want_a} B less activations "
      f"and {want_w} B less workspace than with the (T,T) probabilities"
      + (f"; {'; '.join(bad)}" if bad else f" ({len(a)} ranks)"))
PY
}
run tp-flash s4_flash

# Bad layouts are refused before any rank starts, naming the flags.
s4_refuse() {  # s4_refuse NAME PATTERN FLAGS...
    local name=$1 pattern=$2 out rc; shift 2
    out=$("$BUILD/tp_train" --steps 1 --peak-tflops 1 "$@" 2>&1); rc=$?
    if [ "$rc" -eq 2 ] && echo "$out" | grep -q -- "$pattern" && ! echo "$out" | grep -q "model:"; then
        echo "PASS tp.refuses.$name  exit 2: $(echo "$out" | grep -m1 -- "$pattern" | cut -c1-200)"
    else
        echo "FAIL tp.refuses.$name  exit $rc; output: $(echo "$out" | tail -n 2)"
    fi
}
run tp-refuse-heads s4_refuse heads "--tp 3 does not divide --heads 4" --np 3 --tp 3 --preset tiny
run tp-refuse-np s4_refuse np "--tp 2 does not divide the 3 ranks" --np 3 --tp 2 --preset tiny
run tp-refuse-sp1 s4_refuse sp_needs_tp "--sp needs --tp of 2 or more" --np 1 --tp 1 --sp --preset tiny
run tp-refuse-sp-tokens s4_refuse sp_tokens "--tp 3 does not divide the 1 x 32 = 32 tokens" \
    --np 3 --tp 3 --sp --preset tiny --heads 3 --width 48 --batch 1

# Under mpirun, with MPI's collectives: within 1e-5 of one process.
if mpi_built; then
    s4_mpi() {
        local name="tp.driver.t2.mpi" f="$S4_DIR/mpi" ref="$S4_DIR/ref-dp1"
        echo "PLAN $name"
        [ -f "$ref.safetensors" ] || "$BUILD/train" $S4_MODEL $S4_TRAIN --save-params "$ref.safetensors" >"$ref.log" 2>&1
        if tests/mpirun.sh -np 2 "$BUILD/tp_train" --transport mpi --algo mpi --tp 2 $S4_MODEL $S4_TRAIN \
               --save-params "$f.safetensors" >"$f.log" 2>&1; then
            "$BUILD/tests/compare_params" "$f.safetensors" "$ref.safetensors" 1e-5 "$name"
        else
            echo "FAIL $name  the run failed: $(grep -m1 -E 'error' "$f.log" | cut -c1-300)"
            grep -v "^launcher: " "$f.log" | tail -n 6
        fi
    }
    run tp-mpi s4_mpi
    s4_mismatch() {  # a rank started with other flags is named, before any collective
        local out; out=$(tests/mpirun.sh -np 1 "$BUILD/tp_train" --transport mpi --tp 2 --preset tiny \
            --steps 1 --peak-tflops 1 : -np 1 "$BUILD/tp_train" --transport mpi --tp 2 --sp \
            --preset tiny --steps 1 --peak-tflops 1 2>&1)
        if echo "$out" | grep -q "rank 0 has --sp=0, rank 1 has --sp=1"; then
            echo "PASS tp.config_mismatch_named  $(echo "$out" | grep -m1 'different configurations' | cut -c1-200)"
        else
            echo "FAIL tp.config_mismatch_named  output: $(echo "$out" | tail -n 3)"
        fi
    }
    run tp-config-mismatch s4_mismatch
fi

# Context parallelism's pieces (cp.h), in one process: the placement of the sequence
# (contiguous, zigzag), the merge of partial softmaxes against the full one, and
# attention a (query run, key block) at a time, in a ring's order, against the core's
# flash attention (tests/test_cp.c). Then ring attention and Ulysses between cp = 2, 3,
# 4 ranks, contiguous and zigzag: each rank's out, lse and dqkv against one process's
# flash attention over the whole sequence (Ulysses bitwise), and the bytes each rank
# sent. cp.* checks: not graded yet.
run cp-pieces "$BUILD/tests/test_cp"
for n in 2 3 4; do
    run "cp-np$n" "$BUILD/tests/test_cp" --np "$n" --timeout 20
done
# Ulysses with heads that cp does not divide: refused, naming both, before any work.
s4_ulysses_refuses() {
    local out rc=0
    echo "PLAN cp.ulysses.refuses_heads"
    out=$("$BUILD/tests/test_cp" --np 3 --ulysses-heads 4 --timeout 10 2>&1) || rc=$?
    if [ "$rc" -ne 0 ] && grep -q "4 heads do not split over 3 context-parallel ranks" <<<"$out"; then
        echo "PASS cp.ulysses.refuses_heads  exit $rc: $(grep -m1 -o 'Ulysses: 4 heads[^(]*' <<<"$out")"
    else
        echo "FAIL cp.ulysses.refuses_heads  exit $rc, want a refusal naming 4 heads and 3 ranks: $(tail -n 2 <<<"$out")"
    fi
}
run cp-ulysses-refuses s4_ulysses_refuses

# The GPT with its sequences split over cp ranks (build/cp_train): the weights after 5
# AdamW steps equal one process's with flash attention (build/train: the same model,
# data and seed; batch x dp sequences), within 1e-5 (fp32: the ring's merges and the
# gradients' mean over dp x cp sum in other orders); and the loss printed (the mean
# over rank 0's data-parallel share of the sequences) equals one process's on those
# sequences: at the first step and the last with dp = 1, at the first with dp = 2 (the
# later steps' weights have learnt from the other group's sequences too). T = 24:
# zigzag runs of 6 and 4 tokens at cp = 2, 3.
export S4_CP_MODEL="--layers 2 --width 48 --heads 12 --seq 24 --vocab 251"
export S4_CP_TRAIN="--steps 5 --lr 1e-3 --log-every 100 --warmup 0 --peak-tflops 1"
s4_cp_ref() {  # the single process, batch B: $S4_DIR/cp-ref-B.{log,safetensors}
    local f="$S4_DIR/cp-ref-$1"
    [ -f "$f.safetensors" ] || "$BUILD/train" $S4_CP_MODEL $S4_CP_TRAIN --batch "$1" \
        --attention flash --save-params "$f.safetensors" >"$f.log" 2>&1
}
export -f s4_cp_ref  # (each test runs in a child bash: tests/run.sh)
# s4_cp_loss LOG CHECK DP: LOG's printed losses against one process's on rank 0's share
# of the sequences (cp-ref-2): the first and last, or with dp > 1 the first only (the
# later steps' batches differ).
s4_cp_loss() {
    "$PY" - "$1" "$S4_DIR/cp-ref-2.log" "$2" "$3" <<'PY'
import re, sys
def losses(path):
    m = re.search(r"first_loss=(\S+) final_loss=(\S+)", open(path).read())
    return (float(m.group(1)), float(m.group(2))) if m else None
got, want, name, dp = losses(sys.argv[1]), losses(sys.argv[2]), sys.argv[3], int(sys.argv[4])
n = 2 if dp == 1 else 1  # with dp > 1, the first step only
ok = got and want and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got[:n], want[:n]))
print(f"{'PASS' if ok else 'FAIL'} {name}  {'first and last' if n == 2 else 'first'} loss "
      f"{got[:n] if got else None} against one process's on the same sequences "
      f"{want[:n] if want else None} (rel 1e-5)")
PY
}
export -f s4_cp_loss
s4_cp_equiv() {  # s4_cp_equiv NAME NP CP ATTENTION LAYOUT
    local name=$1 np=$2 cp=$3 f="$S4_DIR/cp-$1" dp=$(($2 / $3))
    echo "PLAN cp.equiv.$name.loss"
    echo "PLAN cp.memory.$name"
    [ -f "$S4_DIR/cp-one.log" ] || "$BUILD/cp_train" --np 1 --cp 1 $S4_CP_MODEL $S4_CP_TRAIN \
        --batch 2 >"$S4_DIR/cp-one.log" 2>&1
    s4_cp_ref $((2 * dp))
    "$BUILD/cp_train" --np "$np" --cp "$cp" --cp-attention "$4" --cp-layout "$5" --timeout 20 \
        $S4_CP_MODEL $S4_CP_TRAIN --batch 2 --save-params "$f.safetensors" >"$f.log" 2>&1
    "$BUILD/tests/compare_params" "$f.safetensors" "$S4_DIR/cp-ref-$((2 * dp)).safetensors" 1e-5 \
        "cp.equiv.$name.weights"
    s4_cp_ref 2  # rank 0's share of the sequences, alone
    s4_cp_loss "$f.log" "cp.equiv.$name.loss" "$dp"
    # Every rank's ledger: the activations of its T/cp rows, 1/cp of one rank's (cp = 1,
    # the core's flash attention); and every category byte for byte stage 01's calculator
    # (memcalc --cp: the ring's two K, V blocks and two dK, dV buffers or Ulysses' send
    # and receive buffers as communication, their scratch, a tile's scores included, as
    # workspace).
    "$BUILD/memcalc" --layers 2 --hidden 48 --heads 12 --seq 24 --vocab 251 --recipe course \
        --micro-batch 2 --cp "$cp" --cp-attention "$4" --json >"$f.calc.json"
    "$PY" - "$f.log" "$S4_DIR/cp-one.log" "cp.memory.$name" "$cp" "$f.calc.json" <<'PY'
import json, sys
log, one, name, cp, calc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
mem = lambda path: [dict(kv.split("=") for kv in l.split()[1:]) for l in open(path) if l.startswith("MEM ")]
full = int(mem(one)[0]["activations"]) if mem(one) else -1
c = json.load(open(calc))
want = {k: int(c["bytes_" + k]) for k in ("params", "grads", "optimizer", "activations",
                                          "workspace", "comm")}
ranks = mem(log)
bad = [f"rank {m['rank']} {k} {m[k]} != {v}" for m in ranks for k, v in want.items() if int(m[k]) != v]
bad += [f"rank {m['rank']}: activations x cp {int(m['activations']) * cp} != {full}" for m in ranks
        if int(m["activations"]) * cp != full]
ok = ranks and full > 0 and not bad
print(f"{'PASS' if ok else 'FAIL'} {name}  {len(ranks)} ranks: ledger = memcalc --cp {cp} in every "
      f"category (activations {want['activations']} B = one rank's {full} / cp, workspace "
      f"{want['workspace']} B, comm {want['comm']} B)" + ("; " + "; ".join(bad[:3]) if bad else ""))
PY
}
run cp-equiv-ring-zigzag-2 s4_cp_equiv ring.zigzag.cp2 2 2 ring zigzag
run cp-equiv-ring-contiguous-2 s4_cp_equiv ring.contiguous.cp2 2 2 ring contiguous
run cp-equiv-ring-zigzag-3 s4_cp_equiv ring.zigzag.cp3 3 3 ring zigzag
run cp-equiv-ring-contiguous-4 s4_cp_equiv ring.contiguous.cp4 4 4 ring contiguous
run cp-equiv-ulysses-zigzag-2 s4_cp_equiv ulysses.zigzag.cp2 2 2 ulysses zigzag
run cp-equiv-ulysses-contiguous-3 s4_cp_equiv ulysses.contiguous.cp3 3 3 ulysses contiguous
run cp-equiv-ulysses-zigzag-4 s4_cp_equiv ulysses.zigzag.cp4 4 4 ulysses zigzag
run cp-equiv-ring-zigzag-dp2 s4_cp_equiv ring.zigzag.cp2.dp2 4 2 ring zigzag
run cp-equiv-ulysses-dp2 s4_cp_equiv ulysses.zigzag.cp2.dp2 4 2 ulysses zigzag
# CP x TP on one mesh (rank = (dp rank x cp + cp rank) tp + tp rank): each layer's weights
# split over the tp ranks, each sequence over the cp ranks, attention on a rank's NH/tp
# heads; the weights after 5 steps and the loss equal one process's (as above).
s4_cp_tp_equiv() {  # s4_cp_tp_equiv NAME NP CP TP ATTENTION LAYOUT
    local name=$1 f="$S4_DIR/cp-$1" dp=$(($2 / $3 / $4))
    echo "PLAN cp.equiv.$name.loss"
    s4_cp_ref $((2 * dp))
    "$BUILD/cp_train" --np "$2" --cp "$3" --tp "$4" --cp-attention "$5" --cp-layout "$6" --timeout 20 \
        $S4_CP_MODEL $S4_CP_TRAIN --batch 2 --save-params "$f.safetensors" >"$f.log" 2>&1
    "$BUILD/tests/compare_params" "$f.safetensors" "$S4_DIR/cp-ref-$((2 * dp)).safetensors" 1e-5 \
        "cp.equiv.$name.weights" | sed "s/\$/ ($(grep -o -m1 'CP [0-9]* ([^)]*) x TP [0-9]* x DP [0-9]*' "$f.log"))/"
    s4_cp_ref 2  # rank 0's share of the sequences, alone
    s4_cp_loss "$f.log" "cp.equiv.$name.loss" "$dp"
}
run cp-tp-ring-zigzag s4_cp_tp_equiv ring.zigzag.cp2.tp2 4 2 2 ring zigzag
run cp-tp-ulysses s4_cp_tp_equiv ulysses.zigzag.cp2.tp2 4 2 2 ulysses zigzag
run cp-tp-ring-contiguous-3 s4_cp_tp_equiv ring.contiguous.cp3.tp2 6 3 2 ring contiguous
run cp-tp-ring-dp2 s4_cp_tp_equiv ring.zigzag.cp2.tp2.dp2 8 2 2 ring zigzag
# Layouts that cannot be: refused before any rank starts, naming what is wrong.
s4_cp_refuses() {
    local out rc
    echo "PLAN cp.refuses.seq_not_divisible"
    echo "PLAN cp.refuses.ulysses_heads"
    rc=0; out=$("$BUILD/cp_train" --np 2 --cp 2 $S4_CP_MODEL --seq 26 --steps 1 2>&1) || rc=$?
    if [ "$rc" = 2 ] && grep -q "does not split into 4 zigzag chunks" <<<"$out"; then
        echo "PASS cp.refuses.seq_not_divisible  exit 2: $(head -n 1 <<<"$out")"
    else echo "FAIL cp.refuses.seq_not_divisible  exit $rc: $(tail -n 2 <<<"$out")"; fi
    rc=0; out=$("$BUILD/cp_train" --np 5 --cp 5 --cp-attention ulysses $S4_CP_MODEL --seq 30 \
        --steps 1 2>&1) || rc=$?
    if [ "$rc" = 2 ] && grep -q "heads 12 is not divisible by --cp 5" <<<"$out"; then
        echo "PASS cp.refuses.ulysses_heads  exit 2: $(head -n 1 <<<"$out")"
    else echo "FAIL cp.refuses.ulysses_heads  exit $rc: $(tail -n 2 <<<"$out")"; fi
}
run cp-refuses s4_cp_refuses
# What CP is for: a sequence whose activations do not fit one rank's memory (--device-mem
# 1.5 MB: one process needs 1.62 MB) trains on 2 ranks, each holding half of them.
s4_cp_fits() {
    local one out rc=0 mem="--device-mem 1500000"
    echo "PLAN cp.device_mem.fits_on_cp2"
    one=$("$BUILD/train" $S4_CP_MODEL $S4_CP_TRAIN --batch 2 --attention flash $mem 2>&1) || rc=$?
    if ! grep -q "out of memory on cpu" <<<"$one"; then
        echo "FAIL cp.device_mem.fits_on_cp2  one process was to run out of $mem (exit $rc): $(tail -n 1 <<<"$one")"
        return
    fi
    rc=0
    out=$("$BUILD/cp_train" --np 2 --cp 2 $S4_CP_MODEL $S4_CP_TRAIN --batch 2 $mem --timeout 20 2>&1) || rc=$?
    if [ "$rc" = 0 ] && grep -q "^RESULT" <<<"$out"; then
        echo "PASS cp.device_mem.fits_on_cp2  one process: $(grep -o 'out of memory on cpu: [^(]*' <<<"$one"); cp = 2 trained: $(grep -m1 '^MEM' <<<"$out")"
    else
        echo "FAIL cp.device_mem.fits_on_cp2  cp = 2 under $mem: exit $rc: $(tail -n 2 <<<"$out")"
    fi
}
run cp-device-mem s4_cp_fits
# The ledger against memcalc --cp where the ring's forward scratch (a block's partial
# output and lse, hs + 1 floats a row, and a tile's scores, FLASH_BR a row) outweighs
# its backward's (D, a float a row and head, and a tile's P and dP, 2 FLASH_BR a row):
# one head of 128 (193 against 130 floats a row), two sequences (the forward's partial
# output is one sequence's, Tl rows: not B Tl).
s4_cp_memory_one_head() {
    local f="$S4_DIR/cp-onehead" model="--layers 2 --width 128 --heads 1 --seq 24 --vocab 251"
    echo "PLAN cp.memory.ring.one_head"
    "$BUILD/cp_train" --np 2 --cp 2 $model --batch 2 --steps 1 --peak-tflops 1 --timeout 20 \
        >"$f.log" 2>&1
    "$BUILD/memcalc" --layers 2 --hidden 128 --heads 1 --seq 24 --vocab 251 --recipe course \
        --micro-batch 2 --cp 2 --json >"$f.json"
    "$PY" - "$f.log" "$f.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[2]))
ranks = [dict(kv.split("=") for kv in l.split()[1:]) for l in open(sys.argv[1]) if l.startswith("MEM ")]
bad = [f"rank {m['rank']} {k} {m[k]} != {int(c['bytes_' + k])}" for m in ranks
       for k in ("activations", "workspace", "comm") if int(m[k]) != int(c["bytes_" + k])]
ok = len(ranks) == 2 and not bad
print(f"{'PASS' if ok else 'FAIL'} cp.memory.ring.one_head  {len(ranks)} ranks: workspace "
      f"{int(c['bytes_workspace'])} B (the forward's scratch the larger), activations, comm = "
      f"memcalc --cp 2" + ("; " + "; ".join(bad[:3]) if bad else ""))
PY
}
run cp-memory-one-head s4_cp_memory_one_head
# Expert parallelism (ep.h): the core's mixture-of-experts layer with its 12 experts split
# over 2, 3, 4 ranks, each routing its own tokens, against one process on all of them:
# outputs, input and weight gradients, losses, and the rows each expert ran on, with and
# without capacity drops.
for n in 2 3 4; do run "ep-np$n" "$BUILD/tests/test_ep" --np "$n"; done
