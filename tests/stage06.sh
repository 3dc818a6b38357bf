# tests/stage06.sh — stage 06's suite, sourced by tests/run.sh (which defines
# `run NAME COMMAND...`, $BUILD and $log).

# ---------------------------------------------------------------- activation recompute
# tests/test_recompute.c: selective, full and full every k-th layer against no
# recompute on one process: gradients and weights bitwise, the activation ledger =
# the stage-01 calculator to the byte.
run mp-recompute "$BUILD/tests/test_recompute"

export S6_DIR="$log/stage06"
mkdir -p "$S6_DIR"
S6_MODEL="--layers 4 --width 32 --heads 4 --seq 8 --vocab 61"
S6_TRAIN="--steps 3 --batch 2 --grad-accum 2 --lr 1e-3 --log-every 100 --warmup 0 --peak-tflops 1"
export S6_MODEL S6_TRAIN

# Recompute composes with every parallel layout: a driver run with --recompute ...
# ends with the weights of the same run without it, bit for bit (cmp of the saved
# files), and its activation peak (the MEM line) is smaller.
s6_recompute() {  # s6_recompute NAME "RECOMPUTE FLAGS" BINARY [FLAGS...]
    local name=$1 level=$2 bin=$3 f="$S6_DIR/rc.$1"; shift 3
    echo "PLAN mp.recompute.driver.$name"
    if ! "$BUILD/$bin" $S6_MODEL $S6_TRAIN "$@" --save-params "$f.none.safetensors" \
            >"$f.none.log" 2>&1 ||
       ! "$BUILD/$bin" $S6_MODEL $S6_TRAIN "$@" --recompute $level \
            --save-params "$f.rc.safetensors" >"$f.rc.log" 2>&1; then
        echo "FAIL mp.recompute.driver.$name  a run failed: $(grep -h -m1 -iE 'error|killed' "$f".*.log | cut -c1-300)"
        return 1
    fi
    local a0 a1
    a0=$(grep -m1 -oE 'activations [0-9.]+[kMG]?B' "$f.none.log" | tail -1)
    a1=$(grep -m1 -oE 'activations [0-9.]+[kMG]?B' "$f.rc.log" | tail -1)
    if cmp -s "$f.none.safetensors" "$f.rc.safetensors"; then
        echo "PASS mp.recompute.driver.$name  $bin $* --recompute $level: weights bitwise; peak $a0 -> $a1"
    else
        echo "FAIL mp.recompute.driver.$name  $bin $* --recompute $level: the weights differ from the run without recompute"
        return 1
    fi
}
export -f s6_recompute
run mp-recompute-train s6_recompute train.full full train
run mp-recompute-ddp s6_recompute ddp.np2.selective selective ddp_train --np 2
run mp-recompute-zero2 s6_recompute zero2.np2.full full sharded_train --np 2 --strategy zero2
run mp-recompute-fsdp s6_recompute fsdp.np2.full full sharded_train --np 2 --strategy fsdp
run mp-recompute-tp s6_recompute tp2.sp.full full tp_train --np 2 --tp 2 --sp
run mp-recompute-tp-every s6_recompute tp2.full_every2 "full --recompute-every 2" tp_train --np 2 --tp 2
