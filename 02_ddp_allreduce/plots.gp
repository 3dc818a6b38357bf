# plots.gp — stage 02's figures from the files run_stage.sh wrote.
#   gnuplot -e "dir='results/02_ddp_allreduce'; ranks='2 4 8'; mpi=1" plots.gp
set terminal pngcairo size 900,600 noenhanced font ",11"
set grid
set key top left
set logscale x 2
set format x "%.0b%BB"
set xlabel "message size"

# 1. busbw against size, per algorithm (nccl-tests columns: 1 size, 5 time us, 7 busbw)
do for [n in ranks] {
    set output sprintf("%s/busbw_np%s.png", dir, n)
    set title sprintf("all-reduce bus bandwidth, %s ranks on this CPU (shared memory)", n)
    set ylabel "busbw (GB/s)"
    plot for [a in "naive ring rd"] sprintf("%s/allreduce_%s_np%s.txt", dir, a, n) \
             using 1:7 with linespoints title a, \
         (mpi ? sprintf("%s/allreduce_mpi_np%s.txt", dir, n) : 1/0) using 1:7 \
             with linespoints dashtype 2 title "MPI_Allreduce (OpenMPI)"
}

# 2. alpha-beta: fit the ring's time t = 2(p-1) alpha + 2 (p-1)/p n beta, per p.
#    Weighted by 1/t (relative errors): otherwise the largest sizes decide alone
#    and alpha, fixed by the smallest ones, comes out as noise.
set fit quiet
set fit logfile "/dev/null"
set print sprintf("%s/alpha_beta.txt", dir)
print "# ring all-reduce, t(n) = 2(p-1) alpha + 2 (p-1)/p n beta, least squares on relative error over all sizes"
set output sprintf("%s/alpha_beta.png", dir)
set title "ring all-reduce: measured time and the fitted alpha-beta model"
set ylabel "time (us)"
set logscale y 10
set key top left
array A[words(ranks)]
array Bt[words(ranks)]
do for [i = 1:words(ranks)] {
    p = word(ranks, i) + 0
    alpha = 1.0; beta = 1e-3
    f(x) = 2 * (p - 1) * alpha + 2.0 * (p - 1) / p * x * beta
    fit f(x) sprintf("%s/allreduce_ring_np%d.txt", dir, p) using 1:5:5 yerror via alpha, beta
    A[i] = alpha; Bt[i] = beta
    print sprintf("np %d: alpha = %.2f us per message, beta = %.4f ns per byte (1/beta = %.2f GB/s)", \
                  p, alpha, beta * 1e3, 1e-3 / beta)
}
set print
plot for [i = 1:words(ranks)] sprintf("%s/allreduce_ring_np%s.txt", dir, word(ranks, i)) \
         using 1:5 with points pointtype 7 title sprintf("measured, %s ranks", word(ranks, i)), \
     for [i = 1:words(ranks)] 2 * (word(ranks, i) - 1) * A[i] + 2.0 * (word(ranks, i) - 1) / word(ranks, i) * x * Bt[i] \
         with lines title sprintf("model, %s ranks", word(ranks, i))

# 3. DDP throughput against ranks.
unset logscale
set format x "%g"
set output sprintf("%s/ddp_scaling.png", dir)
set title "DDP on this CPU: tokens/s against ranks (small preset, batch 4 per rank)"
set xlabel "ranks"
set ylabel "tokens/s"
set xtics 1
set key top left
stats sprintf("%s/ddp_scaling.txt", dir) using 2 nooutput
base = STATS_min
plot sprintf("%s/ddp_scaling.txt", dir) using 1:2 with linespoints pointtype 7 title "measured", \
     sprintf("%s/ddp_scaling.txt", dir) using 1:($1 * base) with lines dashtype 2 title "linear scaling"
