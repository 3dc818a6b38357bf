# plots.gp — stage 02's figures from the files run_stage.sh wrote. scripts/plot.sh
# runs it with the folder, the rank counts, and the machine and date of the data:
#   gnuplot -e "dir='runs/02_ddp_allreduce'; ranks='2 4 8'; mpi=1; machine='...'; run_date='...'" plots.gp
if (!exists("machine")) machine = "machine not recorded"
if (!exists("run_date")) run_date = "date not recorded"
set terminal pngcairo size 900,600 noenhanced font ",11"
set encoding utf8
set micro          # %c writes µ (not u) for 1e-6
set grid
set key top left
set logscale x 2
set xlabel "message size"
# Every 8x, in the units people say (gnuplot's %b format prints "32  B", "1kiB").
set xtics ("4 B" 4, "32 B" 32, "256 B" 256, "2 KiB" 2048, "16 KiB" 16384, "128 KiB" 131072, \
           "1 MiB" 1048576, "8 MiB" 8388608, "64 MiB" 67108864)
# Every figure says where its data come from, in a footer under the axis label.
footer = sprintf("measured on %s, %s", machine, run_date)
FOOT = 'at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"'
set bmargin 5

# 1. busbw and time against size, per algorithm (nccl-tests columns: 1 size, 5 time us,
#    7 busbw). busbw is recomputed from the time, busbw = size/time x 2(p-1)/p as
#    nccl-tests defines it: the files print it with 3 decimals, which is 0.000 for
#    small messages on 4 and 8 ranks, and a log axis cannot show 0. The log axis is
#    what makes small messages visible at all; the lower panel shows their latency.
bw(size, us, p) = size / (us * 1e3) * 2.0 * (p - 1) / p
do for [n in ranks] {
    p = n + 0
    set output sprintf("%s/busbw_np%s.png", dir, n)
    set terminal pngcairo size 900,900 noenhanced font ",11"
    set multiplot layout 2,1 title sprintf("all-reduce on %s ranks of one machine (shared memory)", n)
    set title "bus bandwidth (higher is better)"
    set ylabel "busbw (log scale)"
    set logscale y 10
    set format y "%.0s %cB/s"  # 1 GB/s, 100 MB/s, ... (plotted in B/s)
    unset xlabel
    set bmargin 2
    plot for [a in "naive ring rd"] sprintf("%s/allreduce_%s_np%s.txt", dir, a, n) \
             using 1:(bw($1, $5, p) * 1e9) with linespoints title a, \
         (mpi ? sprintf("%s/allreduce_mpi_np%s.txt", dir, n) : 1/0) using 1:(bw($1, $5, p) * 1e9) \
             with linespoints dashtype 2 title "MPI_Allreduce (OpenMPI)"
    set title "time per call (lower is better)"
    set ylabel "time per call (log scale)"
    set format y "%.0s %cs"  # the files hold microseconds; plotted in seconds: 100 ns, 1 ms, ...
    set xlabel "message size"
    set bmargin 5
    set label 100 footer @FOOT  # in the last panel only: a multiplot draws labels with each
    plot for [a in "naive ring rd"] sprintf("%s/allreduce_%s_np%s.txt", dir, a, n) \
             using 1:($5 * 1e-6) with linespoints title a, \
         (mpi ? sprintf("%s/allreduce_mpi_np%s.txt", dir, n) : 1/0) using 1:($5 * 1e-6) \
             with linespoints dashtype 2 title "MPI_Allreduce (OpenMPI)"
    unset multiplot
    unset label 100
    set format y "%g"
}
set terminal pngcairo size 900,600 noenhanced font ",11"
set label 100 footer @FOOT
set bmargin 5

