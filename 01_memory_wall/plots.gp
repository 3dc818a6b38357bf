# plots.gp — stage 01's figures, from the data files 01_memory_wall/stage.sh writes.
#   gnuplot -e "dir='results/01_memory_wall'" 01_memory_wall/plots.gp
if (!exists("dir")) dir = "results/01_memory_wall"
term = strstrt(GPVAL_TERMINALS, "pngcairo") > 0 ? "pngcairo" : "png"
set terminal @term size 1100,750
GB = 1e9
cap = 80   # GB: one H100

# ---------------------------------------------------------------- breakdown per preset and recipe
set output dir."/breakdown.png"
set multiplot layout 2,2 title "Per-GPU memory of training on ONE GPU (micro-batch 1, preset sequence length, no recompute)\nstacked: weights, gradients, optimizer state, activations; dashed: 80 GB (H100)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set ylabel "GB per GPU"
set grid ytics
set xtics rotate by -25 offset -1,0
set key top left opaque box
names = "gpt2-xl llama2-7b llama2-13b llama2-70b"
do for [i=0:3] {
    set title word(names, i+1)
    if (i > 0) { unset key }
    plot dir."/breakdown.dat" index i using ($3/GB):xtic(2) title "weights" lc rgb "#4477aa", \
         "" index i using ($4/GB) title "grads" lc rgb "#66ccee", \
         "" index i using ($5/GB) title "optimizer" lc rgb "#ee6677", \
         "" index i using ($6/GB) title "activations" lc rgb "#ccbb44", \
         cap with lines dt 2 lw 2 lc rgb "black" title "80 GB"
}
unset multiplot
unset title
set key noopaque nobox
set xtics norotate offset 0,0

# ---------------------------------------------------------------- activations vs sequence length
set output dir."/act_vs_seq.png"
set terminal @term size 900,600
set title "Llama-2-7B activations on one GPU (bf16, micro-batch 1, no TP; Korthikanti's count)\nfull recompute: one input per layer + one layer rematerialised, whose s x s scores dominate at long s"
set style data linespoints
set logscale xy 2
set logscale y 10
set xlabel "sequence length s"
set ylabel "activation GB per GPU"
set format x "%.0f"
set key top left
set grid
plot dir."/act_vs_seq.dat" using 1:($2/GB) title "no recompute: ~s^2 (a s x s scores per layer)" lw 2 pt 7, \
     "" using 1:($3/GB) title "selective: scores recomputed, ~s" lw 2 pt 5, \
     "" using 1:($4/GB) title "full: layer inputs only" lw 2 pt 9, \
     cap with lines dt 2 lw 2 lc rgb "black" title "80 GB (H100)"
unset logscale
unset title

# ---------------------------------------------------------------- predicted vs measured
set output dir."/measured.png"
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
