# 02_ddp_allreduce/stage.mk — the collectives, DDP, their tests and benchmark.
S02 := 02_ddp_allreduce
# ring.c and ddp.c are the exercises: with EX=1 their exercises/ versions are used.
S02_OBJS := $(call stage_obj,$(S02)/collectives.c $(S02)/ring.c $(S02)/ddp.c) \
            $(BUILD)/$(S02)/baseline_mpi.o
S02_BINS := $(BUILD)/ddp_train $(BUILD)/bench_collectives $(BUILD)/tests/test_collectives \
            $(BUILD)/tests/test_ddp $(BUILD)/tests/test_gpu_comm
BINS += $(S02_BINS)

# The MPI baseline is compiled with mpicc's flags when mpicc exists.
$(BUILD)/$(S02)/baseline_mpi.o: $(S02)/baseline_mpi.c $(S02)/*.h common/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(S02) $(if $(MPICC),$(MPI_CFLAGS) -DHAVE_MPI) -c $< -o $@

$(BUILD)/$(S02)/%.o: CFLAGS += -I$(S02)
$(BUILD)/tests/test_collectives.o: CFLAGS += -I$(S02)
$(BUILD)/tests/test_ddp.o: CFLAGS += -I$(S02)
$(BUILD)/tests/test_gpu_comm.o: CFLAGS += -I$(S02)
$(BUILD)/$(S02)/bench_collectives.o: CFLAGS += -I$(S02)

$(BUILD)/ddp_train: $(BUILD)/$(S02)/ddp_train.o $(S02_OBJS) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/bench_collectives: $(BUILD)/$(S02)/bench_collectives.o $(S02_OBJS) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/tests/test_collectives: $(BUILD)/tests/test_collectives.o $(S02_OBJS) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(BUILD)/tests/test_ddp: $(BUILD)/tests/test_ddp.o $(S02_OBJS) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
# The GPU collectives (common/comm_cuda.cu, in the core) against a serial sum and
# against the host ring; exits 77 (skipped) without a CUDA device.
$(BUILD)/tests/test_gpu_comm: $(BUILD)/tests/test_gpu_comm.o $(S02_OBJS) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

.PHONY: stage-2
stage-2: all
	@BUILD=$(BUILD) bash tests/run.sh stage02
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S02)/run_stage.sh
