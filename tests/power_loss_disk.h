// power_loss_disk.h — a simulated disk that can lose power between any two of
// its calls, behind the FsOps table (checkpoint.h) a commit protocol writes
// through, and the enumeration of every state such a power cut may leave.
//
// Why a simulation: a real power cut cannot be scheduled between two system
// calls, and a process that dies (without a power cut) loses nothing the kernel
// already holds. So a test hands the code under test this FsOps table over a
// model of what the kernel promises, and cuts the power after call k, for every
// k. The model is ext4's with default options, and POSIX's:
//
//   - write_file puts bytes in the page cache; they are durable only at
//     fsync_file. Until then a crash leaves the file empty (delayed allocation:
//     no blocks yet). Truncating an existing file counts as on the disk at
//     once, its new bytes not: the old "zero-length file after a crash".
//   - a directory's entries (a file created in it, a rename into or out of it)
//     are durable at fsync_dir of that directory. Renames are atomic.
//   - but the other directory changes may reach the disk on their own, without
//     the data they name: ext4's journal commits them every few seconds, in
//     order, so a crash keeps what was fsync'd plus any PREFIX of the rest; and
//     POSIX promises no order at all, so any SUBSET of the rest too. Every such
//     disk state is checked (a model where only fsync'd changes survive would
//     pass a protocol that renames LATEST.tmp over LATEST before fsync'ing it;
//     ext4's auto_da_alloc narrows that case, but it is a heuristic, not a
//     promise, and other file systems lack it).
//
// How a test uses it: sim_reset and sim_add_durable lay out the disk as it is
// before the code under test runs; the code gets &sim.fs with the power cut
// after call k (crash_after: every call from the k-th on fails with EIO, and
// nothing it would have done reaches the disk) or with one call failing
// (fail_call: EIO from that call only). sim_crash_fault then builds every disk
// state the power cut may leave and asks the test's ReaderCheck, state by state,
// what a recovering reader finds wrong.
//
// Every table is fixed-size and every call checks its room: code under test that
// loops, writes unexpected names or renames into missing directories gets errors
// (EIO past MAX_CALLS calls, ENOSPC, ENOENT, ENAMETOOLONG), never an overflow.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"

// MAX_CALLS: the calls recorded (and survivable); any call after them fails with
// EIO, so a caller that loops cannot overflow a table, and a test can see that it
// made more (Sim.calls keeps counting). MAX_NAME: a path component, NUL included.
enum { MAX_INODES = 64, MAX_OPS = 256, MAX_ENTRIES = 256, MAX_CALLS = 64, MAX_DATA = 4096, MAX_NAME = 64 };

typedef struct {
    int is_dir;
    char cache[MAX_DATA], disk[MAX_DATA];  // what a reader sees now; what survives a power
    size_t cache_n, disk_n;                // cut: the bytes at the last fsync_file
} Inode;

// A change to a directory: an entry created (write_file) or moved (rename).
typedef enum { OP_CREATE, OP_RENAME } OpKind;
typedef struct {
    OpKind kind;
    int from_dir, to_dir;   // directory inodes (from_dir: renames only)
    char from[MAX_NAME], to[MAX_NAME];
    int ino;
    int synced_from, synced_to;  // made durable by fsync_dir of that directory
    int call;               // the call that made it; -1: the initial disk
} Op;

typedef struct { int dir, ino; char name[MAX_NAME]; } Entry;
typedef struct { Entry e[MAX_ENTRIES]; int n; } View;  // a tree: the cache's, or one a crash leaves

typedef struct {
    FsOps fs;  // fs.arg points back here
    Inode ino[MAX_INODES];  // ino[0]: the root directory
    Op op[MAX_OPS];
    int n_ino, n_op, calls, crash_after, fail_call;  // crash_after, fail_call: -1 for never
    char call[MAX_CALLS][200];                       // each call, as text
} Sim;

// What a recovering reader finds wrong with a disk state, and what the code
// under test must have done wrong (NULL: no hint).
typedef struct { char what[800]; const char *hint; } Finding;

// An empty disk (the root directory, inode 0) whose FsOps lose power after call
// crash_after, or fail call fail_call (-1: never).
void sim_reset(Sim *s, int crash_after, int fail_call);

// A file holding text (NULL: a directory) named name in directory dir, already
// durable: the disk as it was before the code under test ran. Its inode.
int sim_add_durable(Sim *s, int dir, const char *name, const char *text);

// The tree made by every durable change plus the others that `keep` selects: bit
// k for the k-th of them, in the order they were made (SIM_CACHE: all of them,
// the tree a reader sees now; 0: only what an fsync made durable).
#define SIM_CACHE UINT64_MAX
void sim_build_view(const Sim *s, View *v, uint64_t keep);

// The inode at path (relative to the root) in v, or -1 with errno. With name !=
// NULL, the inode of its parent directory, and its last component in name
// (MAX_NAME bytes).
int sim_resolve(const Sim *s, const View *v, const char *path, char *name);

// Whether the file at path in v holds exactly `want` (on the disk, or with
// disk 0 in the cache): 0 if it does; 1 if it does not exist (or is a
// directory); 2 if its bytes are wrong. `what` says which, by its last component.
int sim_file_fault(const Sim *s, const View *v, const char *path, const char *want, int disk,
                   char *what, size_t n);

// The test's invariant: 0 if the state v (with the bytes on the disk, or with
// disk 0 those in the cache) is whole for a recovering reader, else 1 with f filled.
typedef int (*ReaderCheck)(const Sim *s, const View *v, int disk, Finding *f);

// Every disk state a power cut may leave now: what was fsync'd, plus the other
// directory changes that reached the disk on their own -- first each prefix of
// them (ext4's journal commits them in order), then any other subset (POSIX
// promises no order; up to 10 of them). 0 if check finds all of them whole; else
// 1, with the first broken one described in f (the state appended to f->what).
// *states counts the states checked.
int sim_crash_fault(const Sim *s, ReaderCheck check, Finding *f, int *states);
