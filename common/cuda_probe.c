// cuda_probe.c — the meaning of the CUDA probe (cuda_probe.h), and which GPU a
// rank takes (comm_cuda.h's gpu_pick_device, gpu_check_launch).
//
// Plain C, in every build: cuda_probe_query (cuda_query.cu, through
// cuda_plugin.c) supplies the raw answer, and everything
// that decides what it means lives here, once, for builds with and without CUDA.
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "comm.h"
#include "comm_cuda.h"
#include "cuda_probe.h"
#include "timer.h"

// cudaComputeMode's values (driver_types.h; cuda_query.cu asserts them).
const char *cuda_compute_mode_name(int mode) {
    switch (mode) {
        case 0: return "default";
        case 1: return "exclusive-thread";
        case 2: return "prohibited";
        case 3: return "exclusive-process";
        default: return "unknown";
    }
}

// NVIDIA display or 3D controllers (PCI vendor 0x10de, class 0x03xxxx) in
// /sys; -1 when the bus cannot be read. Bridges and the GPUs' audio functions
// have other classes and do not count. COURSE_FAKE_PCI_ROOT replaces
// /sys/bus/pci/devices (a test hook: a folder of DEVICE/vendor, DEVICE/class).
static const char *pci_root(void) {
    const char *r = getenv("COURSE_FAKE_PCI_ROOT");
    return r && *r ? r : "/sys/bus/pci/devices";
}

static unsigned long read_hex(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", pci_root(), dir, name);
    FILE *f = fopen(path, "r");
    unsigned long x = 0;
    if (f) {
        if (fscanf(f, "%lx", &x) != 1) x = 0;
        fclose(f);
    }
    return x;
}

static int nvidia_pci_gpus(void) {
    DIR *d = opendir(pci_root());
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        if (read_hex(e->d_name, "vendor") == 0x10de && read_hex(e->d_name, "class") >> 16 == 0x03)
            n++;
    }
    closedir(d);
    return n;
}

static void versions(const CudaProbe *p, char *buf, size_t n) {
    snprintf(buf, n, "driver %d.%d, runtime %d.%d", p->driver_version / 1000,
             p->driver_version % 1000 / 10, p->runtime_version / 1000,
             p->runtime_version % 1000 / 10);
}

void cuda_probe(CudaProbe *p) {
    memset(p, 0, sizeof *p);
    cuda_probe_query(p);
    char ver[64];
    versions(p, ver, sizeof ver);
    if (p->state == CUDA_NOT_BUILT) {
        snprintf(p->why, sizeof p->why, "this build has no CUDA (nvcc was not found at build time)");
        return;
    }
    if (p->state == CUDA_BROKEN) return;  // the backend's library would not load: p->why says why
    if (p->no_driver) p->nvidia_pci = nvidia_pci_gpus();
    if (p->error == 0 && p->devices > 0) {
        p->state = CUDA_READY;
        snprintf(p->why, sizeof p->why, "%d CUDA device%s (%s)", p->devices,
                 p->devices == 1 ? "" : "s", ver);
    } else if (p->error == 0 || p->is_no_device) {
        p->state = CUDA_NO_DEVICE;
        snprintf(p->why, sizeof p->why, "no CUDA device (cudaGetDeviceCount: %s: %s; %s)",
                 p->error ? p->error_name : "0 devices", p->error ? p->error_text : "none", ver);
    } else if (p->no_driver && p->nvidia_pci <= 0) {
        p->state = CUDA_NO_DEVICE;
        snprintf(p->why, sizeof p->why, "no CUDA device: no CUDA driver is installed "
                 "(cudaGetDeviceCount: %s, cudaDriverGetVersion: 0) and %s", p->error_name,
                 p->nvidia_pci == 0 ? "no NVIDIA GPU is on the PCI bus"
                                    : "the PCI bus cannot be read (/sys/bus/pci)");
        // Only a real "no driver" answer comes here, so a fake is of the bus.
        if (getenv("COURSE_FAKE_PCI_ROOT")) snprintf(p->fake, sizeof p->fake, "COURSE_FAKE_PCI_ROOT");
    } else if (p->no_driver) {
        p->state = CUDA_BROKEN;
        if (getenv("COURSE_FAKE_PCI_ROOT")) snprintf(p->fake, sizeof p->fake, "COURSE_FAKE_PCI_ROOT");
        snprintf(p->why, sizeof p->why, "CUDA is broken: %d NVIDIA GPU%s on the PCI bus but no "
                 "CUDA driver is loaded (cudaGetDeviceCount: %s: %s; %s)", p->nvidia_pci,
                 p->nvidia_pci == 1 ? " is" : "s are", p->error_name, p->error_text, ver);
    } else {
        p->state = CUDA_BROKEN;
        snprintf(p->why, sizeof p->why, "CUDA is present but broken: cudaGetDeviceCount failed "
                 "with %s: %s (%s)", p->error_name, p->error_text, ver);
    }
    if (p->fake[0]) {
        size_t len = strlen(p->why);
        snprintf(p->why + len, sizeof p->why - len, " [faked by %s]", p->fake);
    }
}

__attribute__((format(printf, 2, 3)))
static void probe_failed(CudaProbe *p, const char *fmt, ...) {
    memset(p, 0, sizeof *p);
    p->state = CUDA_BROKEN;
    p->error = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
}

// Driver start-up takes seconds on a large machine; two minutes is a hang.
#define PROBE_TIMEOUT_S 120.0

