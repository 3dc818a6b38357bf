# shellcheck shell=bash
# run_info.sh — sourced by the scripts that measure or draw: where their outputs go,
# and the machine and date every output folder records about itself.
#
# A learner's `make stage-N` writes into runs/NN_*/ (RESULTS=runs, untracked);
# results/NN_*/ holds the course's own measured run, which the lessons quote and
# only a maintainer rewrites (`make stage-N RESULTS=results`). Each folder gets a
# run.info:
#
#   date: 2026-11-22
#   machine: 2-core AMD EPYC VM (KVM), 24 GiB
#   command: make stage-2
#   load: 0.12 before the run, 1.96 at its end (1-minute load averages, 2 cores)
#
# which scripts/plot.sh writes onto every figure and scripts/report.sh into the report.
# The stage scripts source it through scripts/stage_lib.sh, with what else they share.

RESULTS=${RESULTS:-runs}

# This machine in words: "<cores>-core <CPU model>[ VM (<hypervisor>)], <memory> GiB".
machine_desc() {
    local model hv cores mem
    model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n1)
    hv=$(lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p' | head -n1)
    cores=$(getconf _NPROCESSORS_ONLN)
    mem=$(awk '/^MemTotal:/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)
    printf '%s-core %s%s, %s GiB\n' "$cores" "${model:-unknown CPU}" "${hv:+ VM ($hv)}" "$mem"
}

# The machine's 1-minute load average now ("" where /proc/loadavg is unreadable).
load_now() { cut -d' ' -f1 /proc/loadavg 2>/dev/null; }

# load_begin: remembers the load before a measuring run starts (for write_run_info), and
# warns on stderr when other work was already running: the timings will be noisy.
load_begin() {
    load_at_begin=$(load_now)
    local cores
    cores=$(getconf _NPROCESSORS_ONLN)
    if awk -v l="${load_at_begin:-0}" -v c="$cores" 'BEGIN {exit !(l > 0.25 * c)}'; then
        echo "warning: the load was $load_at_begin on $cores cores before this run began: other" \
             "work is running, and the timings will show it (run.info records it)" >&2
    fi
}

# write_run_info DIR COMMAND: records today's date (UTC), this machine, and the load
# before the run (load_begin) and at its end, in DIR/run.info.
write_run_info() {
    mkdir -p "$1"
    printf 'date: %s\nmachine: %s\ncommand: %s\n' "$(date -u +%Y-%m-%d)" "$(machine_desc)" "$2" \
        >"$1/run.info"
    [ -n "${load_at_begin:-}" ] &&
        printf 'load: %s before the run, %s at its end (1-minute load averages, %s cores)\n' \
            "$load_at_begin" "$(load_now)" "$(getconf _NPROCESSORS_ONLN)" >>"$1/run.info"
    return 0
}

# run_info DIR KEY: one field of DIR/run.info (empty when there is none).
run_info() {
    [ -f "$1/run.info" ] || return 0
    sed -n "s/^$2: //p" "$1/run.info" | head -n1
}

# outputs_note DIR: the last line of a stage run, saying where its outputs went.
outputs_note() {
    if [ "${RESULTS%/}" = results ]; then
        echo "outputs: $1/ — the course's committed run, rewritten (review git diff before committing)"
    else
        echo "outputs: $1/ (yours; untracked). The course's own measured run, which the lessons"
        echo "quote, stays in results/$(basename "$1")/; \`make report\` sets them side by side."
    fi
}
