# The course's build. `make` builds the CPU code; the CUDA backend (cuBLAS,
# NCCL) is built whenever nvcc is found, MPI parts whenever mpicc is found.
#
#   make                 build everything this machine can build
#   make help            this list
#   make test            the whole test suite; ends with "N passed, N failed"
#   make check           make test, make sanitize, then make grade-check (what CI runs)
#   make demo            train the small preset on the CPU
#   make sanitize        the suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make gpu-test        the CUDA-vs-CPU tests (needs a GPU; says so if there is none)
#   make bench-core      our tokens/s against PyTorch's, and against the sgemm ceiling
#   make stage-N         a stage on the reference: tests, demo, benchmark, plots
#   make grade-N         the stage's tests against your exercises/ (PART=name for one part)
#   make hint-N PART=x   a hint for part x of stage N's exercises (TIER=2, 3: more of it)
#   make report          every stage's numbers against its targets: $(RESULTS)/REPORT.md
#   make grade-check     proves the graders: references full marks, starters 0, mutants caught
#
# Where measurements go: RESULTS=runs (the default, untracked) for your runs;
# results/ holds the course's own measured run, which the lessons quote. Only a
# maintainer rewrites it: make stage-N RESULTS=results (scripts/plot.sh DIR redraws
# a folder's figures from its data without measuring again).

CC        ?= gcc
BUILD     ?= build
RESULTS   ?= runs
OPT       ?= -O3 -march=native
CFLAGS    ?= $(OPT) -g
# -fno-math-errno lets sqrtf vectorize; -fopenmp-simd enables `omp simd` reductions
# (vector lanes only, no threads, fixed order).
CFLAGS    += -std=c11 -D_GNU_SOURCE -Wall -Wextra -fno-math-errno -fopenmp-simd -Icommon
LDLIBS    += -lopenblas -lm -lpthread

