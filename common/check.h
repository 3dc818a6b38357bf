// check.h — the one error-check macro family, and rank-prefixed logging.
//
// Every failure names the file and line and the rank that hit it, then exits
// non-zero. Nothing is retried silently: a training step that continues after a
// failed allocation or a failed kernel computes garbage, so we stop at once.
//
//   CHECK(cond, fmt, ...)    a condition of our own (bad input, corrupt file)
//   CUDA_CHECK(call)         a cudaError_t
//   CUBLAS_CHECK(call)       a cublasStatus_t
//   MPI_CHECK(call)          an MPI return code
//   NCCL_CHECK(call)         an ncclResult_t
//   DIE(fmt, ...)            unconditional
//
// The CUDA/MPI/NCCL variants live in the headers that include those libraries
// (cuda_common.cuh, ...) so that CPU-only code never needs their headers.
#pragma once
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#define CHECK_NORETURN [[noreturn]]  // nvcc compiles .cu files as C++
#else
#define CHECK_NORETURN _Noreturn
#endif

// The rank tag printed before every log line: "[rank 3/8] ". It is the one piece of
// process-wide state in the code base: set once when the rank is born, read by the
// logging functions, which may be called from anywhere (including a dying allocator).
void log_set_rank(int rank, int world);
const char *log_tag(void);

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// With COURSE_EVENTS=1 in the environment: "EVENT <name> t=<seconds>" on stderr, the
// time on CLOCK_MONOTONIC (comparable across the processes of one machine). Stage
// 07's benchmark splits a recovery into its parts with these.
void log_event(const char *name);
// A process that runs alone (one rank: no supervisor watches it) says so itself when
// a signal kills it: "error: ... killed by signal 11 (Segmentation fault)" on stderr,
// where its log is, instead of ending mid-line. Only for signals still at their
// default action (a sanitizer's handler, installed first, keeps its own report).
void log_report_crashes(void);
CHECK_NORETURN void die_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Allocations that cannot fail quietly: out of memory dies, naming the size (a NULL
// read later would crash far from the cause). Never NULL, even for 0 bytes.
void *xmalloc(size_t bytes);
void *xcalloc(size_t n, size_t size);

#define DIE(...) die_at(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) die_at(__FILE__, __LINE__, __VA_ARGS__);               \
    } while (0)

#ifdef __cplusplus
}
#endif
