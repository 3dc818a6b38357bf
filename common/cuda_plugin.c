// cuda_plugin.c — the door to the CUDA backend, in every build.
//
// The backend (ops_cuda*.cu, comm_cuda*.cu, cuda_query.cu, gpu_clock.cu) is built
// as a shared library beside the programs, build/libcourse_cuda.so, linked against
// cuBLAS, the CUDA runtime and NCCL, and loaded the first time a run asks for the
// GPU. A CPU run never maps those libraries: they are several hundred MB, and
// mapping them cost every process about 0.1 s on the course's 2-core machine, a
// tax paid thousands of times by the test suite. (The programs are linked with
// -rdynamic, so the library calls the core — CHECK, the ledger, the host comm —
// in the program that loaded it.)
//
// Every function of the backend that the rest of the course calls is defined here
// once: it loads the library (the first time) and calls the library's function of
// the same name. Without the library the same functions answer as a CPU-only
// build should: no CUDA ops table, the probe says "not built" (or, where nvcc
// built it and the file cannot be loaded, "broken", with the loader's reason), and
// anything that needs a GPU stops with advice.
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "comm_cuda.h"
#include "cuda_probe.h"
#include "ops.h"

#define CUDA_LIB_NAME "libcourse_cuda.so"

// The process's one handle on the library (like the dynamic loader's own state,
// set once, then only read).
typedef struct {
    pthread_once_t once;
    void *lib;       // NULL: not loaded
    int built;       // nvcc built the library (COURSE_CUDA_BUILT)
    char why[600];   // why it is not loaded
} Backend;
static Backend backend = {PTHREAD_ONCE_INIT, NULL, 0, ""};

// Beside the program (build/train) or one folder up (build/tests/test_gpu).
static void load(void) {
#ifdef COURSE_CUDA_BUILT
    backend.built = 1;
#endif
    if (!backend.built) {
        snprintf(backend.why, sizeof backend.why, "this build has no CUDA (nvcc was not found "
                 "at build time; install the CUDA toolkit or set CUDA_HOME, then rebuild)");
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(backend.why, sizeof backend.why, "the CUDA backend %s cannot be found: "
                 "/proc/self/exe is unreadable", CUDA_LIB_NAME);
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    char path[PATH_MAX + 64];
    const char *dirs[] = {"", "/.."};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s%s/%s", exe, dirs[i], CUDA_LIB_NAME);
        if (access(path, F_OK) != 0) continue;
        backend.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!backend.lib)
            snprintf(backend.why, sizeof backend.why, "the CUDA backend cannot be loaded: %s",
                     dlerror());
        return;
    }
    snprintf(backend.why, sizeof backend.why, "the CUDA backend %s is in neither %.250s nor "
             "its parent folder (run make to build it)", CUDA_LIB_NAME, exe);
}

static void *backend_lib(void) {
    pthread_once(&backend.once, load);
    return backend.lib;
}

// The library's function `name`; stops, naming why, where there is no library.
static void *backend_fn(const char *name) {
    void *lib = backend_lib();
    CHECK(lib, "--device cuda: %s", backend.why);
    void *fn = dlsym(lib, name);
    CHECK(fn, "the CUDA backend %s has no function %s (rebuild it: make)", CUDA_LIB_NAME, name);
    return fn;
}

// The CPU's answers, without loading anything.

const Ops *ops_cuda_table(void) {
    if (!backend_lib()) {
        CHECK(!backend.built, "--device cuda: %s", backend.why);
        return NULL;  // ctx_init says this build has no CUDA
    }
    const Ops *(*fn)(void);
    *(void **)&fn = backend_fn("ops_cuda_table");
    return fn();
}

void cuda_probe_query(CudaProbe *p) {
    if (!backend_lib()) {
        p->state = backend.built ? CUDA_BROKEN : CUDA_NOT_BUILT;
        snprintf(p->why, sizeof p->why, "%.390s", backend.why);
        return;
    }
    void (*fn)(CudaProbe *);
    *(void **)&fn = backend_fn("cuda_probe_query");
    fn(p);
}

const char *gpu_algo_name(GpuAlgo a) {
    return a == GPU_NCCL ? "nccl" : a == GPU_IPC ? "ipc" : "auto";
}

// Device memory exists only once the backend is loaded.
int gpu_is_device_pointer(const void *p) {
    if (!p || !backend.lib) return 0;
    int (*fn)(const void *);
    *(void **)&fn = backend_fn("gpu_is_device_pointer");
    return fn(p);
}

