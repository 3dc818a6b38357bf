# plots.gp — stage 03's figures from the files run_stage.sh wrote. scripts/plot.sh runs
# it with the folder, the traced configurations, and the machine and date of the data:
#   gnuplot -e "dir='runs/03_bucketing_zero'; traces='ddp-no-overlap zero3'; machine='...'; run_date='...'" plots.gp
if (!exists("dir")) dir = "runs/03_bucketing_zero"
if (!exists("traces")) traces = ""
if (!exists("machine")) machine = "machine not recorded"
if (!exists("run_date")) run_date = "date not recorded"
set terminal pngcairo size 1000,650 noenhanced font ",11"
set encoding utf8
set grid
# Every figure says where its data come from, in a footer under the axis label.
footer = sprintf("measured on %s, %s", machine, run_date)
FOOT = 'at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"'
bench = "bench model: L=12 C=256 T=64 V=256, batch 1 per rank, 9.56M parameters (38 MB of fp32 gradients)"
strategies = "ddp zero1 zero2 zero3 fsdp"
# One colour per strategy, the same in every figure (Paul Tol's bright scheme).
scol(s) = s eq "ddp" ? 0x4477AA : s eq "zero1" ? 0x66CCEE : s eq "zero2" ? 0x228833 : \
          s eq "zero3" ? 0xCCBB44 : 0xEE6677
spt(i) = word("7 5 9 11 13", i) + 0   # point types: circle, square, triangles, diamond

# ---------------------------------------------------------------- 1. bucket size
f = dir."/bucket_sweep.txt"
# The --no-overlap run: one all-reduce after backward (row "no-overlap").
stats f using (strcol(1) eq "no-overlap" ? $4 : NaN) nooutput
no_ms = STATS_max
stats f using (strcol(1) eq "no-overlap" ? $5 : NaN) nooutput
no_lo = STATS_max
stats f using (strcol(1) eq "no-overlap" ? $6 : NaN) nooutput
no_hi = STATS_max
stats f using (strcol(1) eq "overlap" ? $2 : NaN) nooutput
bmin = STATS_min; bmax = STATS_max
stats f using 6 nooutput
slowest = STATS_max  # the slowest round of any configuration
set output dir."/bucket_sweep.png"
set terminal pngcairo size 1000,950 noenhanced font ",11"
set multiplot layout 2,1 title "DDP on 2 ranks: gradient buckets all-reduced while backward runs\n".bench
set logscale x 2
set xrange [bmin / 1.5 : bmax * 1.5]
set xtics ("0.25" 0.25, "0.5" 0.5, "1" 1, "2" 2, "4" 4, "8" 8, "16" 16, "32" 32, "64" 64)
unset xlabel
set bmargin 2
set title "step time (median of the rounds; bars: the fastest and slowest round; numbers at the bottom: buckets per step)"
set ylabel "ms per step"
set yrange [0:slowest * 1.45]  # headroom for the key above the data
set key inside top right box opaque
set style fill transparent solid 0.15 noborder
plot '+' using 1:(no_lo):(no_hi) with filledcurves lc rgb "#999999" notitle, \
     no_ms with lines dt 2 lw 2 lc rgb "#555555" title sprintf("no overlap: one all-reduce after backward, %.1f ms", no_ms), \
     f using (strcol(1) eq "overlap" ? $2 : NaN):4:5:6 with yerrorlines pt 7 lw 2 lc rgb "#4477AA" \
         title "overlapped: a bucket all-reduced as soon as backward completes it", \
     f using (strcol(1) eq "overlap" ? $2 : NaN):(slowest * 0.06):(sprintf("%d", $3)) with labels \
         textcolor rgb "#4477AA" notitle
