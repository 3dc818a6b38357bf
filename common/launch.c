// launch.c — starting a job's ranks: forked by the built-in launcher (--np N), or
// found already started by mpirun, torchrun's variables or by hand; and the
// built-in launcher's supervisor (stage 07), which restarts every rank when one
// dies, up to --max-restarts times.
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "comm_internal.h"
#include "perf.h"
#include "timer.h"

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

// Parses a non-negative integer environment variable; dies naming it if malformed.
static int env_int(const char *name, int fallback) {
    const char *v = env(name);
    if (!v) return fallback;
    char *end;
    long x = strtol(v, &end, 10);
    CHECK(*end == '\0' && x >= 0 && x < 1 << 20, "environment variable %s=%s is not a valid "
          "rank or size", name, v);
    return (int)x;
}

// The built-in launcher's supervisor: waits for the n children. If one dies
// (non-zero exit or a signal) it reports which and how, gives the others
// `grace` seconds to notice (their waits time out with a diagnostic), then kills
// whatever is left. Returns the exit status for the whole job; *first is the rank
// that failed first (-1 if none did).
static int supervise(pid_t *pids, int n, double grace, int *first) {
    int status = 0, alive = n;
    *first = -1;
    double deadline = 0;
    while (alive > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, deadline > 0 ? WNOHANG : 0);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) break;
        if (pid == 0) {  // nothing exited; are we past the grace period?
            if (now_seconds() > deadline) {
                for (int i = 0; i < n; i++)
                    if (pids[i] > 0) {
                        fprintf(stderr, "launcher: rank %d still running %.0f s after another rank "
                                "ended; killing it\n", i, grace);
                        kill(pids[i], SIGKILL);
                        status = 1;
                    }
                deadline = now_seconds() + 3600;  // now just reap
            }
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        int r = -1;
        for (int i = 0; i < n; i++)
            if (pids[i] == pid) r = i;
        if (r < 0) continue;
        pids[r] = 0;
        alive--;
        int failed = 0;
        if (WIFSIGNALED(st)) {
            fprintf(stderr, "launcher: rank %d (pid %d) was killed by signal %d (%s)\n", r, (int)pid,
                    WTERMSIG(st), strsignal(WTERMSIG(st)));
            failed = 1;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
            fprintf(stderr, "launcher: rank %d (pid %d) exited with status %d\n", r, (int)pid,
                    WEXITSTATUS(st));
            failed = 1;
        }
        if (failed && status == 0) {
            log_event("detected");  // the launcher saw the first rank fail
            status = 1;
            *first = r;
            if (alive > 0) {
                fprintf(stderr, "launcher: waiting up to %.0f s for the other %d rank%s to stop\n",
                        grace, alive, alive == 1 ? "" : "s");
                deadline = now_seconds() + grace;
            }
        } else if (deadline == 0 && alive > 0) {
            // A rank finished. The others talk to it, so they must finish within the
            // comm timeout too; one that does not is stuck outside any wait.
            deadline = now_seconds() + grace;
        }
    }
    return status;
}

// With no more ranks than cores, rank r gets core r of the cores we may use,
// as mpirun's --bind-to core does. Unpinned, the scheduler sometimes leaves two
// ranks that wait by yielding on one core, and a ring all-reduce then runs at a
// third of its speed, depending on the run. Oversubscribed, nothing is pinned.
static void pin_to_core(int rank, int n) {
    cpu_set_t allowed, mine;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < n) return;
    int seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (seen++ == rank) {
            CPU_ZERO(&mine);
            CPU_SET(cpu, &mine);
            sched_setaffinity(0, sizeof mine, &mine);  // best effort: a refusal changes nothing
            return;
        }
    }
}

// How long a wait spins before yielding its core. With a core per rank, spinning
// answers within nanoseconds of the peer and costs nobody. With more ranks on
// this machine than cores, the rank we wait for may be queued behind us on our
// own core: every microsecond we spin delays it, so yield at once (OpenMPI does
// the same when oversubscribed: mpi_yield_when_idle).
static double spin_seconds(int local_ranks, int cpus) { return local_ranks > cpus ? 0 : 20e-6; }

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

// Ranks started by mpirun or torchrun see only their own binding. Each may be
// bound to other cores than ours, so together they may use up to local_size times
// our mask, never more than the machine has.
static void set_local(Comm *c, int local_size) {
    c->local_size = local_size > 0 ? local_size : 1;
    c->local_cores = usable_cores(c->local_size, cores_available(), online_cpus());
}

