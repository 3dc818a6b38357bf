# 04_tensor_parallel/stage.mk — Megatron tensor and sequence parallelism over a
# dp x tp mesh; its tests and benchmark.
#
#   make stage-4     tests, the demo, the sweep and plots into $(RESULTS)/04_tensor_parallel/
#   make grade-4     the same tests against 04_tensor_parallel/exercises/ (PART=name)
S04 := 04_tensor_parallel
# linear.c and vocab_ce.c are the exercises (make grade-4, EX=4, swaps them). The
# collectives and DDP come from stage 02, the calculator from stage 01 (their
# references when grading: this stage grades this stage's code).
S04_TP := $(call stage_obj,$(S04)/linear.c $(S04)/vocab_ce.c) \
          $(patsubst %,$(BUILD)/$(S04)/%.o,conjugate vocab_embed tp_model)
S04_OBJS := $(S04_TP) $(BUILD)/$(S02)/collectives.o $(BUILD)/$(S02)/ring.o $(BUILD)/$(S02)/alltoall.o $(BUILD)/$(S02)/ddp.o \
            $(BUILD)/$(S02)/baseline_mpi.o
S04_CALC := $(BUILD)/01_memory_wall/memory_model.o $(BUILD)/01_memory_wall/memory_plan.o
# Context parallelism (cp.h): softmax_merge.c, zigzag.c and ring_attention.c are exercises too.
S04_CP := $(call stage_obj,$(S04)/softmax_merge.c $(S04)/zigzag.c $(S04)/ring_attention.c) \
          $(patsubst %,$(BUILD)/$(S04)/%.o,cp_attention ring_steps ulysses)
S04_BINS := $(BUILD)/tp_train $(BUILD)/cp_train $(BUILD)/bench_cp $(BUILD)/tests/test_tp \
            $(BUILD)/tests/test_cp $(BUILD)/tests/test_ep
BINS += $(S04_BINS)
DRIVERS += $(BUILD)/tp_train $(BUILD)/cp_train

$(BUILD)/$(S04)/%.o: CFLAGS += -I$(S02) -I$(S04)
$(BUILD)/tests/test_tp.o: CFLAGS += -I$(S02) -I$(S04) -I01_memory_wall
$(BUILD)/tests/test_cp.o $(BUILD)/tests/test_ep.o: CFLAGS += -I$(S02) -I$(S04)
$(filter $(BUILD)/$(S04)/%,$(S04_OBJS)) $(S04_CP) $(BUILD)/$(S04)/tp_train.o \
  $(BUILD)/$(S04)/cp_train.o $(BUILD)/$(S04)/cp_model.o $(BUILD)/$(S04)/bench_cp.o \
  $(BUILD)/tests/test_tp.o $(BUILD)/tests/test_cp.o $(BUILD)/$(S04)/expert_parallel.o \
  $(BUILD)/tests/test_ep.o: $(wildcard $(S04)/*.h) $(wildcard $(S02)/*.h)

$(BUILD)/tp_train: $(BUILD)/$(S04)/tp_train.o $(S04_OBJS) $(CORE_OBJS)
	$(LINK)
$(BUILD)/tests/test_tp.o: tests/opaque_device.h
S04_CP_LINK := $(S04_CP) $(BUILD)/$(S02)/collectives.o $(BUILD)/$(S02)/ring.o \
  $(BUILD)/$(S02)/alltoall.o $(BUILD)/$(S02)/baseline_mpi.o $(CORE_OBJS)
$(BUILD)/tests/test_cp: $(BUILD)/tests/test_cp.o $(S04_CP_LINK)
	$(LINK)
# Expert parallelism (ep.h): the core's mixture-of-experts layer, its experts over ranks.
$(BUILD)/tests/test_ep: $(BUILD)/tests/test_ep.o $(BUILD)/$(S04)/expert_parallel.o \
  $(BUILD)/$(S02)/collectives.o $(BUILD)/$(S02)/ring.o $(BUILD)/$(S02)/alltoall.o \
  $(BUILD)/$(S02)/baseline_mpi.o $(CORE_OBJS)
	$(LINK)
$(BUILD)/bench_cp: $(BUILD)/$(S04)/bench_cp.o $(S04_CP_LINK)
	$(LINK)
$(BUILD)/cp_train: $(BUILD)/$(S04)/cp_train.o $(BUILD)/$(S04)/cp_model.o $(BUILD)/$(S02)/ddp.o \
  $(S04_TP) $(S04_CP_LINK)
	$(LINK)
$(BUILD)/tests/test_tp: $(BUILD)/tests/test_tp.o $(BUILD)/tests/opaque_device.o $(S04_OBJS) \
  $(S04_CALC) $(CORE_OBJS)
	$(LINK)

.PHONY: stage-run-4
stage-run-4:
	@BUILD=$(BUILD) bash tests/run.sh stage04
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S04)/run_stage.sh