CUDA_HOME ?= /usr/local/cuda
NCCL_HOME ?= $(CUDA_HOME)
NVCC      ?= $(firstword $(wildcard $(CUDA_HOME)/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
MPICC     ?= $(shell command -v mpicc 2>/dev/null)
NVCC_OPT  ?= -O3 -lineinfo
NVCCFLAGS ?= $(NVCC_OPT) -std=c++17 -arch=sm_90
NVCCFLAGS += -Icommon -I$(NCCL_HOME)/include -Xcompiler -Wall,-Wextra

# The stages, in order. A stage's folder holds its stage.mk (its programs and tests),
# and links only the core (common/) and the stages before it; later stages plug into
# the training loop as extensions (common/train_ext.h) where they are linked in.
# UPTO=N builds the stages up to N and links them alone: `make stage-N` and `make
# grade-N` set it (a stage-3 build has no file of stages 04-07 in it); `make` builds
# them all, every driver with every extension. A program built without a stage
# refuses that stage's flags, naming it.
STAGES    := $(sort $(wildcard [0-9][0-9]_*))
GOAL_STAGE := $(shell printf '%s\n' $(MAKECMDGOALS) | sed -n 's/^[sg][tr]a[gd]e-\([0-9][0-9]*\)$$/\1/p' | tail -n 1)
UPTO      ?= $(or $(GOAL_STAGE),$(words $(STAGES)))
IN_BUILD  := $(wordlist 1,$(UPTO),$(STAGES))
FULL      := $(filter $(words $(STAGES)),$(words $(IN_BUILD)))

# Exercises. `EX=N` builds stage N against its exercise files: a source D/x.c of
# stage N is replaced by D/exercises/x.c where that file exists (the stages before
# N stay the reference's). `make grade-N` does this in its own build folder
# (build-ex), with UPTO=N, and scores the stage's tests per part.
# EX_FILES="a.c b.c" swaps only those of stage N's files (make grade-N grades each
# part on a build with its own files alone: scripts/grade.sh).
EX ?=
EX_FILES ?=
EX_DIR := $(if $(EX),$(filter $(shell printf '%02d' $(EX) 2>/dev/null)_%,$(STAGES)))
ex_file = $(and $(filter $(EX_DIR)/,$(dir $1)),$(or $(if $(EX_FILES),,all),$(filter $(notdir $1),$(EX_FILES))),$(wildcard $(dir $1)exercises/$(notdir $1)))
stage_src = $(foreach f,$1,$(if $(call ex_file,$f),$(dir $f)exercises/$(notdir $f),$f))
stage_obj = $(patsubst %.c,$(BUILD)/%.o,$(call stage_src,$1))

# The core: common/ alone. Its objects name no stage (tests/test_layering.sh checks
# them with nm).
CORE := log dtype rng ledger flags files json safetensors safetensors_json safetensors_write ctx ops_timed \
        ops_cpu ops_cpu_precision ops_cpu_flash model_layout model_acts model_backward model optim data perf \
        comm launch launch_nodes comm_shm comm_tcp comm_hybrid train_state train_ext train_args train_job trainer timeline \
        moe
CORE_OBJS := $(CORE:%=$(BUILD)/common/%.o)
# The training extensions linked into every driver: each stage in the build that
# has one adds its objects here (06_mixed_precision/stage.mk, 07_fault_tolerance/
# stage.mk), and DRIVERS lists the programs that train (they link them: below).
EXT_OBJS :=
DRIVERS  :=

# MPI: the transport and the mpirun launcher are compiled with mpicc's flags and
# linked with its libraries; without mpicc, comm_mpi_absent.c says so at run time.
ifneq ($(MPICC),)
  CORE_OBJS += $(BUILD)/common/comm_mpi.o
  MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
  LDLIBS     += $(shell $(MPICC) --showme:link 2>/dev/null)
else
  CORE_OBJS += $(BUILD)/common/comm_mpi_absent.o
endif

# CUDA: the backend, the GPU collectives (comm_cuda*.cu), the probe's query and
# the GPU clock are nvcc's, built as one shared library, $(BUILD)/libcourse_cuda.so,
# which the programs load only when a run asks for the GPU (common/cuda_plugin.c:
# a CPU run does not pay for mapping cuBLAS and NCCL). Without nvcc there is no
# library and cuda_plugin.c answers "this build has no CUDA". The probe's meaning
# (cuda_probe.c: skip or fail, which GPU a rank takes) is C, in every build.
CUDA_SRCS := ops_cuda ops_cuda_layers ops_cuda_attention ops_cuda_flash ops_cuda_split ops_cuda_precision ops_cuda_fp8 comm_cuda \
             comm_cuda_nccl comm_cuda_ipc cuda_query comm_cuda_p2p comm_cuda_p2p_nccl gpu_clock
CUDA_OBJS := $(CUDA_SRCS:%=$(BUILD)/common/%.o)
CORE_OBJS += $(BUILD)/common/cuda_probe.o $(BUILD)/common/cuda_plugin.o
# -rdynamic: the library calls the core (CHECK, the ledger, the host comm) in the
# program that loaded it.
LDLIBS    += -rdynamic -ldl
ifneq ($(NVCC),)
  CUDA_LIB  := $(BUILD)/libcourse_cuda.so
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -L$(NCCL_HOME)/lib -Wl,-rpath,$(CUDA_HOME)/lib64 \
               -Wl,-rpath,$(NCCL_HOME)/lib -lcublasLt -lcublas -lcudart -lnccl -lstdc++
  NVCCFLAGS += -Xcompiler -fPIC
  CFLAGS    += -I$(CUDA_HOME)/include
  $(BUILD)/common/cuda_plugin.o: CFLAGS += -DCOURSE_CUDA_BUILT
  HAVE_CUDA := yes
else
  HAVE_CUDA := no
endif

# The core's programs: the single-process baseline, the GEMM ceiling, and the tests
# of the core alone (stage folders add theirs: NN_*/stage.mk).
TESTS := test_dtype test_rng test_ledger test_flags test_safetensors test_ops test_flash test_model test_moe \
         gpt_dump test_comm compare_params test_json
BINS  := $(BUILD)/train $(BUILD)/sgemm_bench $(TESTS:%=$(BUILD)/tests/%)
DRIVERS += $(BUILD)/train

# `make` with no target builds everything (stage.mk files below define targets too).
.DEFAULT_GOAL := all

# Each stage folder in the build adds its programs to BINS (see NN_*/stage.mk).
include $(IN_BUILD:%=%/stage.mk)

# Keep the object files of the test programs between builds.
.SECONDARY:

.PHONY: all help programs test check sanitize gpu-test bench-core demo clean report-build grade-check \
        report FORCE
all: report-build $(BINS) $(CUDA_LIB)

help:
	@awk '/^#   make/ {sub(/^#   /, ""); print}' Makefile

# The programs this build makes (with UPTO=N: the stages up to N's), for the scripts.
programs:
	@echo $(BINS)

report-build:
	@echo "build: CPU core -> $(BUILD)/ ; stages: $(if $(FULL),all,up to $(lastword $(IN_BUILD)))\
	$(if $(EX_DIR),; $(EX_DIR) from its exercises/$(if $(EX_FILES), ($(EX_FILES)))); CUDA: $(if $(NVCC),$(NVCC),not found (CUDA backend\
	 skipped)); MPI: $(if $(MPICC),$(MPICC),not found (MPI transport skipped))"

# Which stages and exercises the programs in $(BUILD) were linked with: a program is
# linked again when that changes (make stage-3 after make), not only when an object
# did. The stages in the build change only what the drivers link (the extensions);
# the exercises swapped in (which files of exercises/ exist: a starter removed puts
# the reference's file back), any program.
$(BUILD)/.stages $(BUILD)/.exercises: FORCE
	@mkdir -p $(dir $@)
	@want="$(if $(filter %.stages,$@),upto=$(UPTO),ex=$(EX_DIR) $(EX_FILES):$(notdir \
	  $(if $(EX_DIR),$(wildcard $(EX_DIR)/exercises/*.c))))"; \
	  [ "$$(cat $@ 2>/dev/null)" = "$$want" ] || echo "$$want" >$@
$(BINS): $(BUILD)/.exercises
$(DRIVERS): $(BUILD)/.stages
# Every program that trains links the extensions of the stages in the build.
$(DRIVERS): $(EXT_OBJS)
# A program: its objects (the prerequisites that are .o files).
LINK = $(CC) $(CFLAGS) $(filter %.o,$^) -o $@ $(LDLIBS)

# One rule for every C object: common/, the stage folders, their exercises/. A stage's
# objects read its headers and earlier stages' (its stage.mk says which).
$(BUILD)/%.o: %.c common/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/common/comm_mpi.o: common/comm_mpi.c common/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(CUDA_OBJS): $(BUILD)/common/%.o: common/%.cu common/*.h common/*.cuh
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# -Bsymbolic: the library's calls to its own functions stay inside it (the programs
# define the same names in cuda_plugin.c, which forward here).
$(CUDA_LIB): $(CUDA_OBJS)
	$(CC) -shared -Wl,-Bsymbolic $^ -o $@ $(CUDA_LIBS)

$(BUILD)/train: $(BUILD)/common/train.o $(CORE_OBJS)
	$(LINK)

$(BUILD)/sgemm_bench: $(BUILD)/common/sgemm_bench.o $(CORE_OBJS)
	$(LINK)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(CORE_OBJS)
	$(LINK)

# test_json: its fuzzer and the helpers both parts share.
$(BUILD)/tests/test_json.o $(BUILD)/tests/json_check.o $(BUILD)/tests/json_fuzz.o: tests/json_check.h
$(BUILD)/tests/test_json: $(BUILD)/tests/json_check.o $(BUILD)/tests/json_fuzz.o

# Each stage's suite on the programs linked as make stage-N links them (tests/run.sh,
# STAGE_MAKE); the programs are left linked with every stage.
# Its builds (and the relinks between suites) run one job per core unless make was
# given -j: on CI's 2 cores a serial build of everything takes about twice as long.
JFLAG = $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS))
test:
	@$(MAKE) --no-print-directory $(JFLAG) all
	@STAGE_MAKE="$(MAKE) $(JFLAG)" BUILD=$(BUILD) SUITE_LOG_DIR=$(BUILD)/suite-logs bash tests/run.sh

# What CI runs: the suite, the suite under the sanitizers, and the graders.
check: test
	@$(MAKE) --no-print-directory sanitize
	@$(MAKE) --no-print-directory grade-check

# make stage-N: the stages up to N alone (UPTO=N, above), then stage N's tests,
# demo, sweeps and plots (its stage.mk's stage-run-N).
stage-%:
	@$(MAKE) --no-print-directory UPTO=$* all
	@$(MAKE) --no-print-directory UPTO=$* stage-run-$*

# make grade-N [PART=name]: the stage's tests against your exercises/, a score per
# part; fails (non-zero status) unless the score is full. Built in build-ex/ from
# the stages before N (the reference's), stage N from your exercises/, and no later
# stage: a part is charged for its own file alone.
# The exercise build runs in parallel (JOBS, one per core) unless make was given -j.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
grade-%:
	@out=$$(bash scripts/grade.sh --list $* "$(PART)" 2>&1) || { echo "$$out" >&2; exit 2; }  # before building
	@[ -d build-ex ] || [ ! -d build ] || cp -a build build-ex  # the reference's objects, once
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) UPTO=$* EX=$* BUILD=build-ex all
	@GRADE_ISOLATE=1 BUILD=build-ex bash scripts/grade.sh $* $(PART)

# make hint-N PART=x [TIER=k]: tier k (1 by default: a nudge; 2 the steps in words; 3
# near-solution pseudo-code) of NN_*/exercises/hints/x.md. The starters state each
# part's contract; the steps are here, for when you are stuck (scripts/hint.sh).
hint-%:
	@bash scripts/hint.sh $* "$(PART)" "$(TIER)"

# The graders are tested too: for each stage, in the learner's own state (the stages
# before it the reference's, later ones left out), the reference scores full marks,
# the pristine starters 0, and every mutant in tests/mutants/ (a typical mistake)
# loses its part's marks (scripts/grade_check.sh builds what it needs).
grade-check:
	@$(MAKE) --no-print-directory $(JFLAG) all
	@JOBS=$(JOBS) bash scripts/grade_check.sh

# The core's demo: the small preset learns the synthetic language on the CPU.
demo: all
	$(BUILD)/train --preset small --steps 200 --lr 1e-3 --log-every 10

# The same suite, instrumented. Its own build folder, so the optimized build stays.
sanitize:
	@$(MAKE) --no-print-directory BUILD=build-san \
	  OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
	  NVCC_OPT="-O1" test

gpu-test: all
	@BUILD=$(BUILD) SUITE_LOG_DIR=$(BUILD)/suite-logs bash tests/run.sh gpu

bench-core: all
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash scripts/bench_core.sh

# Every stage's headline numbers against its targets, then its tables and figures,
# in $(RESULTS)/REPORT.md: your runs where you made them, else the committed ones.
report:
	@RESULTS=$(RESULTS) bash scripts/report.sh

clean:
	rm -rf build build-san build-ex build-ref build-mut $(BUILD)

FORCE:
