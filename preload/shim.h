/* Internal header shared by the shim's modules (not part of the log format: that is mtcprof.h).
 *   core.c       the process state (`shim`), real-symbol lookup, start (environment, log folder check), fork, signals
 *   warn.c       raw writes, the shim's one-line warnings, reading small kernel files
 *   tables.c     paths, file records, open file descriptions, the fd table, the op trace
 *   logwriter.c  the log file: records, where it goes (chroot, change of user), temp file and rename
 *   posix.c      fd-level wrappers: open/close/dup, read/write family, metadata, mmap, exit/exec, vfork
 *   stdio.c      FILE * wrappers
 *   gfarm.c      libgfarm gfs_pio_* wrappers
 * Every symbol is hidden (one .so); the hot path's helpers are static inline here so that each wrapper gets them
 * inlined as it did when the shim was one file.
 *
 * Shape of every wrapper (Darshan-like):
 *     RESOLVE(name);                         real symbol, dlsym(RTLD_NEXT) once
 *     if (!shim.on || <fd not tracked>) return real(...);  pass-through
 *     t0 = CALL_START(); ret = real(...); t1 = CALL_END();  SAVE_ERRNO; record(...); RESTORE_ERRNO; return ret;
 * Hot path (read/write family on a tracked fd): one table load fd -> ofd -> file record, two rdtsc, plain adds
 * while the process is single threaded (__libc_single_threaded) and relaxed atomics otherwise.  No heap, no lock.
 * The shim's own I/O (log writing, /proc reads) uses raw syscalls, never the wrapped entry points.
 */
#ifndef MTCPROF_SHIM_H
#define MTCPROF_SHIM_H
#define _GNU_SOURCE
#define __NO_INLINE__ 1   /* no extern-inline stdio (getc_unlocked...) in the headers: we define some of them */
#include "mtcprof.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TLS __thread __attribute__((tls_model("initial-exec")))
/* the counter helpers below fold to a few instructions once their counter is a constant: always inlined (left to
 * itself GCC calls rec_rw and CADD out of line, ~20 instructions per counter instead of ~3) */
#define HOT static inline __attribute__((always_inline))
#define SHIM_VERSION "mtcprof-shim 1.3 (log format 3)"

#pragma GCC visibility push(hidden)

/* ---------------------------------------------------------------- sizes */
#define FD_MAX (1 << 16)
#define FREC_MAX (1 << 16)
#define NBUCKETS (1 << 14)            /* path hash chains: 64 KiB of heads, touched as files appear */
#define OFD_MAX (1 << 16)
#define PATHS_BYTES (16u << 20)
#define GF_SLOTS 4096
#define GF_SLOT_BYTES 16              /* gfarm.c: struct gfslot */
#define MAX_PREFIX 32
#define ARGV_MAX_BYTES 32768

/* ---------------------------------------------------------------- state */
/* A file record is split in two so that the memory a typical file touches stays small (a first-touch page fault
 * costs ~1.5 us in a VM, more than everything else a new file costs): the hot part (128 bytes, t->frecs[i]) holds the
 * counters nearly every file uses, as 32-bit counts (times in clock ticks) and 8-bit size bins, plus the three that
 * need 64 bits; the cold part holds the rarely used counters and the carries of the narrow ones (2^32 per wrap of a
 * counter, 256 per wrap of a bin).  Cold parts are handed out in order of first use (f->cold), so the few files that
 * need one (a mkdir'd folder, a seek) share pages instead of touching one page each. */