// Ranks per node: COURSE_NODE_RANKS when set (a hierarchy given to a flat machine),
// else what the launcher knows (`launched`: 0 when it knows nothing: one node).
static int node_size(int size, const char *launched_var, int launched) {
    const char *var = env("COURSE_NODE_RANKS") ? "COURSE_NODE_RANKS" : launched_var;
    int k = var ? env_int(var, 0) : launched;
    if (k == 0) return size;
    CHECK(k >= 1 && size % k == 0, "%s=%d: the ranks of one node must be a number that divides "
          "the job's %d ranks", var ? var : "--nodes", k, size);
    return k;
}

static Comm *comm_new(int rank, int size, LaunchMode mode, const CommConfig *cfg) {
    Comm *c = calloc(1, sizeof *c);
    CHECK(c, "out of memory");
    c->rank = rank;
    c->slot = rank;
    c->size = size;
    c->launch = mode;
    c->transport = cfg->transport;
    c->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 60.0;
    c->spin_s = spin_seconds(size, online_cpus());  // the launchers refine it
    c->local_size = size;                           // the launchers refine these too
    c->local_cores = cores_available();
    c->kill_rank = c->stall_rank = -1;
    c->kill_seq = c->stall_seq = -1;
    int ranks[COMM_MAX_RANKS];
    for (int i = 0; i < size; i++) ranks[i] = i;
    c->world.id = 1;
    snprintf(c->world.name, sizeof c->world.name, "world");
    c->world.size = size;
    c->world.rank = rank;
    memcpy(c->world.ranks, ranks, sizeof(int) * size);
    log_set_rank(rank, size);
    return c;
}

int comm_attempt(void) {
    const char *k = getenv("COURSE_RESTART");
    return k ? atoi(k) : 0;
}
int comm_supervised(void) { return getenv("COURSE_RESTART") != NULL; }
int comm_ranks_dropped(void) {
    const char *k = getenv("COURSE_RANKS_DROPPED");
    return k ? atoi(k) : 0;
}

// ---------------------------------------------------------------- the built-in launcher

// What the supervisor keeps across attempts. Rank r of an attempt runs in slot[r]: its
// core, its GPU and (with --nodes) its node. An elastic restart gives up the failed
// rank's slot, or its node's slots, not the last: that place is the suspect.
typedef struct {
    const CommConfig *cfg;
    LaunchNodes ln;
    int n, n0;                // ranks now, and at the start
    int slot[COMM_MAX_RANKS];
    int cpus;                 // the cores we may use (taskset narrows them)
    int base;                 // the attempt this launcher's first is (supervise.sh's)
    int dropped;              // ranks given up so far
    int last_unit;            // the slot (or node) that failed first last time; -1: none
} Launcher;

// How many slots an elastic restart gives up at once: a rank, or with --nodes its node.
static int unit_size(const Launcher *L) { return L->ln.nodes > 1 ? L->ln.node_size : 1; }
// With --nodes: are there still several? Then shm inside a node and TCP across.
static int several_nodes(const Launcher *L) { return L->ln.nodes > 1 && L->n > L->ln.node_size; }

// In the child: this process becomes rank r of the attempt.
static Comm *become_rank(const Launcher *L, int r, int attempt, void *region, size_t bytes) {
    const CommConfig *cfg = L->cfg;
    char k[16];
    snprintf(k, sizeof k, "%d", L->base + attempt);
    setenv("COURSE_RESTART", k, 1);
    pin_to_core(L->slot[r], L->n0);
    launch_nodes_enter(&L->ln, L->slot[r] / L->ln.node_size);
    int n = L->n, hybrid = several_nodes(L) && cfg->transport != TRANSPORT_TCP;
    Comm *c = comm_new(r, n, n > 1 ? LAUNCH_FORK : LAUNCH_SINGLE, cfg);
    c->slot = L->slot[r];
    c->spin_s = spin_seconds(n, L->cpus);
    c->local_cores = L->cpus;  // all the launcher had, not the one core this rank is pinned to
    c->node_size = node_size(n, NULL, several_nodes(L) ? L->ln.node_size : 0);
    if (hybrid) hybrid_transport_init(c, region, bytes, cfg->shm_stores);
    else if (cfg->transport == TRANSPORT_TCP && n > 1) tcp_transport_init(c);
    else shm_transport_init(c, region, bytes, cfg->shm_stores);
    return c;
}

