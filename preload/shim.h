/* Internal header shared by the shim's modules (not part of the log format: that is mtcprof.h).
 *   core.c       state, warnings, real-symbol lookup, start (environment, log folder check), fork, signals
 *   tables.c     paths, file records, open file descriptions, the fd table
 *   logwriter.c  the log file: records, where it goes (chroot, change of user), temp file and rename
 *   posix.c      fd-level wrappers: open/close/dup, read/write family, metadata, mmap, exit/exec, vfork
 *   stdio.c      FILE * wrappers
 *   gfarm.c      libgfarm gfs_pio_* wrappers
 * Every symbol is hidden (one .so); the hot path's helpers are static inline here so that each wrapper gets them
 * inlined as it did when the shim was one file.
 *
 * Shape of every wrapper (Darshan-like):
 *     RESOLVE(name);                         real symbol, dlsym(RTLD_NEXT) once
 *     if (!g_on || <fd not tracked>) return real(...);     pass-through
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
#define MAX_PREFIX 32
#define ARGV_MAX_BYTES 32768

/* ---------------------------------------------------------------- state */
/* A file record is split in two so that the memory a typical file touches stays small (a first-touch page fault
 * costs ~1.5 us in a VM, more than everything else a new file costs): the hot part (128 bytes, g_frecs[i]) holds the
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
    uint32_t path_off, hash;          /* path: g_paths + path_off */
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

/* ---------------------------------------------------------------- shared state and functions, by the file defining them */
/* core.c: state */
extern int g_on;
extern pid_t g_pid;
extern uint32_t g_origin;
extern uint64_t g_parent_start_ns;
extern char g_uptime0[48];        /* /proc/uptime at the image's start (see cpu_clock in logwriter.c) */
extern size_t g_uptime0_len;
extern char g_sched0[80];         /* /proc/self/schedstat at the image's start (see sched_clock in logwriter.c) */
extern size_t g_sched0_len;
size_t read_line(const char *path, char *buf, size_t cap);
extern int g_fd_short;            /* set when one of the shim's own opens failed with EMFILE (logwriter.c: write_log) */
extern char *g_dir, *g_host, *g_run, *g_task, *g_stage, *g_cwd, *g_cwd0;   /* packed strings (core.c) */
extern size_t g_cwd_len;
extern char *g_incl_raw, *g_excl_raw, *g_mounts_raw;
extern int g_mounts_given;
extern const char *g_incl[MAX_PREFIX], *g_excl[MAX_PREFIX + 4];
extern size_t g_incl_len[MAX_PREFIX], g_excl_len[MAX_PREFIX + 4];
extern int g_nincl, g_nexcl;
extern char *g_argvbuf;
extern size_t g_argvlen;
extern int g_argvtrunc;
extern struct ofd **g_fdtab;
extern struct frec *g_frecs;
extern uint32_t g_nfrec, g_files_dropped;
extern struct fcold *g_cold;
extern uint32_t g_ncold;
extern uint32_t *g_bkt;
extern uint64_t *g_bkt_used;
extern char *g_paths;
extern uint64_t g_paths_used;
extern struct ofd *g_ofds;
extern uint64_t g_ofd_free;
extern uint32_t g_ofd_bump;
extern int g_trace;
extern int g_cpu_wait;                 /* MTCPROF_CPU_WAIT=1: each timed call's wait for a CPU (CALL_START/CALL_END) */
extern uint64_t g_cw_ns, g_cw_calls;   /* that wait summed over the calls whose time a file's counters took */
extern TLS uint64_t t_cw0, t_cw;       /* the thread's run-queue wait at its call's start; the call's wait */
uint64_t thread_wait_ns(void);
extern struct mtc_op_rec *g_ops;
extern uint64_t g_nops, g_ops_max;
extern uint64_t g_munmaps;
extern uint64_t g_tick0, g_mono0, g_real0;
extern int g_exit_status;
extern uint32_t g_ended_by;
extern int g_signal;
extern int g_flushing;
extern int g_warned;
extern TLS int t_tid;