set title "share of the communication time spent while the rank computed (mean of the 2 ranks)"
set ylabel "overlap (%)"
set yrange [0:100]
set key inside bottom left box opaque
set xlabel "gradient bucket size (MB = 10^6 bytes, log scale); the whole gradient: 38 MB"
set bmargin 5
set label 100 footer @FOOT
plot f using (strcol(1) eq "overlap" ? $2 : NaN):8 with linespoints pt 7 lw 2 lc rgb "#4477AA" \
         title "overlapped", \
     0 with lines dt 2 lw 2 lc rgb "#555555" title "no overlap (0 %)"
unset multiplot
unset label 100
unset logscale x
set xtics autofreq
set autoscale
set terminal pngcairo size 1000,650 noenhanced font ",11"
set style fill solid 1.0

# ---------------------------------------------------------------- 2. strategies
f = dir."/strategies.txt"
stats f using (strcol(1) eq "ddp" ? $2 : NaN) nooutput
ddp_ms = STATS_max
set output dir."/strategies.png"
set title "Every strategy on 2 ranks: step time against the targets (median of the rounds; bars: fastest and slowest round)\n".bench
set ylabel "ms per step"
set yrange [0:*]
set xrange [-0.6:7.6]
set offsets 0, 0, graph 0.4, 0  # headroom for the key above the bars
set xtics rotate by -20 offset -1,0 nomirror
unset xlabel
set grid ytics noxtics
set boxwidth 0.7
set style fill solid 0.8 border -1
set key top left box opaque
vcol(v) = v eq "met" ? 0x228833 : v eq "MISSED" ? 0xEE6677 : 0xBBBBBB
set bmargin 6
set label 100 footer @FOOT
plot f using 0:2:(vcol(strcol(9))):xtic(1) with boxes lc rgb variable notitle, \
     f using 0:2:3:4 with yerrorbars pt 7 ps 0.5 lc rgb "black" notitle, \
     f using 0:4:(sprintf("%.2f×", $7)) with labels offset 0,0.8 notitle, \
     ddp_ms * 1.05 with lines dt 2 lw 2 lc rgb "#228833" title "ZeRO-1/2 target: DDP + 5 %", \
     ddp_ms * 1.25 with lines dt 2 lw 2 lc rgb "#AA3377" title "ZeRO-3/FSDP target: DDP + 25 %", \
     NaN with boxes lc rgb "#228833" title "target met", \
     NaN with boxes lc rgb "#EE6677" title "target MISSED", \
     NaN with boxes lc rgb "#BBBBBB" title "reference, or no target (× = ms / overlapped DDP's)"
unset label 100
set xtics norotate autofreq offset 0,0
set offsets 0, 0, 0, 0
set grid xtics ytics
set autoscale
set bmargin 5

# ---------------------------------------------------------------- 3. timelines
# One row per rank and lane (compute, communication, waiting); a box per span,
# coloured by what it is. Every chart on the same time axis: the longest trace's.
spancol(s) = strstrt(s, "wait") == 1 ? 0x888888 : strstrt(s, "forward") == 1 ? 0x4477AA : \
             strstrt(s, "backward") == 1 ? 0x66CCEE : strstrt(s, "all-reduce") == 1 ? 0xEE6677 : \
             strstrt(s, "reduce-scatter") == 1 ? 0xAA3377 : strstrt(s, "all-gather") == 1 ? 0xCCBB44 : 0x000000
# "all-gather unit 3" -> "u3", "reduce-scatter bucket 1" -> "b1": written on wide enough comm boxes
short(s) = strstrt(s, "unit ") ? "u".s[strstrt(s, "unit ") + 5:] : \
           strstrt(s, "bucket ") ? "b".s[strstrt(s, "bucket ") + 7:] : ""
tmax = 1
do for [t in traces] {
    stats sprintf("%s/timelines/trace_%s.dat", dir, t) using 4 nooutput
    if (STATS_max > tmax) { tmax = STATS_max }
}
tname(t) = t eq "ddp-no-overlap" ? "DDP without overlap: one all-reduce after backward" : \
           t eq "ddp-overlap" ? "DDP, overlapped, 4 MB buckets" : \
           t eq "zero3" ? "ZeRO-3: weights gathered unit by unit (prefetch), gradients reduce-scattered" : \
           t eq "fsdp" ? "FSDP: a unit per layer group, gathered and freed around its use" : t
