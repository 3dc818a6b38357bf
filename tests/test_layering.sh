#!/usr/bin/env bash
# test_layering.sh — the course's layering, checked on the build and the sources:
#
#   layer.core.names_no_stage        no object of common/ references a symbol that a
#                                    stage folder's objects define (nm)
#   layer.stages.only_earlier        no object of stage N references a symbol that only
#                                    a later stage defines (nm)
#   layer.includes                   every #include "x.h" of common/ finds x.h in common/;
#                                    of stage N, in common/ or a stage up to N
#   layer.make.stage_builds_alone    `make UPTO=N` (what make stage-N and make grade-N
#                                    build) compiles and links no file of a later stage,
#                                    and no stage folder is on the core's include path
#   layer.absent_stage.named         stage 03's sharded_train, linked as make stage-3
#                                    links it, trains, and refuses the flags of stages
#                                    06 and 07 naming them
#
#   bash tests/test_layering.sh BUILD
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stages=$(ls -d [0-9][0-9]_*/ | tr -d /)

# 1. What a stage's build compiles and links (make -n: nothing is run).
bad=""
n=0
for s in $stages; do
    n=$((n + 1))
    make -n --no-print-directory UPTO=$n BUILD="$tmp/b" all >"$tmp/make.$n" 2>&1 ||
        { bad+="make UPTO=$n failed: $(tail -n 1 "$tmp/make.$n"); "; continue; }
    later=$(echo "$stages" | tail -n +$((n + 1)) | tr '\n' '|' | sed 's/|$//')
    if [ -n "$later" ] && grep -Eq "($later)/" "$tmp/make.$n"; then
        bad+="UPTO=$n ($s) touches $(grep -Eo "($later)/[^ ]*" "$tmp/make.$n" | head -n 2 | tr '\n' ' '); "
    fi
    # The core's objects are compiled with no stage folder on the include path.
    core_line=$(grep -m1 -- "-c common/trainer.c" "$tmp/make.$n")
    if [[ "$core_line" =~ -I[0-9][0-9]_ ]]; then bad+="UPTO=$n: the core is compiled with $core_line; "; fi
done
if [ -z "$bad" ] && [ "$n" -gt 0 ]; then
    echo "PASS layer.make.stage_builds_alone  for each N of $n, make UPTO=N (make stage-N, grade-N) compiles and links no later stage's file; the core sees no stage's headers"
else
    echo "FAIL layer.make.stage_builds_alone  ${bad:0:600}"
fi

# The objects of the whole build, as make names them (an object a source no longer
# makes, left behind in $BUILD, is not part of it).
sed -n "s|.* -c \([^ ]*\) -o $tmp/b/\([^ ]*\.o\)\$|\2|p" "$tmp/make.$n" >"$tmp/objects"
objects_of() { grep "^$1/" "$tmp/objects" | sed "s|^|$BUILD/|"; }  # objects_of DIR
# Symbols defined (text, data, bss, rodata) by each stage's objects in this build.
for s in $stages; do
    objects_of "$s" | xargs -r nm --defined-only 2>/dev/null |
        awk '$2 ~ /^[TDBRV]$/ {print $3}' | sort -u >"$tmp/def.$s"
done
undefined_in() {  # undefined_in DIR: the symbols its objects use (nm -u)
    objects_of "$1" | xargs -r nm -u 2>/dev/null | awk 'NF == 2 {print $2}' | sort -u
}
# 2. The core.
undefined_in common >"$tmp/core.u"
bad=""
for s in $stages; do
    hits=$(comm -12 "$tmp/core.u" "$tmp/def.$s" | head -n 5 | tr '\n' ' ')
    [ -n "$hits" ] && bad+="$s: $hits; "
done
n_core=$(objects_of common | wc -l)
if [ "$n_core" -gt 0 ] && [ -z "$bad" ]; then
    echo "PASS layer.core.names_no_stage  $n_core objects of common/ use no symbol of a stage folder"
else
    echo "FAIL layer.core.names_no_stage  ${bad:-no objects in $BUILD/common}"
fi

# 3. Each stage uses only the core and the stages before it.
bad=""
for s in $stages; do
    undefined_in "$s" >"$tmp/u.$s"
    later=0
    for t in $stages; do
        [ "$t" = "$s" ] && { later=1; continue; }
        [ "$later" = 1 ] || continue
        # A symbol only a later stage defines (an earlier stage or the core may define
        # one of the same name: then it is theirs).
        hits=$(comm -12 "$tmp/u.$s" "$tmp/def.$t" | head -n 5 | tr '\n' ' ')
        [ -n "$hits" ] && bad+="$s uses $t's $hits; "
    done
