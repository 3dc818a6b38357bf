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
# One step's loss is one batch's, and noisy. The curves' files also hold a running mean of
# 20 steps (column 3), but drawn, it turned one bad batch (in the committed run step 13's,
# every recipe) into a 20-step plateau. Drawn instead: each step's loss (column 2), thin
# and light, so that a spike shows as the steps it was; over it the median of the mw steps
# around each step, which a spike shorter than half the window does not move, and which
# does not lag behind the falling loss: it is centred (the median of steps n-mw+1..n is
# drawn at n-(mw-1)/2), so the first and last (mw-1)/2 steps have no thick line. The y
# axis stops a little above the first step's loss, a model that knows nothing: higher
# spikes run off the top instead of squashing the curves.
mw = 15  # odd, so that the window is centred on a step
array B[mw]
# Into the window, oldest out; true once the file has filled it ($0 starts at 0 in each).
push(row, y) = (B[int(row) % mw + 1] = y, row >= mw - 1)
# gnuplot cannot sort: the median is the value with (mw-1)/2 values below it (ties broken
# by position in the window).
below(n) = sum [j = 1:mw] (B[j] < B[n] || (B[j] == B[n] && j < n))
med(row, y) = push(row, y) ? sum [n = 1:mw] (below(n) == (mw - 1) / 2 ? B[n] : 0) : NaN
light(c) = sprintf("#A0%06X", c)  # the recipe's colour, 63 % transparent
smoothing = sprintf("thin: each step's loss; thick: the median of the %d steps around it", mw)
data_text = "batch 4 x 128 bytes of the course's Markdown"
stats dir."/curves/fp32.dat" using 2 every ::0::0 nooutput
loss0 = STATS_max
stats dir."/curves/fp32.dat" using 1 nooutput
last_step = STATS_max

set output dir."/loss_curves.png"
set title "Training loss per precision recipe\n".model.", ".data_text.", lr 1e-3"
set xlabel "step\n".smoothing."\n"
set ylabel "loss (nats per byte)"
set xrange [0:last_step]
set yrange [*:loss0 * 1.04]
set key top right
set label 1 footer @FOOT
plot for [i = 1:words(recipes)] dir."/curves/".word(recipes, i).".dat" using 1:2 with lines \
         lw 1 lc rgb light(rcol(i)) notitle, \
     for [i = 1:words(recipes)] dir."/curves/".word(recipes, i).".dat" using ($1 - (mw - 1) / 2):(med($0, $2)) \
         with lines lw 2 dt rdash(i) lc rgb rcol(i) title word(recipes, i)
unset label 1

# The same, the last third of the run, where pure bf16 without stochastic rounding stalls.
set output dir."/loss_curves_tail.png"
set title "The last third of the run (lr 1e-3)"
set xrange [last_step * 2 / 3:last_step]
set autoscale y
set key bottom right  # the single steps' lows are mid-range, the highs at the right
set label 1 footer @FOOT
plot for [i = 1:words(recipes)] dir."/curves/".word(recipes, i).".dat" using 1:2 with lines \
         lw 1 lc rgb light(rcol(i)) notitle, \
     for [i = 1:words(recipes)] dir."/curves/".word(recipes, i).".dat" using ($1 - (mw - 1) / 2):(med($0, $2)) \
         with lines lw 2 dt rdash(i) lc rgb rcol(i) title word(recipes, i)
unset label 1
set xrange [*:*]
set key top right

