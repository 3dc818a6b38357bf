// ctx.c — the per-rank context and ledger-charged device memory.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ctx.h"
#include "cuda_probe.h"
#include "ops.h"
#include "ops_timed.h"

const char *device_name(Device d) { return d == DEV_CUDA ? "cuda" : "cpu"; }

int device_parse(const char *s, Device *out) {
    if (strcmp(s, "cpu") == 0) { *out = DEV_CPU; return 0; }
    if (strcmp(s, "cuda") == 0) { *out = DEV_CUDA; return 0; }
    return -1;
}

// The machine's physical memory (COURSE_FAKE_HOST_MEM=1MB pretends, for the tests);
// 0 when the system does not say.
static size_t host_memory_bytes(void) {
    const char *fake = getenv("COURSE_FAKE_HOST_MEM");
    size_t bytes = 0;
    if (fake) {
        CHECK(parse_bytes(fake, &bytes) == 0, "COURSE_FAKE_HOST_MEM=%s is not a byte count", fake);
        return bytes;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

void ctx_init(Ctx *ctx, Device dev, int threads, size_t capacity) {
    ctx_init_device(ctx, dev, 0, threads, capacity);
}

void ctx_init_device(Ctx *ctx, Device dev, int cuda_device, int threads, size_t capacity) {
    memset(ctx, 0, sizeof *ctx);
    ctx->cuda_device = cuda_device;  // before the backend creates its stream on it
    ctx->rank = 0;
    ctx->world = 1;
    ctx->device = dev;
    ctx->threads = threads > 0 ? threads : 1;
    ctx->gemm_dtype = DT_F32;  // until a bf16 recipe says every GEMM input is bf16
    if (dev == DEV_CUDA) {
        ctx->ops = ops_cuda_table();
        CHECK(ctx->ops != NULL,
              "--device cuda: this binary was built without CUDA (nvcc was not found at build "
              "time; install the CUDA toolkit or set CUDA_HOME, then rebuild)");
        // The probe's diagnosis ("no CUDA device: no driver ...", "CUDA is present
        // but broken: ...") says more than the first failing call would.
        CudaProbe p;
        cuda_probe(&p);
        CHECK(p.state == CUDA_READY, "--device cuda: %s", p.why);
    } else {
        ctx->ops = &ops_cpu;
    }
    ledger_init(&ctx->ledger, capacity, dev == DEV_CUDA ? "cuda" : "cpu");
    if (dev == DEV_CPU && !capacity) ctx->ledger.host_limit = host_memory_bytes();
    if (ctx->ops->init) ctx->ops->init(ctx);
    const char *timing = getenv("COURSE_OP_TIMING");  // where the time goes (ops_timed.h)
    if (timing && strcmp(timing, "1") == 0) ops_timing_wrap(ctx);
}

void ctx_destroy(Ctx *ctx) {
    if (ctx->ops && ctx->ops->destroy) ctx->ops->destroy(ctx);
    ctx->ops = NULL;
}

void *mem_alloc(Ctx *ctx, MemCategory cat, size_t bytes) {
    // Charge first: with a capacity set, an allocation that does not fit fails here,
    // naming the category, as a real device's allocator would.
    ledger_charge(&ctx->ledger, cat, bytes);
    void *p = ctx->ops->alloc(ctx, bytes);
    if (!p) {
        char want[32];
        format_bytes(bytes, want, sizeof want);
        DIE("out of memory on %s: the allocator refused %s for %s", device_name(ctx->device),
            want, mem_category_name(cat));
    }
    return p;
}

void mem_free(Ctx *ctx, MemCategory cat, void *p, size_t bytes) {
    if (!p) return;
    ctx->ops->free(ctx, p);
    ledger_release(&ctx->ledger, cat, bytes);
}
