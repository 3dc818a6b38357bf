# shellcheck shell=bash
# cluster_lib.sh — what the stage scripts that measure on a two-level cluster share
# (scripts/cluster.sh: nodes as network namespaces, their links shaped). Sourced after
# scripts/stage_lib.sh (or run_info.sh); gives
#
#   cluster_begin NODES RATE LOG   the cluster up, this run's own names; taken down when
#                                  the script exits. Returns 0, or 77 when this machine
#                                  cannot make one (the reason: LOG's last line), or 1.
#   cluster_rate RATE              every link reshaped
#   cluster_flags                  --nodes and --cluster for a driver: "--nodes N --cluster P"
#   link_fit                       "alpha_us beta_ns_per_B" of the link between two nodes:
#                                  a 2-rank ring all-reduce across it, 64 KiB .. 4 MiB,
#                                  t = 2 alpha + n beta, least squares weighted by 1/t^2
#                                  (relative errors: the small sizes decide alpha)
#   alpha_beta_fit                 the same fit of "bytes microseconds" lines on stdin
#   two_levels_begin OUT_DIR [RATE...]  a stage's two_levels.sh starts: out, rates (default
#                                  1gbit 200mbit), tmp, the cluster up at the first rate;
#                                  else it exits 77 (or 1) with the reason
#   two_levels_table, two_level_row    its table (below)

cluster_nodes=0
cluster_begin() {
    local rc=0
    export CLUSTER_PREFIX=crs$$ CLUSTER_NET=10.213.$((($$ % 200) + 20))
    cluster_nodes=$1
    # shellcheck disable=SC2154  # tmp: stage_begin's, when there is one
    trap 'bash scripts/cluster.sh down >/dev/null 2>&1; [ -n "${tmp:-}" ] && rm -rf "$tmp"' EXIT
    bash scripts/cluster.sh up --nodes "$1" --inter "$2" >"$3" 2>&1 || rc=$?
    return "$rc"
}
# shellcheck disable=SC2034  # out, rates: for the two_levels.sh that calls it
two_levels_begin() {
    local rc=0
    out=$1; shift
    rates=${*:-1gbit 200mbit}
    tmp=$(mktemp -d)
    cluster_begin 2 "${rates%% *}" "$tmp/up" || rc=$?
    [ "$rc" = 0 ] || { tail -n 1 "$tmp/up" >&2; exit "$rc"; }
}
cluster_rate() { bash scripts/cluster.sh rate "$1" >/dev/null; }
cluster_flags() { echo "--nodes $cluster_nodes --cluster $CLUSTER_PREFIX"; }

# t(n) = a + b n by weighted least squares; prints "a/2 in us, b in ns/B".
alpha_beta_fit() {
    awk '{w = 1 / ($2 * $2); sw += w; sx += w * $1; sy += w * $2; sxx += w * $1 * $1; sxy += w * $1 * $2}
         END {b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx); a = (sy - b * sx) / sw;
              if (a < 0) a = 0; printf "%.3f %.4f\n", a / 2, b * 1e3}'
}
link_fit() {
    "${BUILD:-build}/bench_collectives" --np 2 --nodes 2 --cluster "$CLUSTER_PREFIX" --algo ring \
        --min-bytes 64KiB --max-bytes 4MiB --iters 3 --warmup 1 --timeout 120 |
        awk '!/^#/ {print $1, $5}' | alpha_beta_fit
}

# two_level_row LABEL RATE BETA_NS MS_ONE LOG DRIVER ARGS...: DRIVER's run across the
# cluster's nodes (its ranks split over them), beside the prediction from the same run on
# one node (MS_ONE ms per step) and the link: every byte node 0 sends across, at BETA_NS
# ns a byte, added to that step as if none of it overlapped compute (tbf shapes each
# direction alike, and the layouts here send as much each way). Prints "LABEL RATE
# ms_one ms_two ms_pred err_pct inside_MB across_MB", the bytes node 0 sent in the last step.
two_level_row() {
    local label=$1 rate=$2 beta=$3 one=$4 log=$5 drv=$6 flags
    shift 6
    read -r -a flags < <(cluster_flags)
    run "$log" "$drv" "$@" "${flags[@]}"
    awk -v L="$label" -v R="$rate" -v b="$beta" -v one="$one" -v ms="$(kv "$log" ms_per_step)" '
        /^LINKS / && $3 == "node=0" {split($4, i, "="); split($5, a, "="); inside += i[2]; across += a[2]}
        END {pred = one + across * b * 1e-6
             printf "%s %s %.1f %.1f %.1f %+.1f %.3f %.3f\n", L, R, one, ms, pred,
                    100 * (ms - pred) / pred, inside / 1e6, across / 1e6}' "$log"
}

# two_levels_table OUT_DIR "RATES" NOTE CONFIG...: the table of a stage's two_levels.sh.
# Each CONFIG is "name=DRIVER ARGS..." (ARGS with its --np); for every rate (the link
# reshaped, its beta fitted) every config runs on one node, then across the nodes, side by
# side; the rows (two_level_row's) go to OUT_DIR/two_levels.txt under NOTE (comment lines,
# without their "# ") and the machine, the date and the load. Needs cluster_begin first.
two_levels_table() {
    local dir=$1 rates=$2 note=$3 rate beta cfg name drv rows="" load0
    shift 3
    load0=$(load_now)
    for rate in $rates; do
        cluster_rate "$rate"
        read -r _ beta < <(link_fit)
        for cfg in "$@"; do
            name=${cfg%%=*}
            read -r -a drv <<<"${cfg#*=}"
            run "$tmp/one.log" "${drv[@]}"
            rows+="$(two_level_row "$name" "$rate" "$beta" "$(kv "$tmp/one.log" ms_per_step)" \
                     "$tmp/$name.log" "${drv[@]}")"$'\n'
            tail -n 1 <<<"${rows%$'\n'}"
        done
    done
    {
        sed 's/^/# /' <<<"$note"
        echo "# one: the same ranks on one node, just before; pred: one + node 0's bytes across x the"
        echo "# link's fitted beta (nothing overlapped); err: (two - pred) / pred; inside/across: MB"
        echo "# node 0's ranks sent in the last step, by link (the LINKS lines)."
        echo "# measured on $(machine_desc), $(date -u +%Y-%m-%d); load $load0 at the start, $(load_now) at the end"
        echo "# config rate ms_one ms_two ms_pred err_pct inside_MB across_MB"
        printf '%s' "$rows"
    } >"$dir/two_levels.txt"
}
