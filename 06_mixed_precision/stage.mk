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
S06_BINS := $(BUILD)/tests/test_recompute $(BUILD)/tests/test_mixed $(BUILD)/mp_comm_error
BINS += $(S06_BINS)

# Stage 02's driver sends gradients as bf16 with this stage's grad_comm.c.
S06_COMM := $(BUILD)/$(S06)/grad_comm.o
$(S06_COMM) $(BUILD)/$(S06)/comm_error.o: CFLAGS += -I02_ddp_allreduce
$(S06_COMM) $(BUILD)/$(S06)/comm_error.o: $(wildcard 02_ddp_allreduce/*.h) $(S06)/grad_comm.h
$(BUILD)/02_ddp_allreduce/ddp_train.o: $(S06)/grad_comm.h
$(BUILD)/ddp_train: $(S06_COMM)

# build/mp_comm_error: stage 02's reference ring in fp32 and bf16.
$(BUILD)/mp_comm_error: $(BUILD)/$(S06)/comm_error.o $(BUILD)/02_ddp_allreduce/collectives.o \
  $(BUILD)/02_ddp_allreduce/ring.o $(BUILD)/02_ddp_allreduce/baseline_mpi.o $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_recompute.o: 01_memory_wall/memory_model.h
$(BUILD)/tests/test_recompute: $(BUILD)/tests/test_recompute.o $(S06_CALC) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: stage-6
stage-6: all
	@BUILD=$(BUILD) bash tests/run.sh stage06
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S06)/run_stage.sh