void cuda_probe_forked(CudaProbe *p) {
    int fd[2];
    if (pipe(fd) != 0) {
        probe_failed(p, "cannot create a pipe for the CUDA probe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        probe_failed(p, "cannot fork the CUDA probe: %s", strerror(errno));
        return;
    }
    if (pid == 0) {  // the child initializes CUDA, answers through the pipe, and is gone
        close(fd[0]);
        CudaProbe q;
        cuda_probe(&q);
        const char *b = (const char *)&q;
        for (size_t off = 0; off < sizeof q;) {
            ssize_t w = write(fd[1], b + off, sizeof q - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) _exit(1);
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    CudaProbe got;
    size_t have = 0;
    int hung = 0;
    double deadline = now_seconds() + PROBE_TIMEOUT_S;
    while (have < sizeof got) {
        double left = deadline - now_seconds();
        struct pollfd pf = {fd[0], POLLIN, 0};
        int r = left > 0 ? poll(&pf, 1, (int)(left * 1000) + 1) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            hung = 1;
            kill(pid, SIGKILL);
            break;
        }
        ssize_t n = read(fd[0], (char *)&got + have, sizeof got - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // the child is gone
        have += (size_t)n;
    }
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (have == sizeof got) {
        *p = got;
        return;
    }
    char how[64];
    if (hung) snprintf(how, sizeof how, "no answer in %.0f s", PROBE_TIMEOUT_S);
    else if (WIFSIGNALED(st)) snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(st));
    else snprintf(how, sizeof how, "exit status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    probe_failed(p, "CUDA is broken: the CUDA probe (cudaGetDeviceCount in a child process) ended "
                 "without an answer (%s)", how);
}

int cuda_probe_can_share(const CudaProbe *p, int ranks, char *why, size_t n) {
    if (p->state != CUDA_READY || ranks <= p->devices) return 1;
    for (int d = 0; d < p->devices && d < CUDA_PROBE_MAX_DEVICES; d++) {
        int here = (ranks - d + p->devices - 1) / p->devices;  // ranks r with r % devices == d
        int m = p->compute_mode[d];
        if (here < 2 || m == 0) continue;
        snprintf(why, n, "%d ranks would share GPU %d, whose compute mode is %s: %s", here, d,
                 cuda_compute_mode_name(m),
                 m == 2 ? "no process may use it"
                        : "one process at a time may use it, so every rank after the first would "
                          "fail to create its CUDA context");
        if (p->fake[0]) {  // a test hook left set must not pass for the machine's own answer
            size_t len = strlen(why);
            snprintf(why + len, n - len, " [faked by %s]", p->fake);
        }
        return 0;
    }
    return 1;
}

int cuda_probe_gate(const CudaProbe *p, const char *test) {
    switch (p->state) {
        case CUDA_READY: return 0;
        case CUDA_NOT_BUILT:
        case CUDA_NO_DEVICE:
            printf("SKIP %s: %s\n", test, p->why);
            fflush(stdout);
            return 77;
        default:
            printf("FAIL %s.cuda_probe  %s\n", test, p->why);
            fflush(stdout);
            return 1;
    }
}

// ---------------------------------------------------------------- which GPU

#define NO_SHARING_ADVICE                                                                     \
    "give every rank its own GPU, or have an administrator set the default mode "            \
    "(nvidia-smi -c DEFAULT); this program never changes a GPU's settings"

void gpu_check_launch(int np) {
    CudaProbe p;
    cuda_probe_forked(&p);
    CHECK(p.state == CUDA_READY, "--device cuda: %s", p.why);
    char why[300];
    if (!cuda_probe_can_share(&p, np, why, sizeof why))
        DIE("--np %d --device cuda on %d GPU%s: %s; " NO_SHARING_ADVICE, np, p.devices,
            p.devices == 1 ? "" : "s", why);
}

// This rank's index among the ranks of its machine, and where it came from.
// External launchers say it in the environment: torchrun LOCAL_RANK, mpirun
// OMPI_COMM_WORLD_LOCAL_RANK, Slurm's srun SLURM_LOCALID (in that order: under
// mpirun or torchrun inside a Slurm job, SLURM_LOCALID describes the launcher's
// own task, not the rank). The built-in launcher's ranks inherit the parent's
// environment, which describes the parent, so there the rank itself is used.
static int local_rank(const Comm *c, char *from, size_t n) {
    static const char *vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
    if (comm_launch_mode(c) != LAUNCH_FORK)
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
            const char *v = getenv(vars[i]);
            if (!v || !*v) continue;
            char *end;
            long x = strtol(v, &end, 10);
            CHECK(*end == '\0' && x >= 0 && x < 1 << 20, "%s='%s' is not a valid local rank",
                  vars[i], v);
            snprintf(from, n, "%s=%ld", vars[i], x);
            return (int)x;
        }
    int slot = comm_slot(c);  // the built-in launcher's: the rank, or its elastic slot
    if (slot == comm_rank(c)) snprintf(from, n, "rank %d", slot);
    else snprintf(from, n, "slot %d of rank %d", slot, comm_rank(c));
    return slot;
}

int gpu_pick_device(const Comm *c) {
    CudaProbe p;
    cuda_probe(&p);  // in this rank, which is about to use CUDA anyway
    CHECK(p.state == CUDA_READY, "--device cuda: %s", p.why);
    // Ranks of this machine beyond its GPUs share them: each shared GPU must allow it.
    char why[300];
    if (!cuda_probe_can_share(&p, comm_local_size(c), why, sizeof why))
        DIE("--device cuda: %s; " NO_SHARING_ADVICE, why);
    char from[64];
    int local = local_rank(c, from, sizeof from), dev = local % p.devices;
    // Launchers' variables are where rank-to-GPU mistakes hide: say what was read.
    if (comm_launch_mode(c) != LAUNCH_FORK && strchr(from, '='))
        log_info("GPU %d of %d (from %s)", dev, p.devices, from);
    return dev;
}