do for [t in traces] {
    tf = sprintf("%s/timelines/trace_%s.dat", dir, t)
    set autoscale xy  # stats keeps only the points inside the current ranges
    stats tf using 1 nooutput
    nr = int(STATS_max) + 1
    stats dir."/timelines.txt" using (strcol(1) eq t ? $5 : NaN) nooutput
    ov = STATS_max
    set output sprintf("%s/timeline_%s.png", dir, t)
    set terminal pngcairo size 1200, 220 + 95 * nr noenhanced font ",11"
    set title sprintf("%s — one step, %d ranks\ncommunication hidden behind compute: %.0f %% (mean of the ranks)\n%s", \
                      tname(t), nr, ov, bench)
    set xlabel "time since the step began (ms); b: bucket, u: unit; blank: not traced (AdamW, the data, bookkeeping)"
    unset ylabel
    set xrange [0:tmax * 1.01]
    set yrange [-(4 * nr - 1.5):0.6]
    set ytics () scale 0
    do for [r = 0:nr - 1] {
        set ytics add (sprintf("rank %d compute", r) -(4 * r), sprintf("rank %d comm.", r) -(4 * r + 1), \
                       sprintf("rank %d waiting", r) -(4 * r + 2))
    }
    set grid xtics noytics
    set style fill solid 0.9 noborder
    set key outside right top
    set label 100 footer @FOOT
    plot tf using (($3 + $4) / 2):(-(4 * $1 + $2)):(($4 - $3) / 2):(0.4):(spancol(strcol(5))) \
            with boxxyerror lc rgb variable notitle, \
         tf using (($3 + $4) / 2):(-(4 * $1 + $2)):($2 == 1 && $4 - $3 > tmax / 60 ? short(strcol(5)) : "") \
            with labels font ",9" textcolor rgb "white" notitle, \
         NaN with boxes lc rgb "#4477AA" title "forward", \
         NaN with boxes lc rgb "#66CCEE" title "backward", \
         NaN with boxes lc rgb "#EE6677" title "all-reduce", \
         NaN with boxes lc rgb "#AA3377" title "reduce-scatter", \
         NaN with boxes lc rgb "#CCBB44" title "all-gather", \
         NaN with boxes lc rgb "#888888" title "waiting for one"
    unset label 100
}
set terminal pngcairo size 1000,650 noenhanced font ",11"
set ytics autofreq
set grid xtics ytics
set autoscale
set key default

# ---------------------------------------------------------------- 4. memory per rank
f = dir."/memory.txt"
set output dir."/memory_per_rank.png"
set terminal pngcairo size 1000,950 noenhanced font ",11"
set multiplot layout 2,1 title "Memory per rank against the number of ranks N (small preset: 3.26M parameters, fp32 with AdamW, batch 4 per rank)"
set title "model states: params + grads + optimizer of the largest rank\npoints: measured by the ledger; lines: predicted by memcalc --zero 0/1/2/3 (fsdp, dotted: 16 B x Σu ceil(|u|/N), units padded)"
set ylabel "MB per rank"
set yrange [0:*]
set xrange [0.7:8.3]
set xtics 1
unset xlabel
set bmargin 2
set rmargin 16
set key outside right top
plot for [i = 1:5] f using (strcol(1) eq word(strategies, i) ? $2 : NaN):($7 / 1e6) with lines \
         dt 1 + 2 * (i == 5) lw 2 lc rgb scol(word(strategies, i)) notitle, \
     for [i = 1:5] f using (strcol(1) eq word(strategies, i) ? $2 : NaN):($6 / 1e6) with points \
         pt spt(i) ps 1.6 lc rgb scol(word(strategies, i)) title word(strategies, i)