/* tables.c */
size_t norm_inplace(char *p);
extern char *g_root;                   /* PATH_MAX bytes */
extern size_t g_rootlen;
size_t abs_path(int dirfd, const char *path, char *out);
void cwd_update(void);
int excluded(const char *p, size_t pl);
struct frec *frec_get(const char *p, size_t pl, uint32_t flags);
struct frec *frec_at(int dirfd, const char *path, uint32_t flags);
struct ofd *ofd_new(struct frec *f, int64_t pos);
void ofd_put(struct ofd *o);
void fd_install(int fd, struct ofd *o);
struct ofd *fd_take(int fd);
struct ofd *fd_adopt(int fd);
void rec_open(struct frec *f, int created, uint64_t t0, uint64_t t1, uint16_t fl);
void reg_open(int fd, int dirfd, const char *path, int oflags, int created, uint64_t t0, uint64_t t1, uint32_t ff);
void rec_open_failed(int dirfd, const char *path, uint64_t t0, uint64_t t1, int err);
void rec_close(struct ofd *o, uint64_t t0, uint64_t t1, uint16_t fl);

/* logwriter.c */
int frec_active(const struct frec *f);
void snapshot_argv(int argc, char **argv);
extern uint64_t g_dir_dev, g_dir_ino;
extern int g_dirfd, g_prefd;
extern const char *g_priv_what;
void log_name(char *out);
void priv_prepare(const char *what, int user);
int write_log(uint32_t ended_by);
#define LOG_BUF_BYTES (1 << 16)
extern char *g_wbuf, *g_exe;            /* LOG_BUF_BYTES and PATH_MAX bytes, in the reservation made at start */

/* core.c: warnings, real symbols, start */
long sys_write_all(int fd, const void *buf, size_t n);
void say(const char *msg, size_t n);
void warn_line(const char *const *parts);
void warn_once(const char *what, const char *path, int err);
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
/* A wrapped call's clock: NOW() at its start and end.  With MTCPROF_CPU_WAIT=1 the thread's run-queue wait is read
 * outside them too (/proc/thread-self/schedstat, ~3 us a call for both): the call's time ready to run without a CPU. */
static inline uint64_t CALL_START(void)
{
    if (UNLIKELY(g_cpu_wait)) { t_cw0 = thread_wait_ns(); t_cw = 0; }
    return NOW();
}
static inline uint64_t CALL_END(void)
{
    uint64_t t = NOW();
    if (UNLIKELY(g_cpu_wait)) {
        uint64_t w = thread_wait_ns();
        t_cw = w != ~0ull && t_cw0 != ~0ull && w >= t_cw0 ? w - t_cw0 : 0;
    }
    return t;
}
static inline uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
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
static inline const struct fcold *cold_if(const struct frec *f)
{
    uint32_t c = __atomic_load_n(&f->cold, __ATOMIC_ACQUIRE);
    return c ? &g_cold[c - 1] : NULL;
}
/* tables.c, out of line (rare): add v to the cold part's 64-bit word `word` (struct fcold as an array of words) */
void cold_add(struct frec *f, unsigned word, uint64_t v);
#define COLD_WORD(member, i) ((unsigned)(__builtin_offsetof(struct fcold, member) / 8) + (unsigned)(i))
/* add v to counter c (a constant at nearly every call site: folds to one of the three branches) */
HOT void CADD(struct frec *f, int c, uint64_t v)
{
    int k = g_cmap[c];
    if (k >= WIDE) { ADD(&f->w[k - WIDE], v); return; }
    if (k < 0) { cold_add(f, COLD_WORD(c, ~k), v); return; }
    uint32_t *p = &f->c[k];
    uint64_t carry;
    if (ST) { uint64_t s = (uint64_t)*p + v; *p = (uint32_t)s; carry = s >> 32; }
    else {
        uint32_t old = __atomic_fetch_add(p, (uint32_t)v, __ATOMIC_RELAXED);
        carry = (((uint64_t)old + (uint32_t)v) >> 32) + (v >> 32);
    }
    if (UNLIKELY(carry)) cold_add(f, COLD_WORD(c_hi, k), carry << 32);
}
/* a timed call's duration into one of a file's time counters (C_T_*), and with MTCPROF_CPU_WAIT its wait for a CPU
 * into the process's sum: only calls whose time a file takes count, as in the traced I/O time ingest sums */
