# Stage 01 — the memory wall. Included by the top-level Makefile.
#
#   make stage-1     tests, measured vs predicted, the OOM at step zero, plots, into
#                    $(RESULTS)/01_memory_wall/ (runs/; RESULTS=results: the committed run)
#   make grade-1     the same tests against 01_memory_wall/exercises/ (PART=name)
#
# memory_model.c is the graded file (make grade-1, EX=1, swaps in exercises/memory_model.c);
# memory_plan.c composes its functions and is not an exercise.

MM_OBJS := $(call stage_obj,01_memory_wall/memory_model.c) $(BUILD)/01_memory_wall/memory_plan.o
STAGE01_BINS := $(BUILD)/memcalc $(BUILD)/measure $(BUILD)/tests/test_memory_model
BINS += $(STAGE01_BINS)

# The objects read the stage's header (the generic rule only knows common/*.h), from
# exercises/ too (the reference's #include "memory_model.h" works copied there).
$(MM_OBJS): CFLAGS += -I01_memory_wall
$(MM_OBJS) $(BUILD)/01_memory_wall/memory_model.o $(BUILD)/01_memory_wall/memcalc.o \
  $(BUILD)/01_memory_wall/measure.o \
  $(BUILD)/tests/test_memory_model.o $(BUILD)/tests/test_memory_course.o: 01_memory_wall/memory_model.h

$(BUILD)/memcalc: $(call stage_obj,01_memory_wall/memcalc.c) $(MM_OBJS) $(CORE_OBJS)
	$(LINK)

$(BUILD)/measure: $(call stage_obj,01_memory_wall/measure.c) $(MM_OBJS) $(CORE_OBJS)
	$(LINK)

$(BUILD)/tests/test_memory_model: $(BUILD)/tests/test_memory_model.o \
  $(BUILD)/tests/test_memory_course.o $(MM_OBJS) $(CORE_OBJS)
	$(LINK)

.PHONY: stage-run-1
stage-run-1:
	@BUILD=$(BUILD) RESULTS=$(RESULTS) bash 01_memory_wall/stage.sh
