# 03_bucketing_zero/stage.mk — gradient buckets overlapped with backward, ZeRO-1/2/3,
# FSDP and HSDP; their tests and benchmark.
#
#   make stage-3     tests, the demo, the sweeps, timelines and plots into $(RESULTS)/03_*/
#   make grade-3     the same tests against 03_bucketing_zero/exercises/ (PART=name)
S03 := 03_bucketing_zero
# buckets.c, zero_step.c and fsdp_unit.c are the exercises (make grade-3, EX=3, swaps
# them). The collectives come from stage 02 (its reference when grading: this stage
# grades this stage's code).
S03_OBJS := $(call stage_obj,$(S03)/buckets.c $(S03)/zero_step.c $(S03)/fsdp_unit.c) \
            $(patsubst %,$(BUILD)/$(S03)/%.o,collectives_v async_coll plan grad_reduce units sharded) \
            $(BUILD)/$(S02)/collectives.o $(BUILD)/$(S02)/ring.o $(BUILD)/$(S02)/alltoall.o $(BUILD)/$(S02)/baseline_mpi.o
S03_BINS := $(BUILD)/sharded_train $(BUILD)/tests/test_sharded
BINS += $(S03_BINS)
DRIVERS += $(BUILD)/sharded_train

$(BUILD)/$(S03)/%.o: CFLAGS += -I$(S02) -I$(S03)
$(BUILD)/tests/test_sharded.o: CFLAGS += -I$(S02) -I$(S03)
# The generic rule knows common/*.h only: the stage's objects read its headers too.
$(filter $(BUILD)/$(S03)/%,$(S03_OBJS)) $(BUILD)/$(S03)/sharded_train.o \
  $(BUILD)/tests/test_sharded.o: $(wildcard $(S03)/*.h) $(wildcard $(S02)/*.h)

$(BUILD)/sharded_train: $(BUILD)/$(S03)/sharded_train.o $(S03_OBJS) $(CORE_OBJS)
	$(LINK)
$(BUILD)/tests/test_sharded: $(BUILD)/tests/test_sharded.o $(S03_OBJS) $(CORE_OBJS)
	$(LINK)

.PHONY: stage-run-3
stage-run-3:
	@BUILD=$(BUILD) bash tests/run.sh stage03
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S03)/run_stage.sh
