# tests/stage05.sh — stage 05's suite, sourced by tests/run.sh (which defines
# `run NAME COMMAND...`, $BUILD and $log).
#
# tests/test_pp.c: the checker on every generated schedule and on broken ones;
# then each schedule on 2-4 stages, m = 1..8 micro-batches, against one process
# with gradient accumulation (the loss and every gradient but the tied wte's
# bitwise; weights after 5 AdamW steps within 1e-5), the activation ledger against
# the micro-batches in flight, and the two copies of the tied embedding bitwise.
run pp-checker "$BUILD/tests/test_pp" --checker
for p in 1 2 3 4; do
    for s in gpipe 1f1b; do run "pp-$s-p$p" "$BUILD/tests/test_pp" --np "$p" --schedule "$s" --timeout 20; done
done
for p in 2 4; do run "pp-interleaved-p$p" "$BUILD/tests/test_pp" --np "$p" --schedule interleaved --timeout 20; done
