# tests/stage01.sh — stage 01's suite, sourced by tests/run.sh with $BUILD set.
# Check names start with the parts in 01_memory_wall/exercises/parts.txt (bpp.,
# params., zero., act., measured.); cli01., oom., workspace. and plan. test code that
# is not an exercise. Runs in a few seconds (also under the sanitizers).
run memory_model "$BUILD/tests/test_memory_model"
run memcalc bash tests/test_memcalc.sh "$BUILD"
run measure "$BUILD/measure" --check
