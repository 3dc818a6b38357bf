# 06_mixed_precision/stage.mk — mixed precision and activation recompute: tests,
# benchmark and plots.
#
#   make stage-6     tests, then the benchmark into $(RESULTS)/06_mixed_precision/
#   make grade-6     the same tests against 06_mixed_precision/exercises/ (PART=name)
#
# The stage plugs into every driver (train, ddp_train, sharded_train, tp_train,
# pp_train) as a training extension (precision_ext.c, common/train_ext.h): the drivers
# of a build with this stage link EXT_OBJS, a build of the stages before it does not.
S06 := 06_mixed_precision
# The stage's primitives: recompute.c, sround.c and loss_scale.c are the exercises
# (make grade-6, EX=6, swaps them); fp8.c's delayed scaling and fp8_linear.c's layers
# are the fp8 recipe's; plugins.c hands them all to the model (model.h's GPTPlugins).
S06_PRIMS := $(call stage_obj,$(S06)/recompute.c $(S06)/sround.c $(S06)/loss_scale.c) \
             $(patsubst %,$(BUILD)/$(S06)/%.o,fp8 fp8_linear plugins)
EXT_OBJS += $(BUILD)/$(S06)/precision_ext.o $(S06_PRIMS)
# The stage-01 calculator (test_recompute compares recompute's memory with it).
S06_CALC := $(BUILD)/01_memory_wall/memory_model.o $(BUILD)/01_memory_wall/memory_plan.o
S06_BINS := $(BUILD)/tests/test_recompute $(BUILD)/tests/test_mixed $(BUILD)/tests/test_precision \
            $(BUILD)/tests/test_fp8 $(BUILD)/tests/test_gpu $(BUILD)/mp_comm_error
BINS += $(S06_BINS)

S06_TEST_OBJS := $(patsubst %,$(BUILD)/tests/%.o,test_recompute test_mixed test_precision test_fp8 \
                   test_gpu test_gpu_ops test_gpu_bf16 test_gpu_fp8)
$(BUILD)/$(S06)/%.o: CFLAGS += -I$(S06)
$(S06_TEST_OBJS): CFLAGS += -I$(S06)
$(S06_TEST_OBJS) $(filter $(BUILD)/$(S06)/%,$(EXT_OBJS)): $(S06)/precision.h $(S06)/precision_ext.h
$(BUILD)/$(S06)/comm_error.o: CFLAGS += -I02_ddp_allreduce
$(BUILD)/$(S06)/comm_error.o: $(wildcard 02_ddp_allreduce/*.h)

# build/mp_comm_error: stage 02's reference ring in fp32 and bf16.
$(BUILD)/mp_comm_error: $(BUILD)/$(S06)/comm_error.o $(BUILD)/02_ddp_allreduce/collectives.o \
  $(BUILD)/02_ddp_allreduce/ring.o $(BUILD)/02_ddp_allreduce/alltoall.o $(BUILD)/02_ddp_allreduce/baseline_mpi.o $(CORE_OBJS)
	$(LINK)

$(BUILD)/tests/test_recompute.o: 01_memory_wall/memory_model.h
$(BUILD)/tests/test_recompute: $(BUILD)/tests/test_recompute.o $(S06_PRIMS) $(S06_CALC) $(CORE_OBJS)
	$(LINK)
$(BUILD)/tests/test_mixed $(BUILD)/tests/test_precision $(BUILD)/tests/test_fp8: $(S06_PRIMS)

# test_gpu: the CUDA backend against the CPU's, op by op (stochastic rounding by this
# stage's rule, which the GPU twins): four objects: main, the helpers, memory and
# model (test_gpu.c), the op-by-op checks (test_gpu_ops.c), the bf16 GEMMs'
# (test_gpu_bf16.c) and the fp8 GEMMs' (test_gpu_fp8.c). Exits 77 without a GPU.
TEST_GPU_OBJS := $(BUILD)/tests/test_gpu.o $(BUILD)/tests/test_gpu_ops.o \
                 $(BUILD)/tests/test_gpu_bf16.o $(BUILD)/tests/test_gpu_fp8.o
$(TEST_GPU_OBJS): tests/test_gpu.h
$(BUILD)/tests/test_gpu: $(TEST_GPU_OBJS) $(S06_PRIMS) $(CORE_OBJS)
	$(LINK)

.PHONY: stage-run-6
stage-run-6:
	@BUILD=$(BUILD) bash tests/run.sh stage06
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S06)/run_stage.sh