# 2. alpha-beta: t = 2(p-1) alpha + 2 (p-1)/p n beta, per p. One beta cannot describe
#    a memory hierarchy: while the buffers fit in the caches (here up to a few MiB)
#    the bytes move at cache speed, beyond it at memory speed. So two fits:
#    alpha and beta_cache on sizes <= 2 MiB, weighted by 1/t (relative errors,
#    otherwise the largest sizes decide alone and alpha comes out as noise); then
#    beta_mem on sizes >= 32 MiB with that alpha.
set fit quiet
set fit logfile "/dev/null"
set print sprintf("%s/alpha_beta.txt", dir)
print "# ring all-reduce, t(n) = 2(p-1) alpha + 2 (p-1)/p n beta; alpha and beta_cache fitted on"
print "# sizes <= 2 MiB (relative error), beta_mem on sizes >= 32 MiB with that alpha"
set output sprintf("%s/alpha_beta.png", dir)
set title "ring all-reduce: measured time and the fitted alpha-beta model"
set ylabel "time per call (log scale)"
set format y "%.0s %cs"  # fitted in microseconds, plotted in seconds
set logscale y 10
set key top left
array A[words(ranks)]
array Bc[words(ranks)]
array Bm[words(ranks)]
do for [i = 1:words(ranks)] {
    p = word(ranks, i) + 0
    file = sprintf("%s/allreduce_ring_np%d.txt", dir, p)
    alpha = 1.0; beta = 1e-3
    f(x) = 2 * (p - 1) * alpha + 2.0 * (p - 1) / p * x * beta
    fit [:2097152] f(x) file using 1:5:5 yerror via alpha, beta
    A[i] = alpha; Bc[i] = beta
    stats file using 1 nooutput
    if (STATS_max >= 33554432) {
        fit [33554432:] f(x) file using 1:5:5 yerror via beta
        Bm[i] = beta
        print sprintf("np %d: alpha = %.2f us per message; in cache beta = %.4f ns/B (1/beta = %.2f GB/s); " . \
                      "from memory beta = %.4f ns/B (1/beta = %.2f GB/s)", \
                      p, A[i], Bc[i] * 1e3, 1e-3 / Bc[i], Bm[i] * 1e3, 1e-3 / Bm[i])
    } else {  # a QUICK=1 sweep stops at 16 MiB: nothing to fit from memory
        Bm[i] = NaN
        print sprintf("np %d: alpha = %.2f us per message; in cache beta = %.4f ns/B (1/beta = %.2f GB/s); " . \
                      "from memory: not fitted (sizes up to %.0f B only; the fit needs >= 32 MiB)", \
                      p, A[i], Bc[i] * 1e3, 1e-3 / Bc[i], STATS_max)
    }
}
set print
plot for [i = 1:words(ranks)] sprintf("%s/allreduce_ring_np%s.txt", dir, word(ranks, i)) \
         using 1:($5 * 1e-6) with points pointtype 7 linecolor i title sprintf("measured, %s ranks", word(ranks, i)), \
     for [i = 1:words(ranks)] (2 * (word(ranks, i) - 1) * A[i] + 2.0 * (word(ranks, i) - 1) / word(ranks, i) * x * Bc[i]) * 1e-6 \
         with lines linecolor i title sprintf("model in cache, %s ranks", word(ranks, i)), \
     for [i = 1:words(ranks)] (2 * (word(ranks, i) - 1) * A[i] + 2.0 * (word(ranks, i) - 1) / word(ranks, i) * x * Bm[i]) * 1e-6 \
         with lines dashtype 2 linecolor i \
         title (Bm[i] == Bm[i] ? sprintf("model from memory, %s ranks", word(ranks, i)) : "")
set format y "%g"

# 3. DDP throughput against ranks.
unset logscale
set format x "%g"
set xtics autofreq
set output sprintf("%s/ddp_scaling.png", dir)
set title "DDP on one machine: tokens/s against ranks (small preset, batch 4 per rank)"
set xlabel "ranks"
set ylabel "tokens/s"
set xtics 1
set yrange [0:*]  # from zero: the gap to linear scaling at its true size
set key top left
# linear from the 1-rank rate (not the slowest: on a busy machine that may be another)
stats sprintf("%s/ddp_scaling.txt", dir) using ($1 == 1 ? $2 : NaN) nooutput
base = STATS_max
plot sprintf("%s/ddp_scaling.txt", dir) using 1:2 with linespoints pointtype 7 title "measured", \
     sprintf("%s/ddp_scaling.txt", dir) using 1:($1 * base) with lines dashtype 2 title "linear scaling"