set title "communication buffers: gradient buckets (1 MB cap: one layer group each) and gathered units, in the pool"
set ylabel "MB per rank (peak)"
set xlabel "ranks N (on 2 cores: beyond 2 they share them, which changes the time, not the memory)"
set bmargin 5
set label 100 footer @FOOT
plot for [i = 1:5] f using (strcol(1) eq word(strategies, i) ? $2 : NaN):($9 / 1e6) with linespoints \
         pt spt(i) ps 1.4 lw 2 lc rgb scol(word(strategies, i)) title word(strategies, i)
unset multiplot
unset label 100
set terminal pngcairo size 1000,650 noenhanced font ",11"
set autoscale
set rmargin -1

# ---------------------------------------------------------------- 5. bytes per rank
f = dir."/bytes.txt"
set output dir."/bytes_per_rank.png"
set title "Bytes each rank sends per step against the ranks N (ring collectives; small preset, Ψ = 3.26M fp32 parameters)\n" . \
          "points: measured (mean of the ranks); lines: the formulas"
set ylabel "MB sent per rank per step"
set xlabel "ranks N"
set yrange [0:*]
set xrange [1.7:8.3]
set xtics 1
set key inside bottom right box opaque
set label 100 footer @FOOT
plot f using (strcol(1) eq "zero3" ? $2 : NaN):($6 / 1e6) with lines lw 2 lc rgb "#AA3377" \
         title "(3Ψ - head)(N-1)/N x 4 B: zero3, fsdp (head = embeddings + ln_f, kept gathered)", \
     f using (strcol(1) eq "ddp" ? $2 : NaN):($6 / 1e6) with lines lw 2 lc rgb "#4477AA" \
         title "2Ψ(N-1)/N x 4 B: ddp, zero1, zero2", \
     for [i = 1:5] f using (strcol(1) eq word(strategies, i) ? $2 : NaN):($3 / 1e6) with points \
         pt spt(i) ps (2.4 - 0.35 * i) lw 2 lc rgb scol(word(strategies, i)) title word(strategies, i)." measured"
unset label 100
set autoscale

# ---------------------------------------------------------------- 6. FSDP wrapping
# Two panels over the same k: what a bigger unit costs in memory, and what it does to time
# (several k can share one memory peak, so a scatter of one against the other hides them).
f = dir."/fsdp_units.txt"
set autoscale
stats f using 2 nooutput
nk = STATS_records
set output dir."/fsdp_units.png"
set terminal pngcairo size 1100,600 noenhanced font ",11"
set multiplot layout 1,2 title "FSDP wrapping on 2 ranks: --fsdp-unit-layers k layer groups per unit (k = 14: the whole model)\n".bench
set style fill solid 0.8 border -1
set boxwidth 0.6
set xrange [-0.6:nk - 0.4]
set offsets 0, 0, graph 0.1, 0
set grid ytics noxtics
unset key
unset xlabel
set xtics nomirror
set bmargin 5
set title "peak of the communication buffers per rank\n(gathered units + gradient buckets, largest rank)"
set ylabel "MB"
set yrange [0:*]
plot f using 0:4:xtic(sprintf("k=%d\n%d unit%s", $2, $3, $3 == 1 ? "" : "s")) with boxes lc rgb "#CCBB44", \
     f using 0:4:(sprintf("%.1f", $4)) with labels offset 0,0.8
set title "step time\n(median of the rounds; bars: fastest and slowest round)"
set ylabel "ms per step"
set label 100 footer @FOOT
plot f using 0:6:xtic(sprintf("k=%d\n%d unit%s", $2, $3, $3 == 1 ? "" : "s")) with boxes lc rgb "#EE6677", \
     f using 0:6:7:8 with yerrorbars pt 7 ps 0.5 lc rgb "black", \
     f using 0:8:(sprintf("%.1f", $6)) with labels offset 0,0.8
unset multiplot
unset label 100
