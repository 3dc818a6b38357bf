// async_coll.c — a queue of collectives and the thread that runs them.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_coll.h"
#include "check.h"
#include "timer.h"

typedef enum { TASK_ALLREDUCE, TASK_REDUCE_SCATTER, TASK_ALL_GATHER, TASK_BARRIER } TaskKind;

struct CollTask {
    TaskKind kind;
    Group *g;
    void *buf;
    size_t count;        // all-reduce
    Blocks blocks;       // reduce-scatter, all-gather
    DType dt;
    Algo algo;
    char label[40];
    GpuComm *gpu;        // device memory: the group's GpuComm, and the compute
    void *ready;         // stream's event at start (the data are ready after it)
    int done;            // under a->mu
    CollTask *next;      // the queue
};

#define MAX_GPU_GROUPS 4

struct AsyncComm {
    Comm *c;
    Timeline *tl;
    int threaded, stop;
    int late;                // COURSE_LATE_COMPLETION=1: coll_test says "not yet" until waited
    int eager;               // COURSE_EAGER_COLLECTIVES=1: the data move before start returns
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, finished;
    CollTask *head, *tail;   // started, not yet run
    struct { const Group *g; GpuComm *gc; } gpu[MAX_GPU_GROUPS];
    Ctx *ctx;                // the GPU's context, when there is one
};

static void run_gpu(CollTask *t) {
    gpu_comm_after(t->gpu, t->ready);  // the communication stream waits for the data
    const Blocks *b = &t->blocks;
    switch (t->kind) {
        case TASK_ALLREDUCE: gpu_allreduce(t->gpu, t->buf, t->count, t->dt); break;
        case TASK_REDUCE_SCATTER:
            gpu_reduce_scatter_v(t->gpu, t->buf, b->count, b->lo, b->hi, t->dt);
            break;
        case TASK_ALL_GATHER: gpu_all_gather_v(t->gpu, t->buf, b->count, b->lo, b->hi, t->dt); break;
        case TASK_BARRIER: DIE("a barrier has no device memory");
    }
}

static void run(AsyncComm *a, CollTask *t) {
    double t0 = now_seconds();
    if (t->gpu) run_gpu(t);
    else switch (t->kind) {
        case TASK_ALLREDUCE: allreduce(a->c, t->g, t->buf, t->count, t->dt, t->algo); break;
        case TASK_REDUCE_SCATTER:
            reduce_scatter_v(a->c, t->g, t->buf, &t->blocks, t->dt, t->algo);
            break;
        case TASK_ALL_GATHER: all_gather_v(a->c, t->g, t->buf, &t->blocks, t->dt, t->algo); break;
        case TASK_BARRIER: comm_barrier(a->c, t->g); break;
    }
    timeline_span(a->tl, TL_COMM, t->label, t0, now_seconds());
}

static CollTask *pop(AsyncComm *a) {
    CollTask *t = a->head;
    if (t) {
        a->head = t->next;
        if (!a->head) a->tail = NULL;
    }
    return t;
}

// Without a thread: run everything started up to and including t, in order.
static void run_queued(AsyncComm *a, CollTask *t) {
    for (CollTask *q; !t->done && (q = pop(a));) {
        run(a, q);
        q->done = 1;
    }
}

static void *progress_thread(void *arg) {
    AsyncComm *a = arg;
    comm_bind_thread(a->c, 1);
    comm_share_core(a->c, 1);
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->head && !a->stop) pthread_cond_wait(&a->work, &a->mu);
        CollTask *t = pop(a);
        if (!t) break;  // stopping, and nothing left
        pthread_mutex_unlock(&a->mu);
        run(a, t);  // a failure here (timeout, dead peer) ends the process with its diagnostic
        pthread_mutex_lock(&a->mu);
        t->done = 1;
        pthread_cond_broadcast(&a->finished);
    }
    pthread_mutex_unlock(&a->mu);
    comm_share_core(a->c, 0);
    comm_bind_thread(a->c, 0);
    return NULL;
}

AsyncComm *async_comm_new(Comm *c, Timeline *tl, int threaded) {
    AsyncComm *a = calloc(1, sizeof *a);
    CHECK(a, "out of memory");
    a->c = c;
    a->tl = tl;
    a->threaded = threaded;
    // A checking mode: a collective reports done only when it is waited for, as on a
    // GPU busy with other work, so that code which waits too early is seen waiting
    // whatever this machine's timing (tests/stage03.sh's sharded.overlap.*).
    const char *late = getenv("COURSE_LATE_COMPLETION");
    a->late = late && strcmp(late, "1") == 0;
    // The other end of the same freedom: a collective's data may move at any moment
    // between its start and its wait. --no-overlap moves them at the wait (the
    // latest); this moves them inside the start (the earliest: a GPU's communication
    // stream free at once). Code that writes into a buffer after starting its
    // collective, or reads a result before waiting, gets one answer under one and
    // another under the other, deterministically (tests/stage03.sh's *.eager runs).
    const char *eager = getenv("COURSE_EAGER_COLLECTIVES");
    a->eager = eager && strcmp(eager, "1") == 0;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->work, NULL);
    pthread_cond_init(&a->finished, NULL);
    if (threaded) {
        CHECK(pthread_create(&a->thread, NULL, progress_thread, a) == 0,
              "cannot start the communication thread");
    }
    return a;
}

