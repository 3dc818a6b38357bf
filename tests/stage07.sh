# tests/stage07.sh — stage 07's suite, sourced by tests/run.sh (which defines
# `run NAME COMMAND...`, $BUILD, $PY and $log).

export S7_DIR="$log/stage07"
mkdir -p "$S7_DIR"
# A model that trains in a fraction of a second; 10 steps, a checkpoint every 3.
S7_TRAIN="--layers 2 --width 32 --heads 4 --seq 16 --vocab 64 --lr 1e-3 --log-every 100 --warmup 0 --steps 10 --peak-tflops 1"
export S7_TRAIN

# The layouts the kill-and-resume trials cycle through, each with a global batch
# of 4 sequences: "binary flags".
s7_layout() {  # s7_layout N
    case $(($1 % 8)) in
        0) echo "train --batch 4" ;;
        1) echo "ddp_train --np 2 --batch 2" ;;
        2) echo "sharded_train --np 2 --strategy zero3 --batch 2" ;;
        3) echo "tp_train --np 2 --tp 2 --batch 4" ;;
        4) echo "sharded_train --np 3 --strategy fsdp --batch 2 --grad-accum 2" ;;
        5) echo "tp_train --np 4 --tp 2 --batch 2" ;;
        6) echo "pp_train --np 2 --pp 2 --schedule 1f1b --batch 2 --grad-accum 2" ;;
        7) echo "pp_train --np 4 --pp 2 --zero1 --schedule zb-h1 --batch 1 --grad-accum 2" ;;
    esac
}
export -f s7_layout

# The uninterrupted run of a layout, once: its saved weights.
s7_reference() {  # s7_reference TAG BIN FLAGS... -> $S7_DIR/ref.TAG.safetensors
    local tag=$1 f="$S7_DIR/ref.$1"; shift
    [ -s "$f.safetensors" ] && return 0
    # shellcheck disable=SC2086
    "$BUILD/$1" "${@:2}" $S7_TRAIN --save-params "$f.safetensors" >"$f.log" 2>&1 && return 0
    echo "FAIL s7.reference.$tag  the uninterrupted run failed: $(grep -m1 -i error "$f.log")"
    return 1
}
export -f s7_reference