// Everything else goes to the library: a function pointer looked up once.
#define FORWARD(ret, name, params, args)                                                   \
    ret name params {                                                                      \
        static ret(*fn) params;                                                            \
        if (!fn) *(void **)&fn = backend_fn(#name);                                        \
        return fn args;                                                                    \
    }
#define FORWARD_VOID(name, params, args)                                                   \
    void name params {                                                                     \
        static void(*fn) params;                                                           \
        if (!fn) *(void **)&fn = backend_fn(#name);                                        \
        fn args;                                                                           \
    }
// A NULL object needs no backend to free.
#define FORWARD_FREE(name, type)                                                           \
    void name(type *x) {                                                                   \
        static void (*fn)(type *);                                                         \
        if (!x) return;                                                                    \
        if (!fn) *(void **)&fn = backend_fn(#name);                                        \
        fn(x);                                                                             \
    }

// The GPU collectives DDP calls are weak: a test program may define its own
// (tests/gpu_comm_host.c runs them on the host, so that a CPU machine runs the code
// a GPU run takes: test_ddp --gpu-comm-on-host).
#define FORWARD_VOID_WEAK(name, params, args) __attribute__((weak)) FORWARD_VOID(name, params, args)

// comm_cuda.h: the GPU collectives
FORWARD(GpuComm *, gpu_comm_new, (Comm *c, Group *g, Ctx *ctx, GpuAlgo want), (c, g, ctx, want))
FORWARD(GpuComm *, gpu_comm_try, (Comm *c, Group *g, Ctx *ctx, GpuAlgo want, char *why, size_t n),
        (c, g, ctx, want, why, n))
FORWARD_FREE(gpu_comm_free, GpuComm)
FORWARD(GpuAlgo, gpu_comm_algo, (const GpuComm *gc), (gc))
FORWARD(int, gpu_comm_shared, (const GpuComm *gc), (gc))
FORWARD(const char *, gpu_comm_describe, (const GpuComm *gc), (gc))
FORWARD_VOID_WEAK(gpu_allreduce, (GpuComm *gc, void *buf, size_t count, DType dt),
                  (gc, buf, count, dt))
FORWARD_VOID(gpu_reduce_scatter, (GpuComm *gc, void *buf, size_t count, DType dt),
             (gc, buf, count, dt))
FORWARD_VOID(gpu_all_gather, (GpuComm *gc, void *buf, size_t count, DType dt), (gc, buf, count, dt))
FORWARD_VOID_WEAK(gpu_broadcast, (GpuComm *gc, void *buf, size_t count, DType dt, int root),
                  (gc, buf, count, dt, root))
FORWARD(double, gpu_copy_bandwidth, (Ctx *ctx, size_t bytes), (ctx, bytes))
FORWARD_VOID(gpu_reduce_scatter_v,
             (GpuComm *gc, void *buf, size_t count, const size_t *lo, const size_t *hi, DType dt),
             (gc, buf, count, lo, hi, dt))
FORWARD_VOID(gpu_all_gather_v,
             (GpuComm *gc, void *buf, size_t count, const size_t *lo, const size_t *hi, DType dt),
             (gc, buf, count, lo, hi, dt))
FORWARD_VOID(gpu_comm_own_stream, (GpuComm *gc), (gc))
FORWARD(void *, gpu_event_after_compute, (Ctx *ctx), (ctx))
FORWARD_VOID(gpu_comm_after, (GpuComm *gc, void *event), (gc, event))
FORWARD_VOID(gpu_event_sync, (void *event), (event))
// point to point (stage 05)
FORWARD(GpuRequest *, gpu_isend, (GpuComm *gc, int peer, const void *buf, size_t bytes),
        (gc, peer, buf, bytes))
FORWARD(GpuRequest *, gpu_irecv, (GpuComm *gc, int peer, void *buf, size_t bytes),
        (gc, peer, buf, bytes))
FORWARD(int, gpu_test, (GpuComm *gc, GpuRequest *r), (gc, r))
FORWARD_VOID(gpu_wait, (GpuComm *gc, GpuRequest **reqs, int n), (gc, reqs, n))
FORWARD_VOID(gpu_wait_first, (GpuComm *gc, GpuRequest **reqs, int n), (gc, reqs, n))
FORWARD_VOID(gpu_p2p_prepare, (GpuComm *gc), (gc))
// GPU time (gpu_clock.cu)
FORWARD(GpuClock *, gpu_clock_new, (Ctx *ctx), (ctx))
FORWARD_FREE(gpu_clock_free, GpuClock)
FORWARD_VOID(gpu_clock_start, (GpuClock *k, double timeout_s), (k, timeout_s))
FORWARD(int, gpu_clock_mark, (GpuClock *k), (k))
FORWARD_VOID(gpu_clock_read, (GpuClock *k, double timeout_s), (k, timeout_s))
FORWARD(double, gpu_clock_time, (const GpuClock *k, int mark), (k, mark))