// Elastic: the slot (or node) that failed first twice in a row is taken to be gone for
// good (its node, its GPU): the job goes on without it, the checkpoint resharded to the
// smaller world when it loads.
static void elastic_give_up(Launcher *L, int first) {
    int unit = unit_size(L), lost = L->slot[first] / unit, kept = 0;
    for (int r = 0; r < L->n; r++)
        if (L->slot[r] / unit != lost) L->slot[kept++] = L->slot[r];
    if (kept == 0) return;  // nothing would be left: restart as before
    int gone = L->n - kept;
    L->n = kept;
    L->dropped += gone;
    char k[16], slots[256] = "";
    snprintf(k, sizeof k, "%d", L->dropped);
    setenv("COURSE_RANKS_DROPPED", k, 1);
    for (int r = 0, at = 0; r < kept && at < (int)sizeof slots - 16; r++)
        at += snprintf(slots + at, sizeof slots - at, "%s%d", r ? ", " : "", L->slot[r]);
    if (unit == 1)
        fprintf(stderr, "supervisor: rank %d failed first in two attempts in a row: going on "
                "without it (--elastic), on %d rank%s in slots %s (slot %d, its core and GPU, "
                "left out)\n", first, kept, kept == 1 ? "" : "s", slots, lost);
    else
        fprintf(stderr, "supervisor: node %d (rank %d's) failed first in two attempts in a row: "
                "going on without it (--elastic), on %d rank%s in slots %s (its %d slots left "
                "out)\n", lost, first, kept, kept == 1 ? "" : "s", slots, gone);
    L->last_unit = -1;
}

// Forks the attempt's ranks (the child returns its Comm in *child), supervises them, and
// returns the job's status; *first is the rank that failed first (-1: none).
static int run_attempt(Launcher *L, int attempt, Comm **child, int *first) {
    int n = L->n, tcp = L->cfg->transport == TRANSPORT_TCP || several_nodes(L);
    // The shared region is mapped before fork, so every rank sees the same pages;
    // populated now, so that no collective pays for allocating them. A fresh one
    // per attempt: the dead attempt's channels are in whatever state it left.
    size_t bytes = shm_region_bytes(n);
    void *region = NULL;
    if (tcp && n > 1)  // rank 0's node; a fresh port (the last may linger)
        launch_nodes_master(&L->ln, L->slot[0] / L->ln.node_size);
    if (n > 1 && L->cfg->transport != TRANSPORT_TCP) {
        region = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE,
                      -1, 0);
        CHECK(region != MAP_FAILED, "cannot map %zu bytes of shared memory for %d ranks: %s",
              bytes, n, strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pids[COMM_MAX_RANKS], launcher = getpid();
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        CHECK(pid >= 0, "fork failed for rank %d: %s", r, strerror(errno));
        if (pid == 0) {
            // A rank dies with its launcher: a launcher killed alone (kill PID, not
            // Ctrl-C, which signals the whole process group) must not leave its
            // ranks training on, orphaned. (The check after it covers a launcher
            // that died before the request was made.)
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != launcher) _exit(1);
            *child = become_rank(L, r, attempt, region, bytes);
            return 0;
        }
        pids[r] = pid;
    }
    // The grace: every rank still waiting on the failed one times out within
    // --timeout of the failure (its wait began before it), and 2 s more lets a
    // rank slowed by the machine (or by the sanitizers) print its diagnosis.
    int status = supervise(pids, n, L->cfg->timeout_s + 2.0, first);
    if (region) munmap(region, bytes);
    return status;
}

// The parent is the supervisor: it forks the ranks, waits for them, and (stage 07)
// starts them all again when one died, up to max_restarts times. Only the ranks return.
static Comm *launch_builtin(const CommConfig *cfg, const LaunchNodes *ln, int n) {
    Launcher L = {.cfg = cfg, .ln = *ln, .n = n, .n0 = n, .last_unit = -1};
    for (int r = 0; r < n; r++) L.slot[r] = r;
    cpu_set_t allowed;
    L.cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : online_cpus();
    // Under an outer supervisor (07_fault_tolerance/supervise.sh) this launcher is itself
    // attempt k of a job: its ranks count their attempts from there, so a restarted
    // job resumes (and a fault meant for attempt 0 does not strike again).
    L.base = comm_attempt();
    for (int attempt = 0;; attempt++) {
        double t0 = now_seconds();
        Comm *child = NULL;
        int first, status = run_attempt(&L, attempt, &child, &first);
        if (child) return child;
        if (status == 0 || attempt == cfg->max_restarts) {
            if (attempt > 0)
                fprintf(stderr, "supervisor: %s after %d restart%s\n", status == 0 ? "the job "
                        "finished" : "giving up: the job failed again", attempt, attempt == 1 ? "" : "s");
            exit(status);
        }
        int unit = first >= 0 ? L.slot[first] / unit_size(&L) : -1;
        if (cfg->elastic && first >= 0 && unit == L.last_unit && L.n > 1) elastic_give_up(&L, first);
        else L.last_unit = unit;
        log_event("restart");  // every rank of the failed attempt reaped: start again
        fprintf(stderr, "supervisor: attempt %d failed after %.1f s (above: which rank, and how); "
                "restart %d of at most %d: %d rank%s, from the latest good checkpoint\n",
                attempt + 1, now_seconds() - t0, attempt + 1, cfg->max_restarts, L.n,
                L.n == 1 ? "" : "s");
    }
}