enum hot_counter {
    H_OPENS, H_CREATES, H_CLOSES, H_READS, H_WRITES, H_BYTES_READ, H_BYTES_WRITTEN, H_STATS, H_ERRORS,
    H_T_OPEN, H_T_READ, H_T_WRITE, H_T_CLOSE, H_T_META, NHOT
};
enum wide_counter { W_MAX_OFFSET, W_FIRST_OPEN, W_LAST_CLOSE, NWIDE };
#define NCOLD (NCOUNTERS - NHOT - NWIDE)
struct frec {
    uint64_t last_end;                /* end offset of the previous read/write (discontinuity check) */
    uint64_t w[NWIDE];                /* timestamps in clock ticks until written out */
    uint32_t path_off, hash;          /* path: t->paths + path_off */
    uint32_t next;                    /* hash chain: index + 1 of the next record, 0 = end */
    uint16_t path_len, flags;
    uint32_t c[NHOT];                 /* low 32 bits */
    uint8_t hr[NBINS], hw[NBINS];     /* low 8 bits of the size bins */
    uint32_t cold;                    /* index + 1 of the cold part, 0 = none yet */
};
_Static_assert(sizeof(struct frec) == 128, "hot file record is 128 bytes");
struct fcold {
    uint64_t c[NCOLD];
    uint64_t c_hi[NHOT];              /* carries of the narrow counters */
    uint64_t hr_hi[NBINS], hw_hi[NBINS];
};
/* counter -> narrow hot slot (0..NHOT-1), WIDE + wide slot, or ~cold slot */
#define WIDE 64
static const signed char g_cmap[NCOUNTERS] = {
    [C_OPENS] = H_OPENS, [C_CREATES] = H_CREATES, [C_CLOSES] = H_CLOSES, [C_READS] = H_READS, [C_WRITES] = H_WRITES,
    [C_BYTES_READ] = H_BYTES_READ, [C_BYTES_WRITTEN] = H_BYTES_WRITTEN, [C_SEEKS] = ~0, [C_READ_DISCONT] = ~1,
    [C_WRITE_DISCONT] = ~2, [C_MAX_OFFSET] = WIDE + W_MAX_OFFSET, [C_STATS] = H_STATS, [C_FSYNCS] = ~3,
    [C_UNLINKS] = ~4, [C_RENAMES] = ~5, [C_MKDIRS] = ~6, [C_RMDIRS] = ~7, [C_TRUNCATES] = ~8, [C_MMAPS] = ~9,
    [C_MMAP_BYTES] = ~10, [C_DUPS] = ~11, [C_ERRORS] = H_ERRORS, [C_T_OPEN] = H_T_OPEN, [C_T_READ] = H_T_READ,
    [C_T_WRITE] = H_T_WRITE, [C_T_CLOSE] = H_T_CLOSE, [C_T_META] = H_T_META, [C_FIRST_OPEN] = WIDE + W_FIRST_OPEN,
    [C_LAST_CLOSE] = WIDE + W_LAST_CLOSE, [C_SEEKS_END] = ~12,
};
_Static_assert(NCOLD == 13, "cold counter count matches g_cmap");
struct ofd {                          /* one open file description (shared by dup'd fds) */
    struct frec *f;
    int64_t pos;                      /* our idea of the file offset; -1 unknown */
    uint32_t refs, next;
};

/* ---------------------------------------------------------------- the process state */
/* Everything the shim keeps for its process image is one struct, struct shim_process, defined once (core.c: `shim`).
 * Modules below the wrappers never name that object: they get the part they work on as an argument, so what each
 * needs from the others is in its functions' signatures.  The modules, each using only those below it:
 *     warn.c       raw writes, warnings, kernel files            struct shim_warn
 *     tables.c     paths, file records, ofds, fd table, op trace  struct shim_tables
 *     logwriter.c  the log file                                   reads the whole struct; changes shim_writer,
 *                                                                 shim_site and how the image ended (shim_end)
 *     core.c       start, fork, signals, real symbols             defines `shim`
 *     posix.c, stdio.c, gfarm.c   the wrappers                     `shim` ("the wrappers' view" below)
 * Outside it: per-thread values (TLS), each wrapper's resolved real symbol (real_<name>, the wrapper's own cache) and
 * the program's main (core.c, set before the shim starts, traced or not).  gfarm.c's handle table (used by no other
 * module) is in the reservation, reached through gf_slots: 64 KiB that stay untouched in a process that never calls
 * libgfarm. */

