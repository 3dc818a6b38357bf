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
set ylabel "time (us)"
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
    fit [33554432:] f(x) file using 1:5:5 yerror via beta
    Bm[i] = beta
    print sprintf("np %d: alpha = %.2f us per message; in cache beta = %.4f ns/B (1/beta = %.2f GB/s); " . \
                  "from memory beta = %.4f ns/B (1/beta = %.2f GB/s)", \
                  p, A[i], Bc[i] * 1e3, 1e-3 / Bc[i], Bm[i] * 1e3, 1e-3 / Bm[i])
}
set print
plot for [i = 1:words(ranks)] sprintf("%s/allreduce_ring_np%s.txt", dir, word(ranks, i)) \
         using 1:5 with points pointtype 7 linecolor i title sprintf("measured, %s ranks", word(ranks, i)), \
     for [i = 1:words(ranks)] 2 * (word(ranks, i) - 1) * A[i] + 2.0 * (word(ranks, i) - 1) / word(ranks, i) * x * Bc[i] \
         with lines linecolor i title sprintf("model in cache, %s ranks", word(ranks, i)), \
     for [i = 1:words(ranks)] 2 * (word(ranks, i) - 1) * A[i] + 2.0 * (word(ranks, i) - 1) / word(ranks, i) * x * Bm[i] \
         with lines dashtype 2 linecolor i title sprintf("model from memory, %s ranks", word(ranks, i))

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
