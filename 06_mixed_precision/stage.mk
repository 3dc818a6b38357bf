# 06_mixed_precision/stage.mk — mixed precision and activation recompute: tests,
# benchmark and plots.
#
#   make stage-6     tests, then the benchmark into $(RESULTS)/06_mixed_precision/
#   make grade-6     the same tests against 06_mixed_precision/exercises/ (PART=name)
#
# The stage's primitives (recompute.c, ...) are linked into every binary (the core's
# PRECISION_SRCS, top-level Makefile): every stage trains with them.
S06 := 06_mixed_precision
# The stage-01 calculator's reference (this stage grades this stage's code).
S06_CALC := $(BUILD)/01_memory_wall/memory_model.o $(BUILD)/01_memory_wall/memory_plan.o
S06_BINS := $(BUILD)/tests/test_recompute
BINS += $(S06_BINS)

$(BUILD)/tests/test_recompute.o: 01_memory_wall/memory_model.h
$(BUILD)/tests/test_recompute: $(BUILD)/tests/test_recompute.o $(S06_CALC) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: stage-6
stage-6: all
	@BUILD=$(BUILD) bash tests/run.sh stage06