/* the environment's options, as read at start (strings in the packed area, see core.c: mtc_init) */
struct shim_opts {
    char *incl_raw, *excl_raw;        /* MTCPROF_INCLUDE / MTCPROF_EXCLUDE as given (copied into the log) */
    char *mounts_raw;                 /* MTCPROF_GFARM_MOUNTS */
    int mounts_given;                 /* it was set: the launcher listed the gfarm2fs mounts */
    char *cpus_online;                /* MTCPROF_CPUS_ONLINE ("" unset): /sys/devices/system/cpu/online as the
                                       * launcher read it, so that no traced process opens sysfs (~20 us) */
};
#define CPUS_ONLINE_MAX 256
/* who the process image is: the strings and numbers of its PROC record */
struct shim_task {
    pid_t pid;
    uint32_t origin;                  /* 0 exec'd image, 1 fork child */
    uint64_t parent_start_ns;         /* fork child: the parent image's start */
    char *dir, *host, *run, *task, *stage, *cwd0;   /* log folder, attribution strings, cwd at start */
    char *argv;                       /* argv as it was at start (programs may rewrite theirs), at most ARGV_MAX_BYTES */
    size_t argv_len;
    int argv_trunc;
};
/* the clock: ticks (TSC or monotonic ns) -> realtime ns, and the kernel's counters at the image's start */
struct shim_clock {
    uint64_t tick0, mono0, real0;
    char uptime0[48];                 /* /proc/uptime (see cpu_clock in logwriter.c) */
    size_t uptime0_len;
    char sched0[80];                  /* /proc/self/schedstat (see sched_clock in logwriter.c) */
    size_t sched0_len;
};
/* how the image ends */
struct shim_end {
    int exit_status;                  /* -1 unknown */
    uint32_t ended_by;
    int signal;
    int flushing;                     /* 1 once a log was written (or is being written) */
};
/* where paths are resolved and which are recorded (tables.c) */
struct shim_paths {
    char *cwd;                        /* the working directory, or a "?cwd=" stand-in: the start's until it changes */
    char *cwd_room;                   /* PATH_MAX bytes where cwd_update puts it */
    size_t cwd_len;
    char *root;                       /* PATH_MAX bytes: the new root after a chroot, as seen from the original one */
    size_t root_len;                  /* 0 without a chroot */
    const char *incl[MAX_PREFIX], *excl[MAX_PREFIX + 4];
    size_t incl_len[MAX_PREFIX], excl_len[MAX_PREFIX + 4];
    int nincl, nexcl;
    uint32_t gen;                     /* bumped when cwd or root change: a path remembered before may name another file */
};
/* the record set (tables.c): what the log holds.  A fork child keeps the paths and the fd table, zeroes the rest. */
struct shim_tables {
    /* read by every wrapped call: first, so that with shim.on they share one cache line */
    struct ofd **fdtab;               /* FD_MAX entries (see fd_ofd) */
    int trace;                        /* MTCPROF_TRACE=ops and its memory reserved */
    int cpu_wait;                     /* MTCPROF_CPU_WAIT=1: each timed call's wait for a CPU (CALL_START/CALL_END) */
    struct frec *frecs;               /* FREC_MAX records (lazily backed mmap) */
    uint32_t nfrec, files_dropped;
    struct fcold *cold;               /* 2 * FREC_MAX cold parts, handed out in order of use */
    uint32_t ncold;
    uint32_t *bkt;                    /* NBUCKETS chain heads: frec index + 1 */
    uint64_t *bkt_used;               /* NBUCKETS bits: the chain may be non-empty */
    struct frec *last;                /* the last record found or made (single-threaded only) */
    char *paths;                      /* PATHS_BYTES of NUL-terminated paths */
    uint64_t paths_used;
    struct ofd *ofds;                 /* ofd pool, index 0 unused */
    uint64_t ofd_free;                /* Treiber stack head: tag << 32 | index */
    uint32_t ofd_bump;
    struct mtc_op_rec *ops;
    uint64_t nops, ops_max;           /* ops_max: MTCPROF_TRACE_MAX, the trace's capacity */
    uint64_t cw_ns, cw_calls;         /* that wait summed over the calls whose time a file's counters took */
    uint64_t munmaps;
    /* the last path frec_at found a record for, as the program gave it (relative to the cwd or absolute), while
     * the process has one thread: the same path again (an open after a stat, a reopen) skips the path work */
    struct frec *memo_f;
    uint32_t memo_gen, memo_len;
    char memo[240];
    struct shim_paths where;
};
/* the shim's messages (warn.c) */
struct shim_warn {
    int err_state;                    /* 0: fd 2 not taken yet (write), 1: taken, 2: fd 2 was closed at start */
    uint64_t err_dev, err_ino;        /* fd 2 at start */
    int warned;                       /* the one "running untraced" warning was printed */
};
/* where the log goes after a chroot or a change of user (logwriter.c) */
struct shim_site {
    uint64_t dir_dev, dir_ino;        /* the log folder checked at start */
    int dirfd, prefd;                 /* the folder, and the log file opened in place, before such a call */
    uint64_t pre_dev, pre_ino;
    const char *priv_what;            /* first such call, for the warning */
    int priv_warned;
    char *exe;                        /* PATH_MAX: /proc/self/exe read before a chroot (no /proc inside it, often) */
    long exe_len;
};
/* the log writer's buffer and the end it writes (logwriter.c; async-signal-safe) */
#define LOG_BUF_BYTES (1 << 16)
struct shim_writer {
    char *buf;                        /* LOG_BUF_BYTES, in the reservation made at start */
    size_t len;
    int fd, err, nrec;
    uint64_t total;
    double scale;                     /* ns per tick */
    int fd_short;                     /* one of the writer's own opens failed with EMFILE */
    char sched_path[48];              /* /proc/self/schedstat, or /proc/<pid>/schedstat in a log-writing copy */
    uint64_t t_end, real_end;         /* the end of the image, taken once (a log written again says the same) */
    int32_t ppid_end;
};
struct shim_process {
    int on;                           /* 1: tracing; 0: pure pass-through (or paused over a vfork) */
    int vfork_paused;
    struct shim_tables tab;
    struct shim_opts opt;
    struct shim_task id;
    struct shim_clock clock;
    struct shim_end end;
    struct shim_warn warn;
    struct shim_site site;
    struct shim_writer w;
    void *gf_slots;                   /* gfarm.c's handle table (GF_SLOTS), in the reservation: untouched unless the
                                       * program calls libgfarm */
};
/* per thread, so outside the struct */
extern TLS uint64_t t_cw0, t_cw;       /* the thread's run-queue wait at its call's start; the call's wait */
extern TLS int t_tid;

