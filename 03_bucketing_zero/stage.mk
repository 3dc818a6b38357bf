# 03_bucketing_zero/stage.mk — gradient buckets overlapped with backward, ZeRO-1/2/3,
# FSDP and HSDP; their tests and benchmark.
#
#   make stage-3     tests, the demo, the sweeps, timelines and plots into $(RESULTS)/03_*/
#   make grade-3     the same tests against 03_bucketing_zero/exercises/ (PART=name)
S03 := 03_bucketing_zero
# buckets.c, zero_step.c and fsdp_unit.c are the exercises (EX=1 swaps them). The
# collectives come from stage 02's reference (its ring, not your stage-02 exercise:
# this stage grades this stage's code).
S03_OBJS := $(call stage_obj,$(S03)/buckets.c $(S03)/zero_step.c $(S03)/fsdp_unit.c) \
            $(patsubst %,$(BUILD)/$(S03)/%.o,collectives_v async_coll plan grad_reduce units sharded) \
            $(BUILD)/$(S02)/collectives.o $(BUILD)/$(S02)/ring.o $(BUILD)/$(S02)/baseline_mpi.o
# The suite's references: stage 02's DDP and stage 01's calculator built from those
# stages' reference sources, so that grading this stage's exercises does not compare
# them with your stage 02 and 01 (which build-ex's ddp_train and memcalc are).
S03_REFS := $(BUILD)/tests/ddp_train_ref $(BUILD)/tests/memcalc_ref
S03_BINS := $(BUILD)/sharded_train $(BUILD)/tests/test_sharded $(S03_REFS)
BINS += $(S03_BINS)

$(BUILD)/$(S03)/%.o: CFLAGS += -I$(S02) -I$(S03)
$(BUILD)/tests/test_sharded.o: CFLAGS += -I$(S02) -I$(S03)
# The generic rule knows common/*.h only: the stage's objects read its headers too.
$(filter $(BUILD)/$(S03)/%,$(S03_OBJS)) $(BUILD)/$(S03)/sharded_train.o \
  $(BUILD)/tests/test_sharded.o: $(wildcard $(S03)/*.h) $(wildcard $(S02)/*.h)

$(BUILD)/sharded_train: $(BUILD)/$(S03)/sharded_train.o $(S03_OBJS) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/tests/test_sharded: $(BUILD)/tests/test_sharded.o $(S03_OBJS) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(addprefix $(BUILD)/$(S02)/,ddp.o ring.o collectives.o ddp_train.o): $(wildcard $(S02)/*.h)
$(BUILD)/tests/ddp_train_ref: $(BUILD)/$(S02)/ddp_train.o $(BUILD)/$(S02)/collectives.o \
  $(BUILD)/$(S02)/ring.o $(BUILD)/$(S02)/ddp.o $(BUILD)/$(S02)/baseline_mpi.o \
  $(BUILD)/06_mixed_precision/grad_comm.o $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/tests/memcalc_ref: $(BUILD)/01_memory_wall/memcalc.o $(BUILD)/01_memory_wall/memory_model.o \
  $(BUILD)/01_memory_wall/memory_plan.o $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: stage-3
stage-3: all
	@BUILD=$(BUILD) bash tests/run.sh stage03
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S03)/run_stage.sh
