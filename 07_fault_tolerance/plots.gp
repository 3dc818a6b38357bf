# plots.gp — stage 07's checkpoint-cost figure from run_stage.sh's ckpt_cost.dat
# (scripts/plot.sh passes dir, machine and run_date; the interval's figures are
# plots_interval.gp's).
#
# ckpt_cost.png: against the state's size (MB), the synchronous save's stall, the
# asynchronous one's (the snapshot alone, when the write overlaps the next steps),
# the write and the load, each in milliseconds, log-log.
if (!exists("dir")) dir = "runs/07_fault_tolerance"
if (!exists("machine")) machine = "machine not recorded"
if (!exists("run_date")) run_date = "date not recorded"
set terminal pngcairo size 1000,650 noenhanced font ",11"
set encoding utf8
set grid
set bmargin 5
set label 1 sprintf("measured on %s, %s (make stage-7)", machine, run_date) \
    at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"
set output dir."/ckpt_cost.png"
set title "Checkpoint cost against the state's size (one process, this machine's disk)"
set xlabel "state: weights + AdamW moments (MB)"
set ylabel "milliseconds per checkpoint"
set logscale xy
set key top left
# Columns: 1 C, 2 params, 3 state_MB, 4 snapshot, 5 write, 6 stall_sync, 7 stall_async, 8 load
plot dir."/ckpt_cost.dat" using 3:6 with linespoints lw 2 pt 7 lc rgb "#EE6677" title "training's stall, synchronous save", \
     ""                   using 3:7 with linespoints lw 2 pt 5 lc rgb "#228833" title "training's stall, --ckpt-async", \
     ""                   using 3:5 with linespoints lw 1 pt 6 dt 2 lc rgb "#4477AA" title "write (a shard, fsync'd)", \
     ""                   using 3:8 with linespoints lw 1 pt 4 dt 3 lc rgb "#AA3377" title "load (verified, read)"
