# two_levels.gp — the figure of a stage's two-level measurement (NN_*/two_levels.sh's
# two_levels.txt: "label rate ms_one ms_two ms_pred err_pct inside_MB across_MB" rows).
# scripts/plot.sh runs it for every stage folder that has one:
#   gnuplot -e "dir='...'; machine='...'; what='...'" scripts/two_levels.gp
# Left: ms per step on one node, across two nodes (measured) and the alpha-beta
# prediction for the latter; right: the MB node 0 sent per step, inside and across.
f = dir."/two_levels.txt"
foot = system("sed -n 's/^# measured on //p' '".f."' | cut -d';' -f1")
set terminal pngcairo size 1200,600 noenhanced font ",11"
set output dir."/two_levels.png"
set encoding utf8
set multiplot layout 1,2 title what
set style fill solid 0.85 border -1
set boxwidth 0.25
stats f using 3 nooutput
n = STATS_records
set xrange [-0.6:n - 0.4]
set grid ytics noxtics
set xtics nomirror
set yrange [0:*]
set key top left
set offsets 0, 0, graph 0.3, 0  # room for the key above the bars
set bmargin 5
tic(l, r) = sprintf("%s\n%s", l, r)
set title "step time: one node vs two nodes"
set ylabel "ms per step"
plot f using ($0 - 0.27):3:xtic(tic(strcol(1), strcol(2))) with boxes lc rgb "#BBBBBB" title "one node", \
     f using 0:4 with boxes lc rgb "#4477AA" title "two nodes, measured", \
     f using ($0 + 0.27):5 with boxes lc rgb "#EE6677" title "two nodes, predicted (alpha-beta)", \
     f using 0:4:(sprintf("%+.0f%%", $6)) with labels offset 0,0.8 font ",9" notitle
set title "bytes node 0 sent per step, by link"
set ylabel "MB"
set label 100 sprintf("measured on %s", foot) at screen 0.99, screen 0.012 right font ",9" \
    textcolor rgb "#444444"
plot f using ($0 - 0.14):7:xtic(tic(strcol(1), strcol(2))) with boxes lc rgb "#CCBB44" title "inside the node (shared memory)", \
     f using ($0 + 0.14):8 with boxes lc rgb "#AA3377" title "across (the shaped link)"
unset multiplot
