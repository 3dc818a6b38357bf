# plots.gp — stage 01's figures, from the data files 01_memory_wall/stage.sh writes.
# scripts/plot.sh runs it with the folder and the machine and date of its data:
#   gnuplot -e "dir='runs/01_memory_wall'; machine='...'; run_date='2026-11-22'" 01_memory_wall/plots.gp
if (!exists("dir")) dir = "runs/01_memory_wall"
if (!exists("machine")) machine = "machine not recorded"
if (!exists("run_date")) run_date = "date not recorded"
term = strstrt(GPVAL_TERMINALS, "pngcairo") > 0 ? "pngcairo" : "png"
set terminal @term size 1100,750
GB = 1e9
cap = 80   # GB: one H100
# Every figure says where its data come from, in a footer (noenhanced: a CPU name may
# hold characters that enhanced text reads as markup, such as @ or _).
calc_note = sprintf("calculated by build/memcalc (a formula, not a measurement) on %s, %s", machine, run_date)
meas_note = sprintf("measured by build/measure on %s, %s", machine, run_date)
FOOT = 'at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444" noenhanced'

# ---------------------------------------------------------------- breakdown per preset and recipe
set output dir."/breakdown.png"
set multiplot title "Per-GPU memory of training on ONE GPU (micro-batch 1, preset sequence length, no recompute)\nstacked: weights, gradients, optimizer state, activations; dashed: 80 GB (H100)"
set style fill solid 0.85 border -1
# One key for the four panels, in a strip of its own under the title (inside a panel
# it hid bars; gnuplot sizes a key to its plot, so the strip is an empty plot of NaN).
unset border
unset tics
set xrange [0:1]
set yrange [0:1]
set lmargin at screen 0.05
set rmargin at screen 0.95
set tmargin at screen 0.91
set bmargin at screen 0.86
set key center center horizontal maxrows 1 samplen 1.5 box
plot NaN with boxes lc rgb "#4477aa" title "weights", \
     NaN with boxes lc rgb "#66ccee" title "grads", \
     NaN with boxes lc rgb "#ee6677" title "optimizer", \
     NaN with boxes lc rgb "#ccbb44" title "activations", \
     NaN with lines dt 2 lw 2 lc rgb "black" title "80 GB"
unset key
set border
set tics
set autoscale xy
set offsets 0, 0, graph 0.06, 0   # headroom: the 80 GB line is not drawn on the frame
set style data histograms
set style histogram rowstacked
set boxwidth 0.7
set ylabel "GB per GPU"
set grid ytics
set xtics rotate by -25 offset -1,0 nomirror
names = "gpt2-xl llama2-7b llama2-13b llama2-70b"
do for [i=0:3] {
    set title word(names, i+1)
    # 2 x 2 panels; below each, room for the rotated labels; below all, the footer
    set lmargin at screen 0.07 + (i % 2) * 0.5
    set rmargin at screen 0.48 + (i % 2) * 0.5
    set tmargin at screen 0.80 - (i / 2) * 0.42
    set bmargin at screen 0.56 - (i / 2) * 0.42
    if (i == 3) { set label 100 calc_note @FOOT }  # once: a multiplot draws labels with every panel
    plot dir."/breakdown.dat" index i using ($3/GB):xtic(2) lc rgb "#4477aa", \
         "" index i using ($4/GB) lc rgb "#66ccee", \
         "" index i using ($5/GB) lc rgb "#ee6677", \
         "" index i using ($6/GB) lc rgb "#ccbb44", \
         cap with lines dt 2 lw 2 lc rgb "black"
}
unset multiplot
unset title
set lmargin
set rmargin
set tmargin
set offsets 0, 0, 0, 0
set bmargin 5   # room for the footer below the axis label
set key default   # drop the strip's key settings (horizontal, one row, centred)
set xtics norotate offset 0,0 mirror

# ---------------------------------------------------------------- activations vs sequence length
set output dir."/act_vs_seq.png"
set terminal @term size 900,600
set label 100 calc_note @FOOT
set title "Llama-2-7B activations on one GPU (bf16, micro-batch 1, no TP; Korthikanti's count)\nfull recompute: one input per layer + one layer rematerialised, whose s x s scores dominate at long s"
set style data linespoints
set logscale xy 2
set logscale y 10
set xlabel "sequence length s"
set ylabel "activation GB per GPU"
set format x "%.0f"
set key top left
set grid
# "∝", not "~": enhanced text reads ~ as an overprint and drew the s^2 on top of it.
plot dir."/act_vs_seq.dat" using 1:($2/GB) title "no recompute: ∝ s^2 (a heads x s x s scores per layer)" lw 2 pt 7, \
     "" using 1:($3/GB) title "selective: scores recomputed, ∝ s" lw 2 pt 5, \
     "" using 1:($4/GB) title "full: layer inputs only" lw 2 pt 9, \
     cap with lines dt 2 lw 2 lc rgb "black" title "80 GB (H100)"
unset logscale
unset title

# ---------------------------------------------------------------- predicted vs measured
set output dir."/measured.png"
set label 100 meas_note @FOOT
set title "This code's memory: calculator (course recipe) vs the ledger after one training step, per category\n(tiny, odd, small, medium, gpt2-124m at T=256; CPU)"
set style data points
set logscale xy 10
set xlabel "predicted bytes"
set ylabel "measured bytes (ledger peak)"
set format x "10^{%L}"
set format y "10^{%L}"
set xrange [1e5:3e9]
set yrange [1e5:3e9]
set key top left box samplen 2 spacing 1.1
set grid
plot dir."/measured.dat" using 2:3 title "params" pt 7 ps 1.6 lc rgb "#4477aa", \
     "" using 4:5 title "grads" pt 6 ps 2.2 lc rgb "#66ccee", \
     "" using 6:7 title "optimizer" pt 5 ps 1.4 lc rgb "#ee6677", \
     "" using 8:9 title "activations" pt 9 ps 1.6 lc rgb "#ccbb44", \
     "" using 10:11 title "workspace" pt 13 ps 1.4 lc rgb "#aa3377", \
     "" using 12:9 title "activations, Korthikanti fp32" pt 2 ps 1.4 lc rgb "black", \
     x with lines dt 2 lw 1.5 lc rgb "#555555" title "y = x"