/* ---------------------------------------------------------------- functions, by the file defining them */
/* warn.c: raw writes, the shim's messages, kernel files (async-signal-safe) */
long sys_write_all(int fd, const void *buf, size_t n);
void warn_init(struct shim_warn *w);
void say(struct shim_warn *w, const char *msg, size_t n);
void warn_line(struct shim_warn *w, const char *const *parts);
void warn_once(struct shim_warn *w, const char *what, const char *path, int err);
size_t read_line(const char *path, char *buf, size_t cap, int *emfile);
uint64_t thread_wait_ns(void);

/* tables.c */
size_t norm_inplace(char *p);
size_t abs_path(struct shim_tables *t, int dirfd, const char *path, char *out);
void cwd_update(struct shim_paths *w);
void set_root(struct shim_paths *w, const char *nr, size_t n);
int excluded(const struct shim_paths *w, const char *p, size_t pl);
void path_filters(struct shim_paths *w, const char *log_dir, const char *excl_raw, const char *incl_raw, char **store,
                  char *store_end);
struct frec *frec_get(struct shim_tables *t, const char *p, size_t pl, uint32_t flags);
struct frec *frec_at(struct shim_tables *t, int dirfd, const char *path, uint32_t flags);
struct ofd *ofd_new(struct shim_tables *t, struct frec *f, int64_t pos);
void ofd_put(struct shim_tables *t, struct ofd *o);
void fd_install(struct shim_tables *t, int fd, struct ofd *o);
struct ofd *fd_take(struct shim_tables *t, int fd);
struct ofd *fd_adopt(struct shim_tables *t, int fd);
void rec_open(struct shim_tables *t, struct frec *f, int created, uint64_t t0, uint64_t t1, uint16_t fl);
void reg_open(struct shim_tables *t, int fd, int dirfd, const char *path, int oflags, int created, uint64_t t0,
              uint64_t t1, uint32_t ff);
