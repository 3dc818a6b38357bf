// cuda_query.cu — what the CUDA runtime says about this machine, raw: the error
// of cudaGetDeviceCount, the driver and runtime versions, and every device's
// compute mode; or the answer COURSE_FAKE_CUDA_* dictates (test hooks). What the
// answer means (skip or fail) is decided in cuda_probe.c, which is plain C and
// built with or without CUDA; this file is the only part that needs the runtime.
//
// Nothing here creates a CUDA context: cudaGetDeviceCount, cudaDriverGetVersion
// and cudaDeviceGetAttribute initialize the driver only, so probing a device in
// exclusive-process mode does not take it away from the rank that will use it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_probe.h"

// cuda_probe.c names the modes by number (it cannot include CUDA's headers).
static_assert(cudaComputeModeDefault == 0 && cudaComputeModeExclusive == 1 &&
                  cudaComputeModeProhibited == 2 && cudaComputeModeExclusiveProcess == 3,
              "cudaComputeMode values changed: update cuda_compute_mode_name in cuda_probe.c");

static void set_error(CudaProbe *p, cudaError_t e) {
    p->error = (int)e;
    snprintf(p->error_name, sizeof p->error_name, "%s", cudaGetErrorName(e));
    snprintf(p->error_text, sizeof p->error_text, "%s", cudaGetErrorString(e));
    p->is_no_device = e == cudaErrorNoDevice;
}

// COURSE_FAKE_CUDA_ERROR: an alias, or a cudaError_t number. Returns 1 if set.
static int fake_error(CudaProbe *p) {
    static const struct { const char *alias; cudaError_t err; } known[] = {
        {"insufficient-driver", cudaErrorInsufficientDriver},
        {"no-device", cudaErrorNoDevice},
        {"devices-unavailable", cudaErrorDevicesUnavailable},
        {"memory-allocation", cudaErrorMemoryAllocation},
        {"initialization-error", cudaErrorInitializationError},
        {"system-driver-mismatch", cudaErrorSystemDriverMismatch},
    };
    const char *v = getenv("COURSE_FAKE_CUDA_ERROR");
    if (!v || !*v) return 0;
    snprintf(p->fake, sizeof p->fake, "COURSE_FAKE_CUDA_ERROR=%.60s", v);
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(v, known[i].alias) == 0) {
            set_error(p, known[i].err);
            return 1;
        }
    char *end;
    long x = strtol(v, &end, 10);
    if (*end == '\0' && x > 0 && x < 100000) {
        set_error(p, (cudaError_t)x);
        return 1;
    }
    // A typo in a test hook must not read as "no device": report it as an error.
    p->error = -1;
    snprintf(p->error_name, sizeof p->error_name, "bad COURSE_FAKE_CUDA_ERROR");
    snprintf(p->error_text, sizeof p->error_text, "'%.40s' is neither an alias that "
             "common/cuda_probe.h lists nor a cudaError_t number", v);
    return 1;
}

// COURSE_FAKE_CUDA_DEVICES=N[:MODE]. Returns 1 if set.
static int fake_devices(CudaProbe *p) {
    const char *v = getenv("COURSE_FAKE_CUDA_DEVICES");
    if (!v || !*v) return 0;
    snprintf(p->fake, sizeof p->fake, "COURSE_FAKE_CUDA_DEVICES=%.60s", v);
    char *end;
    long n = strtol(v, &end, 10);
    int mode = -1;
    if (*end == '\0') mode = cudaComputeModeDefault;
    else if (*end == ':') {
        for (int m = 0; m <= 3; m++)
            if (strcmp(end + 1, cuda_compute_mode_name(m)) == 0) mode = m;
    }
    if (n < 1 || n > CUDA_PROBE_MAX_DEVICES || mode < 0) {
        p->error = -1;
        snprintf(p->error_name, sizeof p->error_name, "bad COURSE_FAKE_CUDA_DEVICES");
        snprintf(p->error_text, sizeof p->error_text, "'%.40s' is not N[:MODE] with N in 1..%d "
                 "and MODE default, exclusive-process or prohibited", v, CUDA_PROBE_MAX_DEVICES);
        return 1;
    }
    p->devices = (int)n;
    for (int d = 0; d < n; d++) p->compute_mode[d] = mode;
    return 1;
}

extern "C" void cuda_probe_query(CudaProbe *p) {
    // Versions first: they never fail, and "driver 0" is how a missing driver
    // shows (cudaGetDeviceCount says cudaErrorInsufficientDriver either way).
    if (cudaDriverGetVersion(&p->driver_version) != cudaSuccess) p->driver_version = -1;
    if (cudaRuntimeGetVersion(&p->runtime_version) != cudaSuccess) p->runtime_version = -1;
    if (fake_error(p) || fake_devices(p)) return;  // a faked error claims a driver is present
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();  // not left for the next CUDA_CHECK_LAUNCH to find
        set_error(p, e);
        p->no_driver = e == cudaErrorInsufficientDriver && p->driver_version == 0;
        return;
    }
    p->devices = n;
    for (int d = 0; d < n && d < CUDA_PROBE_MAX_DEVICES; d++) {
        e = cudaDeviceGetAttribute(&p->compute_mode[d], cudaDevAttrComputeMode, d);
        if (e != cudaSuccess) {  // a device we cannot even query is broken
            (void)cudaGetLastError();
            set_error(p, e);
            p->devices = 0;
            return;
        }
    }
}
