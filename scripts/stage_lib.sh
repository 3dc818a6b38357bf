# shellcheck shell=bash
# stage_lib.sh — what every stage's benchmark script (NN_*/run_stage.sh, and stage 01's
# stage.sh) shares. A stage script starts
#
#   set -eu
#   cd "$(dirname "$0")/.."            # the repository root: the paths below are from it
#   . scripts/stage_lib.sh
#   stage_begin 04_tensor_parallel '*.txt' '*.log' '*.png'
#
# and ends `stage_end "make stage-4" "QUICK=1's note"`. From here it gets:
#
#   BUILD, RESULTS            where the binaries are (build/), where outputs go (runs/)
#   stage_begin NAME PATTERN...  $out, its earlier run's files gone, $tmp, $cores
#   stage_end COMMAND [NOTE]  run.info, then the figures (scripts/plot.sh)
#   quick                     true in a QUICK=1 smoke run
#   run LOG BINARY ARGS...    one run into LOG; a failed run stops the script
#   demo LOG BINARY ARGS...   one run shown as it goes, kept in LOG, checked
#   kv LOG KEY                a value of the run's RESULT line
#   mem LOG KEY               the largest KEY of the ranks' MEM lines
#   memcalc_value KEY ARGS... one number of build/memcalc's --json answer
#   alpha_beta NP             stage 02's alpha-beta fit for NP ranks
#   rotation FIRST N          the order of one round of a sweep
#   med, spread               the median (and min, max) of the numbers on stdin
#   two_levels SCRIPT RATES QUICK_RATES   a stage's two-level cluster measurement, or why not
#   $awk_med                  the same median as an awk function, med(a, n)
#
# and, from scripts/run_info.sh, write_run_info, outputs_note and machine_desc.

. scripts/run_info.sh
BUILD=${BUILD:-build}

# ---------------------------------------------------------------- the start and the end

# stage_begin NAME PATTERN...: the start of a stage script. Sets
#   out    $RESULTS/NAME, made, with any folder a PATTERN names (gantt/*.dat: gantt/)
#   tmp    a scratch folder, removed when the script exits, however it exits
#   cores  the cores this process may run on
# and removes the earlier run's run.info (written again last, once the data are
# complete: a folder without one holds a run that did not finish) and its files that
# match a PATTERN (in $out). A QUICK run must not leave a full run's files beside its
# own: the plots and the report take whatever files are there as one run.
# shellcheck disable=SC2034  # out, tmp and cores are for the stage script
stage_begin() {
    local p
    out=$RESULTS/$1; shift
    mkdir -p "$out"
    rm -f "$out/run.info"
    for p in "$@"; do
        case $p in */*) mkdir -p "$out/${p%/*}" ;; esac
        # shellcheck disable=SC2086  # $p unquoted: a pattern, expanded here
        rm -f "$out"/$p
    done
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cores=$(nproc)
    load_begin
}

# quick: true in a smoke run (QUICK=1): fewer sizes, rounds and steps, the same files.
quick() { [ "${QUICK:-0}" = 1 ]; }

# stage_end COMMAND [NOTE]: the data are complete. run.info records the date, the machine
# and COMMAND (in a QUICK run with " (QUICK=1: NOTE)" after it, so that the report calls
# it one); then scripts/plot.sh draws the figures, each labelled from run.info.
stage_end() {
    write_run_info "$out" "$1$(if [ $# -gt 1 ] && quick; then echo " (QUICK=1: $2)"; fi)"
    bash scripts/plot.sh "$out"
}

# ---------------------------------------------------------------- running the binaries

# run LOG BINARY ARGS...: $BUILD/BINARY's output into LOG. A failed run stops the script
# with its last lines: a benchmark of a broken run measures nothing.
run() {
    local log=$1 bin=$2; shift 2
    if ! "$BUILD/$bin" "$@" >"$log" 2>&1; then
        echo "$(basename "$0"): FAILED: $BUILD/$bin $*" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
}

# demo LOG BINARY ARGS...: a run the reader watches, its output shown as it goes and kept
# in LOG. The pipe into tee hides the run's exit status: the RESULT line, which a run
# prints once it has finished, says whether it did.
demo() {
    local log=$1 bin=$2; shift 2
    "$BUILD/$bin" "$@" 2>&1 | tee "$log"
    grep -q '^RESULT' "$log" || { echo "$(basename "$0"): the demo failed" >&2; exit 1; }
}

# ---------------------------------------------------------------- reading what they print

kv() { sed -n "s/^RESULT .* $2=\([0-9.e+-]*\).*/\1/p" "$1"; }  # kv LOG KEY

# mem LOG KEY: the largest value of KEY= over the ranks' MEM lines (bytes).
mem() {
    awk -v k="$2" '/^MEM / {for (i = 2; i <= NF; i++) {split($i, kv, "="); if (kv[1] == k && kv[2] + 0 > m) m = kv[2] + 0}}
                   END {printf "%.0f\n", m}' "$1"
}

# memcalc_value KEY ARGS...: one number of `build/memcalc ARGS --json` (bytes_total, ...):
# the stage-01 calculator's prediction, beside which the stages set their ledger's.
memcalc_value() {
    local key=$1; shift
    "$BUILD/memcalc" "$@" --json | sed -n "s/.*\"$key\": \([0-9]*\).*/\1/p"
}

# alpha_beta NP: stage 02's fit of the ring for NP ranks, "alpha_us beta_cache_ns
# beta_mem_ns FILE": from yours ($RESULTS/02_ddp_allreduce/alpha_beta.txt) where it has
# NP ranks, else from the course's (results/); beta_mem "nan" where the sweep did not
# reach past the cache (QUICK); nothing where neither fit has NP ranks.
alpha_beta() {
    local f
    for f in "$RESULTS/02_ddp_allreduce/alpha_beta.txt" results/02_ddp_allreduce/alpha_beta.txt; do
        if [ ! -f "$f" ] || ! grep -q "^np $1:" "$f"; then continue; fi
        awk -v t="$1" '$1 == "np" && $2 == t ":" {
            a = $0; sub(/.*alpha = /, "", a); sub(/ .*/, "", a); c = $0; sub(/.*in cache beta = /, "", c); sub(/ .*/, "", c)
            m = "nan"; if ($0 ~ /from memory beta = /) {m = $0; sub(/.*from memory beta = /, "", m); sub(/ .*/, "", m)}
            print a, c, m, FILENAME; exit}' "$f"
        return
    done
}