# 4. The two-level cluster (hierarchy.sh, where it could run): seconds per 16 MiB
#    all-reduce against the rate of the link between the nodes, the flat ring and the
#    hierarchical one on 2 nodes x 2 and x 4 ranks, measured (points) beside the
#    alpha-beta prediction from the fitted links (lines).
if (exists("hier") && hier) {
    unset yrange
    set output sprintf("%s/hierarchy.png", dir)
    set title "all-reduce of 16 MiB across 2 nodes: flat ring vs hierarchical, measured and predicted"
    set xlabel "rate of each node's link (Mbit/s, log scale; inside a node: shared memory)"
    set ylabel "seconds per call (log scale)"
    set logscale xy 10
    set xtics autofreq
    set format x "%g"
    set format y "%g"
    set key bottom left
    f = sprintf("%s/hierarchy.txt", dir)
    # Its own machine and date (hierarchy.sh may have run apart from the sweep).
    hfoot = system(sprintf("sed -n 's/^# measured on //p' '%s' | cut -d';' -f1", f))
    # (FOOT spelled out: gnuplot expands no macro inside an if block)
    set label 100 sprintf("measured on %s", hfoot) at screen 0.99, screen 0.012 right font ",9" \
        textcolor rgb "#444444"
    g(L) = sprintf("< grep '^%s ' '%s'", L, f)  # one layout's rows (NaN would break the lines)
    plot for [L in "2x2 2x4"] g(L) using 3:4 with points pointtype 7 linecolor (L eq "2x2" ? 1 : 3) \
             title sprintf("ring, %s, measured", L), \
         for [L in "2x2 2x4"] g(L) using 3:5 with lines dashtype 2 linecolor (L eq "2x2" ? 1 : 3) \
             title sprintf("ring, %s, predicted", L), \
         for [L in "2x2 2x4"] g(L) using 3:7 with points pointtype 5 linecolor (L eq "2x2" ? 2 : 4) \
             title sprintf("hier, %s, measured", L), \
         for [L in "2x2 2x4"] g(L) using 3:8 with lines dashtype 2 linecolor (L eq "2x2" ? 2 : 4) \
             title sprintf("hier, %s, predicted", L), \
         for [L in "2x2 2x4"] g(L) using 3:11 with points pointtype (L eq "2x2" ? 9 : 8) linecolor 7 \
             title sprintf("MPI_Allreduce, %s, measured", L)
}

# 5. The all-to-all (run_stage.sh's step 4): busbw = size/time x (p-1)/p against size,
#    naive (everything posted at once), pairwise and MPI_Alltoall on 4 ranks.
if (exists("a2a") && a2a) {
    unset yrange
    unset logscale y
    set output sprintf("%s/alltoall_np4.png", dir)
    set title "all-to-all on 4 ranks of one machine (shared memory): bus bandwidth"
    set xlabel "message size (the whole buffer of each rank)"
    set ylabel "busbw (log scale)"
    set logscale x 2
    set logscale y 10
    set xtics ("4 KiB" 4096, "32 KiB" 32768, "256 KiB" 262144, "2 MiB" 2097152, "16 MiB" 16777216, \
               "64 MiB" 67108864)
    set format y "%.0s %cB/s"
    set key top left
    set label 100 footer at screen 0.99, screen 0.012 right font ",9" textcolor rgb "#444444"
    a2abw(size, us) = size / (us * 1e3) * 3.0 / 4 * 1e9
    plot for [a in "naive pairwise"] sprintf("%s/alltoall_%s_np4.txt", dir, a) \
             using 1:(a2abw($1, $5)) with linespoints title a, \
         (mpi ? sprintf("%s/alltoall_mpi_np4.txt", dir) : 1/0) using 1:(a2abw($1, $5)) \
             with linespoints dashtype 2 title "MPI_Alltoall (OpenMPI)"
}
