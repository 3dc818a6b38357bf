# plots.gp — stage 04's figures from the files run_stage.sh wrote. scripts/plot.sh runs
# it with the folder and the machine and date of the data:
#   gnuplot -e "dir='runs/04_tensor_parallel'; machine='...'; run_date='...'" plots.gp
if (!exists("dir")) dir = "runs/04_tensor_parallel"
if (!exists("machine")) machine = "machine not recorded"
if (!exists("run_date")) run_date = "date not recorded"
set terminal pngcairo size 1000,650 noenhanced font ",11"
set encoding utf8
set grid
# Every figure says where its data come from, in a footer under the axis label.
footer = sprintf("measured on %s, %s", machine, run_date)
FOOT = 'at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"'
model = "small preset: L=4 C=256 heads=4 T=128 V=256, 3.26M parameters, batch 4 (512 tokens per step)"
# Without SP, with SP: the same two colours in every figure (Paul Tol's bright scheme).
c_no = 0x4477AA; c_sp = 0x228833; c_tgt = 0xEE6677; c_ib = 0xAA3377; c_nv = 0x66CCEE
nosp(c) = strcol(3) eq "0" ? c : NaN  # rows without SP (the tables list them first)
sp(c) = strcol(3) eq "1" ? c : NaN    # rows with SP (t >= 2: SP needs a group to split over)

# ---------------------------------------------------------------- 1. throughput vs t
f = dir."/tp_sweep.txt"
stats f using (strcol(1) eq "tp1" ? $7 : NaN) nooutput
tp1_tok = STATS_max
stats f using 9 nooutput
top = STATS_max
if (1.6 * tp1_tok > top) top = 1.6 * tp1_tok
stats f using 2 nooutput
tmax = STATS_max
# The cores of the machine that measured: prediction_cpu.txt's min(t, cores), at its largest t.
stats dir."/prediction_cpu.txt" using 4 nooutput
kmax = STATS_max
over = kmax < tmax ? sprintf("t > %d on %d cores: oversubscribed, ranks wait for a core inside the collectives", kmax, kmax) \
                   : "every rank has a core of its own"
set output dir."/tp_throughput.png"
set terminal pngcairo size 1000,950 noenhanced font ",11"
set multiplot layout 2,1 title "Tensor parallelism over t ranks on this CPU (forked ranks, shared memory)\n".model
set lmargin 10  # both panels' t on the same x
set logscale x 2
set xrange [0.8:tmax * 1.25]
set xtics 2
unset xlabel
set bmargin 2
set title "tokens/s of the job (median of the rounds; bars: the slowest and fastest round)"
set ylabel "tokens/s"
set yrange [0:top * 1.45]  # headroom for the key
set key inside top left box opaque
plot f using (nosp($2)):7:8:9 with yerrorlines pt 7 ps 1.3 lw 2 lc rgb c_no title "TP, no SP", \
     f using (sp($2) * 1.04):7:8:9 with yerrorlines pt 5 ps 1.3 lw 2 lc rgb c_sp \
         title "TP + sequence parallelism (drawn a little to the right)", \
     '+' using (2):(1.6 * tp1_tok) with points pt 3 ps 3 lw 2 lc rgb c_tgt \
         title sprintf("target at t = 2: 1.6x TP = 1 = %.0f tokens/s", 1.6 * tp1_tok), \
     f using (nosp($2)):(tp1_tok * ($2 < kmax ? $2 : kmax)) with lines dt 2 lw 1 lc rgb "#555555" \
         title sprintf("TP = 1 x min(t, %d cores): every core busy, no communication", kmax)
set title "share of the step spent in TP collectives (TPCOMM: the last step, mean of the ranks, median of the rounds)"
set ylabel "% of the step"
set yrange [0:*]
set xlabel "tensor-parallel ranks t (log scale); ".over
set bmargin 5
set boxwidth 0.12
set style fill solid 0.8 border -1
set label 100 footer @FOOT
plot f using (nosp($2) / 1.08):10:(0.12 * nosp($2) / 1.08) with boxes lc rgb c_no title "no SP", \
     f using (sp($2) * 1.08):10:(0.12 * sp($2) * 1.08) with boxes lc rgb c_sp title "SP", \
     f using (nosp($2) / 1.08):10:(sprintf("%.1f", $10)) with labels offset 0,0.8 notitle, \
     f using (sp($2) * 1.08):10:(sprintf("%.1f", $10)) with labels offset 0,0.8 notitle
unset multiplot
unset label 100
set terminal pngcairo size 1000,650 noenhanced font ",11"
set autoscale
set bmargin -1
set lmargin -1

# ---------------------------------------------------------------- 2. memory per rank vs t
f = dir."/memory.txt"
set output dir."/memory_per_rank.png"
set title "Memory per rank against the tensor-parallel size t\n".model."\n" . \
          "points: measured by the ledger (peaks, largest rank); lines: predicted by memcalc --recipe course --tp t [--sp]"