# ---------------------------------------------------------------- rounds and medians
# Timings on a shared VM are noisy: a timed table is several rounds, each running every
# configuration once, and reports medians over the rounds.

# rotation FIRST N: the indices 0 .. N-1 from FIRST (mod N) on, one a line: the order of
# a round. Each round starts one configuration later, so that none always runs first or
# always after the same neighbour (a slow spell of the VM lands on each in turn).
rotation() {
    local i
    for ((i = 0; i < $2; i++)); do echo $(( (i + $1) % $2 )); done
}

# spread: "median min max" of the numbers on stdin (one a line); med: the median alone.
spread() {
    sort -g | awk '{a[++n] = $1} END {m = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2; print m, a[1], a[n]}'
}
med() { spread | cut -d' ' -f1; }

# The median inside an awk program: awk "$awk_med"'...program...' defines med(a, n), the
# median of a[1..n] (it sorts a in place).
# shellcheck disable=SC2034  # for the stage scripts
awk_med='
    function med(a, n,    i, j, t) {
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }'

# ---------------------------------------------------------------- two levels

# two_levels SCRIPT RATES QUICK_RATES: a stage's measurement on a two-level cluster
# (NN_*/two_levels.sh, hierarchy.sh: scripts/cluster.sh's namespaces) into $out, its
# rows shown; where this machine cannot make the cluster (no root, no namespaces),
# skipped with the reason. A failure stops the stage script.
two_levels() {
    local script=$1 rates=$2 rc=0
    quick && rates=$3
    # shellcheck disable=SC2086  # rates: words
    bash "$script" "$out" $rates >"$tmp/two_levels.log" 2>&1 || rc=$?
    case $rc in
        0) sed 's/^/   /' "$tmp/two_levels.log" ;;
        77) echo "   skipped: $(tail -n 1 "$tmp/two_levels.log")" ;;
        *) cat "$tmp/two_levels.log" >&2; exit 1 ;;
    esac
}