void rec_open_failed(struct shim_tables *t, int dirfd, const char *path, uint64_t t0, uint64_t t1, int err);
void rec_close(struct shim_tables *t, struct ofd *o, uint64_t t0, uint64_t t1, uint16_t fl);
int frec_active(const struct shim_tables *t, const struct frec *f);
int tables_active(const struct shim_tables *t);
void tables_fork_child(struct shim_tables *t);

/* logwriter.c */
void snapshot_argv(struct shim_task *id, int argc, char **argv);
void log_name(const struct shim_process *p, char *out);
void priv_prepare(struct shim_process *p, const char *what, int user);
void priv_undo(struct shim_process *p, const char *prev_what);
void log_fork_child(struct shim_process *p);
int write_log(struct shim_process *p, uint32_t ended_by);

/* core.c: real symbols */
void *resolve(const char *name, const char *version);
void missing_symbol(const char *name);

static inline uint64_t NOW(void)
{
#ifdef HAVE_TSC
    return __rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}
/* the clock base at start and end: a system call, not the vDSO, whose first use in a process faults in its data and
 * code pages (~5 us in a VM, more than the four calls cost; a short program often never reads a clock itself) */
static inline uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    if (syscall(SYS_clock_gettime, c, &ts)) clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static inline size_t s_len(const char *s) { size_t n = 0; while (s[n]) n++; return n; }
static inline void s_cpy(char *d, const char *s, size_t cap)
{
    size_t i = 0;
    if (!s) s = "";
    for (; s[i] && i + 1 < cap; i++) d[i] = s[i];
    d[i] = 0;
}
static inline char *u64_str(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) *p++ = tmp[--n];
    *p = 0;
    return p;
}