set logscale x 2
set xrange [0.8:tmax * 1.25]
set xtics 2
set xlabel "tensor-parallel ranks t (log scale; SP needs t >= 2)"
set ylabel "MB per rank (1 MB = 1e6 bytes)"
set yrange [0:*]
set key inside top right box opaque
set bmargin 5
set label 100 footer @FOOT
plot f using (nosp($2)):($11 / 1e6) with lines lw 2 lc rgb c_no title "total, no SP: memcalc", \
     f using (nosp($2)):($10 / 1e6) with points pt 7 ps 1.6 lc rgb c_no title "total, no SP: ledger", \
     f using (sp($2)):($11 / 1e6) with lines lw 2 lc rgb c_sp title "total, SP: memcalc", \
     f using (sp($2)):($10 / 1e6) with points pt 5 ps 1.6 lc rgb c_sp title "total, SP: ledger", \
     f using (nosp($2)):($5 / 1e6) with lines dt 2 lw 2 lc rgb c_no title "activations, no SP: memcalc", \
     f using (nosp($2)):($4 / 1e6) with points pt 6 ps 1.6 lw 2 lc rgb c_no title "activations, no SP: ledger", \
     f using (sp($2)):($5 / 1e6) with lines dt 2 lw 2 lc rgb c_sp title "activations, SP: memcalc", \
     f using (sp($2)):($4 / 1e6) with points pt 4 ps 1.6 lw 2 lc rgb c_sp title "activations, SP: ledger"
unset label 100
set autoscale
set bmargin -1

# ---------------------------------------------------------------- 3. predictions: why TP stays in a node
f = dir."/prediction_links.txt"
g = dir."/prediction_cpu.txt"
s = dir."/tp_sweep.txt"
set output dir."/tp_prediction.png"
set terminal pngcairo size 1000,1050 noenhanced font ",11"
set multiplot layout 2,1 title "Tensor parallelism against the alpha-beta model: why TP stays inside a node"
set lmargin 10
set logscale x 2
set logscale y 2
set xrange [0.8:80]
set yrange [0.8:80]
set xtics 2
set ytics 2
set title "PREDICTED (not measured): one GPT-3-175B-sized layer (h=12288, s=2048, b=1, bf16), 400 TFLOP/s per GPU,\n" . \
          "4 ring all-reduces of 50 MB per layer, not overlapped; numbers: the share of the step in communication (%)"
set ylabel "speed-up T(1) / T(t) (log scale)"
set xlabel "tensor-parallel GPUs t (log scale; an HGX H100 node has 8: NVLink beyond 8 is hypothetical)"
set key inside top left box opaque
set bmargin 4
plot x with lines dt 3 lw 1 lc rgb "#555555" title "ideal: t", \
     f using (strcol(1) eq "nvlink" ? $2 : NaN):6 with linespoints pt 7 ps 1.3 lw 2 lc rgb c_no \
         title "NVLink 4 inside a node: 450 GB/s each way, alpha 2 us", \
     f using (strcol(1) eq "ib" ? $2 : NaN):6 with linespoints pt 5 ps 1.3 lw 2 lc rgb c_ib \
         title "InfiniBand NDR across nodes: 50 GB/s each way, alpha 5 us", \
     f using (strcol(1) eq "nvlink" && $2 > 1 ? $2 : NaN):6:(sprintf("%.0f", $8)) with labels offset -1,1 \
         textcolor rgb c_no notitle, \
     f using (strcol(1) eq "ib" && $2 > 1 ? $2 : NaN):6:(sprintf("%.0f", $8)) with labels offset 1,-1 \
         textcolor rgb c_ib notitle
unset logscale y
set ytics autofreq
set autoscale xy  # stats keeps only the points inside the current ranges
stats s using 2 nooutput
cmax = STATS_max
stats s using 6 nooutput
set xrange [0.8:cmax * 1.25]
set yrange [0:STATS_max * 1.5]
set title "MEASURED on this CPU: step time beside T(1) / min(t, cores) + comm(t) with stage 02's alpha-beta fit\n" . \
          "(points: median of the rounds, bars: slowest and fastest round; lines: predicted)"
set ylabel "ms per step"
set xlabel "tensor-parallel ranks t (log scale); small preset, batch 4; " . \
           (kmax < tmax ? sprintf("%d cores: t > %d oversubscribed", kmax, kmax) : "a core per rank")
set bmargin 5
set label 100 footer @FOOT
plot g using (nosp($2)):7 with lines lw 2 lc rgb c_no title "predicted, no SP", \
     g using (sp($2)):7 with lines dt 2 lw 2 lc rgb c_sp title "predicted, SP", \
     s using (nosp($2)):4:5:6 with yerrorbars pt 7 ps 1.3 lw 2 lc rgb c_no title "measured, no SP", \
     s using (sp($2) * 1.04):4:5:6 with yerrorbars pt 5 ps 1.3 lw 2 lc rgb c_sp title "measured, SP (a little to the right)"
unset multiplot
unset label 100

