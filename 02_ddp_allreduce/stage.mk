# 02_ddp_allreduce/stage.mk — the collectives, DDP, their tests and benchmark.
#
#   make stage-2     tests, the DDP demo, the collectives' sweep and plots
#   make grade-2     the same tests against 02_ddp_allreduce/exercises/ (PART=name)
S02 := 02_ddp_allreduce
# ring.c, alltoall.c and ddp.c are the exercises (make grade-2, EX=2, swaps them).
S02_OBJS := $(call stage_obj,$(S02)/collectives.c $(S02)/ring.c $(S02)/alltoall.c $(S02)/ddp.c) \
            $(BUILD)/$(S02)/ddp_bf16.o $(BUILD)/$(S02)/baseline_mpi.o
S02_BINS := $(BUILD)/ddp_train $(BUILD)/bench_collectives $(BUILD)/tests/test_collectives \
            $(BUILD)/tests/test_ddp $(BUILD)/tests/test_gpu_comm
BINS += $(S02_BINS)
DRIVERS += $(BUILD)/ddp_train

# The MPI baseline is compiled with mpicc's flags when mpicc exists.
$(BUILD)/$(S02)/baseline_mpi.o: $(S02)/baseline_mpi.c $(S02)/*.h common/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(S02) $(if $(MPICC),$(MPI_CFLAGS) -DHAVE_MPI) -c $< -o $@

$(BUILD)/$(S02)/%.o: CFLAGS += -I$(S02)
$(BUILD)/tests/test_collectives.o: CFLAGS += -I$(S02)
$(BUILD)/tests/test_ddp.o $(BUILD)/tests/gpu_comm_host.o: CFLAGS += -I$(S02)
$(BUILD)/tests/test_gpu_comm.o: CFLAGS += -I$(S02)
$(addprefix $(BUILD)/$(S02)/,ddp.o ddp_bf16.o ring.o alltoall.o collectives.o ddp_train.o bench_collectives.o) \
  $(BUILD)/tests/test_collectives.o $(BUILD)/tests/test_ddp.o: $(wildcard $(S02)/*.h)

$(BUILD)/ddp_train: $(BUILD)/$(S02)/ddp_train.o $(S02_OBJS) $(CORE_OBJS)
	$(LINK)
$(BUILD)/bench_collectives: $(BUILD)/$(S02)/bench_collectives.o $(S02_OBJS) $(CORE_OBJS)
	$(LINK)
$(BUILD)/tests/test_collectives: $(BUILD)/tests/test_collectives.o $(S02_OBJS) $(CORE_OBJS)
	$(LINK)
$(BUILD)/tests/test_ddp.o: tests/gpu_comm_host.h
$(BUILD)/tests/test_ddp: $(BUILD)/tests/test_ddp.o $(BUILD)/tests/gpu_comm_host.o $(S02_OBJS) $(CORE_OBJS)
	$(LINK)
# The GPU collectives (common/comm_cuda.cu, in the core) against a serial sum and
# against the host ring; exits 77 (skipped) without a CUDA device.
$(BUILD)/tests/test_gpu_comm: $(BUILD)/tests/test_gpu_comm.o $(S02_OBJS) $(CORE_OBJS)
	$(LINK)

.PHONY: stage-run-2
stage-run-2:
	@BUILD=$(BUILD) bash tests/run.sh stage02
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S02)/run_stage.sh