/* ---------------------------------------------------------------- real symbols */
#define DECL(ret, name, args) static ret(*real_##name) args
#define RESOLVE(name)                                                                                           \
    do {                                                                                                        \
        if (UNLIKELY(!real_##name)) {                                                                           \
            void *p_ = resolve(#name, NULL);                                                                    \
            if (!p_) { errno = ENOSYS; missing_symbol(#name); }                                                 \
            __atomic_store_n((void **)&real_##name, p_, __ATOMIC_RELAXED);                                      \
        }                                                                                                       \
    } while (0)

/* ---------------------------------------------------------------- counters */
/* While the process has one thread (glibc's flag; it only ever turns false, in the thread that creates the second
 * one) plain loads and stores replace the locked instructions: each costs ~8 ns and an open/close takes several. */
#define ST LIKELY(__libc_single_threaded)
#define MTC_STR_(x) #x
#define MTC_STR(x) MTC_STR_(x)
HOT void ADD(uint64_t *p, uint64_t v)
{
    if (ST) *p += v;
    else __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
HOT void MAXU(uint64_t *p, uint64_t v)
{
    if (ST) { if (v > *p) *p = v; return; }
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > cur && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
HOT void MINU_NZ(uint64_t *p, uint64_t v)   /* first-open timestamp: min over nonzero */
{
    if (ST) { if (*p == 0 || v < *p) *p = v; return; }
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while ((cur == 0 || v < cur) && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
HOT uint64_t XCHG(uint64_t *p, uint64_t v)
{
    if (ST) { uint64_t o = *p; *p = v; return o; }
    return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
}
HOT int64_t POS_ADVANCE(int64_t *p, int64_t n)
{
    if (ST) { int64_t o = *p; *p = o + n; return o; }
    return __atomic_fetch_add(p, n, __ATOMIC_RELAXED);
}
static inline const struct fcold *cold_if(const struct shim_tables *t, const struct frec *f)
{
    uint32_t c = __atomic_load_n(&f->cold, __ATOMIC_ACQUIRE);
    return c ? &t->cold[c - 1] : NULL;
}
/* tables.c, out of line (rare): add v to the cold part's 64-bit word `word` (struct fcold as an array of words) */
void cold_add(struct shim_tables *t, struct frec *f, unsigned word, uint64_t v);
#define COLD_WORD(member, i) ((unsigned)(__builtin_offsetof(struct fcold, member) / 8) + (unsigned)(i))
/* add v to counter c (a constant at nearly every call site: folds to one of the three branches) */
HOT void CADD(struct shim_tables *t, struct frec *f, int c, uint64_t v)
{
    int k = g_cmap[c];
    if (k >= WIDE) { ADD(&f->w[k - WIDE], v); return; }
    if (k < 0) { cold_add(t, f, COLD_WORD(c, ~k), v); return; }
    uint32_t *p = &f->c[k];
    uint64_t carry;
    if (ST) { uint64_t s = (uint64_t)*p + v; *p = (uint32_t)s; carry = s >> 32; }
    else {
        uint32_t old = __atomic_fetch_add(p, (uint32_t)v, __ATOMIC_RELAXED);
        carry = (((uint64_t)old + (uint32_t)v) >> 32) + (v >> 32);
    }
    if (UNLIKELY(carry)) cold_add(t, f, COLD_WORD(c_hi, k), carry << 32);
}
/* a timed call's duration into one of a file's time counters (C_T_*), and with MTCPROF_CPU_WAIT its wait for a CPU
 * into the process's sum: only calls whose time a file takes count, as in the traced I/O time ingest sums */
HOT void TADD(struct shim_tables *t, struct frec *f, int c, uint64_t dt)
{
    CADD(t, f, c, dt);
    if (UNLIKELY(t->cpu_wait)) {
        __atomic_fetch_add(&t->cw_ns, t_cw, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->cw_calls, 1, __ATOMIC_RELAXED);
        t_cw = 0;
    }
}
/* address of a 64-bit counter (max_offset, first_open, last_close) */
HOT uint64_t *WCTR(struct frec *f, int c) { return &f->w[g_cmap[c] - WIDE]; }
/* one more call in size bin b (8-bit count; a wrap adds 256 to the cold high part) */
HOT void BIN_INC(struct shim_tables *t, struct frec *f, int wr, int b)
{
    uint8_t *p = &(wr ? f->hw : f->hr)[b];
    uint8_t old;
    if (ST) old = (*p)++;
    else old = __atomic_fetch_add(p, 1, __ATOMIC_RELAXED);
    if (UNLIKELY(old == UINT8_MAX)) cold_add(t, f, wr ? COLD_WORD(hw_hi, b) : COLD_WORD(hr_hi, b), 256);
}
HOT int size_bin(uint64_t n)
{
    return n < 100 ? 0 : n < 1024 ? 1 : n < 10240 ? 2 : n < 102400 ? 3 : n < 1048576 ? 4
         : n < 4194304 ? 5 : n < 10485760 ? 6 : n < 104857600 ? 7 : n < 1073741824 ? 8 : 9;
}
/* tables.c: one op into the op trace (MTCPROF_TRACE=ops), out of line */
void trace(struct shim_tables *t, uint16_t op, uint16_t fl, const struct frec *f, int64_t off, int64_t len,
           uint64_t t0, uint64_t t1, int err);

/* one read or write of n bytes (n < 0: failed call) at offset off (-1 unknown) */
HOT void rec_rw(struct shim_tables *t, struct frec *f, int wr, int64_t off, int64_t n, uint64_t t0, uint64_t t1,
                uint16_t fl, int err)
{
    if (UNLIKELY(n < 0)) {
        CADD(t, f, C_ERRORS, 1);
        TADD(t, f, wr ? C_T_WRITE : C_T_READ, t1 - t0);
    } else {
        CADD(t, f, wr ? C_WRITES : C_READS, 1);
        CADD(t, f, wr ? C_BYTES_WRITTEN : C_BYTES_READ, (uint64_t)n);
        TADD(t, f, wr ? C_T_WRITE : C_T_READ, t1 - t0);
        BIN_INC(t, f, wr, size_bin((uint64_t)n));
        if (off >= 0) {
            uint64_t end = (uint64_t)off + (uint64_t)n;
            if (XCHG(&f->last_end, end) != (uint64_t)off) CADD(t, f, wr ? C_WRITE_DISCONT : C_READ_DISCONT, 1);
            if (n > 0) MAXU(WCTR(f, C_MAX_OFFSET), end);
        }
    }
    if (UNLIKELY(t->trace)) trace(t, wr ? OP_WRITE : OP_READ, fl, f, off, n, t0, t1, n < 0 ? err : 0);
}
/* the same, out of line (tables.c), one copy for reads and one for writes, each with its counters folded */
void rec_read(struct shim_tables *t, struct frec *f, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl,
              int err);
void rec_write(struct shim_tables *t, struct frec *f, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl,
               int err);
HOT void rec_io(struct shim_tables *t, struct frec *f, int wr, int64_t off, int64_t n, uint64_t t0, uint64_t t1,
                uint16_t fl, int err)
{
    if (wr) rec_write(t, f, off, n, t0, t1, fl, err);
    else rec_read(t, f, off, n, t0, t1, fl, err);
}
HOT void rec_meta(struct shim_tables *t, struct frec *f, int counter, uint16_t op, uint64_t t0, uint64_t t1,
                  int failed, int err, int64_t off)
{
    if (failed) CADD(t, f, C_ERRORS, 1);
    else CADD(t, f, counter, 1);
    TADD(t, f, C_T_META, t1 - t0);
    if (UNLIKELY(t->trace)) trace(t, op, 0, f, off, failed ? -1 : 0, t0, t1, failed ? err : 0);
}
/* a record's file id (its index: FILE records and ops refer to it) */
static inline uint32_t frec_id(const struct shim_tables *t, const struct frec *f) { return (uint32_t)(f - t->frecs); }


/* ---------------------------------------------------------------- the fd table */
/* t->fdtab entries: NULL = not looked at yet, FD_NONE = not a traced file (pipe, socket, excluded path...),
 * else the open file description.  An fd the shim did not see opened (inherited over exec, or opened by a route
 * that is not wrapped) is adopted at its first use, so start-up does not have to walk /proc/self/fd. */
#define FD_NONE ((struct ofd *)1)
static inline struct ofd *fd_ofd(struct shim_tables *t, int fd)
{
    if (UNLIKELY((unsigned)fd >= FD_MAX)) return NULL;
    struct ofd *o = __atomic_load_n(&t->fdtab[fd], __ATOMIC_ACQUIRE);
    if (LIKELY(o > FD_NONE)) return o;
    return o ? NULL : fd_adopt(t, fd);
}
#define SAVE_ERRNO int saved_errno_ = errno
#define RESTORE_ERRNO errno = saved_errno_

/* ---------------------------------------------------------------- the wrappers' view of the state */
/* core.c and the wrappers (posix.c, stdio.c, gfarm.c) reach the process state through `shim`.  warn.c, tables.c and
 * logwriter.c define SHIM_PASSED_STATE before including this header: `shim` is then not declared for them, and the
 * compiler holds them to the parts they are given. */
#ifndef SHIM_PASSED_STATE
extern struct shim_process shim;
#define TAB (&shim.tab)
/* A wrapped call's clock: NOW() at its start and end.  With MTCPROF_CPU_WAIT=1 the thread's run-queue wait is read
 * outside them too (/proc/thread-self/schedstat, ~3 us a call for both): the call's time ready to run without a CPU. */
static inline uint64_t CALL_START(void)
{
    if (UNLIKELY(shim.tab.cpu_wait)) { t_cw0 = thread_wait_ns(); t_cw = 0; }
    return NOW();
}
static inline uint64_t CALL_END(void)
{
    uint64_t t = NOW();
    if (UNLIKELY(shim.tab.cpu_wait)) {
        uint64_t w = thread_wait_ns();
        t_cw = w != ~0ull && t_cw0 != ~0ull && w >= t_cw0 ? w - t_cw0 : 0;
    }
    return t;
}
#endif

#pragma GCC visibility pop
#endif
