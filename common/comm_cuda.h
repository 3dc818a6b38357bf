// comm_cuda.h — collectives on GPU buffers: NCCL, or our own ring over CUDA IPC.
//
// The host transports (comm.h) move host memory. When the gradients live on a
// GPU, copying them to the host and back costs two PCIe crossings per step; the
// collectives here work on device pointers directly, two ways:
//
//   NCCL      real multi-GPU, one process per GPU. The NCCL unique id travels
//             from the group's member 0 to the others over the host transport
//             (the "launch channel"), then every member calls ncclCommInitRank.
//   CUDA IPC  several processes sharing one GPU (the course's one-GPU simulation
//             of N ranks; NCCL refuses two ranks on one GPU). Every rank exports
//             a device buffer of its own (its "outbox") with cudaIpcGetMemHandle;
//             the others map it with cudaIpcOpenMemHandle and read from it. The
//             ring all-reduce of ring.c then runs on device memory: step k reads
//             the left neighbour's shard straight out of its outbox and adds it
//             into ours with a kernel; small host messages say "my shard for
//             step k is ready". The protocol is documented in comm_cuda_ipc.cu.
//
// Both sit behind one object, GpuComm, which the caller creates once per group
// and passes to every GPU collective. The collectives have the semantics of
// collectives.h (in place, shard_range's split, fp32 or bf16 summed in fp32 and
// rounded once per addition) and, like every wait in the course, give up after
// the comm timeout with a diagnostic naming the collective, its sequence number
// and the group. They return when the result is in the buffer (the host polls
// the GPU with the timeout), so a stuck peer can never hang a rank silently.
//
// CUDA does not survive fork: a process that has touched CUDA must not fork
// ranks afterwards. So: comm_launch first, then ctx_init_device in every rank. To
// ask "is there a GPU?" before launching, use cuda_probe_forked (cuda_probe.h:
// it asks in a child process) or gpu_check_launch.
//
// Point to point on device buffers (stage 05's pipeline) rides on the same
// object: gpu_isend / gpu_irecv below, over CUDA IPC or NCCL.
//
// The code: comm_cuda.cu (the object, waiting, placement, the API),
// comm_cuda_nccl.cu, comm_cuda_ipc.cu, comm_cuda_p2p.cu (point to point),
// gpu_clock.cu (GPU times for timelines); which GPU a rank takes is
// cuda_probe.c's. All of it is in the backend's library, libcourse_cuda.so,
// which cuda_plugin.c loads on the first call; in a build without nvcc there is
// none, and everything here that needs a GPU stops with "this build has no CUDA".
#pragma once
#include <stddef.h>

#include "comm.h"
#include "ctx.h"
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GPU_AUTO = 0,  // NCCL when every rank has a GPU of its own, CUDA IPC when some share one
    GPU_NCCL,      // NCCL (falls back to CUDA IPC, saying why, when ranks share a GPU)
    GPU_IPC,       // our ring over CUDA IPC (all ranks on one machine)
} GpuAlgo;
const char *gpu_algo_name(GpuAlgo a);  // "auto", "nccl", "ipc"

typedef struct GpuComm GpuComm;

// Before launching N ranks with --device cuda (the built-in launcher; call it
// before comm_launch, which forks): probes in a child process (cuda_probe.h) and
// exits with a clear message if there is no usable GPU, or if the ranks would
// share a GPU whose compute mode forbids it (exclusive-process, prohibited).
// Never changes a GPU's settings.
void gpu_check_launch(int np);

// The GPU this rank should use: its local rank modulo the number of devices, so
// that more ranks than GPUs share them round-robin. The local rank comes from
// LOCAL_RANK (torchrun), OMPI_COMM_WORLD_LOCAL_RANK (mpirun) or SLURM_LOCALID
// (srun), in that order, when set; under the built-in launcher (whose ranks
// inherit the launcher's environment) and otherwise, from the world rank. Exits
// naming the reason if there is no usable device, or if this machine's ranks
// (comm_local_size) would share a GPU whose compute mode forbids it.
int gpu_pick_device(const Comm *c);

