# 07_fault_tolerance/stage.mk — checkpoints, restarts and faults: the stage's tools
# and tests. The checkpoint code itself is the core's (FAULT_SRCS in the Makefile):
# every driver saves and resumes through it.
#
#   make stage-7     the stage's tests, then the benchmark into $(RESULTS)/07_fault_tolerance/
#   make grade-7     the same tests against 07_fault_tolerance/exercises/ (PART=name):
#                    publish.c and resume.c (the core's FAULT_SRCS, Makefile) and
#                    young_daly.c (below)
S07 := 07_fault_tolerance
# The checkpoint-interval calculator: the formulas (young_daly.c, an exercise) and
# the failure simulation (goodput.c).
S07_INTERVAL := $(call stage_obj,$(S07)/young_daly.c) $(BUILD)/$(S07)/goodput.o
$(S07_INTERVAL) $(BUILD)/$(S07)/interval.o $(BUILD)/tests/test_interval.o: $(S07)/young_daly.h
$(BUILD)/ckpt_interval: $(BUILD)/$(S07)/interval.o $(S07_INTERVAL) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/tests/test_interval: $(BUILD)/tests/test_interval.o $(S07_INTERVAL) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
BINS += $(BUILD)/ckpt_interval $(BUILD)/tests/test_interval

.PHONY: stage-7
stage-7: all
	@BUILD=$(BUILD) bash tests/run.sh stage07
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S07)/run_stage.sh
