# 07_fault_tolerance/stage.mk — checkpoints, restarts and faults: the stage's tools
# and tests.
#
#   make stage-7     the stage's tests, then the benchmark into $(RESULTS)/07_fault_tolerance/
#   make grade-7     the same tests against 07_fault_tolerance/exercises/ (PART=name):
#                    publish.c, resume.c and young_daly.c
#
# The stage plugs into every driver as a training extension (fault_tolerance_ext.c,
# common/train_ext.h): checkpoints, the supervisor's restarts, injected faults,
# replica checks, loss spikes, stragglers. A build of the stages before it has none.
S07 := 07_fault_tolerance
# The checkpoints: publish.c and resume.c are the exercises (make grade-7, EX=7,
# swaps them). They save stage 06's state too (the loss scaler, fp8's histories).
S07_CKPT := $(patsubst %,$(BUILD)/$(S07)/%.o,checkpoint ckpt_load ckpt_save sdc straggler \
              ckpt_layout manifest faults) $(call stage_obj,$(S07)/publish.c $(S07)/resume.c)
EXT_OBJS += $(BUILD)/$(S07)/fault_tolerance_ext.o $(S07_CKPT)
# The checkpoint-interval calculator: the formulas (young_daly.c, an exercise) and
# the failure simulation (goodput.c).
S07_INTERVAL := $(call stage_obj,$(S07)/young_daly.c) $(BUILD)/$(S07)/goodput.o
S07_BINS := $(BUILD)/ckpt_interval $(BUILD)/tests/test_interval $(BUILD)/tests/test_publish \
            $(BUILD)/tests/test_ckpt_fuzz $(BUILD)/tests/test_straggler $(BUILD)/tests/test_extensions
BINS += $(S07_BINS)

S07_TEST_OBJS := $(patsubst %,$(BUILD)/tests/%.o,test_publish power_loss_disk test_ckpt_fuzz \
                   mutate test_straggler test_extensions)
$(BUILD)/$(S07)/%.o: CFLAGS += -I$(S06) -I$(S07)
$(S07_TEST_OBJS): CFLAGS += -I$(S06) -I$(S07)
$(S07_TEST_OBJS) $(filter $(BUILD)/$(S07)/%,$(EXT_OBJS)): $(S07)/checkpoint.h $(S06)/precision.h \
  $(S06)/precision_ext.h
$(S07_INTERVAL) $(BUILD)/$(S07)/interval.o $(BUILD)/tests/test_interval.o: $(S07)/young_daly.h
$(BUILD)/tests/test_interval.o: CFLAGS += -I$(S07)

$(BUILD)/ckpt_interval: $(BUILD)/$(S07)/interval.o $(S07_INTERVAL) $(CORE_OBJS)
	$(LINK)
$(BUILD)/tests/test_interval: $(BUILD)/tests/test_interval.o $(S07_INTERVAL) $(CORE_OBJS)
	$(LINK)
# test_publish runs on a simulated disk (tests/power_loss_disk.c); test_ckpt_fuzz
# damages its files with tests/mutate.c.
$(BUILD)/tests/test_publish.o $(BUILD)/tests/power_loss_disk.o: tests/power_loss_disk.h
$(BUILD)/tests/test_ckpt_fuzz.o $(BUILD)/tests/mutate.o: tests/mutate.h
$(BUILD)/tests/test_publish: $(BUILD)/tests/power_loss_disk.o $(S07_CKPT) $(S06_PRIMS)
$(BUILD)/tests/test_ckpt_fuzz: $(BUILD)/tests/mutate.o $(S07_CKPT) $(S06_PRIMS)
$(BUILD)/tests/test_straggler: $(S07_CKPT) $(S06_PRIMS)
# test_extensions: every extension of the course linked in, against the catalogue.
$(BUILD)/tests/test_extensions: $(EXT_OBJS)

.PHONY: stage-run-7
stage-run-7:
	@BUILD=$(BUILD) bash tests/run.sh stage07
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S07)/run_stage.sh