// Collective over g (every member calls it, with the same `want`): exchanges
// each member's GPU (UUID, PCI bus id, host name) over the host transport and
// picks NCCL or CUDA IPC as `want` asks and the placement allows. ctx must be a
// CUDA context (ctx_init_device); its stream and ledger are used (buffers are
// charged as MEM_COMM). g must outlive the GpuComm.
GpuComm *gpu_comm_new(Comm *c, Group *g, Ctx *ctx, GpuAlgo want);
// The same, except where the CUDA IPC ring cannot connect every member (one
// member's GPU is hidden from another's process, or two GPUs have no
// peer-to-peer path): there every member returns NULL, with the reason in why,
// where gpu_comm_new exits. Tests use it to skip, not die, on such machines.
GpuComm *gpu_comm_try(Comm *c, Group *g, Ctx *ctx, GpuAlgo want, char *why, size_t n);
// Collective too (peers unmap each other's buffers before they are freed).
// NULL is allowed. Call before ctx_destroy and comm_finalize.
void gpu_comm_free(GpuComm *gc);
GpuAlgo gpu_comm_algo(const GpuComm *gc);   // GPU_NCCL or GPU_IPC: what was chosen
int gpu_comm_shared(const GpuComm *gc);     // 1 if two or more ranks use one GPU
// One line for logs and table headers, e.g. "CUDA IPC ring, 4 ranks on 1 GPU
// (NVIDIA H100 80GB HBM3)" or "NCCL 2.28.9, 8 ranks on 8 GPUs (...)".
const char *gpu_comm_describe(const GpuComm *gc);

// The collectives, on device buffers of `count` elements (fp32 or bf16). Every
// member of the group calls them with the same count. They advance the group's
// sequence number and the Comm's counters like the host collectives do (the
// counters get the bytes moved between GPUs; the small host handshakes of the
// IPC ring are control, not payload, and are not counted).
void gpu_allreduce(GpuComm *gc, void *buf, size_t count, DType dt);
void gpu_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt);
void gpu_all_gather(GpuComm *gc, void *buf, size_t count, DType dt);
void gpu_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root);

// Over blocks of any size (stage 03's shards, collectives_v.h): member i's block
// is [lo[i], hi[i]); the blocks tile the buffer in member order, empty ones too.
void gpu_reduce_scatter_v(GpuComm *gc, void *buf, size_t count, const size_t *lo,
                          const size_t *hi, DType dt);
void gpu_all_gather_v(GpuComm *gc, void *buf, size_t count, const size_t *lo, const size_t *hi,
                      DType dt);

// Collectives beside the compute (stage 03). After gpu_comm_own_stream, gc queues
// its work on a stream of its own instead of the compute stream, so a collective
// run by a progress thread overlaps the kernels the compute thread queues. Its
// data must still be ready first: the compute thread records an event on its
// stream when it hands a buffer over (gpu_event_after_compute), and the progress
// thread makes gc's stream wait for that event (gpu_comm_after, which also frees
// it). The collectives still return only when their result is complete, so the
// compute thread may use it as soon as its wait returns.
void gpu_comm_own_stream(GpuComm *gc);
void *gpu_event_after_compute(Ctx *ctx);
void gpu_comm_after(GpuComm *gc, void *event);
// Blocks the host until the event has fired, then frees it.
void gpu_event_sync(void *event);
// 1 if p is device (or managed) memory. Host collectives then must not touch it.
int gpu_is_device_pointer(const void *p);