done
if [ -z "$bad" ]; then
    echo "PASS layer.stages.only_earlier  no stage's objects use a later stage's symbols"
else
    echo "FAIL layer.stages.only_earlier  $bad"
fi

# 4. The sources' includes: where each quoted header is found.
bad=""
header_home() {  # header_home NAME: the folders (common, or stage folders) holding it
    local d
    for d in common $stages; do [ -f "$d/$1" ] && echo "$d"; done
}
check_includes() {  # check_includes FILE ALLOWED_FOLDERS...
    local f=$1 inc home ok; shift
    for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
        case "$inc" in ../*) home=$(dirname "${inc#../}") ;; *) home=$(header_home "$inc" | head -n 1) ;; esac
        [ -f "$(dirname "$f")/$inc" ] && continue  # beside it (its own folder)
        [ -z "$home" ] && continue                    # a test's own header, a system one
        ok=0
        for a in "$@"; do [ "$home" = "$a" ] && ok=1; done
        [ "$ok" = 1 ] || bad+="$f includes $inc ($home); "
    done
}
for f in common/*.[ch] common/*.cu common/*.cuh; do check_includes "$f" common; done
allowed=common
for s in $stages; do
    allowed+=" $s"
    for f in "$s"/*.[ch] "$s"/exercises/*.c; do [ -f "$f" ] && check_includes "$f" $allowed; done
done
if [ -z "$bad" ]; then
    echo "PASS layer.includes  common/ includes common/ alone; each stage the core and the stages up to it"
else
    echo "FAIL layer.includes  ${bad:0:600}"
fi


# 5. A program linked without a stage trains without it and refuses its flags naming
# it: stage 03's sharded_train as make stage-3 links it (from this build's objects,
# into a folder of its own: $BUILD keeps every stage).
link=$(make -B -n --no-print-directory UPTO=3 BUILD="$BUILD" "$BUILD/sharded_train" 2>/dev/null |
       grep -- "-o $BUILD/sharded_train ")
prog="$tmp/sharded_train"
if [ -z "$link" ] || ! eval "${link/-o $BUILD\/sharded_train /-o $prog }" >"$tmp/link.log" 2>&1; then
    echo "FAIL layer.absent_stage.named  could not link stage 03's sharded_train: $(tail -n 2 "$tmp/link.log" 2>/dev/null)"
else
    ln -s "$PWD/$BUILD/libcourse_cuda.so" "$tmp/libcourse_cuda.so" 2>/dev/null
    bad=""
    absent() {  # absent PATTERN FLAGS...: exit 2, the stage named, no rank started
        local pat=$1 out rc; shift
        out=$("$prog" --preset tiny --steps 1 "$@" 2>&1); rc=$?
        if [ "$rc" != 2 ] || ! grep -qF -- "$pat" <<<"$out" || grep -q '^\[rank' <<<"$out"; then
            bad+="'$*': exit $rc, $(head -c 200 <<<"$out"); "
        fi
    }
    absent "--ckpt-dir is taught in 07_fault_tolerance" --ckpt-dir "$tmp/ck"
    absent "--recompute is taught in 06_mixed_precision" --recompute full
    absent "--precision mixed-fp16 needs dynamic loss scaling, which 06_mixed_precision teaches" \
        --precision mixed-fp16
    [ -e "$tmp/ck" ] && bad+="the refused --ckpt-dir was made; "
    out=$("$prog" --np 2 --strategy zero2 --preset tiny --steps 2 --precision mixed-bf16 \
          --peak-tflops 1 2>&1) || bad+="a stage-03 run failed: $(tail -n 2 <<<"$out"); "
    nm "$prog" | grep -q 'fault_tolerance_extension\|precision_extension' && bad+="it holds an extension; "
    if [ -z "$bad" ]; then
        echo "PASS layer.absent_stage.named  stage 03's sharded_train (no 06, no 07) trains ZeRO-2 in mixed-bf16 and refuses --ckpt-dir, --recompute and mixed-fp16, naming the stage that teaches each"
    else
        echo "FAIL layer.absent_stage.named  ${bad:0:600}"
    fi
fi