# ---------------------------------------------------------------- ring attention's overlap
# cp_overlap.sh's last steps across two nodes, with and without the overlap: one row per
# rank and lane (compute, messages from posted to seen complete, waiting), on one time axis.
if (strlen(system(sprintf("ls %s/timelines/cp_two.dat %s/timelines/cp_two_no_overlap.dat 2>/dev/null", dir, dir))) > 0) {
    ringcol(s) = strstrt(s, "ring forward") == 1 ? 0x4477AA : strstrt(s, "ring backward") == 1 ? 0x66CCEE : \
                 strstrt(s, "K,V") == 1 ? 0xEE6677 : strstrt(s, "dK,dV") == 1 ? 0xCCBB44 : 0x000000
    o = dir."/cp_overlap.txt"
    set autoscale xy
    stats dir."/timelines/cp_two_no_overlap.dat" using 4 nooutput
    tmax = STATS_max
    set output dir."/cp_overlap.png"
    unset logscale
    unset ylabel
    set xtics autofreq
    set mxtics default
    set format x "%g"
    set bmargin 4
    set terminal pngcairo size 1200, 700 noenhanced font ",11"
    set multiplot layout 2, 1 title "Ring attention, cp = 2 across two nodes: the K,V blocks move while the rank computes\n" . \
        "(the small preset, one long sequence a step; one step, each rank's compute, its messages from posted to complete, and its waits)"
    do for [m in "overlap no_overlap"] {
        tf = dir."/timelines/cp_two".(m eq "overlap" ? "" : "_no_overlap").".dat"
        set autoscale xy
        stats o using ((strcol(1) eq "two" && strcol(2) eq m) ? $3 : NaN) nooutput
        ms = STATS_max
        stats o using ((strcol(1) eq "two" && strcol(2) eq m) ? $4 : NaN) nooutput
        set title sprintf("%s: %.0f ms a step, %.0f ms of it waiting for a message (mean of the ranks)", \
                          m eq "overlap" ? "moved between blocks of compute (the default)" : "moved only while waiting (--no-overlap)", \
                          ms, STATS_max)
        set xrange [0:tmax * 1.01]
        set yrange [-7.5:0.6]
        set ytics ("rank 0 compute" 0, "rank 0 messages" -1, "rank 0 waiting" -2, \
                   "rank 1 compute" -4, "rank 1 messages" -5, "rank 1 waiting" -6) scale 0
        set grid xtics noytics
        set style fill solid 0.9 noborder
        set key outside right top
        set xlabel m eq "overlap" ? "" : "time since the step began (ms); blank: the rest of the model (its layers token by token, AdamW)"
        if (m ne "overlap") { set label 100 footer at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444" }
        plot tf using (($3 + $4) / 2):(-(4 * $1 + $2)):(($4 - $3) / 2):(0.4):(ringcol(strcol(5))) \
                with boxxyerror lc rgb variable notitle, \
             NaN with boxes lc rgb "#4477AA" title "ring forward", \
             NaN with boxes lc rgb "#66CCEE" title "ring backward", \
             NaN with boxes lc rgb "#EE6677" title "K,V block", \
             NaN with boxes lc rgb "#CCBB44" title "dK,dV"
        unset label 100
    }
    unset multiplot
    set ytics autofreq
    set grid
}

# ---------------------------------------------------------------- CP: memory against the sequence
# The calculator's bytes per rank at cp = 1, 2, 4 (lines), the ledger's where each cp's
# longest sequence under the budget trained (points), and the budget.
if (strlen(system(sprintf("ls %s/cp_memory.txt %s/cp_fits.txt 2>/dev/null", dir, dir))) > 0) {
    m = dir."/cp_memory.txt"; fz = dir."/cp_fits.txt"
    budget = real(system(sprintf("sed -n 's/^# budget_bytes //p' %s", fz)))
    set output dir."/cp_memory.png"
    set terminal pngcairo size 1000, 650 noenhanced font ",11"
    unset multiplot
    set autoscale xy
    set logscale xy 2
    set format x "%g"
    set format y "%g"
    set xtics autofreq
    set ytics autofreq
    set mxtics default
    set key inside top left
    set grid xtics ytics
    set title "Context parallelism: each rank's memory against the sequence\n" . \
              "(the small preset, one sequence a step; lines: stage 01's calculator; black: the ledger where the longest trained)"
    set xlabel "sequence length (tokens, log scale)"
    set ylabel "MB per rank (log scale)"
    set label 100 footer at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"
    plot m index 0 using 1:($3 / 1e6) with linespoints pt 6 lw 2 lc rgb c_no title "cp = 1 (one rank)", \
         m index 1 using 1:($3 / 1e6) with linespoints pt 6 lw 2 lc rgb c_sp title "cp = 2", \
         m index 2 using 1:($3 / 1e6) with linespoints pt 6 lw 2 lc rgb c_ib title "cp = 4", \
         budget / 1e6 with lines dt 2 lw 2 lc rgb c_tgt title sprintf("--device-mem %.0f MB", budget / 1e6), \
         fz using 2:($4 / 1e6) with points pt 7 ps 2 lc rgb "#000000" title "measured: the longest that fits, at each cp"
    unset label 100
    unset logscale
}