# At lr 1e-4: updates below half a bf16 ulp of the weights.
set output dir."/loss_curves_lowlr.png"
set title "lr 1e-4: an update is below half a bf16 ulp of most weights. Pure bf16 (dashed) loses it; stochastic rounding does not\n".model.", ".data_text
lowlr = "fp32 mixed-bf16 bf16 bf16-sr"
lcol(i) = word("0x000000 0x4477AA 0xEE6677 0xCCBB44", i) + 0
ldash(i) = i == 3 ? 2 : 1
set xrange [0:last_step]
set yrange [*:loss0 * 1.04]
set label 1 footer @FOOT
plot for [i = 1:words(lowlr)] dir."/curves/lowlr_".word(lowlr, i).".dat" using 1:2 with lines \
         lw 1 lc rgb light(lcol(i)) notitle, \
     for [i = 1:words(lowlr)] dir."/curves/lowlr_".word(lowlr, i).".dat" using ($1 - (mw - 1) / 2):(med($0, $2)) \
         with lines lw 2 dt ldash(i) lc rgb lcol(i) title word(lowlr, i)
unset label 1
set xrange [*:*]
set yrange [*:*]
set xlabel "step\n\n"

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
# Upright names, centred under their bar or pair of bars (rotated, a name began at its tic
# and sat beside its bars); the four names fit side by side.
set xtics norotate center nomirror
set key top right
set title "peak activations (MB = 10^6 B)"
set ylabel "MB"
# Room for the footer under both panels, so that their axes line up.
set xlabel "\n\n"
set yrange [0:*]
plot dir."/recompute.txt" using ($2 / 1e6):xtic(1) title "measured (ledger)" lc rgb 0x4477AA, \
     "" using ($3 / 1e6) title "calculator" lc rgb 0xBBBBBB
set title "step time (median of the rounds)"
set ylabel "ms per step"
set label 1 footer @FOOT
plot dir."/recompute.txt" using 5:xtic(1) title "ms per step" lc rgb 0xEE6677
unset label 1
unset multiplot
set style data lines
set xtics norotate
set yrange [*:*]

# ---------------------------------------------------------------- 4. gradients in bf16
set output dir."/comm_error.png"
# Two panels: the fp32 ring's error sits seven decades below bf16's, so on one log axis the
# bf16 ring's growth with p (the lesson's point) is a flat line on top of the rounded-once
# one. The right panel shows that growth on its own linear axis: the ratio of the two
# (column 5), against the sqrt(p - 1) that p - 1 independent roundings would give.
set terminal pngcairo size 1100,650 noenhanced font ",11"
set multiplot layout 1,2 title "The error of an all-reduce of bf16 gradients against the world size (2^20 elements)"
set xlabel "ranks p\n\n"
stats dir."/comm_error.txt" using 1 nooutput
pmin = STATS_min
pmax = STATS_max
set xrange [pmin - 0.3:pmax + 0.3]
set xtics 1
set title "the relative error of each sum (log scale)"
set ylabel "||result - exact sum|| / ||exact sum||"
set logscale y
set format y "%.0e"
set key center right
plot dir."/comm_error.txt" using 1:3 with linespoints lw 2 pt 7 lc rgb 0xEE6677 title "bf16 ring (p - 1 roundings)", \
     "" using 1:4 with linespoints lw 2 pt 5 lc rgb 0x4477AA title "the exact sum rounded to bf16 once", \
     "" using 1:2 with linespoints lw 2 pt 9 lc rgb 0x000000 title "fp32 ring"
unset logscale y
set format y "%g"
set title "bf16: the ring's error over the best a bf16 result can be"
set ylabel "bf16 ring error / exact sum rounded once"
stats dir."/comm_error.txt" using 5 nooutput
set yrange [0:(sqrt(pmax - 1) > STATS_max ? sqrt(pmax - 1) : STATS_max) * 1.15]
set key top left Left reverse
set samples 200
set label 1 footer @FOOT
plot (x >= pmin && x <= pmax ? sqrt(x - 1) : NaN) with lines dt 2 lw 1.5 lc rgb 0x666666 \
         title "sqrt(p - 1): p - 1 independent roundings", \
     dir."/comm_error.txt" using 1:5 with linespoints lw 2 pt 7 lc rgb 0xEE6677 title "measured: bf16 ring / rounded once"
unset label 1
unset multiplot
set yrange [*:*]
set xrange [*:*]
set xtics autofreq