Comm *comm_launch(const CommConfig *cfg) {
    const char *ompi_rank = env("OMPI_COMM_WORLD_RANK");
    const char *torch_rank = env("RANK");
    if (ompi_rank || env("PMI_RANK")) {  // under mpirun
        int rank = 0, size = 1;
        CHECK(mpi_launch_init(&rank, &size), "launched by mpirun, but this binary was built "
              "without MPI (mpicc was not found at build time)");
        CHECK(size <= COMM_MAX_RANKS, "%d ranks: at most %d are supported", size, COMM_MAX_RANKS);
        Comm *c = comm_new(rank, size, LAUNCH_MPIRUN, cfg);
        c->spin_s = spin_seconds(env_int("OMPI_COMM_WORLD_LOCAL_SIZE", size), online_cpus());
        set_local(c, env_int("OMPI_COMM_WORLD_LOCAL_SIZE", size));
        c->node_size = node_size(size, "OMPI_COMM_WORLD_LOCAL_SIZE", 0);
        // The shm channels are mapped before the built-in launcher forks; ranks that
        // mpirun started have no such region, so under mpirun shm means MPI.
        if (cfg->transport == TRANSPORT_TCP) tcp_transport_init(c);
        else mpi_transport_init(c);
        mpi_group_comm(c, &c->world);
        return c;
    }
    if (torch_rank) {  // torchrun's convention
        int rank = env_int("RANK", 0), size = env_int("WORLD_SIZE", 1);
        CHECK(cfg->transport != TRANSPORT_MPI, "--transport mpi needs mpirun; ranks started by "
              "torchrun's variables use tcp, and shm inside a node (LOCAL_WORLD_SIZE)");
        CHECK(env("WORLD_SIZE"), "RANK is set but WORLD_SIZE is not (torchrun convention needs "
              "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
        CHECK(rank < size, "RANK=%d is not below WORLD_SIZE=%d", rank, size);
        CHECK(size <= COMM_MAX_RANKS, "WORLD_SIZE=%d: at most %d ranks are supported", size,
              COMM_MAX_RANKS);
        Comm *c = comm_new(rank, size, LAUNCH_TORCHRUN, cfg);
        c->spin_s = spin_seconds(env_int("LOCAL_WORLD_SIZE", size), online_cpus());
        set_local(c, env_int("LOCAL_WORLD_SIZE", size));
        c->node_size = node_size(size, env("LOCAL_WORLD_SIZE") ? "LOCAL_WORLD_SIZE" : NULL, 0);
        c->transport = TRANSPORT_TCP;
        tcp_transport_init(c);
        // The ranks of a node (LOCAL_WORLD_SIZE says which: without it, nothing does)
        // then talk through shared memory, unless --transport tcp asked for sockets.
        if (cfg->transport != TRANSPORT_TCP && env("LOCAL_WORLD_SIZE") && c->node_size > 1)
            hybrid_transport_after_tcp(c, cfg->shm_stores);
        return c;
    }
    int n = cfg->np > 0 ? cfg->np : 1;
    CHECK(n <= COMM_MAX_RANKS, "--np %d: at most %d ranks are supported", n, COMM_MAX_RANKS);
    CHECK(cfg->transport != TRANSPORT_MPI, "--transport mpi needs mpirun; the built-in launcher "
          "uses shm (and tcp between its --nodes), or tcp for every pair");
    LaunchNodes ln;
    launch_nodes_plan(&ln, cfg->nodes > 0 ? cfg->nodes : 1, cfg->cluster, n);
    CHECK(ln.nodes == 1 || node_size(n, NULL, ln.node_size) == ln.node_size, "COURSE_NODE_RANKS=%s "
          "disagrees with --nodes %d of %d ranks each", env("COURSE_NODE_RANKS"), ln.nodes,
          ln.node_size);
    if (n == 1 && cfg->max_restarts == 0 && !ln.cluster) {
        Comm *c = comm_new(0, 1, LAUNCH_SINGLE, cfg);
        shm_transport_init(c, NULL, 0, cfg->shm_stores);
        log_report_crashes();
        return c;
    }
    return launch_builtin(cfg, &ln, n);
}

int comm_planned_size(const CommConfig *cfg) {
    if (env("OMPI_COMM_WORLD_RANK")) return env_int("OMPI_COMM_WORLD_SIZE", 1);
    if (env("PMI_RANK")) return env_int("PMI_SIZE", 1);
    if (env("RANK")) return env_int("WORLD_SIZE", 1);
    return cfg->np > 0 ? cfg->np : 1;
}

void comm_finalize(Comm *c) {
    if (!c) return;
    if (c->ops && c->ops->finalize) c->ops->finalize(c);
    if (c->launch == LAUNCH_MPIRUN) mpi_launch_finalize();
    free(c);
}