# Kill a rank (a step after the first checkpoint, 4..10 from the seed, and a random
# rank), resume from the checkpoints, and compare the final weights with the
# uninterrupted run's: bitwise (cmp). The resume must say which checkpoint it loaded:
# a run that started over would end with the same weights and prove nothing.
s7_trial() {  # s7_trial SEED LAYOUT_INDEX... (one trial per seed, cycling the layouts)
    local bad=0 seed
    for seed in "$@"; do echo "PLAN s7.resume.bitwise.seed$seed"; done
    for seed in "$@"; do
        local layout bin args tag d="$S7_DIR/trial.$seed"
        layout=$(s7_layout "$seed")
        bin=${layout%% *} args=${layout#* }
        tag=$(echo "$layout" | tr -c 'a-z0-9\n' '_')
        # shellcheck disable=SC2086
        s7_reference "$tag" "$bin" $args || return 1
        rm -rf "$d" && mkdir -p "$d"
        # (In a group whose stderr is dropped: bash's own "Killed" line for the process
        # the fault kills on purpose is no failure. A subshell would not do: bash execs
        # its one command, and the outer shell reports the kill.)
        # shellcheck disable=SC2086
        { "$BUILD/$bin" $args $S7_TRAIN --ckpt-dir "$d/ck" --ckpt-every 3 \
            --inject "kill,step=$((4 + seed % 7)),rank=random,seed=$seed" >"$d/kill.log" 2>&1; } 2>/dev/null
        local rc=$? what
        what=$(grep -ho 'rank [0-9]*: injected death [a-z0-9 -]*' "$d/kill.log" | head -n 1 | sed 's/ *$//')
        # shellcheck disable=SC2086
        if [ "$rc" -eq 0 ] || ! "$BUILD/$bin" $args $S7_TRAIN --ckpt-dir "$d/ck" --ckpt-every 3 --resume \
                --save-params "$d/resumed.safetensors" >"$d/resume.log" 2>&1; then
            echo "FAIL s7.resume.bitwise.seed$seed  $layout: the kill run exited $rc (it must die), or the resume failed: $(grep -h -m1 -i 'error' "$d/resume.log")"
            bad=1
            continue
        fi
        local from
        from=$(grep -ho 'resumed from [^ ]* (step [0-9]*)' "$d/resume.log" | head -n 1 | sed 's#from .*/#from #')
        # Killed as step k begins: steps 1..k-1 are done, the latest checkpoint is the
        # last multiple of 3 among them.
        local k latest
        k=$(grep -o 'as step [0-9]*' <<<"$what" | grep -o '[0-9]*$')
        latest=$(( ${k:-1} > 1 ? (k - 1) / 3 * 3 : 0 ))
        if [ -z "$what" ] || [ "$latest" -eq 0 ] || [[ "$from" != *"(step $latest)" ]]; then
            echo "FAIL s7.resume.bitwise.seed$seed  $layout: ${what:-no injected death in the kill log}; ${from:-no resume named in the resumed log}: want a resume from the latest checkpoint, step $latest"
            bad=1
        elif cmp -s "$d/resumed.safetensors" "$S7_DIR/ref.$tag.safetensors"; then
            echo "PASS s7.resume.bitwise.seed$seed  $layout: $what; $from; final weights bitwise those of the uninterrupted run"
        else
            echo "FAIL s7.resume.bitwise.seed$seed  $layout: $what; $from: the final weights differ from the uninterrupted run's"
            bad=1
        fi
    done
    return $bad
}
export -f s7_trial
# 24 trials in four groups, so that a failure names its seeds.
run ft-resume-trials-a s7_trial 1 2 3 4 5 6
run ft-resume-trials-b s7_trial 7 8 9 10 11 12
run ft-resume-trials-c s7_trial 13 14 15 16 17 18
run ft-resume-trials-d s7_trial 19 20 21 22 23 24

# The precisions' own state: mixed-bf16's fp32 masters (the resume must not refill
# them from the bf16 weights), mixed-fp16's loss scaler (its scale and counters;
# an overflow injected at step 2 backs the scale off before the checkpoint at 3),
# and fp8's amax histories (each rank's own: on DDP too). S7_RUN: the driver;
# S7_EVERY, S7_KILL: the checkpoint interval (3) and the step killed (6).
s7_precision() {  # s7_precision NAME FLAGS...
    local name=$1 d="$S7_DIR/prec.$1" run=${S7_RUN:-train --batch 2}; shift
    local every=${S7_EVERY:-3} kill=${S7_KILL:-6} from
    from=$(( (kill - 1) / every * every ))
    echo "PLAN s7.resume.precision.$name"
    rm -rf "$d" && mkdir -p "$d"
    # (The uninterrupted run checkpoints too: its last manifest's progress is the
    # resumed run's, counter for counter.)
    # shellcheck disable=SC2086
    "$BUILD"/$run $S7_TRAIN "$@" --save-params "$d/ref.safetensors" --ckpt-dir "$d/refck" \
        --ckpt-every "$every" >"$d/ref.log" 2>&1
    # shellcheck disable=SC2086
    { "$BUILD"/$run $S7_TRAIN "$@" --ckpt-dir "$d/ck" --ckpt-every "$every" \
        --inject "kill,step=$kill" >"$d/kill.log" 2>&1; } 2>/dev/null
    local killed=$?
    # shellcheck disable=SC2086
    "$BUILD"/$run $S7_TRAIN "$@" --ckpt-dir "$d/ck" --resume \
        --save-params "$d/res.safetensors" >"$d/res.log" 2>&1
    local scale progress
    scale=$(grep -o '"scale": [0-9.e+-]*' "$d/ck/step-00000010/manifest.json" 2>/dev/null | head -n 1)
    # The final manifests' progress (step, optimizer and scaler counters): equal, and the
    # optimizer skipped as many steps as overflowed (a count never saved is 0 in both).
    progress=$("$PY" - "$d/refck/step-00000010/manifest.json" "$d/ck/step-00000010/manifest.json" <<'PY'
import json, sys
try:
    a, b = (json.load(open(f))["progress"] for f in sys.argv[1:3])
except (OSError, ValueError, KeyError) as e:
    print(f"a final manifest is missing or unreadable: {e}")
    sys.exit()
def flat(d, pre=""):
    for k, v in d.items():
        yield from flat(v, pre + k + ".") if isinstance(v, dict) else [(pre + k, v)]
fa, fb = dict(flat(a)), dict(flat(b))
diff = [f"{k} {fa.get(k)} (uninterrupted) vs {fb.get(k)} (resumed)" for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
if diff:
    print("the final manifests' progress differs: " + "; ".join(diff[:4]))
elif fb.get("opt_skipped") != fb.get("overflows"):
    print(f"opt_skipped {fb.get('opt_skipped')} but overflows {fb.get('overflows')}: the optimizer's count of skipped steps is not saved")
PY
)
    if [ "$killed" -eq 0 ] || ! grep -q "resumed from .*(step $from)" "$d/res.log"; then
        echo "FAIL s7.resume.precision.$name  $*: the kill run exited $killed (it must die at step $kill), or the resume did not load step $from's checkpoint: $(grep -h -m1 -i -E 'error|resumed' "$d/res.log")"
        return 1
    elif [ "$(grep '^loss scale:' "$d/ref.log")" != "$(grep '^loss scale:' "$d/res.log")" ]; then
        echo "FAIL s7.resume.precision.$name  $*: the loss scaler's summary differs after the resume: '$(grep '^loss scale:' "$d/res.log")' against the uninterrupted run's '$(grep '^loss scale:' "$d/ref.log")'"
        return 1
    elif [ -n "$progress" ]; then
        echo "FAIL s7.resume.precision.$name  $*: $progress"
        return 1
    elif cmp -s "$d/ref.safetensors" "$d/res.safetensors"; then
        echo "PASS s7.resume.precision.$name  $*: killed at step $kill, resumed from step $from, final weights and the final manifest's progress as the uninterrupted run's (final manifest: $scale)"
    else
        echo "FAIL s7.resume.precision.$name  $*: the resumed run's weights differ: $(grep -h -m1 -i error "$d"/*.log)"
        return 1
    fi
}
run ft-resume-mixed-bf16 s7_precision mixed-bf16 --precision mixed-bf16
run ft-resume-mixed-fp16 s7_precision mixed-fp16 --precision mixed-fp16 --loss-scale 1024 --loss-scale-window 2 --inject-overflow 2
# Every step before the checkpoint overflowed (skipped): the masters were never filled
# from the weights, and the resumed run must fill them at its first step, as the
# uninterrupted run does.
S7_EVERY=1 S7_KILL=2 run ft-resume-fp16-unfilled s7_precision mixed-fp16.masters_unfilled \
    --precision mixed-fp16 --loss-scale 1024 --inject-overflow 1
run ft-resume-bf16-sr s7_precision bf16-sr --precision bf16-sr
run ft-resume-fp8 s7_precision fp8 --precision fp8
S7_RUN="ddp_train --np 2 --batch 1" run ft-resume-fp8-ddp s7_precision fp8_ddp_np2 --precision fp8
# Several optimizers on a rank (FSDP's units, an interleaved pipeline's chunks), each
# with its fp32 masters in mixed-bf16: every one of them must get its state back.
S7_RUN="sharded_train --np 2 --strategy fsdp --batch 1" run ft-resume-fsdp-bf16 \
    s7_precision fsdp.mixed-bf16 --precision mixed-bf16
S7_RUN="pp_train --np 2 --pp 2 --schedule interleaved --chunks 2 --grad-accum 2 --batch 1" \
    run ft-resume-interleaved-bf16 s7_precision interleaved.mixed-bf16 --precision mixed-bf16 --layers 4

# A rank killed while the step-6 checkpoint is being written: that checkpoint is
# never published (step-00000006.tmp stays behind, LATEST names step 3), the
# resume comes from step 3, and the weights still end bitwise.
s7_kill_in_ckpt() {
    local d="$S7_DIR/inckpt" ref="$S7_DIR/ref.ddp.safetensors"
    printf 'PLAN s7.kill_in_ckpt.unpublished\nPLAN s7.kill_in_ckpt.resume\n'
    rm -rf "$d" && mkdir -p "$d"
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --save-params "$ref" >"$d/ref.log" 2>&1
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/ck" --ckpt-every 3 \
        --inject kill,step=6,rank=1,during=ckpt >"$d/kill.log" 2>&1
    local latest; latest=$(cat "$d/ck/LATEST" 2>/dev/null)
    if [ "$latest" != "step-00000003" ] || [ -d "$d/ck/step-00000006" ]; then
        echo "FAIL s7.kill_in_ckpt.unpublished  LATEST is '$latest' and step-00000006 $( [ -d "$d/ck/step-00000006" ] && echo exists || echo "does not exist"): a partial checkpoint was published"
        return 1
    fi
    echo "PASS s7.kill_in_ckpt.unpublished  rank 1 died after writing its step-6 shard: LATEST still names $latest, step-00000006.tmp is not a checkpoint"
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/ck" --resume \
        --save-params "$d/res.safetensors" >"$d/res.log" 2>&1
    if ! grep -q 'resumed from .*step-00000003' "$d/res.log"; then
        echo "FAIL s7.kill_in_ckpt.resume  the resume should start from step-00000003 (LATEST); its log" \
             "says: $(grep -h -m1 -E 'resumed|error' "$d/res.log" || tail -n 1 "$d/res.log")"
        return 1
    fi
    # The verdict on the weights is compare_params's: bitwise, or the element that differs most.
    "$BUILD/tests/compare_params" "$d/res.safetensors" "$ref" 0 s7.kill_in_ckpt.resume |
        sed 's/^PASS s7.kill_in_ckpt.resume .*/& (resumed from step 3)/'
}
run ft-kill-in-ckpt s7_kill_in_ckpt

# A rank killed in the middle of a collective (during=collective: after posting its
# first message of step 5's first one): the others, inside it, name the dead peer;
# the supervisor restarts; the weights end bitwise. DDP's all-reduce, ZeRO-3's
# all-gather, tensor parallelism's all-reduce.
s7_kill_mid_collective() {
    local bad=0 spec
    for spec in "ddp_train --np 2 --batch 2" "sharded_train --np 2 --strategy zero3 --batch 2" \
                "tp_train --np 2 --tp 2 --batch 4"; do
        local tag d bin=${spec%% *} args=${spec#* } how seen
        tag=$(echo "$spec" | tr -c 'a-z0-9\n' '_') d="$S7_DIR/midcoll.${spec%% *}"
        rm -rf "$d" && mkdir -p "$d"
        # shellcheck disable=SC2086
        s7_reference "$tag" "$bin" $args || { bad=1; continue; }
        # shellcheck disable=SC2086
        "$BUILD/$bin" $args $S7_TRAIN --ckpt-dir "$d/ck" --ckpt-every 3 --max-restarts 1 \
            --inject kill,step=5,rank=1,during=collective --save-params "$d/out.safetensors" >"$d/run.log" 2>&1
        local rc=$?
        how=$(grep -h -m1 -o 'injected death in the middle of [^,]*' "$d/run.log")
        seen=$(grep -h -m1 -o "the peer's process has exited, in [a-z-]* #[0-9]* on group [a-z]*" "$d/run.log")
        if [ "$rc" -eq 0 ] && [ -n "$how" ] && [ -n "$seen" ] &&
           cmp -s "$d/out.safetensors" "$S7_DIR/ref.$tag.safetensors"; then
            echo "PASS s7.kill_mid_collective.$bin  $spec: rank 1 $how; rank 0: $seen; restarted, final weights bitwise"
        else
            echo "FAIL s7.kill_mid_collective.$bin  $spec: exit $rc; '${how:-no injected death}'; '${seen:-no peer saw it}'; or the weights differ"
            bad=1
        fi
    done
    return $bad
}
run ft-kill-mid-collective s7_kill_mid_collective

# Corruption by flag (--inject corrupt): once step 6's checkpoint is published, a
# byte of rank 1's shard flips. The run that resumes refuses step 6 by its
# checksum, naming the file, resumes from step 3, and still ends bitwise. The
# refused checkpoint is set aside (step-00000006.refused), so the resumed run saves
# step 6 again where it was, and pruning (keep 3) ends with steps 6, 9 and 10, all good.
s7_corrupt() {
    local d="$S7_DIR/corrupt" ref="$S7_DIR/ref.ddp.safetensors" why
    rm -rf "$d" && mkdir -p "$d"
    s7_reference ddp ddp_train --np 2 --batch 2 || return 1  # -> $ref
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --steps 6 --ckpt-dir "$d/ck" --ckpt-every 3 \
        --inject corrupt,step=6,rank=1 >"$d/first.log" 2>&1
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/ck" --resume --ckpt-every 3 \
        --ckpt-keep 3 --save-params "$d/out.safetensors" >"$d/resume.log" 2>&1
    why=$(grep -h -m1 -o 'step-00000006 refused: .*' "$d/resume.log" | sed 's#/[^ ]*/step-#step-#')
    local kept
    kept=$(cd "$d/ck" && ls -d step-* | tr '\n' ' ')
    if [ -n "$why" ] && grep -q 'rank-00001.safetensors: CRC-32C .*(corrupt)' "$d/resume.log" &&
       grep -q 'resumed from .*step-00000003' "$d/resume.log" && cmp -s "$d/out.safetensors" "$ref" &&
       [ "$kept" = "step-00000006 step-00000006.refused step-00000009 step-00000010 " ] &&
       ! grep -qiE 'checkpoint.*fail|renaming' "$d/resume.log"; then
        echo "PASS s7.inject_corrupt  $why; resumed from step 3, final weights bitwise; kept: $kept"
    else
        echo "FAIL s7.inject_corrupt  kept: $kept; $(grep -h -m3 -iE 'injected|refused|resumed|error|fail' "$d"/*.log | tr '\n' ' ' | cut -c1-300)"
        return 1
    fi
}
run ft-inject-corrupt s7_corrupt

# The manifest is checked too: "world": 0 (a layout of no ranks, every share a division
# by zero) and a manifest of another step than its folder are refused, named.
s7_manifest_checks() {
    local d="$S7_DIR/manifest" out bad=0
    rm -rf "$d" && mkdir -p "$d"
    # shellcheck disable=SC2086
    "$BUILD/train" $S7_TRAIN --steps 6 --ckpt-dir "$d/ck" --ckpt-every 2 --ckpt-keep 3 >/dev/null 2>&1
    sed -i 's/"world": 1/"world": 0/' "$d/ck/step-00000006/manifest.json"
    cp "$d/ck/step-00000002/manifest.json" "$d/ck/step-00000004/manifest.json"
    # shellcheck disable=SC2086
    out=$("$BUILD/train" $S7_TRAIN --steps 6 --ckpt-dir "$d/ck" --resume 2>&1)
    if grep -q 'step-00000006/manifest.json: "world" is 0' <<<"$out" &&
       grep -q 'step-00000004 refused: step-00000004: its manifest is of step 2' <<<"$out" &&
       grep -q 'resumed from .*step-00000002' <<<"$out"; then
        echo "PASS s7.manifest.checked  world 0 and a step-2 manifest in step-4's folder refused; resumed from step 2"
    else
        echo "FAIL s7.manifest.checked  $(grep -E 'refused|resumed|error' <<<"$out" | tr '\n' ' ' | cut -c1-300)"
        bad=1
    fi
    return $bad
}
run ft-manifest-checks s7_manifest_checks

# Damage on disk: one flipped byte in a shard, a truncated shard, a deleted
# manifest. Each is named with its reason and the next older checkpoint used; a
# directory of only damaged checkpoints is an error, not a fresh start.
s7_damage() {
    local d="$S7_DIR/damage" bad=0
    rm -rf "$d" && mkdir -p "$d"
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --steps 9 --ckpt-dir "$d/ck" --ckpt-every 3 \
        --ckpt-keep 3 >"$d/make.log" 2>&1
    s7_expect() {  # s7_expect NAME REFUSED_PATTERN RESUMED_STEP   (on a copy: the run saves)
        rm -rf "$d/try" && cp -r "$d/ck" "$d/try"
        # shellcheck disable=SC2086
        "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --steps 9 --ckpt-dir "$d/try" --ckpt-keep 3 \
            --resume >"$d/$1.log" 2>&1
        local rc=$? refused resumed
        refused=$(grep -h -m1 'refused' "$d/$1.log" | sed 's/.*refused: //')
        resumed=$(grep -h -o 'resumed from [^ ]*' "$d/$1.log" | head -n 1 | sed 's#from .*/#from #')
        if [ "$rc" -eq 0 ] && [[ "$refused" == *$2* ]] && [[ "$resumed" == *"step-0000000$3" ]]; then
            echo "PASS s7.damage.$1  refused: $refused; $resumed"
        else
            echo "FAIL s7.damage.$1  exit $rc; refused: '${refused:-none}' (wanted *$2*); ${resumed:-no resume} (wanted step $3)"
            bad=1
        fi
    }
    # One byte of rank 1's step-9 shard, in the middle of the tensor data.
    "$PY" - "$d/ck/step-00000009/rank-00001.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) * 3 // 4] ^= 0x01
open(p, "wb").write(b)
PY
    s7_expect corrupt_byte "rank-00001.safetensors: CRC-32C" 6
    rm -rf "$d/ck/step-00000009"
    truncate -s 200 "$d/ck/step-00000006/rank-00000.safetensors"
    s7_expect truncated "rank-00000.safetensors: 200 bytes, the manifest says" 3
    rm -rf "$d/ck/step-00000006"
    rm "$d/ck/step-00000003/manifest.json"
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --steps 9 --ckpt-dir "$d/ck" --resume \
        >"$d/none.log" 2>&1  # (fails before training: nothing is saved)
    local rc=$?
    if [ "$rc" -ne 0 ] && grep -q 'step-00000003/manifest.json: cannot open' "$d/none.log" &&
       grep -q 'failed verification' "$d/none.log"; then
        echo "PASS s7.damage.no_manifest  exit $rc: $(grep -h -m1 -o 'refused: .*' "$d/none.log"); $(grep -h -m1 -o 'all 1 checkpoint.*' "$d/none.log")"
    else
        echo "FAIL s7.damage.no_manifest  exit $rc: a directory of damaged checkpoints must fail, naming the manifest"
        bad=1
    fi
    return $bad
}
run ft-damage s7_damage

# Resharding: a checkpoint of one layout resumed in another, the global batch kept
# at 4: the run ends within 1e-5 (stage 03/04's tolerance: only the summation order
# differs) of one process that trained all 10 steps.
s7_reshard() {  # s7_reshard NAME "FROM" "TO"
    local name=$1 from=$2 to=$3 d="$S7_DIR/reshard.$1" one="$S7_DIR/one.safetensors"
    echo "PLAN s7.reshard.$name"
    rm -rf "$d" && mkdir -p "$d"
    # shellcheck disable=SC2086
    [ -s "$one" ] || "$BUILD/train" --batch 4 $S7_TRAIN --save-params "$one" >"$d/one.log" 2>&1
    # shellcheck disable=SC2086
    "$BUILD"/$from $S7_TRAIN --ckpt-dir "$d/ck" --ckpt-every 3 --inject kill,step=8 >"$d/from.log" 2>&1
    # shellcheck disable=SC2086
    "$BUILD"/$to $S7_TRAIN --ckpt-dir "$d/ck" --resume --save-params "$d/to.safetensors" \
        >"$d/to.log" 2>&1
    if ! grep -q 'resumed from .*step-00000006' "$d/to.log"; then
        echo "FAIL s7.reshard.$name  $from -> $to: no resume from step 6: $(grep -h -m1 -i error "$d/to.log")"
        return 1
    fi
    "$BUILD/tests/compare_params" "$d/to.safetensors" "$one" 1e-5 "s7.reshard.$name" |
        sed "s#\$# ($from -> $to at step 6)#"
}
run ft-reshard-zero3-to-ddp s7_reshard zero3_np4_to_ddp_np2 "sharded_train --np 4 --strategy zero3 --batch 1" "ddp_train --np 2 --batch 2"
run ft-reshard-tp2-to-1 s7_reshard tp2_to_1 "tp_train --np 2 --tp 2 --batch 4" "train --batch 4"
run ft-reshard-1-to-dp2tp2 s7_reshard 1_to_dp2_tp2 "train --batch 4" "tp_train --np 4 --tp 2 --batch 2"
run ft-reshard-ddp-to-fsdp s7_reshard ddp_np2_to_fsdp_np4 "ddp_train --np 2 --batch 2" "sharded_train --np 4 --strategy fsdp --batch 1"
run ft-reshard-pp2-to-1 s7_reshard pp2_to_1 "pp_train --np 2 --pp 2 --batch 2 --grad-accum 2" "train --batch 4"
run ft-reshard-1-to-dp2pp2 s7_reshard 1_to_dp2_pp2_zero1 "train --batch 4" "pp_train --np 4 --pp 2 --zero1 --batch 1 --grad-accum 2"

# The shards are plain safetensors: an independent reader (tests/torch_gpt.py's,
# not the C one) opens each, and every piece is F32 and named kind/tensor@r0,c0,
# beside each rank's own local/loss_history (F64: --spike-factor) (tests/ckpt_shards.py).
s7_readable() {
    local d="$S7_DIR/readable"
    rm -rf "$d" && mkdir -p "$d"
    # shellcheck disable=SC2086
    "$BUILD/tp_train" --np 2 --tp 2 --batch 4 $S7_TRAIN --steps 2 --spike-factor 4 --ckpt-dir "$d/ck" \
        >"$d/run.log" 2>&1
    "$PY" tests/ckpt_shards.py "$d/ck/step-00000002"
}
run ft-readable s7_readable

# The same shards opened by PyTorch's own `safetensors` package (PyPI; Debian 12 has
# none: scripts/install-deps.sh installs it into .venv/): every tensor equal to
# what the course's reader found.
s7_safetensors_package() {
    local d="$S7_DIR/readable/ck/step-00000002"
    if ! "$PY" -c 'import safetensors.torch' 2>/dev/null && [ ! -x .venv/bin/python3 ]; then
        bash scripts/install-deps.sh --venv  # a fresh clone, make test before install-deps
        .venv/bin/python3 -c 'import safetensors.torch, numpy' 2>/dev/null && PY=$PWD/.venv/bin/python3
    fi
    if ! "$PY" -c 'import safetensors.torch' 2>/dev/null; then
        echo "SKIP s7.shards_safetensors_package  $PY cannot import safetensors (scripts/install-deps.sh installs it into .venv/)"
        return 77
    fi
    if [ ! -f "$d/manifest.json" ]; then
        # shellcheck disable=SC2086
        "$BUILD/tp_train" --np 2 --tp 2 --batch 4 $S7_TRAIN --steps 2 --spike-factor 4 \
            --ckpt-dir "${d%/*}" >"$S7_DIR/pkg.log" 2>&1
    fi
    "$PY" tests/ckpt_shards.py --package "$d"
}
run ft-safetensors-package s7_safetensors_package

# Bad input is refused before any work, naming the flag or the reason.
s7_refuse() {  # s7_refuse NAME PATTERN BINARY FLAGS...
    local name=$1 pat=$2 bin=$3 f="$S7_DIR/refuse.$1.log"; shift 3
    # shellcheck disable=SC2086
    "$BUILD/$bin" $S7_TRAIN "$@" >"$f" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] && grep -qF -- "$pat" "$f"; then
        echo "PASS s7.refuse.$name  exit $rc: $(grep -h -m1 -F -- "$pat" "$f" | cut -c1-200)"
    else
        echo "FAIL s7.refuse.$name  exit $rc, wanted a message with '$pat': $(tail -n 1 "$f")"
        return 1
    fi
}
run ft-refuse-resume-nodir s7_refuse resume_needs_dir "--resume needs --ckpt-dir" train --resume
run ft-refuse-dir s7_refuse unwritable_dir "--ckpt-dir /proc/stage07: cannot create" train --ckpt-dir /proc/stage07
run ft-refuse-inject s7_refuse inject_bad "--inject: step=99 is not a number in [1, 10]" train --inject kill,step=99
s7_refuse_other() {  # a checkpoint of another model or recipe is not silently used
    local d="$S7_DIR/other"
    rm -rf "$d"
    # shellcheck disable=SC2086
    "$BUILD/train" $S7_TRAIN --steps 2 --ckpt-dir "$d" >/dev/null 2>&1
    s7_refuse other_recipe "was trained with --precision fp32 --seed 1; this run asks for --precision mixed-bf16" train --ckpt-dir "$d" \
        --resume --precision mixed-bf16
    s7_refuse other_model "is of another model (L=2 C=32" train --ckpt-dir "$d" --resume --layers 3
}
run ft-refuse-other s7_refuse_other

# Restarts: the supervisor (built-in and the supervise.sh wrapper, under mpirun
# too) and elastic restarts that go on with fewer ranks.
source tests/stage07_restart.sh
run ft-refuse-hang-alone s7_refuse hang_alone "one process has none: use 2 or more ranks" train --inject hang,step=2
run ft-refuse-mid-collective-alone s7_refuse mid_collective_alone "one process has no collective to die in" train --inject kill,step=2,during=collective
run ft-refuse-corrupt-nodir s7_refuse corrupt_needs_dir "corrupt strikes a checkpoint: it needs --ckpt-dir" train --inject corrupt,step=2
run ft-refuse-restarts-nodir s7_refuse restarts_need_dir "--max-restarts (a restart resumes from the latest checkpoint) needs --ckpt-dir" train --max-restarts 1

# Async save (--ckpt-async): the shards are written on a thread while the next step
# computes. The checkpoints it publishes are byte for byte the synchronous ones, and
# a kill while one is in flight still resumes bitwise (from the one before).
s7_async() {
    local d="$S7_DIR/async" ref="$S7_DIR/ref.ddp.safetensors" bad=0
    rm -rf "$d" && mkdir -p "$d"
    s7_reference ddp ddp_train --np 2 --batch 2 || return 1  # -> $ref
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/sync" --ckpt-every 3 --ckpt-keep 9 >"$d/sync.log" 2>&1
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/async" --ckpt-every 3 --ckpt-keep 9 \
        --ckpt-async >"$d/async.log" 2>&1
    local n; n=$(find "$d/sync" -name '*.safetensors' -o -name manifest.json | wc -l)
    if [ "$n" -gt 0 ] && diff -r "$d/sync" "$d/async" -x PROGRESS >/dev/null &&
       grep -q 'in the background' "$d/async.log"; then
        echo "PASS s7.async.same_bytes  $n files of 4 checkpoints written in the background, byte for byte the synchronous ones"
    else
        echo "FAIL s7.async.same_bytes  the async checkpoints differ from the sync ones (or none was written in the background)"
        bad=1
    fi
    # shellcheck disable=SC2086
    { "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/kill" --ckpt-every 3 --ckpt-async \
        --inject kill,step=8,rank=1 >"$d/kill.log" 2>&1; } 2>/dev/null
    local killed=$?
    # shellcheck disable=SC2086
    "$BUILD/ddp_train" --np 2 --batch 2 $S7_TRAIN --ckpt-dir "$d/kill" --ckpt-async --resume \
        --save-params "$d/res.safetensors" >"$d/res.log" 2>&1
    if [ "$killed" -eq 0 ] || ! grep -q 'resumed from .*(step [36])' "$d/res.log"; then
        echo "FAIL s7.async.resume  the kill run exited $killed (it must die at step 8), or the resume loaded no checkpoint of step 3 or 6: $(grep -h -m1 -i -E 'error|resumed' "$d/res.log")"
        bad=1
    elif cmp -s "$d/res.safetensors" "$ref"; then
        echo "PASS s7.async.resume  killed at step 8 with a save in flight; $(grep -h -m1 -o 'resumed from [^ ]* (step [0-9]*)' "$d/res.log" | sed 's#from .*/#from #'); final weights bitwise"
    else
        echo "FAIL s7.async.resume  the resumed run's weights differ: $(grep -h -m1 -i -E 'error|resumed' "$d/res.log")"
        bad=1
    fi
    return $bad
}
run ft-async s7_async
run ft-refuse-async-nodir s7_refuse async_needs_dir "--ckpt-async needs --ckpt-dir" train --ckpt-async

# Errors that do not crash: silent data corruption, loss spikes, stragglers.
source tests/stage07_silent.sh

# The commit protocol against a simulated disk that loses power after any call
# (tests/test_publish.c), and the manifest and safetensors readers against
# thousands of damaged files (tests/test_ckpt_fuzz.c).
run ft-publish-crash "$BUILD/tests/test_publish"
run ft-ckpt-fuzz "$BUILD/tests/test_ckpt_fuzz"

# The checkpoint interval (young_daly.c): Young's and Daly's formulas on the
# published test vector, the goodput simulator against its exact model, the
# cluster-scale failure rates.
run ft-interval "$BUILD/tests/test_interval"

# The faults of a cluster, on scripts/cluster.sh's nodes (root only, else skipped with
# the reason): a node lost and a link left down, each recovered by an elastic restart on
# the node left, bitwise; a link slowed mid-run, named by the ranks behind it.
run cluster-faults bash tests/test_cluster_faults.sh "$BUILD"
