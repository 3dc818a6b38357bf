# 05_pipeline/stage.mk — pipeline schedules as data, the checker, the engine; tests
# and benchmark.
#
#   make stage-5     tests, the demo, the bubble and memory benchmark, the simulator and
#                    the Gantt charts into $(RESULTS)/05_pipeline/
#   make grade-5     the same tests against 05_pipeline/exercises/ (PART=name)
S05 := 05_pipeline
# sched_1f1b.c, sched_interleaved.c and engine_step.c are the exercises (make grade-5,
# EX=5, swaps them). The collectives and DDP come from stage 02, tensor parallelism
# from stage 04 (their references when grading: this stage grades this stage's code).
S05_OBJS := $(call stage_obj,$(S05)/sched_1f1b.c $(S05)/sched_interleaved.c $(S05)/engine_step.c) \
            $(patsubst %,$(BUILD)/$(S05)/%.o,schedule sched_zb checker engine pipe_model) \
            $(patsubst %,$(BUILD)/$(S04)/%.o,linear vocab_ce conjugate vocab_embed tp_model) \
            $(BUILD)/$(S02)/collectives.o $(BUILD)/$(S02)/ring.o $(BUILD)/$(S02)/alltoall.o $(BUILD)/$(S02)/ddp.o \
            $(BUILD)/$(S02)/baseline_mpi.o
# build/pp_sim: the same generators and checker, run against a clock (no model), and
# of the core only the flag table and the log: linked without OpenBLAS and CUDA, it
# starts in a millisecond (the CUDA libraries alone take ~75 ms to load, per start).
S05_SIM_OBJS := $(call stage_obj,$(S05)/sched_1f1b.c $(S05)/sched_interleaved.c) \
                $(patsubst %,$(BUILD)/$(S05)/%.o,schedule sched_zb checker) \
                $(patsubst %,$(BUILD)/common/%.o,flags log ledger)
S05_BINS := $(BUILD)/pp_train $(BUILD)/tests/test_pp $(BUILD)/pp_sim
BINS += $(S05_BINS)
DRIVERS += $(BUILD)/pp_train

$(BUILD)/$(S05)/%.o: CFLAGS += -I$(S02) -I$(S04) -I$(S05)
$(BUILD)/tests/test_pp.o: CFLAGS += -I$(S02) -I$(S04) -I$(S05)
$(filter $(BUILD)/$(S05)/%,$(S05_OBJS)) $(BUILD)/$(S05)/pp_train.o $(BUILD)/$(S05)/pp_sim.o \
  $(BUILD)/tests/test_pp.o: $(wildcard $(S05)/*.h) \
  $(wildcard $(S04)/*.h) $(wildcard $(S02)/*.h)

$(BUILD)/pp_train: $(BUILD)/$(S05)/pp_train.o $(S05_OBJS) $(CORE_OBJS)
	$(LINK)
$(BUILD)/tests/test_pp: $(BUILD)/tests/test_pp.o $(S05_OBJS) $(CORE_OBJS)
	$(LINK)
$(BUILD)/pp_sim: $(BUILD)/$(S05)/pp_sim.o $(S05_SIM_OBJS)
	$(CC) $(CFLAGS) $(filter %.o,$^) -o $@ -lm

.PHONY: stage-run-5
stage-run-5:
	@BUILD=$(BUILD) bash tests/run.sh stage05
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash $(S05)/run_stage.sh