// ---- point to point on device buffers (stage 05's pipeline) ----
//
// One member's device buffer to another's, posted without blocking and finished
// by gpu_test / gpu_wait: comm_isend / comm_irecv (comm.h) for GPU memory. Two
// transports, as gc chose:
//
// CUDA IPC (ranks sharing a GPU, or the GPUs of one machine: create gc with
// GPU_IPC). Every member keeps one OUTBOX per peer it sends to, a device buffer
// that the peer maps once; a send is copied into it on the GPU, small host
// messages say READY (the outbox holds message k) and TAKEN (the receiver has
// copied it out: the outbox may be reused). The protocol, and why no message is
// read half-written or overwritten while read: comm_cuda_p2p.cu. Each message
// moves by itself, as host messages do.
//
// NCCL (one process per GPU, across machines too). Messages posted since the
// last wait go out together, as one NCCL group, at the next gpu_wait or
// gpu_wait_first (gpu_test does not send them out); each rank's groups then run
// in the order they went out, and a message completes with its whole group.
// Which schedules can finish that way is the caller's to prove (stage 05's
// sched_check_serialized); comm_cuda_p2p_nccl.cu says why. Every member calls
// gpu_p2p_prepare before its first message.
//
// Ordering with the compute: a send reads buf after the work queued on the
// compute stream before gpu_isend (the kernels that wrote it); a receive writes
// buf after the work queued before gpu_irecv (kernels still reading what the
// buffer held). A completed receive's data is in buf: work queued afterwards
// sees it. Between posting and completion buf must stay untouched and alive.
//
// Matching, as for host messages: between two members the messages arrive in
// the order they were posted, each in the receive posted in the same place, and
// the sizes must agree (checked, naming both). A send completes when its
// receiver has TAKEN it — like a host message larger than the transport's
// channel — so post the receives before waiting for the sends. No GPU collective
// may run on gc while point-to-point messages are in flight (they share its host
// channel, or its NCCL communicator). Over NCCL the sizes cannot be checked: a
// receive's must equal its send's.
typedef struct GpuRequest GpuRequest;
// Collective over gc's group, before any member's first message: over NCCL,
// connects each member to its ring neighbours (the members a pipeline talks to;
// NCCL connects two ranks at their first message, which both must reach at
// once); over CUDA IPC nothing.
void gpu_p2p_prepare(GpuComm *gc);
GpuRequest *gpu_isend(GpuComm *gc, int peer, const void *buf, size_t bytes);
GpuRequest *gpu_irecv(GpuComm *gc, int peer, void *buf, size_t bytes);
// Moves r along without blocking (the GPU's copies, the host messages); 1 when
// it is complete (then gpu_wait frees it at once).
int gpu_test(GpuComm *gc, GpuRequest *r);
// Waits for all n requests and frees them. Like every wait in the course it gives
// up after the comm timeout, or when a peer's process has exited, naming the
// peer, the message (its number, size and direction) and the step it was at.
void gpu_wait(GpuComm *gc, GpuRequest **reqs, int n);
// Waits for reqs[0] only (and frees it), moving reqs[1..n) along meanwhile: the
// pipeline's wait for one message (comm_wait_first's twin).
void gpu_wait_first(GpuComm *gc, GpuRequest **reqs, int n);

// ---- timing on the GPU (stage 05's timeline) ----
//
// The host only queues GPU work, so the host's clock says when an action was
// queued, not when it ran. A GpuClock records CUDA events ("marks") on the
// compute stream and, once the work has run, converts them to host seconds
// (timer.h's now_seconds clock, which the timeline uses): the origin is an event
// recorded on an idle stream at a noted host time; mark i is the origin's time
// plus cudaEventElapsedTime(origin, mark i).
typedef struct GpuClock GpuClock;
GpuClock *gpu_clock_new(Ctx *ctx);   // ctx: a CUDA context
void gpu_clock_free(GpuClock *k);    // NULL is allowed
// A new round: waits (at most timeout_s) for the work already queued, notes the
// origin, forgets earlier marks.
void gpu_clock_start(GpuClock *k, double timeout_s);
// An event on the compute stream, after everything queued so far; its number.
int gpu_clock_mark(GpuClock *k);
// Waits (at most timeout_s) for every mark, then gpu_clock_time gives mark i in
// host seconds.
void gpu_clock_read(GpuClock *k, double timeout_s);
double gpu_clock_time(const GpuClock *k, int mark);

// The device's copy bandwidth: a cudaMemcpy device to device of `bytes`, timed
// with CUDA events, counting bytes read plus bytes written (the figure that
// busbw of ranks sharing one GPU can be compared with). GB/s. Local: not a
// collective.
double gpu_copy_bandwidth(Ctx *ctx, size_t bytes);

#ifdef __cplusplus
}
#endif