HOT void TADD(struct frec *f, int c, uint64_t dt)
{
    CADD(f, c, dt);
    if (UNLIKELY(g_cpu_wait)) {
        __atomic_fetch_add(&g_cw_ns, t_cw, __ATOMIC_RELAXED);
        __atomic_fetch_add(&g_cw_calls, 1, __ATOMIC_RELAXED);
        t_cw = 0;
    }
}
/* address of a 64-bit counter (max_offset, first_open, last_close) */
HOT uint64_t *WCTR(struct frec *f, int c) { return &f->w[g_cmap[c] - WIDE]; }
/* one more call in size bin b (8-bit count; a wrap adds 256 to the cold high part) */
HOT void BIN_INC(struct frec *f, int wr, int b)
{
    uint8_t *p = &(wr ? f->hw : f->hr)[b];
    uint8_t old;
    if (ST) old = (*p)++;
    else old = __atomic_fetch_add(p, 1, __ATOMIC_RELAXED);
    if (UNLIKELY(old == UINT8_MAX)) cold_add(f, wr ? COLD_WORD(hw_hi, b) : COLD_WORD(hr_hi, b), 256);
}
HOT int size_bin(uint64_t n)
{
    return n < 100 ? 0 : n < 1024 ? 1 : n < 10240 ? 2 : n < 102400 ? 3 : n < 1048576 ? 4
         : n < 4194304 ? 5 : n < 10485760 ? 6 : n < 104857600 ? 7 : n < 1073741824 ? 8 : 9;
}
/* tables.c: one op into the op trace (MTCPROF_TRACE=ops), out of line */
void trace(uint16_t op, uint16_t fl, const struct frec *f, int64_t off, int64_t len, uint64_t t0, uint64_t t1,
           int err);

/* one read or write of n bytes (n < 0: failed call) at offset off (-1 unknown) */
HOT void rec_rw(struct frec *f, int wr, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl,
                          int err)
{
    if (UNLIKELY(n < 0)) {
        CADD(f, C_ERRORS, 1);
        TADD(f, wr ? C_T_WRITE : C_T_READ, t1 - t0);
    } else {
        CADD(f, wr ? C_WRITES : C_READS, 1);
        CADD(f, wr ? C_BYTES_WRITTEN : C_BYTES_READ, (uint64_t)n);
        TADD(f, wr ? C_T_WRITE : C_T_READ, t1 - t0);
        BIN_INC(f, wr, size_bin((uint64_t)n));
        if (off >= 0) {
            uint64_t end = (uint64_t)off + (uint64_t)n;
            if (XCHG(&f->last_end, end) != (uint64_t)off) CADD(f, wr ? C_WRITE_DISCONT : C_READ_DISCONT, 1);
            if (n > 0) MAXU(WCTR(f, C_MAX_OFFSET), end);
        }
    }
    if (UNLIKELY(g_trace)) trace(wr ? OP_WRITE : OP_READ, fl, f, off, n, t0, t1, n < 0 ? err : 0);
}
/* the same, out of line (tables.c), one copy for reads and one for writes, each with its counters folded */
void rec_read(struct frec *f, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl, int err);
void rec_write(struct frec *f, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl, int err);
HOT void rec_io(struct frec *f, int wr, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl, int err)
{
    if (wr) rec_write(f, off, n, t0, t1, fl, err);
    else rec_read(f, off, n, t0, t1, fl, err);
}
HOT void rec_meta(struct frec *f, int counter, uint16_t op, uint64_t t0, uint64_t t1, int failed, int err,
                            int64_t off)
{
    if (failed) CADD(f, C_ERRORS, 1);
    else CADD(f, counter, 1);
    TADD(f, C_T_META, t1 - t0);
    if (UNLIKELY(g_trace)) trace(op, 0, f, off, failed ? -1 : 0, t0, t1, failed ? err : 0);
}


/* ---------------------------------------------------------------- the fd table */
/* g_fdtab entries: NULL = not looked at yet, FD_NONE = not a traced file (pipe, socket, excluded path...),
 * else the open file description.  An fd the shim did not see opened (inherited over exec, or opened by a route
 * that is not wrapped) is adopted at its first use, so start-up does not have to walk /proc/self/fd. */
#define FD_NONE ((struct ofd *)1)
static inline struct ofd *fd_ofd(int fd)
{
    if (UNLIKELY((unsigned)fd >= FD_MAX)) return NULL;
    struct ofd *o = __atomic_load_n(&g_fdtab[fd], __ATOMIC_ACQUIRE);
    if (LIKELY(o > FD_NONE)) return o;
    return o ? NULL : fd_adopt(fd);
}
#define SAVE_ERRNO int saved_errno_ = errno
#define RESTORE_ERRNO errno = saved_errno_

#pragma GCC visibility pop
#endif
