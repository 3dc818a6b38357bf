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

# Exercises. `EX=1` builds every stage against its exercise files: a stage source
# D/x.c is replaced by D/exercises/x.c where that file exists. `make grade-N` does
# this in its own build folder (build-ex) and scores the stage's tests per part.
EX ?=
stage_src = $(foreach f,$1,$(if $(and $(EX),$(wildcard $(dir $f)exercises/$(notdir $f))),$(dir $f)exercises/$(notdir $f),$f))
stage_obj = $(patsubst %.c,$(BUILD)/%.o,$(call stage_src,$1))

CORE := log dtype rng ledger flags json safetensors safetensors_json safetensors_write ctx ops_cpu ops_cpu_precision \
        model_layout model_acts model_backward model_fp8 \
        model optim data perf comm launch comm_shm comm_tcp train_args trainer timeline
CORE_OBJS := $(CORE:%=$(BUILD)/common/%.o)
# Stage 06's primitives are the core's too: every stage trains with its precisions
# and recompute. They live in the lesson's folder, where `make grade-6` swaps in
# the learner's versions (EX=1, stage_src).
PRECISION_SRCS := 06_mixed_precision/recompute.c 06_mixed_precision/sround.c \
                  06_mixed_precision/loss_scale.c 06_mixed_precision/fp8.c
CORE_OBJS += $(patsubst %.c,$(BUILD)/%.o,$(call stage_src,$(PRECISION_SRCS)))
# precision.h (stochastic rounding, loss scaling, fp8 scales) is the core's too:
# the CPU backend's ops call its scalar routines.
CFLAGS += -I06_mixed_precision
# Stage 07's checkpoints likewise: every driver saves and resumes through them.
# publish.c and resume.c are its exercises (EX=1 swaps them).
FAULT_SRCS := 07_fault_tolerance/checkpoint.c 07_fault_tolerance/ckpt_load.c \
              07_fault_tolerance/ckpt_save.c 07_fault_tolerance/sdc.c 07_fault_tolerance/straggler.c \
              07_fault_tolerance/ckpt_layout.c 07_fault_tolerance/manifest.c \
              07_fault_tolerance/faults.c 07_fault_tolerance/publish.c \
              07_fault_tolerance/resume.c
CORE_OBJS += $(patsubst %.c,$(BUILD)/%.o,$(call stage_src,$(FAULT_SRCS)))
CFLAGS += -I07_fault_tolerance

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
CUDA_SRCS := ops_cuda ops_cuda_layers ops_cuda_attention ops_cuda_split ops_cuda_precision ops_cuda_fp8 comm_cuda \
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

TESTS := test_dtype test_rng test_ledger test_flags test_safetensors test_ops test_model \
         test_gpu gpt_dump test_comm compare_params test_precision test_fp8 test_json test_ckpt_fuzz test_publish \
         test_straggler
BINS  := $(BUILD)/train $(BUILD)/sgemm_bench $(TESTS:%=$(BUILD)/tests/%)

# `make` with no target builds everything (stage.mk files below define targets too).
.DEFAULT_GOAL := all

# Each stage folder adds its binaries to BINS and defines stage-N (see NN_*/stage.mk).
include $(wildcard [0-9][0-9]_*/stage.mk)

# Keep the object files of the test programs between builds.
.SECONDARY:

.PHONY: all help test check sanitize gpu-test bench-core demo clean report-build grade-check report
all: report-build $(BINS) $(CUDA_LIB)

help:
	@awk '/^#   make/ {sub(/^#   /, ""); print}' Makefile

report-build:
	@echo "build: CPU core -> $(BUILD)/ ; CUDA: $(if $(NVCC),$(NVCC),not found (CUDA backend skipped))\
	; MPI: $(if $(MPICC),$(MPICC),not found (MPI transport skipped))"

# One rule for every C object: common/, the stage folders, their exercises/.
# Stage 06's precision.h is a core header too (see PRECISION_SRCS).
$(BUILD)/%.o: %.c common/*.h 06_mixed_precision/precision.h 07_fault_tolerance/checkpoint.h
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
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/sgemm_bench: $(BUILD)/common/sgemm_bench.o $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# test_gpu is four objects: main, the helpers, memory and model (test_gpu.c), the
# op-by-op checks (test_gpu_ops.c), the bf16 GEMMs' (test_gpu_bf16.c) and the fp8
# GEMMs' (test_gpu_fp8.c).
TEST_GPU_OBJS := $(BUILD)/tests/test_gpu.o $(BUILD)/tests/test_gpu_ops.o \
                 $(BUILD)/tests/test_gpu_bf16.o $(BUILD)/tests/test_gpu_fp8.o
$(TEST_GPU_OBJS): tests/test_gpu.h
$(BUILD)/tests/test_gpu: $(TEST_GPU_OBJS) $(CORE_OBJS)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# test_publish runs on a simulated disk (tests/power_loss_disk.c); the rule for
# every test links it in.
$(BUILD)/tests/test_publish.o $(BUILD)/tests/power_loss_disk.o: tests/power_loss_disk.h
$(BUILD)/tests/test_publish: $(BUILD)/tests/power_loss_disk.o
# test_json: its fuzzer and the helpers both parts share.
$(BUILD)/tests/test_json.o $(BUILD)/tests/json_check.o $(BUILD)/tests/json_fuzz.o: tests/json_check.h
$(BUILD)/tests/test_json: $(BUILD)/tests/json_check.o $(BUILD)/tests/json_fuzz.o
# test_ckpt_fuzz damages its files with tests/mutate.c.
$(BUILD)/tests/test_ckpt_fuzz.o $(BUILD)/tests/mutate.o: tests/mutate.h
$(BUILD)/tests/test_ckpt_fuzz: $(BUILD)/tests/mutate.o

test: all
	@BUILD=$(BUILD) SUITE_LOG_DIR=$(BUILD)/suite-logs bash tests/run.sh

# What CI runs: the suite, the suite under the sanitizers, and the graders.
check: test
	@$(MAKE) --no-print-directory sanitize
	@$(MAKE) --no-print-directory grade-check

# make grade-N [PART=name]: the stage's tests against your exercises/, a score per
# part; fails (non-zero status) unless the score is full.
# The exercise build runs in parallel (JOBS, one per core) unless make was given -j.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
grade-%:
	@out=$$(bash scripts/grade.sh --list $* "$(PART)" 2>&1) || { echo "$$out" >&2; exit 2; }  # before building
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) EX=1 BUILD=build-ex all
	@BUILD=build-ex bash scripts/grade.sh $* $(PART)

# The graders are tested too: the reference scores full marks, the pristine starters
# 0, and every mutant in tests/mutants/ (a typical mistake) loses its part's marks.
grade-check: all
	@$(MAKE) --no-print-directory EX=1 BUILD=build-ex all
	@bash scripts/grade_check.sh

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
	rm -rf build build-san build-ex build-mut $(BUILD)
