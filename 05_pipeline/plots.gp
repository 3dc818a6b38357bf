# plots.gp — stage 05's figures from the files run_stage.sh wrote. scripts/plot.sh runs
# it with the folder and the machine and date of the data:
#   gnuplot -e "dir='runs/05_pipeline'; machine='...'; run_date='...'" plots.gp
if (!exists("dir")) dir = "runs/05_pipeline"
if (!exists("machine")) machine = "machine not recorded"
if (!exists("run_date")) run_date = "date not recorded"
set terminal pngcairo size 1000,650 noenhanced font ",11"
set encoding utf8
set grid
# Every figure says where its data come from, in a footer under the axis label.
footer = sprintf("measured on %s, %s", machine, run_date)
FOOT = 'at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"'
model = "small preset: L=4 C=256 heads=4 T=128 V=256, 3.26M parameters, micro-batches of 2 sequences (256 tokens)"
scheds = "gpipe 1f1b interleaved zb-h1"
# One colour per schedule, the same in every figure (Paul Tol's bright scheme).
scol(s) = s eq "gpipe" ? 0x4477AA : s eq "1f1b" ? 0xEE6677 : s eq "interleaved" ? 0x228833 : 0xCCBB44
sname(s) = s eq "gpipe" ? "GPipe" : s eq "1f1b" ? "1F1B" : s eq "interleaved" ? "interleaved 1F1B (v = 2)" : \
           "zero-bubble (ZB-H1)"
spt(i) = word("7 5 9 13", i) + 0   # point types: circle, square, triangle, diamond

# ---------------------------------------------------------------- 1. Gantt charts
# One figure per source (measured p = 2, simulated p = 2, simulated p = 4), a panel per
# schedule, one row per rank; F, B, W coloured, the waits inside them grey on top. The p = 2
# figures share their time axis.
g = dir."/gantt.txt"
letter(s) = s[1:1]
spancol(s) = letter(s) eq "F" ? 0x4477AA : letter(s) eq "W" ? 0xCCBB44 : 0x228833
mb(s) = s[2:]  # "3", or "3.1": micro-batch 3, chunk 1
# A label is drawn only where it fits, so that neighbouring labels never run into each
# other (interleaved's "3.1"s collided at p = 4): right-aligned at its action's end, on the
# coloured part (an action's wait, grey, comes first), and only if that part is wider than
# the text and a margin. Widths in pixels: cairo draws 96 pixels an inch, and a digit of
# the label font (DejaVu Sans) is 0.64 em, a dot 0.32 em.
GW = 1700  # wide enough that interleaved's shortest actions (1/60 of a step) hold "3.1"
lab_pt = 8
lab_px(s) = lab_pt * 96.0 / 72 * (0.64 * strlen(s) - 0.32 * (strstrt(s, ".") > 0))
lab_margin = 6
tmax2 = 1
do for [s in scheds] {
    do for [src in "measured_p2 sim_p2"] {
        stats sprintf("%s/gantt/%s_%s.dat", dir, src, s) using 4 nooutput
        if (STATS_max > tmax2) { tmax2 = STATS_max }
    }
}
tmax4 = 1
do for [s in scheds] {
    stats sprintf("%s/gantt/sim_p4_%s.dat", dir, s) using 4 nooutput
    if (STATS_max > tmax4) { tmax4 = STATS_max }
}
do for [src in "measured_p2 sim_p2 sim_p4"] {
    p = src eq "sim_p4" ? 4 : 2
    how = src[1:3] eq "sim" ? "sim" : "measured"
    tmax = p == 4 ? tmax4 : tmax2
    set output sprintf("%s/gantt_%s.png", dir, src)
    H = 4 * (95 + 34 * p) + 170
    set terminal pngcairo size GW, H noenhanced font ",11"
    ms_px = (0.98 - 0.08) * GW / (tmax * 1.01)  # the x axis: pixels per ms
    set multiplot layout 4,1 margins 0.08, 0.98, 95.0 / H, 1 - 75.0 / H spacing 0, 62.0 / H title (how eq "measured" ? \
        "MEASURED: one traced step (the last) of pp_train, p = 2 ranks, m = 8 micro-batches, on this CPU\n".model : \
        p == 2 ? "SIMULATED by pp_sim, p = 2, m = 8: each virtual stage's median F, B, W from the same traces, messages from stage 02's fit" : \
        "SIMULATED by pp_sim, p = 4, m = 8 (4 ranks would oversubscribe this CPU): the measured model cut evenly in 4 stages (sim_bubble.txt)")
    set ytics () scale 0
    do for [r = 0:p - 1] { set ytics add (sprintf("rank %d", r) -r) }
    set grid xtics noytics
    set style fill solid 0.9 noborder
    unset key
    i = 0
    do for [s in scheds] {
        i = i + 1
        f = sprintf("%s/gantt/%s_%s.dat", dir, src, s)
        set autoscale xy  # stats keeps only the points inside the current ranges
        # The waits (rank, t0, t1), to find how much of an action is coloured.
        nw = 0
        stats f using (nw = nw + ($2 == 2), $2) nooutput
        array WR[nw + 1]; array W0[nw + 1]; array W1[nw + 1]
        k = 0
        stats f using ($2 == 2 ? (k = k + 1, WR[k] = $1, W0[k] = $3, W1[k] = $4) : 0) nooutput
        coloured(r, t0, t1) = t1 - t0 - sum [j = 1:nw] (WR[j] == r && W0[j] >= t0 && W1[j] <= t1 ? W1[j] - W0[j] : 0)
        stats g using (strcol(1) eq s && strcol(2) eq how && $3 == p ? $6 : NaN) nooutput
        st = STATS_max
        stats g using (strcol(1) eq s && strcol(2) eq how && $3 == p ? $7 : NaN) nooutput
        set xrange [0:tmax * 1.01]
        set yrange [-(p - 0.45):0.45]
        set title sprintf("%s: step %.1f ms, bubble %.3f (step - busy) / busy of the busiest rank", sname(s), st, STATS_max) \
            offset 0,-0.6
        if (i == 4) {
            set xlabel "ms since the step began. F forward (blue), B backward (green; zb-h1: its input-gradient pass), " . \
                       "W weight-gradient pass (yellow);\ngrey: waiting for a message, inside the action that needs it; " . \
                       "white numbers, where they fit: micro-batch[.chunk]"
            set label 100 footer @FOOT
        } else { unset xlabel }
        plot f using ($2 == 0 ? ($3 + $4) / 2 : NaN):(-$1):(($4 - $3) / 2):(0.36):(spancol(strcol(5))) \
                with boxxyerror lc rgb variable, \
             f using ($2 == 2 ? ($3 + $4) / 2 : NaN):(-$1):(($4 - $3) / 2):(0.36) with boxxyerror lc rgb "#C8C8C8", \
             f using ($2 == 0 && coloured($1, $3, $4) * ms_px >= lab_px(mb(strcol(5))) + lab_margin ? $4 : NaN) \
                :(-$1):(mb(strcol(5))) with labels right offset -0.25,0 font ",".lab_pt textcolor rgb "white"
    }
    unset multiplot
    unset label 100
    unset title
}
set terminal pngcairo size 1000,650 noenhanced font ",11"
set ytics autofreq
set grid
set autoscale
set lmargin -1
set rmargin -1
set bmargin -1
set xlabel

# ---------------------------------------------------------------- 2. bubble vs m at p = 2
f = dir."/bubble.txt"
set output dir."/bubble.png"
set terminal pngcairo size 1100,900 noenhanced font ",11"
set multiplot layout 2,2 title "Pipeline bubble against the micro-batches m, p = 2 ranks on this CPU\n".model . \
    "\npoints: measured (median of the rounds; bars: min and max), bubble = (step - busy) / busy of the busiest rank"
set logscale x 2
stats f using 2 nooutput
set xrange [STATS_min / 1.4:STATS_max * 1.4]
stats f using 6 nooutput
top = STATS_max
stats f using 18 nooutput
top = STATS_max > top ? STATS_max : top
set yrange [0:top * 1.6]
set key inside top right box opaque font ",9"
set ylabel "bubble ((step - busy) / busy)"
i = 0
do for [s in scheds] {
    i = i + 1
    set title sname(s)
    if (i > 2) {
        set xlabel "micro-batches m (log scale)"
        set bmargin 5
    } else { unset xlabel; set bmargin 3 }
    if (i == 4) { set label 100 footer @FOOT }
    plot f using (strcol(1) eq s ? $2 : NaN):4:5:6 with yerrorbars pt spt(i) ps 1.4 lw 2 lc rgb scol(s) title "measured", \
         f using (strcol(1) eq s ? $2 : NaN):7 with linespoints dt 2 lw 2 pt 1 lc rgb "#333333" \
             title (s eq "zb-h1" ? "formula: ZB-H1 (p-1)(tF+tB-tW)/(m(tF+tB+tW))" : \
                    s eq "interleaved" ? "formula: (p-1)/(v m)" : "formula: (p-1)/m"), \
         f using (strcol(1) eq s ? $2 : NaN):9 with linespoints lw 2 pt 6 ps 1.2 lc rgb "#AA3377" \
             title "pp_sim on the measured stage times", \
         f using (strcol(1) eq s ? $2 : NaN):18 with points pt 2 ps 1.2 lc rgb "#888888" \
             title "idle, the mean rank (bubble + imbalance)", \
         f using (strcol(1) eq "1f1b" && (s eq "interleaved" || s eq "zb-h1") ? $2 : NaN):7 with lines dt 3 lw 2 \
             lc rgb "#999999" title (s eq "interleaved" || s eq "zb-h1" ? "(p-1)/m: 1F1B's formula, for comparison" : "")
}
unset multiplot
unset label 100
set terminal pngcairo size 1000,650 noenhanced font ",11"
set autoscale
unset logscale x
set bmargin -1

# ---------------------------------------------------------------- 3. memory per stage
f = dir."/memory.txt"
set output dir."/memory_per_stage.png"
set terminal pngcairo size 1100,650 noenhanced font ",11"
set multiplot layout 1,2 title "Peak activation memory per pipeline stage, m = 8 micro-batches (the ledger)\n".model . \
    "\nbars: measured; interleaved and zb-h1 measured only (memcalc knows GPipe and 1F1B)"
set style fill solid 0.85 border -1
set boxwidth 0.18
set xlabel "pipeline stage"
set ylabel "MB (1 MB = 1e6 bytes)"
off(s) = s eq "gpipe" ? -0.3 : s eq "1f1b" ? -0.1 : s eq "interleaved" ? 0.1 : 0.3
set key inside top right box opaque font ",9"
stats f using 5 nooutput
set yrange [0:STATS_max / 1e6 * 1.35]
do for [p in "2 4"] {
    set title sprintf("p = %s%s", p, p eq "4" ? " (oversubscribed here; no interleaved: p v <= 4 layers)" : "")
    set xrange [-0.6:p - 0.4]
    set xtics 1
    if (p eq "4") { set label 100 footer @FOOT }
    set bmargin 5
    plot for [s in scheds] f using (strcol(1) eq p && strcol(2) eq s ? $3 + off(s) : NaN):($5 / 1e6) with boxes \
             lc rgb scol(s) title sname(s), \
         for [s in "gpipe 1f1b"] f using (strcol(1) eq p && strcol(2) eq s ? $3 + off(s) : NaN):($6 / 1e6) with points \
             pt 2 ps 2 lw 3 lc rgb "black" title (s eq "gpipe" ? "memcalc --stage s (GPipe, 1F1B)" : ""), \
         f using (strcol(1) eq p && strcol(2) eq "1f1b" ? $3 + off("1f1b") - 0.13 : NaN):($5 / $8 * $9 / 1e6):(0.26):(0) \
             with vectors nohead lw 3 lc rgb "black" title "p/m x GPipe's: the 1F1B target's bound"
}
unset multiplot
unset label 100
set terminal pngcairo size 1000,650 noenhanced font ",11"
set autoscale
set bmargin -1
set xtics autofreq

# ---------------------------------------------------------------- 4. the simulator beyond the cores
f = dir."/sim_bubble.txt"
set output dir."/sim_bubble.png"
set terminal pngcairo size 1100,600 noenhanced font ",11"
set multiplot layout 1,2 title "SIMULATED (pp_sim): the bubble at p = 4 and 8 ranks, the measured model cut into p equal stages\n" . \
    "points: simulated; dashed: the formulas ((p-1)/m, (p-1)/(v m), ZB-H1's); interleaved: m a multiple of p"
set logscale x 2
stats f using 4 nooutput
set xrange [STATS_min / 1.4:STATS_max * 1.4]
stats f using 5 nooutput
set yrange [0:STATS_max * 1.2]
set xlabel "micro-batches m (log scale)"
set ylabel "bubble (idle / busy)"
set key inside top right box opaque font ",9"
set bmargin 5
do for [p in "4 8"] {
    set title sprintf("p = %s", p)
    if (p eq "8") { set label 100 footer @FOOT }
    plot for [i = 1:4] f using (strcol(1) eq p && strcol(2) eq word(scheds, i) ? $4 : NaN):5 with linespoints \
             pt (i == 1 ? 6 : spt(i)) ps (i == 1 ? 2.4 : 1.3) lw 2 lc rgb scol(word(scheds, i)) \
             title sname(word(scheds, i)) . (i == 1 ? " (under 1F1B: the same bubble)" : ""), \
         for [i = 1:4] f using (strcol(1) eq p && strcol(2) eq word(scheds, i) ? $4 : NaN):6 with lines dt 2 lw 1.5 \
             lc rgb scol(word(scheds, i)) notitle
}
unset multiplot
unset label 100
