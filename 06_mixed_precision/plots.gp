# plots.gp — stage 06's figures from the files run_stage.sh wrote. scripts/plot.sh runs
# it with the folder and the machine and date of the data:
#   gnuplot -e "dir='runs/06_mixed_precision'; machine='...'; run_date='...'" plots.gp
if (!exists("dir")) dir = "runs/06_mixed_precision"
if (!exists("machine")) machine = "machine not recorded"
if (!exists("run_date")) run_date = "date not recorded"
set terminal pngcairo size 1000,650 noenhanced font ",11"
set encoding utf8
set grid
footer = sprintf("measured on %s, %s", machine, run_date)
FOOT = 'at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"'
model = "small preset: L=4 C=256 heads=4 T=128 V=256, 3.26M parameters"
recipes = "fp32 mixed-bf16 mixed-fp16 bf16 bf16-sr fp8"
# One colour per recipe (Paul Tol's bright scheme); pure bf16 dashed.
rcol(i) = word("0x000000 0x4477AA 0x228833 0xEE6677 0xCCBB44 0xAA3377", i) + 0
rdash(i) = i == 4 ? 2 : 1

# ---------------------------------------------------------------- 1. loss curves
set output dir."/loss_curves.png"
set title "Training loss per precision recipe (mean of the last 20 steps)\n".model.", batch 4 x 128 bytes of the course's Markdown, lr 1e-3"
set xlabel "step\n\n"
set ylabel "loss (nats per byte)"
set key top right
set label 1 footer @FOOT
plot for [i = 1:words(recipes)] dir."/curves/".word(recipes, i).".dat" using 1:3 with lines \
     lw 2 dt rdash(i) lc rgb rcol(i) title word(recipes, i)
unset label 1

# The same, the last third of the run, where pure bf16 without stochastic rounding stalls.
set output dir."/loss_curves_tail.png"
set title "The last third of the run (lr 1e-3)"
stats dir."/curves/fp32.dat" using 1 nooutput
set xrange [STATS_max * 2 / 3:STATS_max]
set autoscale y
set label 1 footer @FOOT
plot for [i = 1:words(recipes)] dir."/curves/".word(recipes, i).".dat" using 1:3 with lines \
     lw 2 dt rdash(i) lc rgb rcol(i) title word(recipes, i)
unset label 1
set xrange [*:*]

# At lr 1e-4: updates below half a bf16 ulp of the weights.
set output dir."/loss_curves_lowlr.png"
set title "lr 1e-4: an update is below half a bf16 ulp of most weights. Pure bf16 (dashed) loses it; stochastic rounding does not\n".model.", batch 4 x 128 bytes of the course's Markdown"
lowlr = "fp32 mixed-bf16 bf16 bf16-sr"
lcol(i) = word("0x000000 0x4477AA 0xEE6677 0xCCBB44", i) + 0
ldash(i) = i == 3 ? 2 : 1
set label 1 footer @FOOT
plot for [i = 1:words(lowlr)] dir."/curves/lowlr_".word(lowlr, i).".dat" using 1:3 with lines \
     lw 2 dt ldash(i) lc rgb lcol(i) title word(lowlr, i)
unset label 1

# ---------------------------------------------------------------- 2. the loss scale
set output dir."/loss_scale.png"
set title "mixed-fp16: the dynamic loss scale, step by step (doubles after a window of good steps, halves on an overflow)"
set ylabel "loss scale (log2)"
set logscale y 2
set format y "2^%L"
set key top left
set label 1 footer @FOOT
plot dir."/scale.dat" using 1:2 with steps lw 2 lc rgb 0x4477AA title "scale", \
     "" using ($3 == 1 ? $1 : 1/0):2 with points pt 7 ps 1.2 lc rgb 0xEE6677 title "overflow: step skipped"
unset label 1
unset logscale y
set format y "%g"

# ---------------------------------------------------------------- 3. recompute
set output dir."/recompute.png"
set multiplot layout 1,2 title "Activation recompute: memory saved against time spent (small preset, batch 8 x 128)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -20 nomirror
set key top right
set title "peak activations (MB = 10^6 B)"
set ylabel "MB"
set xlabel " "
set yrange [0:*]
plot dir."/recompute.txt" using ($2 / 1e6):xtic(1) title "measured (ledger)" lc rgb 0x4477AA, \
     "" using ($3 / 1e6) title "calculator" lc rgb 0xBBBBBB
set title "step time (median of the rounds)"
set ylabel "ms per step"
set xlabel "\n\n"
set label 1 footer @FOOT
plot dir."/recompute.txt" using 5:xtic(1) title "ms per step" lc rgb 0xEE6677
unset label 1
unset multiplot
set style data lines
set xtics norotate
set yrange [*:*]

# ---------------------------------------------------------------- 4. gradients in bf16
set output dir."/comm_error.png"
set title "The error of an all-reduce of bf16 gradients against the world size (2^20 elements)"
set xlabel "ranks p\n\n"
set ylabel "||result - exact sum|| / ||exact sum||"
set logscale y
set format y "%.0e"
set key center right
set label 1 footer @FOOT
plot dir."/comm_error.txt" using 1:3 with linespoints lw 2 pt 7 lc rgb 0xEE6677 title "bf16 ring (p - 1 roundings)", \
     "" using 1:4 with linespoints lw 2 pt 5 lc rgb 0x4477AA title "the exact sum rounded to bf16 once", \
     "" using 1:2 with linespoints lw 2 pt 9 lc rgb 0x000000 title "fp32 ring"
unset label 1
