# plots_interval.gp — stage 07's checkpoint-interval figures from build/ckpt_interval's output.
#
#   build/ckpt_interval --ckpt-cost 60 --mtbf 6480 --restart 60 > DIR/ckpt_interval.dat
#   build/ckpt_interval --table > DIR/ckpt_table.dat
#   gnuplot -e "dir='DIR'; machine='...'; run_date='...'" 07_fault_tolerance/plots_interval.gp
#
# draws DIR/ckpt_interval.png (goodput against the interval, Young's and Daly's marked)
# and DIR/ckpt_cluster.png (the best goodput against the job's GPU count, one line per
# checkpoint cost). Other file names: -e "sweep='FILE'; table='FILE'" (either may be
# left out: its figure is then skipped). machine and run_date label the footer, as in
# the other stages' plots.gp (scripts/plot.sh passes them).
if (!exists("dir")) dir = "runs/07_fault_tolerance"
if (!exists("sweep")) sweep = dir."/ckpt_interval.dat"
if (!exists("table")) table = dir."/ckpt_table.dat"
if (!exists("machine")) machine = "machine not recorded"
if (!exists("run_date")) run_date = "date not recorded"
set terminal pngcairo size 1000,650 noenhanced font ",11"
set encoding utf8
set grid
footer = sprintf("simulated on %s, %s (build/ckpt_interval: failures drawn at the MTBF)", machine, run_date)
FOOT = 'at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"'
set bmargin 5
# One colour per checkpoint cost (Paul Tol's bright scheme, as stage 06).
col(i) = word("0x4477AA 0x228833 0xEE6677 0xAA3377 0xCCBB44", (i - 1) % 5 + 1) + 0
readable(f) = system("test -r '".f."' && echo 1 || echo 0") + 0

# ---------------------------------------------------------------- 1. goodput vs interval
if (readable(sweep)) {
    # Columns: 1 T_s, 2 T/T_young, 3 simulated, 4 model, 5 first order, 8 mark
    # ("young", "daly", "best", comma-joined). Young's interval is T / (T/T_young).
    stats sweep using ($1 / $2) nooutput
    young = STATS_mean
    stats sweep using (strstrt(strcol(8), "daly") ? $1 : 1/0) nooutput
    daly = STATS_max
    stats sweep using (strstrt(strcol(8), "best") ? $1 : 1/0) nooutput
    best_T = STATS_max
    stats sweep using (strstrt(strcol(8), "best") ? $3 : 1/0) nooutput
    best_g = STATS_max
    stats sweep using 1 nooutput
    set xrange [STATS_min / 1.3:STATS_max * 1.3]
    # The run's parameters, from the first header line.
    setup = system("sed -n 's/^# ckpt_interval: //p' '".sweep."' | head -n 1")
    set output dir."/ckpt_interval.png"
    set title "Goodput against the checkpoint interval, with failures drawn at the MTBF\n".setup
    set xlabel "checkpoint interval T: seconds of compute between checkpoints (log scale)"
    set ylabel "goodput: saved compute / wall time"
    set logscale x 10
    # The key goes under the axes, and the best point's words into it: inside, wherever
    # they were put, the curve (an arch whose height and ends depend on C, M and R) ran
    # under them. Young's and Daly's names stay beside their lines, low, under the arch.
    set bmargin 8  # the axis label, the key's two rows and the footer
    set key at screen 0.5, screen 0.115 center top horizontal Left reverse maxrows 2 width 2
    set arrow 1 from young, graph 0 to young, graph 1 nohead dt 2 lw 2 lc rgb 0x666666
    set arrow 2 from daly, graph 0 to daly, graph 1 nohead dt 3 lw 2 lc rgb 0xEE6677
    set label 2 sprintf(" Young %.0f s", young) at young, graph 0.1 left textcolor rgb 0x666666
    set label 3 sprintf("Daly %.0f s ", daly) at daly, graph 0.1 right textcolor rgb 0xEE6677
    set label 1 footer @FOOT
    plot sweep using 1:3 with points pt 7 ps 0.9 lc rgb 0x4477AA title "simulated", \
         "" using 1:4 with lines lw 2 lc rgb 0x000000 title "expected (exact for the simulated model)", \
         "" using 1:($5 > 0 ? $5 : 1/0) with lines lw 1 dt 2 lc rgb 0x228833 \
            title "first order: T/(T+C) (1 - ((T+C)/2 + R)/M)", \
         "" using (strstrt(strcol(8), "best") ? $1 : 1/0):3 with points pt 6 ps 2 lc rgb 0x000000 \
            title sprintf("best simulated: T = %.0f s, goodput %.4f", best_T, best_g)
    unset label 1; unset label 2; unset label 3
    set bmargin 5
    set key default
    unset arrow 1; unset arrow 2
    unset logscale x
    set xrange [*:*]
} else {
    print "plots_interval.gp: no ".sweep.": the interval figure is skipped"
}

# ---------------------------------------------------------------- 2. goodput vs GPUs
if (readable(table)) {
    # One data set (index) per checkpoint cost, Kokolis et al.'s MTBFs; the last holds
    # Llama 3's rows for every cost. Columns: 1 gpus, 3 mtbf_h, 4 source, 5 ckpt_s,
    # 8 best_T_s, 9 best_goodput.
    stats table using 1 nooutput
    nb = STATS_blocks
    costs = ""
    do for [i = 0:nb - 2] {
        stats table index i using 5 nooutput
        costs = costs.sprintf(" %g", STATS_min)
    }
    restart = system("sed -n 's/.*restart R = \\([0-9.e+]*\\) s.*/\\1/p' '".table."' | head -n 1")
    set output dir."/ckpt_cluster.png"
    set title "The best goodput a job can reach against its size: checkpoints must get faster as jobs grow\n".\
        "each point at its Young/Daly-optimal interval, restart R = ".restart." s; job MTBF from Meta's\n".\
        "RSC clusters (Kokolis et al. 2024) and from Llama 3's 54 days (419 unexpected interruptions)"
    set xlabel "GPUs in the job (log scale); filled: MTBF measured, open: projected; diamonds: Llama 3 (16,384 H100s)\n\n"
    set ylabel "best goodput"
    set logscale x 2
    set xtics ("8" 8, "64" 64, "512" 512, "1024" 1024, "4096" 4096, "16k" 16384, "131k" 131072)
    set xrange [5:200000]
    set yrange [0:1.02]
    set key at graph 0.03, graph 0.22 left bottom Left reverse
    set arrow 1 from graph 0, first 0.9 to graph 1, first 0.9 nohead dt 2 lc rgb 0x666666
    set label 2 "90 %: about 10 s checkpoints at 12k GPUs (Kokolis et al.)" at graph 0.02, first 0.92 \
        left textcolor rgb 0x666666
    set label 1 footer @FOOT
    plot for [i = 1:words(costs)] table index (i - 1) using 1:9 with lines lw 2 lc rgb col(i) \
            title sprintf("checkpoint %s s", word(costs, i)), \
         for [i = 1:words(costs)] table index (i - 1) \
            using 1:9:(strcol(4) eq "measured" ? 7 : 6) with points pt variable ps 1.4 \
            lc rgb col(i) notitle, \
         for [i = 1:words(costs)] table index (nb - 1) \
            using 1:($5 == word(costs, i) + 0 ? $9 : 1/0) with points pt 13 ps 1.8 lc rgb col(i) notitle
    unset label 1; unset label 2; unset arrow 1
    unset logscale x
    set xrange [*:*]
    set yrange [*:*]
} else {
    print "plots_interval.gp: no ".table.": the cluster figure is skipped"
}