int async_comm_threaded(const AsyncComm *a) { return a->threaded; }

void async_comm_use_gpu(AsyncComm *a, const Group *g, GpuComm *gc, Ctx *ctx) {
    int i = 0;
    while (i < MAX_GPU_GROUPS && a->gpu[i].g && a->gpu[i].g != g) i++;
    CHECK(i < MAX_GPU_GROUPS, "more than %d groups with GPU collectives", MAX_GPU_GROUPS);
    a->gpu[i].g = g;
    a->gpu[i].gc = gc;
    a->ctx = ctx;
}

static CollTask *start(AsyncComm *a, CollTask *t) {
    t->next = NULL;
    // Device memory on a group with a GpuComm: mark where on the compute stream its
    // data are ready. (Recorded here, by the thread that queued the kernels.)
    for (int i = 0; i < MAX_GPU_GROUPS && a->gpu[i].g && t->buf; i++)
        if (a->gpu[i].g == t->g && gpu_is_device_pointer(t->buf)) {
            t->gpu = a->gpu[i].gc;
            t->ready = gpu_event_after_compute(a->ctx);
        }
    pthread_mutex_lock(&a->mu);
    if (a->tail) a->tail->next = t;
    else a->head = t;
    a->tail = t;
    pthread_cond_signal(&a->work);
    if (a->eager && a->threaded)  // the thread owns the Comm: it runs t now, we wait
        while (!t->done) pthread_cond_wait(&a->finished, &a->mu);
    pthread_mutex_unlock(&a->mu);
    if (a->eager && !a->threaded) run_queued(a, t);
    return t;
}

static CollTask *task(TaskKind kind, Group *g, void *buf, DType dt, Algo algo, const char *label) {
    CollTask *t = calloc(1, sizeof *t);
    CHECK(t, "out of memory");
    t->kind = kind;
    t->g = g;
    t->buf = buf;
    t->dt = dt;
    t->algo = algo;
    snprintf(t->label, sizeof t->label, "%s", label);
    return t;
}

CollTask *allreduce_start(AsyncComm *a, Group *g, void *buf, size_t count, DType dt, Algo algo,
                          const char *label) {
    CollTask *t = task(TASK_ALLREDUCE, g, buf, dt, algo, label);
    t->count = count;
    return start(a, t);
}

CollTask *reduce_scatter_start(AsyncComm *a, Group *g, void *buf, const Blocks *b, DType dt,
                               Algo algo, const char *label) {
    CollTask *t = task(TASK_REDUCE_SCATTER, g, buf, dt, algo, label);
    t->blocks = *b;
    return start(a, t);
}

CollTask *all_gather_start(AsyncComm *a, Group *g, void *buf, const Blocks *b, DType dt, Algo algo,
                           const char *label) {
    CollTask *t = task(TASK_ALL_GATHER, g, buf, dt, algo, label);
    t->blocks = *b;
    return start(a, t);
}

void coll_wait(AsyncComm *a, CollTask *t) {
    double t0 = now_seconds();
    if (!a->threaded) {
        run_queued(a, t);
        CHECK(t->done, "coll_wait: '%s' was never started here", t->label);
    } else {
        pthread_mutex_lock(&a->mu);
        while (!t->done) pthread_cond_wait(&a->finished, &a->mu);
        pthread_mutex_unlock(&a->mu);
        double t1 = now_seconds();
        if (t1 - t0 > 1e-6) {
            char name[48];
            snprintf(name, sizeof name, "wait %s", t->label);
            timeline_span(a->tl, TL_WAIT, name, t0, t1);
        }
    }
    free(t);
}

int coll_test(AsyncComm *a, CollTask *t) {
    if (a->late) return 0;
    if (!a->threaded) return t->done;
    pthread_mutex_lock(&a->mu);
    int done = t->done;
    pthread_mutex_unlock(&a->mu);
    return done;
}

void async_allreduce(AsyncComm *a, Group *g, void *buf, size_t count, DType dt, Algo algo,
                     const char *label) {
    coll_wait(a, allreduce_start(a, g, buf, count, dt, algo, label));
}

void async_barrier(AsyncComm *a, Group *g) {
    coll_wait(a, start(a, task(TASK_BARRIER, g, NULL, DT_F32, ALGO_RING, "barrier")));
}

void async_comm_free(AsyncComm *a) {
    if (!a) return;
    if (a->threaded) {
        pthread_mutex_lock(&a->mu);
        a->stop = 1;
        pthread_cond_signal(&a->work);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->thread, NULL);
    } else {
        // Every collective started must run on every rank, waited for or not.
        for (CollTask *q; (q = pop(a));) run(a, q);
    }
    CHECK(!a->head, "collectives left unrun");
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->work);
    pthread_cond_destroy(&a->finished);
    free(a);
}
