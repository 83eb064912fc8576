/* mtcprof: LD_PRELOAD shim that profiles the file I/O of one process.  See FORMAT.md.
 *
 * Shape of every wrapper (Darshan-like):
 *     RESOLVE(name);                         real symbol, dlsym(RTLD_NEXT) once
 *     if (!g_on || <fd not tracked>) return real(...);     pass-through
 *     t0 = NOW(); ret = real(...); t1 = NOW();  SAVE_ERRNO; record(...); RESTORE_ERRNO; return ret;
 * Hot path (read/write family on a tracked fd): one table load fd -> ofd -> file record, two rdtsc, plain adds
 * while the process is single threaded (__libc_single_threaded) and relaxed atomics otherwise.  No heap, no lock.
 * The shim's own I/O (log writing, /proc reads) uses raw syscalls, never the wrapped entry points.
 */
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
#define SHIM_VERSION "mtcprof-shim 1.1 (log format 2)"

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
/* A file record is split in two parallel arrays so that the memory a typical file touches stays small (a first-touch
 * page fault costs ~1.5 us in a VM, more than everything else a new file costs): the hot part (128 bytes, g_frecs[i])
 * holds the counters nearly every file uses, as 32-bit counts (times in clock ticks) and 8-bit size bins, plus the
 * three that need 64 bits; the cold part (g_cold[i]) holds the rarely used counters and the carries of the narrow
 * ones (2^32 per wrap of a counter, 256 per wrap of a bin); its page is touched only when one of them is used. */
enum hot_counter {
    H_OPENS, H_CREATES, H_CLOSES, H_READS, H_WRITES, H_BYTES_READ, H_BYTES_WRITTEN, H_STATS, H_ERRORS,
    H_T_OPEN, H_T_READ, H_T_WRITE, H_T_CLOSE, H_T_META, NHOT
};
enum wide_counter { W_MAX_OFFSET, W_FIRST_OPEN, W_LAST_CLOSE, NWIDE };
#define NCOLD (NCOUNTERS - NHOT - NWIDE)
#define FF_COLD 0x8000u                /* private flag: the cold part was touched (not written to the log) */
struct frec {
    uint64_t last_end;                /* end offset of the previous read/write (discontinuity check) */
    uint64_t w[NWIDE];                /* timestamps in clock ticks until written out */
    uint32_t path_off, hash;          /* path: g_paths + path_off */
    uint32_t next;                    /* hash chain: index + 1 of the next record, 0 = end */
    uint16_t path_len, flags;
    uint32_t c[NHOT];                 /* low 32 bits */
    uint8_t hr[NBINS], hw[NBINS];     /* low 8 bits of the size bins */
    uint8_t pad_[4];
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
    [C_LAST_CLOSE] = WIDE + W_LAST_CLOSE,
};
_Static_assert(NCOLD == 12, "cold counter count matches g_cmap");
struct ofd {                          /* one open file description (shared by dup'd fds) */
    struct frec *f;
    int64_t pos;                      /* our idea of the file offset; -1 unknown */
    uint32_t refs, next;
};

static int g_on;                      /* 1: tracing; 0: pure pass-through */
static pid_t g_pid;
static uint32_t g_origin;
static uint64_t g_parent_start_ns;
static char g_dir[PATH_MAX];
static char g_host[256], g_run[256], g_task[256], g_stage[256], g_cwd[PATH_MAX], g_cwd0[PATH_MAX];
static size_t g_cwd_len;
static char g_incl_raw[4096], g_excl_raw[4096], g_mounts_raw[4096];
static int g_mounts_given;           /* MTCPROF_GFARM_MOUNTS set: the launcher listed the gfarm2fs mounts */
static const char *g_incl[MAX_PREFIX], *g_excl[MAX_PREFIX + 4];
static size_t g_incl_len[MAX_PREFIX], g_excl_len[MAX_PREFIX + 4];
static int g_nincl, g_nexcl;
static char g_prefix_store[8192];
static char g_argvbuf[ARGV_MAX_BYTES];  /* argv as it was at start: programs may rewrite theirs */
static size_t g_argvlen;
static int g_argvtrunc;

static struct ofd *g_fdtab[FD_MAX];
static struct frec *g_frecs;          /* FREC_MAX records (lazily backed mmap) */
static uint32_t g_nfrec, g_files_dropped;
static struct fcold *g_cold;          /* FREC_MAX cold parts, parallel to g_frecs (lazily backed mmap) */
static uint32_t *g_bkt;               /* NBUCKETS chain heads: frec index + 1 */
static char *g_paths;
static uint64_t g_paths_used;
static struct ofd *g_ofds;            /* ofd pool, index 0 unused */
static uint64_t g_ofd_free;           /* Treiber stack head: tag << 32 | index */
static uint32_t g_ofd_bump = 1;

static int g_trace;
static struct mtc_op_rec *g_ops;
static uint64_t g_nops, g_ops_max;
static uint64_t g_munmaps;

/* clock: ticks (TSC or monotonic ns) -> realtime ns */
static uint64_t g_tick0, g_mono0, g_real0;

/* exit bookkeeping */
static int g_exit_status = -1;
static uint32_t g_ended_by;
static int g_signal;
static int g_flushing;                /* 1 once a log was written (or is being written) */
static int g_warned;

static TLS int t_tid;
static TLS int t_resolving;

/* ---------------------------------------------------------------- small helpers (async-signal-safe) */
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
static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static size_t s_len(const char *s) { size_t n = 0; while (s[n]) n++; return n; }
static void s_cpy(char *d, const char *s, size_t cap)
{
    size_t i = 0;
    if (!s) s = "";
    for (; s[i] && i + 1 < cap; i++) d[i] = s[i];
    d[i] = 0;
}
static char *u64_str(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) *p++ = tmp[--n];
    *p = 0;
    return p;
}
static long sys_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        long r = syscall(SYS_write, fd, p, n);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) { errno = ENOSPC; return -1; }
        p += r; n -= (size_t)r;
    }
    return 0;
}
/* The shim's messages go to fd 2 only while it is the stderr the process started with: a program that closed its
 * stderr may have a data file on fd 2 by now, and a warning must never land in it.  Identity = (dev, ino) at start. */
static int g_err_state;               /* 0: not taken yet (write), 1: taken, 2: fd 2 was closed at start (never write) */
static uint64_t g_err_dev, g_err_ino;
static void err_identity(void)
{
    struct stat st;
    if (syscall(SYS_fstat, 2, &st) < 0) { g_err_state = 2; return; }
    g_err_dev = st.st_dev; g_err_ino = st.st_ino; g_err_state = 1;
}
static void say(const char *msg, size_t n)
{
    if (g_err_state == 2) return;
    if (g_err_state == 1) {
        struct stat st;
        int saved = errno;
        int same = syscall(SYS_fstat, 2, &st) == 0 && st.st_dev == g_err_dev && st.st_ino == g_err_ino;
        errno = saved;
        if (!same) return;
    }
    sys_write_all(2, msg, n);
}
/* one line "mtcprof: warning: " + the parts (NULL-terminated) + "\n" */
static void warn_line(const char *const *parts)
{
    char msg[2 * PATH_MAX + 256], *p = msg;
    s_cpy(p, "mtcprof: warning: ", 32); p += s_len(p);
    for (int i = 0; parts[i]; i++) { s_cpy(p, parts[i], sizeof msg - (size_t)(p - msg) - 2); p += s_len(p); }
    *p++ = '\n';
    say(msg, (size_t)(p - msg));
}
/* the warning that a process image runs (or ends) without a log: at most one per image */
static void warn_once(const char *what, const char *path, int err)
{
    if (__atomic_exchange_n(&g_warned, 1, __ATOMIC_RELAXED)) return;
    char num[24];
    u64_str(num, (uint64_t)err);
    const char *parts[] = {what, " ", path ? path : "", ": errno ", num, " (running untraced)", NULL};
    warn_line(parts);
}

/* ---------------------------------------------------------------- real symbols */
static void *fallback_sym(const char *name);
static void *resolve(const char *name, const char *version)
{
    void *p;
    if (t_resolving) {               /* dlsym re-entered one of our wrappers */
        p = fallback_sym(name);
        if (p) return p;
        static const char m[] = "mtcprof: recursive symbol resolution, aborting\n";
        say(m, sizeof m - 1);
        abort();
    }
    t_resolving = 1;
    p = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
    t_resolving = 0;
    return p;
}
#define DECL(ret, name, args) static ret(*real_##name) args
#define RESOLVE(name)                                                                                           \
    do {                                                                                                        \
        if (UNLIKELY(!real_##name)) {                                                                           \
            void *p_ = resolve(#name, NULL);                                                                    \
            if (!p_) { errno = ENOSYS; missing_symbol(#name); }                                                 \
            __atomic_store_n((void **)&real_##name, p_, __ATOMIC_RELAXED);                                      \
        }                                                                                                       \
    } while (0)
static void missing_symbol(const char *name)
{
    char msg[256];
    s_cpy(msg, "mtcprof: cannot resolve real symbol ", sizeof msg);
    s_cpy(msg + s_len(msg), name, sizeof msg - s_len(msg) - 2);
    size_t n = s_len(msg);
    msg[n++] = '\n';
    say(msg, n);
    abort();
}

/* fallbacks used only when dlsym itself re-enters a wrapper: raw syscalls */
static int fb_open(const char *p, int f, ...) { va_list a; va_start(a, f); int m = va_arg(a, int); va_end(a); return (int)syscall(SYS_openat, AT_FDCWD, p, f, m); }
static ssize_t fb_read(int fd, void *b, size_t n) { return syscall(SYS_read, fd, b, n); }
static ssize_t fb_write(int fd, const void *b, size_t n) { return syscall(SYS_write, fd, b, n); }
static int fb_close(int fd) { return (int)syscall(SYS_close, fd); }
static int fb_fstat(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }
static void *fallback_sym(const char *name)
{
    if (!strcmp(name, "open") || !strcmp(name, "open64")) return (void *)fb_open;
    if (!strcmp(name, "read")) return (void *)fb_read;
    if (!strcmp(name, "write")) return (void *)fb_write;
    if (!strcmp(name, "close")) return (void *)fb_close;
    if (!strcmp(name, "fstat") || !strcmp(name, "fstat64")) return (void *)fb_fstat;
    return NULL;
}

/* ---------------------------------------------------------------- counters */
/* While the process has one thread (glibc's flag; it only ever turns false, in the thread that creates the second
 * one) plain loads and stores replace the locked instructions: each costs ~8 ns and an open/close takes several. */
#define ST LIKELY(__libc_single_threaded)
#define MTC_STR_(x) #x
#define MTC_STR(x) MTC_STR_(x)
static inline void ADD(uint64_t *p, uint64_t v)
{
    if (ST) *p += v;
    else __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline void MAXU(uint64_t *p, uint64_t v)
{
    if (ST) { if (v > *p) *p = v; return; }
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > cur && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
static inline void MINU_NZ(uint64_t *p, uint64_t v)   /* first-open timestamp: min over nonzero */
{
    if (ST) { if (*p == 0 || v < *p) *p = v; return; }
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while ((cur == 0 || v < cur) && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
static inline uint64_t XCHG(uint64_t *p, uint64_t v)
{
    if (ST) { uint64_t o = *p; *p = v; return o; }
    return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
}
static inline int64_t POS_ADVANCE(int64_t *p, int64_t n)
{
    if (ST) { int64_t o = *p; *p = o + n; return o; }
    return __atomic_fetch_add(p, n, __ATOMIC_RELAXED);
}
static inline struct fcold *cold_of(struct frec *f)
{
    if (UNLIKELY(!(f->flags & FF_COLD))) __atomic_fetch_or(&f->flags, (uint16_t)FF_COLD, __ATOMIC_RELAXED);
    return &g_cold[f - g_frecs];
}
static inline const struct fcold *cold_if(const struct frec *f)
{
    return f->flags & FF_COLD ? &g_cold[f - g_frecs] : NULL;
}
/* add v to counter c (a constant at nearly every call site: folds to one of the three branches) */
static inline void CADD(struct frec *f, int c, uint64_t v)
{
    int k = g_cmap[c];
    if (k >= WIDE) { ADD(&f->w[k - WIDE], v); return; }
    if (k < 0) { ADD(&cold_of(f)->c[~k], v); return; }
    uint32_t *p = &f->c[k];
    uint64_t carry;
    if (ST) { uint64_t s = (uint64_t)*p + v; *p = (uint32_t)s; carry = s >> 32; }
    else {
        uint32_t old = __atomic_fetch_add(p, (uint32_t)v, __ATOMIC_RELAXED);
        carry = (((uint64_t)old + (uint32_t)v) >> 32) + (v >> 32);
    }
    if (UNLIKELY(carry)) ADD(&cold_of(f)->c_hi[k], carry << 32);
}
/* address of a 64-bit counter (max_offset, first_open, last_close) */
static inline uint64_t *WCTR(struct frec *f, int c) { return &f->w[g_cmap[c] - WIDE]; }
/* one more call in size bin b (8-bit count; a wrap adds 256 to the cold high part) */
static inline void BIN_INC(struct frec *f, int wr, int b)
{
    uint8_t *p = &(wr ? f->hw : f->hr)[b];
    uint8_t old;
    if (ST) old = (*p)++;
    else old = __atomic_fetch_add(p, 1, __ATOMIC_RELAXED);
    if (UNLIKELY(old == UINT8_MAX)) { struct fcold *x = cold_of(f); ADD(&(wr ? x->hw_hi : x->hr_hi)[b], 256); }
}
static inline int size_bin(uint64_t n)
{
    return n < 100 ? 0 : n < 1024 ? 1 : n < 10240 ? 2 : n < 102400 ? 3 : n < 1048576 ? 4
         : n < 4194304 ? 5 : n < 10485760 ? 6 : n < 104857600 ? 7 : n < 1073741824 ? 8 : 9;
}
static inline int gettid_cached(void)
{
    if (UNLIKELY(!t_tid)) t_tid = (int)syscall(SYS_gettid);
    return t_tid;
}
static inline void trace(uint16_t op, uint16_t fl, const struct frec *f, int64_t off, int64_t len, uint64_t t0,
                         uint64_t t1, int err)
{
    uint64_t i = ST ? g_nops++ : __atomic_fetch_add(&g_nops, 1, __ATOMIC_RELAXED);
    if (i >= g_ops_max) return;
    struct mtc_op_rec *o = &g_ops[i];
    o->start_ns = t0; o->dur_ns = t1 - t0; o->offset = off; o->length = len;
    o->file = (uint32_t)(f - g_frecs); o->tid = (uint32_t)gettid_cached(); o->op = op; o->flags = fl; o->err = err;
}

/* one read or write of n bytes (n < 0: failed call) at offset off (-1 unknown) */
static inline void rec_rw(struct frec *f, int wr, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl,
                          int err)
{
    if (UNLIKELY(n < 0)) {
        CADD(f, C_ERRORS, 1);
        CADD(f, wr ? C_T_WRITE : C_T_READ, t1 - t0);
    } else {
        CADD(f, wr ? C_WRITES : C_READS, 1);
        CADD(f, wr ? C_BYTES_WRITTEN : C_BYTES_READ, (uint64_t)n);
        CADD(f, wr ? C_T_WRITE : C_T_READ, t1 - t0);
        BIN_INC(f, wr, size_bin((uint64_t)n));
        if (off >= 0) {
            uint64_t end = (uint64_t)off + (uint64_t)n;
            if (XCHG(&f->last_end, end) != (uint64_t)off) CADD(f, wr ? C_WRITE_DISCONT : C_READ_DISCONT, 1);
            if (n > 0) MAXU(WCTR(f, C_MAX_OFFSET), end);
        }
    }
    if (UNLIKELY(g_trace)) trace(wr ? OP_WRITE : OP_READ, fl, f, off, n, t0, t1, n < 0 ? err : 0);
}
static inline void rec_meta(struct frec *f, int counter, uint16_t op, uint64_t t0, uint64_t t1, int failed, int err,
                            int64_t off)
{
    if (failed) CADD(f, C_ERRORS, 1);
    else CADD(f, counter, 1);
    CADD(f, C_T_META, t1 - t0);
    if (UNLIKELY(g_trace)) trace(op, 0, f, off, failed ? -1 : 0, t0, t1, failed ? err : 0);
}

/* ---------------------------------------------------------------- paths and file records */
static inline uint64_t load8(const char *s) { uint64_t w; __builtin_memcpy(&w, s, 8); return w; }
static uint32_t hash_path(const char *s, size_t n)
{
    /* 8 bytes per step (multiply-xorshift); only used for the in-memory table */
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ load8(s + i)) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    if (i < n) {
        uint64_t w = 0;
        if (n >= 8) w = load8(s + n - 8);          /* last 8 bytes (overlapping) */
        else for (size_t k = 0; k < n; k++) w |= (uint64_t)(unsigned char)s[k] << (8 * k);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    }
    h ^= h >> 29;
    h *= 0xff51afd7ed558ccdull;
    return (uint32_t)(h ^ (h >> 32));
}
/* lexical normalisation in place: collapse //, /./, /../ (no symlink resolution); no library calls */
static size_t norm_inplace(char *p)
{
    size_t o = 0;
    const char *in = p;
    while (*in) {
        while (*in == '/') in++;
        if (!*in) break;
        const char *seg = in;
        while (*in && *in != '/') in++;
        size_t n = (size_t)(in - seg);
        if (n == 1 && seg[0] == '.') continue;
        if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            while (o > 0 && p[o - 1] != '/') o--;
            if (o > 0) o--;
            continue;
        }
        p[o++] = '/';
        if (p + o != seg)                          /* destination never after the source: forward copy is safe */
            for (size_t k = 0; k < n; k++) p[o + k] = seg[k];
        o += n;
    }
    if (o == 0) p[o++] = '/';
    p[o] = 0;
    return o;
}
/* already normalised (no "//", "/.", trailing "/"): nearly every path a program passes */
static inline int is_normal(const char *p, size_t n)
{
    if (n == 0 || p[0] != '/' || (n > 1 && p[n - 1] == '/')) return 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == '/' && (p[i + 1] == '/' || p[i + 1] == '.')) return 0;
    return 1;
}
/* g_fdtab entries: NULL = not looked at yet, FD_NONE = not a traced file (pipe, socket, excluded path...),
 * else the open file description.  An fd the shim did not see opened (inherited over exec, or opened by a route
 * that is not wrapped) is adopted at its first use, so start-up does not have to walk /proc/self/fd. */
#define FD_NONE ((struct ofd *)1)
static struct ofd *fd_adopt(int fd);
static inline struct ofd *fd_ofd(int fd)
{
    if (UNLIKELY((unsigned)fd >= FD_MAX)) return NULL;
    struct ofd *o = __atomic_load_n(&g_fdtab[fd], __ATOMIC_ACQUIRE);
    if (LIKELY(o > FD_NONE)) return o;
    return o ? NULL : fd_adopt(fd);
}
/* the absolute path /proc/self/fd gives for fd, into out[PATH_MAX] (NUL-terminated); its length, or -1 */
static long fd_path(int fd, char *out)
{
    char lnk[64] = "/proc/self/fd/";
    u64_str(lnk + 14, (uint64_t)fd);
    long r = syscall(SYS_readlinkat, AT_FDCWD, lnk, out, PATH_MAX - 1);
    if (r <= 0 || out[0] != '/') return -1;
    out[r] = 0;
    return r;
}
/* After a chroot the kernel's paths (the program's, getcwd's, /proc/self/fd's) are inside the new root: g_root, the
 * new root as seen from the original one, is put in front of them.  Empty without a chroot. */
static char g_root[PATH_MAX];
static size_t g_rootlen;
/* out (normalised, length n) as seen from the original root; 0 if that does not fit.  Called when g_rootlen > 0. */
static size_t add_root(char *out, size_t n)
{
    if (out[0] != '/') return n;                   /* an unresolvable stand-in stays as it is */
    if (n == 1) n = 0;                             /* "/" is the root itself */
    if (g_rootlen + n + 1 > PATH_MAX) return 0;
    memmove(out + g_rootlen, out, n);
    memcpy(out, g_root, g_rootlen);
    out[g_rootlen + n] = 0;
    return g_rootlen + n;
}
/* absolute normalised path of (dirfd, path) into out[PATH_MAX]; 0 on failure.  A path relative to a working
 * directory the shim could not name (g_cwd is then a stand-in that does not start with "/") is kept as the stand-in
 * plus the path as given, not normalised: it says which folder, and is never mistaken for an absolute path. */
static size_t abs_path(int dirfd, const char *path, char *out)
{
    if (!path || !*path) return 0;
    size_t n = s_len(path), bl = 0;
    int rooted = 1;                                /* the result is in the current root's terms */
    if (path[0] != '/') {
        if (dirfd == AT_FDCWD) {
            bl = g_cwd_len;
            if (bl + 1 + n + 1 > PATH_MAX) return 0;
            memcpy(out, g_cwd, bl);
        } else {
            struct ofd *o = fd_ofd(dirfd);
            if (o && o->f->path_len + 1 + n + 1 <= PATH_MAX) {
                bl = o->f->path_len;
                memcpy(out, g_paths + o->f->path_off, bl);
                rooted = 0;                        /* a recorded path already has the root in front */
            } else {
                long r = fd_path(dirfd, out);
                if (r <= 0 || (size_t)r + 1 + n + 1 > PATH_MAX) return 0;
                bl = (size_t)r;
            }
        }
        out[bl++] = '/';
    } else if (n + 1 > PATH_MAX) return 0;
    memcpy(out + bl, path, n + 1);
    if (UNLIKELY(out[0] != '/')) return bl + n;
    size_t len = is_normal(out, bl + n) ? bl + n : norm_inplace(out);
    return UNLIKELY(g_rootlen) && rooted ? add_root(out, len) : len;
}
/* g_cwd: the working directory, or when getcwd cannot name it (longer than PATH_MAX, or outside the root) the
 * stand-in "?cwd=<st_dev>:<st_ino>" (FORMAT.md) */
static void cwd_update(void)
{
    long r = syscall(SYS_getcwd, g_cwd, sizeof g_cwd);
    if (r < 0 || g_cwd[0] != '/') {
        struct stat st;
        char *p = g_cwd;
        s_cpy(p, "?cwd=", 8); p += 5;
        if (syscall(SYS_stat, ".", &st) == 0) { p = u64_str(p, st.st_dev); *p++ = ':'; p = u64_str(p, st.st_ino); }
        else { *p++ = '?'; *p = 0; }
    }
    g_cwd_len = s_len(g_cwd);
}
static int prefix_match(const char *p, size_t pl, const char *pre, size_t n)
{
    if (pl < n) return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] != pre[i]) return 0;
    return pl == n || p[n] == '/' || (n > 0 && pre[n - 1] == '/');
}
static int excluded(const char *p, size_t pl)
{
    for (int i = 0; i < g_nexcl; i++)
        if (prefix_match(p, pl, g_excl[i], g_excl_len[i])) return 1;
    if (!g_nincl) return 0;
    for (int i = 0; i < g_nincl; i++)
        if (prefix_match(p, pl, g_incl[i], g_incl_len[i])) return 0;
    return 1;
}
/* the record of p in the chain starting at v, stopping at stop (index + 1); NULL if absent */
static struct frec *chain_find(uint32_t v, uint32_t stop, const char *p, size_t pl, uint32_t h)
{
    for (; v && v != stop; v = __atomic_load_n(&g_frecs[v - 1].next, __ATOMIC_RELAXED)) {
        struct frec *f = &g_frecs[v - 1];
        if (f->hash == h && f->path_len == pl && !memcmp(g_paths + f->path_off, p, pl)) return f;
    }
    return NULL;
}
/* find or create the record of an absolute normalised path; lock-free (records are pushed on the head of their
 * hash chain with a CAS; a record is fully written before it is published and never unlinked) */
static struct frec *frec_get(const char *p, size_t pl, uint32_t flags)
{
    uint32_t h = hash_path(p, pl);
    uint32_t *bkt = &g_bkt[h & (NBUCKETS - 1)];
    uint32_t head = __atomic_load_n(bkt, __ATOMIC_ACQUIRE);
    struct frec *f = chain_find(head, 0, p, pl, h);
    if (f) {
        if ((f->flags & flags) != flags) __atomic_fetch_or(&f->flags, flags, __ATOMIC_RELAXED);
        return f;
    }
    /* new record */
    int st = ST;
    uint32_t idx = st ? g_nfrec++ : __atomic_fetch_add(&g_nfrec, 1, __ATOMIC_RELAXED);
    uint64_t po = st ? (g_paths_used += pl + 1) - (pl + 1) : __atomic_fetch_add(&g_paths_used, pl + 1, __ATOMIC_RELAXED);
    if (idx >= FREC_MAX || po + pl + 1 > PATHS_BYTES) {
        if (idx >= FREC_MAX) __atomic_store_n(&g_nfrec, FREC_MAX, __ATOMIC_RELAXED);
        __atomic_fetch_add(&g_files_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    f = &g_frecs[idx];
    memcpy(g_paths + po, p, pl + 1);
    f->flags = (uint16_t)flags; f->path_len = (uint16_t)pl; f->hash = h; f->path_off = (uint32_t)po;
    if (st) { f->next = head; __atomic_store_n(bkt, idx + 1, __ATOMIC_RELEASE); return f; }
    for (;;) {
        f->next = head;
        if (__atomic_compare_exchange_n(bkt, &head, idx + 1, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) return f;
        /* another record was pushed meanwhile (head now holds it): is it ours? */
        struct frec *g = chain_find(head, f->next, p, pl, h);
        if (g) {
            /* lost the race: our record stays unused (no counters, never written) */
            f->path_len = 0; f->hash = 0;
            if ((g->flags & flags) != flags) __atomic_fetch_or(&g->flags, flags, __ATOMIC_RELAXED);
            return g;
        }
    }
}
static struct frec *frec_at(int dirfd, const char *path, uint32_t flags)
{
    char buf[PATH_MAX];
    size_t n = abs_path(dirfd, path, buf);
    if (!n || excluded(buf, n)) return NULL;
    return frec_get(buf, n, flags);
}

/* ofd pool: Treiber stack with a tag against ABA */
static struct ofd *ofd_new(struct frec *f, int64_t pos)
{
    uint32_t idx;
    uint64_t h = __atomic_load_n(&g_ofd_free, __ATOMIC_ACQUIRE);
    if (ST) {
        idx = (uint32_t)h;
        if (idx) g_ofd_free = ((h >> 32) + 1) << 32 | g_ofds[idx].next;
        else if ((idx = g_ofd_bump++) >= OFD_MAX) { g_ofd_bump = OFD_MAX; return NULL; }
    } else for (;;) {
        idx = (uint32_t)h;
        if (!idx) {
            idx = __atomic_fetch_add(&g_ofd_bump, 1, __ATOMIC_RELAXED);
            if (idx >= OFD_MAX) return NULL;
            break;
        }
        uint64_t nh = ((h >> 32) + 1) << 32 | __atomic_load_n(&g_ofds[idx].next, __ATOMIC_RELAXED);
        if (__atomic_compare_exchange_n(&g_ofd_free, &h, nh, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
    }
    struct ofd *o = &g_ofds[idx];
    o->f = f; o->pos = pos; o->refs = 1;
    return o;
}
static void ofd_put(struct ofd *o)
{
    if (o <= FD_NONE) return;
    uint32_t idx = (uint32_t)(o - g_ofds);
    if (ST) {
        if (--o->refs) return;
        o->next = (uint32_t)g_ofd_free;
        g_ofd_free = ((g_ofd_free >> 32) + 1) << 32 | idx;
        return;
    }
    if (__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL)) return;
    uint64_t h = __atomic_load_n(&g_ofd_free, __ATOMIC_ACQUIRE);
    do {
        __atomic_store_n(&o->next, (uint32_t)h, __ATOMIC_RELAXED);
    } while (!__atomic_compare_exchange_n(&g_ofd_free, &h, ((h >> 32) + 1) << 32 | idx, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE));
}
static void fd_install(int fd, struct ofd *o)
{
    if ((unsigned)fd >= FD_MAX) { ofd_put(o); return; }
    if (ST) { struct ofd *old = g_fdtab[fd]; __atomic_store_n(&g_fdtab[fd], o, __ATOMIC_RELEASE); ofd_put(old); return; }
    ofd_put(__atomic_exchange_n(&g_fdtab[fd], o, __ATOMIC_ACQ_REL));
}
static struct ofd *fd_take(int fd)
{
    if ((unsigned)fd >= FD_MAX) return NULL;
    struct ofd *o = __atomic_load_n(&g_fdtab[fd], __ATOMIC_RELAXED);
    if (!o) return NULL;
    if (ST) g_fdtab[fd] = NULL;
    else o = __atomic_exchange_n(&g_fdtab[fd], NULL, __ATOMIC_ACQ_REL);
    return o == FD_NONE ? NULL : o;
}
/* first use of an fd the shim did not see opened: a regular file gets a record (flag inherited) under the path
 * /proc/self/fd gives, anything else is marked FD_NONE.  A closed fd is left unmarked. */
static struct ofd *fd_adopt(int fd)
{
    int saved = errno;
    struct stat st;
    struct ofd *o = FD_NONE;
    if (syscall(SYS_fstat, fd, &st)) { errno = saved; return NULL; }
    if (S_ISREG(st.st_mode)) {
        char path[PATH_MAX];
        if (fd_path(fd, path) > 0) {
            size_t pl = norm_inplace(path);
            if (UNLIKELY(g_rootlen)) pl = add_root(path, pl);
            struct frec *f = !pl || excluded(path, pl) ? NULL : frec_get(path, pl, FF_INHERITED);
            long pos = f ? syscall(SYS_lseek, fd, 0, SEEK_CUR) : -1;
            struct ofd *n = f ? ofd_new(f, pos < 0 ? -1 : pos) : NULL;
            if (n) o = n;
        }
    }
    struct ofd *cur = NULL;
    if (!__atomic_compare_exchange_n(&g_fdtab[fd], &cur, o, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        ofd_put(o);            /* another thread adopted (or opened) it first */
        o = cur;
    }
    errno = saved;
    return o > FD_NONE ? o : NULL;
}

/* counters of a successful open (fd, stdio stream or Gfarm handle) */
static void rec_open(struct frec *f, int created, uint64_t t0, uint64_t t1, uint16_t fl)
{
    CADD(f, C_OPENS, 1);
    if (created) CADD(f, C_CREATES, 1);
    CADD(f, C_T_OPEN, t1 - t0);
    MINU_NZ(WCTR(f, C_FIRST_OPEN), t0);
    if (UNLIKELY(g_trace)) trace(OP_OPEN, (uint16_t)(fl | (created ? OF_CREATED : 0)), f, -1, 0, t0, t1, 0);
}
/* register a successful open of (dirfd, path) as fd */
static void reg_open(int fd, int dirfd, const char *path, int oflags, int created, uint64_t t0, uint64_t t1,
                     uint32_t ff)
{
    struct frec *f = frec_at(dirfd, path, ff | (created ? FF_CREATED : 0));
    if (!f) { fd_install(fd, FD_NONE); return; }
    int64_t pos = 0;
    if (oflags & O_APPEND) {
        struct stat st;
        pos = syscall(SYS_fstat, fd, &st) == 0 ? (int64_t)st.st_size : -1;
    }
    struct ofd *o = ofd_new(f, pos);
    fd_install(fd, o ? o : FD_NONE);
    rec_open(f, created, t0, t1, ff & FF_STDIO ? OF_STDIO : 0);
}
/* a failed open counts as an error on its path (failed lookups are metadata load too) */
static void rec_open_failed(int dirfd, const char *path, uint64_t t0, uint64_t t1, int err)
{
    struct frec *f = frec_at(dirfd, path, 0);
    if (!f) return;
    CADD(f, C_ERRORS, 1);
    CADD(f, C_T_OPEN, t1 - t0);
    if (UNLIKELY(g_trace)) trace(OP_OPEN, 0, f, -1, -1, t0, t1, err);
}
static void rec_close(struct ofd *o, uint64_t t0, uint64_t t1, uint16_t fl)
{
    struct frec *f = o->f;
    CADD(f, C_CLOSES, 1);
    CADD(f, C_T_CLOSE, t1 - t0);
    MAXU(WCTR(f, C_LAST_CLOSE), t1);
    if (UNLIKELY(g_trace)) trace(OP_CLOSE, fl, f, -1, 0, t0, t1, 0);
    ofd_put(o);
}

#define SAVE_ERRNO int saved_errno_ = errno
#define RESTORE_ERRNO errno = saved_errno_

/* ---------------------------------------------------------------- log writer (async-signal-safe) */
static char g_wbuf[1 << 16];
static size_t g_wlen;
static int g_wfd, g_werr, g_nrec;
static uint64_t g_wtotal;
static double g_scale;                /* ns per tick */

static void wb_flush(void)
{
    if (g_wlen && !g_werr && sys_write_all(g_wfd, g_wbuf, g_wlen) < 0) g_werr = errno ? errno : EIO;
    g_wtotal += g_wlen;
    g_wlen = 0;
}
static void wb_put(const void *p, size_t n)
{
    const char *s = p;
    while (n) {
        size_t k = sizeof g_wbuf - g_wlen;
        if (k > n) k = n;
        memcpy(g_wbuf + g_wlen, s, k);
        g_wlen += k; s += k; n -= k;
        if (g_wlen == sizeof g_wbuf) wb_flush();
    }
}
static void wb_pad(size_t n)
{
    static const char z[8];
    if (n % 8) wb_put(z, 8 - n % 8);
}
static void wb_rec(uint16_t type, uint32_t len)
{
    uint16_t h[2] = {type, 0};
    wb_put(h, 4);
    wb_put(&len, 4);
    g_nrec++;
}
static void wb_str(uint32_t key, const char *s, size_t n)
{
    uint32_t len = (uint32_t)((8 + n + 7) & ~(size_t)7);
    wb_rec(R_STR, len);
    uint32_t kv[2] = {key, (uint32_t)n};
    wb_put(kv, 8);
    wb_put(s, n);
    wb_pad(n);
}
static inline uint64_t tick_ns(uint64_t t) { return t ? g_real0 + (uint64_t)((double)(int64_t)(t - g_tick0) * g_scale) : 0; }
static inline uint64_t dur_ns(uint64_t d) { return (uint64_t)((double)d * g_scale); }

static int frec_active(const struct frec *f)
{
    if (!f->path_len) return 0;
    for (int i = 0; i < NHOT; i++)
        if (f->c[i]) return 1;
    for (int i = 0; i < NWIDE; i++)
        if (f->w[i]) return 1;
    const struct fcold *x = cold_if(f);
    if (x) {
        for (int i = 0; i < NCOLD; i++)
            if (x->c[i]) return 1;
        for (int i = 0; i < NHOT; i++)
            if (x->c_hi[i]) return 1;
    }
    return 0;
}
/* directories already written as DIR records: the last few, most recent first (files come in creation order, so
 * neighbours nearly always share one of a few folders) */
#define MRU_N 8
struct dir_mru {
    uint32_t n, next_id;
    uint32_t id[MRU_N], len[MRU_N];
    const char *s[MRU_N];
};
/* put (id, d, len) first, shifting entries 0..k-1 down over slot k */
static uint32_t mru_front(struct dir_mru *m, uint32_t k, uint32_t id, const char *d, uint32_t len)
{
    for (; k > 0; k--) { m->id[k] = m->id[k - 1]; m->len[k] = m->len[k - 1]; m->s[k] = m->s[k - 1]; }
    m->id[0] = id; m->len[0] = len; m->s[0] = d;
    return id;
}
static uint32_t dir_id(struct dir_mru *m, const char *d, uint32_t len)
{
    for (uint32_t k = 0; k < m->n; k++)
        if (m->len[k] == len && !memcmp(m->s[k], d, len)) return mru_front(m, k, m->id[k], m->s[k], len);
    uint32_t id = m->next_id++;
    uint32_t rl = (uint32_t)((8 + len + 7) & ~7u);
    wb_rec(R_DIR, rl);
    uint32_t kv[2] = {id, len};
    wb_put(kv, 8);
    wb_put(d, len);
    wb_pad(len);
    return mru_front(m, m->n < MRU_N ? m->n++ : MRU_N - 1, id, d, len);
}
/* FILE record (FORMAT.md): present slots as u32, or u64 when they do not fit; the name relative to a DIR record */
static void wb_file(const struct frec *f, struct dir_mru *mru, uint64_t start_ns)
{
    static const uint8_t hot_slot[NHOT] = {
        [H_OPENS] = C_OPENS, [H_CREATES] = C_CREATES, [H_CLOSES] = C_CLOSES, [H_READS] = C_READS,
        [H_WRITES] = C_WRITES, [H_BYTES_READ] = C_BYTES_READ, [H_BYTES_WRITTEN] = C_BYTES_WRITTEN,
        [H_STATS] = C_STATS, [H_ERRORS] = C_ERRORS, [H_T_OPEN] = C_T_OPEN, [H_T_READ] = C_T_READ,
        [H_T_WRITE] = C_T_WRITE, [H_T_CLOSE] = C_T_CLOSE, [H_T_META] = C_T_META};
    uint64_t x[NSLOTS] = {0};
    for (int k = 0; k < NHOT; k++) x[hot_slot[k]] = f->c[k];
    x[C_MAX_OFFSET] = f->w[W_MAX_OFFSET]; x[C_FIRST_OPEN] = f->w[W_FIRST_OPEN]; x[C_LAST_CLOSE] = f->w[W_LAST_CLOSE];
    for (int k = 0; k < NBINS; k++) { x[NCOUNTERS + k] = f->hr[k]; x[NCOUNTERS + NBINS + k] = f->hw[k]; }
    const struct fcold *cx = cold_if(f);
    if (cx) {
        for (int k = 0; k < NCOUNTERS; k++) if (g_cmap[k] < 0) x[k] = cx->c[~g_cmap[k]];
        for (int k = 0; k < NHOT; k++) x[hot_slot[k]] += cx->c_hi[k];
        for (int k = 0; k < NBINS; k++) { x[NCOUNTERS + k] += cx->hr_hi[k]; x[NCOUNTERS + NBINS + k] += cx->hw_hi[k]; }
    }
    for (int k = C_T_OPEN; k <= C_T_META; k++) if (x[k]) x[k] = dur_ns(x[k]);
    uint64_t present = 0;
    for (int k = C_FIRST_OPEN; k <= C_LAST_CLOSE; k++)
        if (x[k]) { uint64_t t = tick_ns(x[k]); x[k] = t > start_ns ? t - start_ns : 0; present |= 1ull << k; }
    const char *path = g_paths + f->path_off;
    uint32_t plen = f->path_len, slash = plen;
    while (slash > 0 && path[slash - 1] != '/') slash--;
    uint32_t dir = dir_id(mru, path, slash ? slash - 1 : 0);
    uint32_t nlen = plen - slash;
    /* at most 32 + 8 * NSLOTS + name + pad bytes, built in place */
    if (g_wlen + 8 + 32 + 8 * NSLOTS + nlen + 8 > sizeof g_wbuf) wb_flush();
    char *r = g_wbuf + g_wlen, *v = r + 40;
    uint64_t mask = 0, wide = 0;
    for (int k = 0; k < NSLOTS; k++) {
        if (!x[k] && !(present >> k & 1)) continue;
        mask |= 1ull << k;
        if (x[k] >> 32) { wide |= 1ull << k; __builtin_memcpy(v, &x[k], 8); v += 8; }
        else { uint32_t w = (uint32_t)x[k]; __builtin_memcpy(v, &w, 4); v += 4; }
    }
    memcpy(v, path + slash, nlen);
    v += nlen;
    while ((v - r) & 7) *v++ = 0;
    uint32_t len = (uint32_t)(v - r - 8);
    uint16_t th[2] = {R_FILE, 0}, fl[2] = {(uint16_t)(f->flags & ~FF_COLD), (uint16_t)nlen};
    uint32_t id = (uint32_t)(f - g_frecs);
    uint8_t cn[4] = {NCOUNTERS, NBINS, 0, 0};
    __builtin_memcpy(r, th, 4);
    __builtin_memcpy(r + 4, &len, 4);
    __builtin_memcpy(r + 8, &id, 4);
    __builtin_memcpy(r + 12, fl, 4);
    __builtin_memcpy(r + 16, &dir, 4);
    __builtin_memcpy(r + 20, cn, 4);
    __builtin_memcpy(r + 24, &mask, 8);
    __builtin_memcpy(r + 32, &wide, 8);
    g_wlen += 8 + len;
    g_nrec++;
}
/* gfarm2fs mount points from /proc/self/mounts */
static void wb_mounts(void)
{
    char buf[8192];
    size_t have = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/mounts", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    for (;;) {
        long r = syscall(SYS_read, fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0 && have == 0) break;
        if (r > 0) have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (buf[i] != '\n') continue;
            buf[i] = 0;
            char *fld[3] = {0};
            char *q = buf + start;
            for (int k = 0; k < 3 && q; k++) {
                fld[k] = q;
                q = strchr(q, ' ');
                if (q) *q++ = 0;
            }
            if (fld[2] && !strcmp(fld[2], "fuse.gfarm2fs")) {
                char mp[PATH_MAX];   /* unescape \040 etc. */
                size_t o = 0;
                for (char *s = fld[1]; *s && o + 1 < sizeof mp; s++) {
                    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
                        mp[o++] = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
                        s += 3;
                    } else mp[o++] = *s;
                }
                wb_str(S_GFARM_MOUNT, mp, o);
            }
            start = i + 1;
        }
        if (r <= 0) break;
        if (start == 0 && have == sizeof buf - 1) have = 0;   /* absurdly long line: drop */
        memmove(buf, buf + start, have - start);
        have -= start;
    }
    syscall(SYS_close, fd);
}
static void snapshot_argv(int argc, char **argv)
{
    size_t n = 0;
    for (int i = 0; argv && i < argc && argv[i]; i++) {
        size_t l = s_len(argv[i]) + 1;
        if (n + l > sizeof g_argvbuf) { g_argvtrunc = 1; break; }
        memcpy(g_argvbuf + n, argv[i], l);
        n += l;
    }
    g_argvlen = n;
}

static void wb_argv(void)
{
    wb_str(S_ARGV, g_argvbuf, g_argvlen);
    if (g_argvtrunc) wb_str(S_ARGV_TRUNCATED, "1", 1);
}

/* ---------------------------------------------------------------- where the log goes */
/* The log folder is found by its path at the end, except after a chroot or a change of user: then the path may lead
 * elsewhere (inside the new root) or to a folder the new user may not write.  Before such a call the shim opens the
 * folder (g_dirfd, used if it is still the folder checked at start) and, for a change of user, the log file itself
 * (g_prefd), which is then written in place instead of through a temp file. */
static uint64_t g_dir_dev, g_dir_ino;  /* the log folder checked at start */
static int g_dirfd = -1, g_prefd = -1;
static uint64_t g_pre_dev, g_pre_ino;
static const char *g_priv_what;        /* first such call, for the warning */
static char g_exe[PATH_MAX];           /* /proc/self/exe read before a chroot (no /proc inside it, often) */
static long g_exe_len;
static int g_priv_warned;
#define HIGH_FD 512                    /* the shim's own fds are moved up here, out of the program's way */

static int fd_is(int fd, uint64_t dev, uint64_t ino)
{
    struct stat st;
    return syscall(SYS_fstat, fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}
static int fd_high(int fd)
{
    int hi = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, HIGH_FD);
    if (hi < 0) return fd;
    syscall(SYS_close, fd);
    return hi;
}
/* the log's file name "<host>.<pid>.<start_ns>.mtclog" into out[192]: a host name starting with "." (or empty)
 * gets a "_" first, since readers skip hidden names (the writer's temp files) */
static void log_name(char *out)
{
    char *p = out;
    if (g_host[0] == '.' || !g_host[0]) *p++ = '_';
    s_cpy(p, g_host, 128);
    p += s_len(p); *p++ = '.';
    p = u64_str(p, (uint64_t)g_pid); *p++ = '.';
    p = u64_str(p, g_real0);
    s_cpy(p, ".mtclog", 8);
}
static void join(char *out, const char *dir, const char *pre, const char *name, const char *post)
{
    const char *parts[] = {dir, "/", pre, name, post};
    char *p = out;
    for (int i = 0; i < 5; i++) { s_cpy(p, parts[i], PATH_MAX + 64 - (size_t)(p - out)); p += s_len(p); }
}
/* before a chroot or a change of user (what: the call's name); async-signal-safe */
static void priv_prepare(const char *what, int user)
{
    if (!g_on) return;
    int saved = errno;
    if (!g_priv_what) g_priv_what = what;
    if (!g_exe_len) {
        long r = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", g_exe, sizeof g_exe);
        g_exe_len = r > 0 ? r : -1;
    }
    if (g_dirfd < 0) {
        int fd = (int)syscall(SYS_openat, AT_FDCWD, g_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0 && fd_is(fd, g_dir_dev, g_dir_ino)) g_dirfd = fd_high(fd);
        else if (fd >= 0) syscall(SYS_close, fd);
    }
    if (user && g_prefd < 0 && g_dirfd >= 0) {
        char name[192];
        log_name(name);
        int fd = (int)syscall(SYS_openat, g_dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        struct stat st;
        if (fd >= 0 && syscall(SYS_fstat, fd, &st) == 0) {
            g_prefd = fd_high(fd); g_pre_dev = st.st_dev; g_pre_ino = st.st_ino;
        } else if (fd >= 0) syscall(SYS_close, fd);
    }
    errno = saved;
}
static void priv_warn(const char *fin)
{
    if (!g_priv_what || __atomic_exchange_n(&g_priv_warned, 1, __ATOMIC_RELAXED)) return;
    const char *parts[] = {g_priv_what, "() during the run: log written to ", fin,
                           g_rootlen ? " outside the new root (paths after it have the new root in front)"
                                     : " through the folder and file opened before it", NULL};
    warn_line(parts);
}

/* Write the log; returns 0 on success.  Only one writer ever runs (g_flushing). */
static int write_log(uint32_t ended_by)
{
    if (__atomic_exchange_n(&g_flushing, 1, __ATOMIC_ACQ_REL)) return 0;
    int saved = errno;
    if (!g_ended_by) g_ended_by = ended_by;
    uint64_t t_end = NOW(), mono_end = clock_ns(CLOCK_MONOTONIC), real_end = clock_ns(CLOCK_REALTIME);
#ifdef HAVE_TSC
    g_scale = t_end > g_tick0 ? (double)(mono_end - g_mono0) / (double)(t_end - g_tick0) : 1.0;
#else
    g_scale = 1.0;
#endif
    (void)real_end;
    uint64_t start_ns = g_real0;
    /* names: <dir>/<host>.<pid>.<start_ns>.mtclog, written as .<same>.tmp then renamed; or in place (g_prefd) */
    char name[192], fin[PATH_MAX + 64], tmp[PATH_MAX + 64];
    log_name(name);
    join(fin, g_dir, "", name, "");
    join(tmp, g_dir, ".", name, ".tmp");
    size_t dl = s_len(g_dir);
    int dfd = AT_FDCWD;
    const char *tname = tmp, *fname = fin;
    if (g_dirfd >= 0 && fd_is(g_dirfd, g_dir_dev, g_dir_ino)) { dfd = g_dirfd; tname = tmp + dl + 1; fname = fin + dl + 1; }
    int in_place = g_prefd >= 0 && fd_is(g_prefd, g_pre_dev, g_pre_ino);

    if (in_place) {
        g_wfd = g_prefd;
        syscall(SYS_ftruncate, g_wfd, 0);          /* a failed exec's log is rewritten */
        syscall(SYS_lseek, g_wfd, 0, SEEK_SET);
    } else {
        g_wfd = (int)syscall(SYS_openat, dfd, tname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (g_wfd < 0) { warn_once("cannot create log", tmp, errno); errno = saved; return -1; }
    }
    g_wlen = 0; g_werr = 0; g_nrec = 0; g_wtotal = 0;

    /* header */
    char hdr[32] = {0};
    memcpy(hdr, MTC_MAGIC, 8);
    uint16_t v16[2] = {MTC_VERSION, 32};
    uint32_t bom = MTC_BOM;
    memcpy(hdr + 8, v16, 4);
    memcpy(hdr + 12, &bom, 4);
    memcpy(hdr + 16, &real_end, 8);
    wb_put(hdr, 32);

    uint32_t nf = 0, nfrec = __atomic_load_n(&g_nfrec, __ATOMIC_ACQUIRE);
    if (nfrec > FREC_MAX) nfrec = FREC_MAX;
    uint64_t nops = __atomic_load_n(&g_nops, __ATOMIC_ACQUIRE);
    uint64_t traced = nops < g_ops_max ? nops : g_ops_max;

    struct mtc_proc_rec pr;
    memset(&pr, 0, sizeof pr);
    pr.pid = g_pid;
    pr.ppid = (int32_t)syscall(SYS_getppid);
    pr.uid = (uint32_t)syscall(SYS_getuid);
    pr.origin = g_origin;
    pr.start_ns = start_ns;
    pr.end_ns = tick_ns(t_end);
    pr.exit_status = g_exit_status;
    pr.ended_by = g_ended_by;
    pr.signal = g_signal;
    pr.n_files = 0;                   /* set below, once the FILE records are written */
    pr.ops_traced = traced;
    pr.ops_dropped = nops - traced;
    pr.files_dropped = g_files_dropped;
    pr.trace_flags = g_trace ? 1 : 0;
    pr.munmaps = g_munmaps;
    pr.parent_start_ns = g_parent_start_ns;
    wb_rec(R_PROC, sizeof pr);
    wb_put(&pr, sizeof pr);

    wb_str(S_HOST, g_host, s_len(g_host));
    if (g_run[0]) wb_str(S_RUN, g_run, s_len(g_run));
    if (g_task[0]) wb_str(S_TASK, g_task, s_len(g_task));
    if (g_stage[0]) wb_str(S_STAGE, g_stage, s_len(g_stage));
    if (g_exe_len > 0) wb_str(S_EXE, g_exe, (size_t)g_exe_len);
    else {
        char exe[PATH_MAX];
        long r = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", exe, sizeof exe);
        if (r > 0) wb_str(S_EXE, exe, (size_t)r);
    }
    wb_argv();
    wb_str(S_CWD, g_cwd0, s_len(g_cwd0));
    wb_str(S_LOGDIR, g_dir, s_len(g_dir));
    if (g_incl_raw[0]) wb_str(S_INCLUDE, g_incl_raw, s_len(g_incl_raw));
    if (g_excl_raw[0]) wb_str(S_EXCLUDE, g_excl_raw, s_len(g_excl_raw));
    wb_str(S_SHIM_VERSION, SHIM_VERSION, sizeof SHIM_VERSION - 1);
    if (g_mounts_given) {
        for (const char *m = g_mounts_raw; *m;) {
            const char *e = strchr(m, ':');
            size_t l = e ? (size_t)(e - m) : s_len(m);
            if (l) wb_str(S_GFARM_MOUNT, m, l);
            m += l + (e != NULL);
        }
    } else wb_mounts();

    struct dir_mru mru = {0};
    for (uint32_t i = 0; i < nfrec; i++) {
        const struct frec *f = &g_frecs[i];
        if (frec_active(f)) { wb_file(f, &mru, start_ns); nf++; }
    }
    {   /* n_files of the PROC record (header 32 + record header 8): still in the buffer, or written already */
        const size_t at = 32 + 8 + __builtin_offsetof(struct mtc_proc_rec, n_files);
        if (g_wtotal == 0) memcpy(g_wbuf + at, &nf, 4);
        else if (syscall(SYS_pwrite64, g_wfd, &nf, 4, (long)at) != 4 && !g_werr) g_werr = errno ? errno : EIO;
    }
    /* op trace: records of at most 1M ops each */
    for (uint64_t done = 0; done < traced;) {
        uint64_t k = traced - done;
        if (k > (1u << 20)) k = 1u << 20;
        wb_rec(R_OPS, (uint32_t)(8 + k * sizeof(struct mtc_op_rec)));
        uint32_t oh[2] = {(uint32_t)k, (uint32_t)sizeof(struct mtc_op_rec)};
        wb_put(oh, 8);
        for (uint64_t j = 0; j < k; j++) {
            struct mtc_op_rec o = g_ops[done + j];
            o.start_ns = tick_ns(o.start_ns);
            o.dur_ns = dur_ns(o.dur_ns);
            if (o.op == OP_RENAME) {}   /* offset holds the destination file id */
            wb_put(&o, sizeof o);
        }
        done += k;
    }
    uint32_t nrec = (uint32_t)g_nrec;
    wb_rec(R_END, 16);
    uint64_t total = g_wtotal + g_wlen - 8;
    uint32_t e2[2] = {nrec, 0};
    wb_put(e2, 8);
    wb_put(&total, 8);
    wb_flush();
    if (in_place) {                    /* kept open: a failed exec writes it again */
        if (g_werr) {
            syscall(SYS_ftruncate, g_wfd, 0);
            syscall(SYS_unlinkat, dfd, fname, 0);
            warn_once("cannot write log", fin, g_werr);
            errno = saved;
            return -1;
        }
        priv_warn(fin);
        errno = saved;
        return 0;
    }
    syscall(SYS_close, g_wfd);
    if (g_werr) {
        syscall(SYS_unlinkat, dfd, tname, 0);
        warn_once("cannot write log", tmp, g_werr);
        errno = saved;
        return -1;
    }
    if (syscall(SYS_renameat, dfd, tname, dfd, fname) < 0) {
        warn_once("cannot rename log", fin, errno);
        syscall(SYS_unlinkat, dfd, tname, 0);
        errno = saved;
        return -1;
    }
    priv_warn(fin);
    errno = saved;
    return 0;
}

/* ---------------------------------------------------------------- init, fork, signals */
static void *arena(size_t bytes)
{
    long r = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return (r == -1 || (unsigned long)r > -4096UL) ? NULL : (void *)r;
}
static void parse_prefixes(const char *raw, const char **arr, size_t *lens, int *n, int max, char **store,
                           char *store_end)
{
    const char *s = raw;
    while (s && *s && *n < max) {
        const char *e = strchr(s, ':');
        size_t l = e ? (size_t)(e - s) : s_len(s);
        if (l && *store + l + 1 < store_end && s[0] == '/') {
            memcpy(*store, s, l);
            (*store)[l] = 0;
            while (l > 1 && (*store)[l - 1] == '/') (*store)[--l] = 0;
            arr[*n] = *store; lens[*n] = l; (*n)++;
            *store += l + 1;
        }
        s = e ? e + 1 : NULL;
    }
}
static void time_base(void)
{
    g_tick0 = NOW();
    g_mono0 = clock_ns(CLOCK_MONOTONIC);
    g_real0 = clock_ns(CLOCK_REALTIME);
#ifndef HAVE_TSC
    g_tick0 = g_mono0;
#endif
}
static const int g_fatal[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGPIPE,
                              SIGXCPU, SIGXFSZ, SIGUSR1, SIGUSR2, SIGALRM};
static void on_fatal(int sig)
{
    int saved = errno;
    g_signal = sig;
    if (g_on) write_log(E_SIGNAL);     /* off in a vfork child, whose memory is its parent's */
    /* re-raise with the original (default) disposition */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, sig);
    syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &ss, NULL, 8);
    syscall(SYS_tgkill, (int)syscall(SYS_getpid), (int)syscall(SYS_gettid), sig);
    errno = saved;   /* synchronous faults re-fault on return with SIG_DFL */
}
static void install_signals(void)
{
    for (size_t i = 0; i < sizeof g_fatal / sizeof g_fatal[0]; i++) {
        /* one call per signal: install, and put the old disposition back if it was not the default */
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(g_fatal[i], &sa, &old)) continue;
        if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) sigaction(g_fatal[i], &old, NULL);
    }
}
static void atfork_child(void)
{
    if (!g_on) return;
    t_tid = 0;
    g_parent_start_ns = g_real0;
    g_origin = 1;
    g_pid = (pid_t)syscall(SYS_getpid);
    time_base();
    /* fresh record set: keep paths and the fd table (fds are inherited), zero every counter */
    uint32_t n = g_nfrec > FREC_MAX ? FREC_MAX : g_nfrec;
    for (uint32_t i = 0; i < n; i++) {
        struct frec *f = &g_frecs[i];
        memset(f->w, 0, sizeof f->w);
        memset(f->c, 0, sizeof f->c);
        memset(f->hr, 0, sizeof f->hr);
        memset(f->hw, 0, sizeof f->hw);
        f->flags = (uint16_t)((f->flags | FF_INHERITED) & ~(FF_CREATED | FF_COLD));
    }
    /* cold parts: drop the pages (they read back as zeros) rather than touching every one */
    syscall(SYS_madvise, g_cold, sizeof(struct fcold) * FREC_MAX, MADV_DONTNEED);
    g_nops = 0; g_munmaps = 0; g_files_dropped = 0;
    g_exit_status = -1; g_ended_by = 0; g_signal = 0;
    g_flushing = 0;
    /* the parent's log file opened in place is the parent's: this child writes its own (g_dirfd stays) */
    if (g_prefd >= 0) { syscall(SYS_close, g_prefd); g_prefd = -1; }
}
/* The log folder must be the user's: owned by the (real or effective) user or root, not writable by others unless
 * it is root's and sticky (like /tmp), and if it is a symlink, the link too is the user's or root's.  Else another
 * user could have made it (0777, or a link to a folder of theirs) to read, remove or forge the logs.  Returns NULL
 * if the folder is fine (g_dir_dev/ino set), else the problem, with *err the errno to name. */
static int uid_trusted(uint32_t u) { return u == 0 || u == (uint32_t)syscall(SYS_geteuid) || u == (uint32_t)syscall(SYS_getuid); }
static const char *log_dir_problem(const char *d, int *err)
{
    struct stat st;
    if (syscall(SYS_lstat, d, &st) < 0) { *err = errno; return "log folder missing"; }
    if (S_ISLNK(st.st_mode) && !uid_trusted(st.st_uid)) { *err = EPERM; return "log folder is a symlink owned by another user:"; }
    if (syscall(SYS_stat, d, &st) < 0) { *err = errno; return "log folder missing"; }
    if (!S_ISDIR(st.st_mode)) { *err = ENOTDIR; return "log folder is not a directory"; }
    if (!uid_trusted(st.st_uid)) { *err = EPERM; return "log folder owned by another user:"; }
    if ((st.st_mode & S_IWOTH) && !(st.st_uid == 0 && (st.st_mode & S_ISVTX))) {
        *err = EPERM; return "log folder writable by others:";
    }
    if (syscall(SYS_faccessat, AT_FDCWD, d, W_OK | X_OK, 0) < 0) { *err = errno; return "log folder not writable"; }
    g_dir_dev = st.st_dev; g_dir_ino = st.st_ino;
    return NULL;
}
/* MTCPROF_TRACE_MAX: digits only; above the cap, the cap (more would not fit the address space, and the byte count
 * would overflow); anything else, the default.  One warning either way. */
#define TRACE_MAX_DEFAULT (1ull << 22)
#define TRACE_MAX_CAP (1ull << 30)          /* 48 GiB of lazily touched memory */
static uint64_t trace_max(const char *m)
{
    if (!m || !*m) return TRACE_MAX_DEFAULT;
    uint64_t v = 0;
    int big = 0;
    const char *c = m;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (v > TRACE_MAX_CAP) big = 1;
        else v = v * 10 + (uint64_t)(*c - '0');
    }
    char num[24];
    if (*c) {
        u64_str(num, TRACE_MAX_DEFAULT);
        const char *parts[] = {"MTCPROF_TRACE_MAX=", m, " is not a number of ops; using ", num, NULL};
        warn_line(parts);
        return TRACE_MAX_DEFAULT;
    }
    if (big || v > TRACE_MAX_CAP) {
        u64_str(num, TRACE_MAX_CAP);
        const char *parts[] = {"MTCPROF_TRACE_MAX=", m, " is more than the most the shim keeps; using ", num, NULL};
        warn_line(parts);
        return TRACE_MAX_CAP;
    }
    return v;
}
static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

__attribute__((constructor(101))) static void mtc_init(int argc, char **argv, char **envp)
{
    (void)envp;
    const char *dir = getenv("MTCPROF_DIR");
    if (!dir || !*dir) return;                  /* not configured: pure pass-through */
    snapshot_argv(argc, argv);
    int saved = errno;
    err_identity();
    g_pid = (pid_t)syscall(SYS_getpid);
    cwd_update();
    s_cpy(g_cwd0, g_cwd, sizeof g_cwd0);
    if (dir[0] == '/') s_cpy(g_dir, dir, sizeof g_dir);
    else if (g_cwd[0] != '/') { warn_once("log folder relative to an unnamed working directory:", dir, ENAMETOOLONG); errno = saved; return; }
    else { s_cpy(g_dir, g_cwd, sizeof g_dir); size_t l = s_len(g_dir); g_dir[l] = '/'; s_cpy(g_dir + l + 1, dir, sizeof g_dir - l - 1); }
    norm_inplace(g_dir);
    int derr = 0;
    const char *problem = log_dir_problem(g_dir, &derr);
    if (problem) { warn_once(problem, g_dir, derr); errno = saved; return; }

    const char *h = getenv("MTCPROF_HOST");
    if (h && *h) s_cpy(g_host, h, sizeof g_host);
    else { struct utsname u; if (uname(&u) == 0) s_cpy(g_host, u.nodename, sizeof g_host); else s_cpy(g_host, "localhost", sizeof g_host); }
    for (char *c = g_host; *c; c++) if (*c == '/') *c = '_';
    s_cpy(g_run, env_or("MTCPROF_RUN", ""), sizeof g_run);
    s_cpy(g_task, env_or("MTCPROF_TASK", ""), sizeof g_task);
    s_cpy(g_stage, env_or("MTCPROF_STAGE", ""), sizeof g_stage);
    s_cpy(g_incl_raw, env_or("MTCPROF_INCLUDE", ""), sizeof g_incl_raw);
    s_cpy(g_excl_raw, env_or("MTCPROF_EXCLUDE", ""), sizeof g_excl_raw);
    const char *gm = getenv("MTCPROF_GFARM_MOUNTS");
    if (gm) { g_mounts_given = 1; s_cpy(g_mounts_raw, gm, sizeof g_mounts_raw); }
    char *store = g_prefix_store, *store_end = g_prefix_store + sizeof g_prefix_store;
    static const char *dflt[] = {"/proc", "/sys", "/dev"};
    for (int i = 0; i < 3; i++) { g_excl[g_nexcl] = dflt[i]; g_excl_len[g_nexcl++] = s_len(dflt[i]); }
    g_excl[g_nexcl] = g_dir; g_excl_len[g_nexcl++] = s_len(g_dir);
    parse_prefixes(g_excl_raw, g_excl, g_excl_len, &g_nexcl, MAX_PREFIX + 4, &store, store_end);
    parse_prefixes(g_incl_raw, g_incl, g_incl_len, &g_nincl, MAX_PREFIX, &store, store_end);

    const char *tr = env_or("MTCPROF_TRACE", "");
    if (!strcmp(tr, "ops")) {
        g_ops_max = trace_max(getenv("MTCPROF_TRACE_MAX"));
        g_ops = g_ops_max ? arena(g_ops_max * sizeof(struct mtc_op_rec)) : NULL;
        if (g_ops_max && !g_ops) {
            char num[24];
            u64_str(num, g_ops_max);
            const char *parts[] = {"cannot reserve memory for ", num, " traced ops: op trace off", NULL};
            warn_line(parts);
            g_ops_max = 0;
        }
        g_trace = g_ops != NULL;
    }
    /* the tables share one reservation (pages are backed only when touched): one mapping to make per process */
    const size_t parts[] = {sizeof(struct frec) * FREC_MAX, sizeof(struct fcold) * FREC_MAX,
                            sizeof(uint32_t) * NBUCKETS, PATHS_BYTES, sizeof(struct ofd) * OFD_MAX};
    size_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) total += (parts[i] + 4095) & ~(size_t)4095;
    char *mem = arena(total);
    if (!mem) { warn_once("cannot reserve memory", "", ENOMEM); errno = saved; return; }
    g_frecs = (struct frec *)mem; mem += (parts[0] + 4095) & ~(size_t)4095;
    g_cold = (struct fcold *)mem; mem += (parts[1] + 4095) & ~(size_t)4095;
    g_bkt = (uint32_t *)mem; mem += (parts[2] + 4095) & ~(size_t)4095;
    g_paths = mem; mem += (parts[3] + 4095) & ~(size_t)4095;
    g_ofds = (struct ofd *)mem;
    time_base();
    install_signals();
    pthread_atfork(NULL, NULL, atfork_child);
    __atomic_store_n(&g_on, 1, __ATOMIC_RELEASE);
    errno = saved;
}
__attribute__((destructor(101))) static void mtc_fini(void)
{
    if (g_on) write_log(E_DESTRUCTOR);
}

/* main()'s return value: wrap __libc_start_main */
static int (*g_main)(int, char **, char **);
static int main_hook(int argc, char **argv, char **envp)
{
    int r = g_main(argc, argv, envp);
    if (g_on && !g_ended_by) { g_exit_status = r & 0xff; g_ended_by = E_MAIN_RETURN; }
    return r;
}
DECL(int, __libc_start_main, (int (*)(int, char **, char **), int, char **, void (*)(void), void (*)(void),
                              void (*)(void), void *));
EXPORT int __libc_start_main(int (*m)(int, char **, char **), int argc, char **argv, void (*init)(void),
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    RESOLVE(__libc_start_main);
    g_main = m;
    return real___libc_start_main(main_hook, argc, argv, init, fini, rtld_fini, stack_end);
}

/* ---------------------------------------------------------------- process end and exec */
DECL(void, exit, (int));
DECL(void, _exit, (int));
DECL(void, _Exit, (int));
EXPORT void exit(int status)
{
    RESOLVE(exit);
    if (g_on && !g_ended_by) { g_exit_status = status & 0xff; g_ended_by = E_EXIT; }
    real_exit(status);
    __builtin_unreachable();
}
EXPORT void _exit(int status)
{
    RESOLVE(_exit);
    if (g_on) { if (!g_ended_by) { g_exit_status = status & 0xff; g_ended_by = E__EXIT; } write_log(E__EXIT); }
    real__exit(status);
    __builtin_unreachable();
}
EXPORT void _Exit(int status)
{
    RESOLVE(_Exit);
    if (g_on) { if (!g_ended_by) { g_exit_status = status & 0xff; g_ended_by = E__EXIT; } write_log(E__EXIT); }
    real__Exit(status);
    __builtin_unreachable();
}
/* before exec: write this image's log if it did any file I/O (the new image starts its own log) */
static int pre_exec(void)
{
    if (!g_on) return 0;
    uint32_t n = g_nfrec > FREC_MAX ? FREC_MAX : g_nfrec;
    int active = g_nops > 0;
    for (uint32_t i = 0; i < n && !active; i++) active = frec_active(&g_frecs[i]);
    if (!active) return 0;
    uint32_t eb = g_ended_by;
    g_ended_by = 0;
    write_log(E_EXEC);
    g_ended_by = eb;
    return 1;
}
static void post_exec_failed(int wrote)
{
    if (wrote) { int e = errno; __atomic_store_n(&g_flushing, 0, __ATOMIC_RELEASE); errno = e; }
}
DECL(int, execve, (const char *, char *const[], char *const[]));
DECL(int, execv, (const char *, char *const[]));
DECL(int, execvp, (const char *, char *const[]));
DECL(int, execvpe, (const char *, char *const[], char *const[]));
DECL(int, fexecve, (int, char *const[], char *const[]));
DECL(int, execveat, (int, const char *, char *const[], char *const[], int));
EXPORT int execve(const char *p, char *const a[], char *const e[])
{ RESOLVE(execve); int w = pre_exec(); int r = real_execve(p, a, e); post_exec_failed(w); return r; }
EXPORT int execv(const char *p, char *const a[])
{ RESOLVE(execv); int w = pre_exec(); int r = real_execv(p, a); post_exec_failed(w); return r; }
EXPORT int execvp(const char *p, char *const a[])
{ RESOLVE(execvp); int w = pre_exec(); int r = real_execvp(p, a); post_exec_failed(w); return r; }
EXPORT int execvpe(const char *p, char *const a[], char *const e[])
{ RESOLVE(execvpe); int w = pre_exec(); int r = real_execvpe(p, a, e); post_exec_failed(w); return r; }
EXPORT int fexecve(int fd, char *const a[], char *const e[])
{ RESOLVE(fexecve); int w = pre_exec(); int r = real_fexecve(fd, a, e); post_exec_failed(w); return r; }
EXPORT int execveat(int d, const char *p, char *const a[], char *const e[], int fl)
{ RESOLVE(execveat); int w = pre_exec(); int r = real_execveat(d, p, a, e, fl); post_exec_failed(w); return r; }
#define COLLECT_ARGS(first)                                                                                    \
    va_list ap;                                                                                                \
    int n_ = 1;                                                                                                \
    va_start(ap, first);                                                                                       \
    while (va_arg(ap, char *)) n_++;                                                                           \
    va_end(ap);                                                                                                \
    char **av = alloca(sizeof(char *) * (size_t)(n_ + 1));                                                     \
    va_start(ap, first);                                                                                       \
    av[0] = (char *)first;                                                                                     \
    for (int i_ = 1; i_ <= n_; i_++) av[i_] = va_arg(ap, char *);
EXPORT int execl(const char *p, const char *arg, ...)
{ COLLECT_ARGS(arg); va_end(ap); return execv(p, av); }
EXPORT int execlp(const char *p, const char *arg, ...)
{ COLLECT_ARGS(arg); va_end(ap); return execvp(p, av); }
EXPORT int execle(const char *p, const char *arg, ...)
{ COLLECT_ARGS(arg); char **env = va_arg(ap, char **); va_end(ap); return execve(p, av, env); }

/* ---------------------------------------------------------------- open / close / dup */
static int is_creat(int flags) { return (flags & O_CREAT) && (flags & O_TMPFILE) != O_TMPFILE; }
/* open with O_CREAT: try O_EXCL first to learn whether this call creates the file (same effect as the original
 * call when it succeeds); on any failure, repeat the original call so results and errno are the program's own. */
#define OPEN_BODY(CALL_ORIG, CALL_EXCL, DIRFD, PATH, FLAGS)                                                    \
    if (!g_on) return CALL_ORIG;                                                                               \
    int created = 0, fd, errno0_ = errno;                                                                      \
    uint64_t t0 = NOW();                                                                                       \
    if (is_creat(FLAGS) && !((FLAGS) & O_EXCL)) {                                                              \
        fd = CALL_EXCL;                                                                                        \
        if (fd >= 0) created = 1;                                                                              \
        else { errno = errno0_; fd = CALL_ORIG; }                                                              \
    } else {                                                                                                   \
        fd = CALL_ORIG;                                                                                        \
        created = fd >= 0 && is_creat(FLAGS);                                                                  \
    }                                                                                                          \
    uint64_t t1 = NOW();                                                                                       \
    SAVE_ERRNO;                                                                                                \
    if (fd >= 0) reg_open(fd, DIRFD, PATH, FLAGS, created, t0, t1, FF_POSIX);                                  \
    else rec_open_failed(DIRFD, PATH, t0, t1, saved_errno_);                                                   \
    RESTORE_ERRNO;                                                                                             \
    return fd;

static mode_t va_mode(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}
DECL(int, open, (const char *, int, ...));
DECL(int, open64, (const char *, int, ...));
DECL(int, openat, (int, const char *, int, ...));
DECL(int, openat64, (int, const char *, int, ...));
DECL(int, __open_2, (const char *, int));
DECL(int, __open64_2, (const char *, int));
DECL(int, __openat_2, (int, const char *, int));
DECL(int, __openat64_2, (int, const char *, int));
EXPORT int open(const char *p, int fl, ...)
{
    va_list ap; va_start(ap, fl); mode_t m = va_mode(fl, ap); va_end(ap);
    RESOLVE(open);
    OPEN_BODY(real_open(p, fl, m), real_open(p, fl | O_EXCL, m), AT_FDCWD, p, fl)
}
EXPORT int open64(const char *p, int fl, ...)
{
    va_list ap; va_start(ap, fl); mode_t m = va_mode(fl, ap); va_end(ap);
    RESOLVE(open64);
    OPEN_BODY(real_open64(p, fl, m), real_open64(p, fl | O_EXCL, m), AT_FDCWD, p, fl)
}
EXPORT int openat(int d, const char *p, int fl, ...)
{
    va_list ap; va_start(ap, fl); mode_t m = va_mode(fl, ap); va_end(ap);
    RESOLVE(openat);
    OPEN_BODY(real_openat(d, p, fl, m), real_openat(d, p, fl | O_EXCL, m), d, p, fl)
}
EXPORT int openat64(int d, const char *p, int fl, ...)
{
    va_list ap; va_start(ap, fl); mode_t m = va_mode(fl, ap); va_end(ap);
    RESOLVE(openat64);
    OPEN_BODY(real_openat64(d, p, fl, m), real_openat64(d, p, fl | O_EXCL, m), d, p, fl)
}
/* the _FORTIFY_SOURCE entry points never carry O_CREAT */
EXPORT int __open_2(const char *p, int fl) { RESOLVE(__open_2); OPEN_BODY(real___open_2(p, fl), -1, AT_FDCWD, p, fl) }
EXPORT int __open64_2(const char *p, int fl) { RESOLVE(__open64_2); OPEN_BODY(real___open64_2(p, fl), -1, AT_FDCWD, p, fl) }
EXPORT int __openat_2(int d, const char *p, int fl) { RESOLVE(__openat_2); OPEN_BODY(real___openat_2(d, p, fl), -1, d, p, fl) }
EXPORT int __openat64_2(int d, const char *p, int fl) { RESOLVE(__openat64_2); OPEN_BODY(real___openat64_2(d, p, fl), -1, d, p, fl) }
EXPORT int creat(const char *p, mode_t m)
{
    RESOLVE(open);
    int fl = O_CREAT | O_WRONLY | O_TRUNC;
    OPEN_BODY(real_open(p, fl, m), real_open(p, fl | O_EXCL, m), AT_FDCWD, p, fl)
}
EXPORT int creat64(const char *p, mode_t m)
{
    RESOLVE(open64);
    int fl = O_CREAT | O_WRONLY | O_TRUNC;
    OPEN_BODY(real_open64(p, fl, m), real_open64(p, fl | O_EXCL, m), AT_FDCWD, p, fl)
}
#define MKSTEMP_WRAP(name, proto, call)                                                                        \
    DECL(int, name, proto);                                                                                    \
    EXPORT int name proto                                                                                      \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        if (!g_on) return real_##name call;                                                                    \
        uint64_t t0 = NOW();                                                                                   \
        int fd = real_##name call;                                                                             \
        uint64_t t1 = NOW();                                                                                   \
        if (fd >= 0) { SAVE_ERRNO; reg_open(fd, AT_FDCWD, t, O_CREAT, 1, t0, t1, FF_POSIX); RESTORE_ERRNO; } \
        return fd;                                                                                             \
    }
MKSTEMP_WRAP(mkstemp, (char *t), (t))
MKSTEMP_WRAP(mkostemp, (char *t, int fl), (t, fl))
MKSTEMP_WRAP(mkstemps, (char *t, int sl), (t, sl))
MKSTEMP_WRAP(mkostemps, (char *t, int sl, int fl), (t, sl, fl))

DECL(int, close, (int));
EXPORT int close(int fd)
{
    RESOLVE(close);
    struct ofd *o;
    if (!g_on || !(o = fd_take(fd))) return real_close(fd);
    uint64_t t0 = NOW();
    int r = real_close(fd);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    if (r == 0 || saved_errno_ != EBADF) rec_close(o, t0, t1, 0);
    else ofd_put(o);
    RESTORE_ERRNO;
    return r;
}
DECL(int, close_range, (unsigned, unsigned, int));
EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
    RESOLVE(close_range);
    int r = real_close_range(lo, hi, flags);
    if (g_on && r == 0 && !(flags & CLOSE_RANGE_CLOEXEC)) {
        SAVE_ERRNO;
        uint64_t t = NOW();
        for (unsigned fd = lo; fd <= hi && fd < FD_MAX; fd++) {
            struct ofd *o = fd_take((int)fd);
            if (o) rec_close(o, t, t, 0);
        }
        RESTORE_ERRNO;
    }
    return r;
}
DECL(void, closefrom, (int));
EXPORT void closefrom(int lo)
{
    RESOLVE(closefrom);
    real_closefrom(lo);
    if (g_on) {
        SAVE_ERRNO;
        uint64_t t = NOW();
        for (int fd = lo < 0 ? 0 : lo; fd < FD_MAX; fd++) {
            struct ofd *o = fd_take(fd);
            if (o) rec_close(o, t, t, 0);
        }
        RESTORE_ERRNO;
    }
}
static void rec_dup(int oldfd, int newfd, uint64_t t0, uint64_t t1)
{
    struct ofd *o = fd_ofd(oldfd);
    if (oldfd == newfd) return;
    if (!o) { fd_install(newfd, FD_NONE); return; }   /* newfd now refers to something untracked */
    __atomic_fetch_add(&o->refs, 1, __ATOMIC_ACQ_REL);
    fd_install(newfd, o);
    CADD(o->f, C_DUPS, 1);
    if (UNLIKELY(g_trace)) trace(OP_DUP, 0, o->f, newfd, 0, t0, t1, 0);
}
DECL(int, dup, (int));
DECL(int, dup2, (int, int));
DECL(int, dup3, (int, int, int));
EXPORT int dup(int fd)
{
    RESOLVE(dup);
    if (!g_on) return real_dup(fd);
    uint64_t t0 = NOW();
    int r = real_dup(fd);
    uint64_t t1 = NOW();
    if (r >= 0) { SAVE_ERRNO; rec_dup(fd, r, t0, t1); RESTORE_ERRNO; }
    return r;
}
EXPORT int dup2(int fd, int nfd)
{
    RESOLVE(dup2);
    if (!g_on) return real_dup2(fd, nfd);
    uint64_t t0 = NOW();
    int r = real_dup2(fd, nfd);
    uint64_t t1 = NOW();
    if (r >= 0) { SAVE_ERRNO; rec_dup(fd, r, t0, t1); RESTORE_ERRNO; }
    return r;
}
EXPORT int dup3(int fd, int nfd, int fl)
{
    RESOLVE(dup3);
    if (!g_on) return real_dup3(fd, nfd, fl);
    uint64_t t0 = NOW();
    int r = real_dup3(fd, nfd, fl);
    uint64_t t1 = NOW();
    if (r >= 0) { SAVE_ERRNO; rec_dup(fd, r, t0, t1); RESTORE_ERRNO; }
    return r;
}
#define FCNTL_WRAP(name)                                                                                       \
    DECL(int, name, (int, int, ...));                                                                          \
    EXPORT int name(int fd, int cmd, ...)                                                                      \
    {                                                                                                          \
        va_list ap;                                                                                            \
        va_start(ap, cmd);                                                                                     \
        void *arg = va_arg(ap, void *);                                                                        \
        va_end(ap);                                                                                            \
        RESOLVE(name);                                                                                         \
        if (!g_on || (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)) return real_##name(fd, cmd, arg);            \
        uint64_t t0 = NOW();                                                                                   \
        int r = real_##name(fd, cmd, arg);                                                                     \
        uint64_t t1 = NOW();                                                                                   \
        if (r >= 0) { SAVE_ERRNO; rec_dup(fd, r, t0, t1); RESTORE_ERRNO; }                                    \
        return r;                                                                                              \
    }
#undef fcntl
FCNTL_WRAP(fcntl)
FCNTL_WRAP(fcntl64)

/* ---------------------------------------------------------------- read / write family (hot path) */
/* IO(kind, off_expr, call): kind 0 read, 1 write; off_expr evaluated after the call with r = bytes */
#define IO_BODY(TYPE, FD, WR, CALL, OFFSET_EXPR, FL)                                                           \
    struct ofd *o;                                                                                             \
    if (!g_on || !(o = fd_ofd(FD))) return CALL;                                                               \
    uint64_t t0 = NOW();                                                                                       \
    TYPE r = CALL;                                                                                             \
    uint64_t t1 = NOW();                                                                                       \
    SAVE_ERRNO;                                                                                                \
    rec_rw(o->f, WR, (r >= 0 ? (OFFSET_EXPR) : -1), (int64_t)r, t0, t1, FL, saved_errno_);                      \
    RESTORE_ERRNO;                                                                                             \
    return r;
#define SEQ_OFF (o->pos >= 0 ? POS_ADVANCE(&o->pos, (int64_t)r) : -1)

DECL(ssize_t, read, (int, void *, size_t));
DECL(ssize_t, __read_chk, (int, void *, size_t, size_t));
DECL(ssize_t, write, (int, const void *, size_t));
DECL(ssize_t, pread, (int, void *, size_t, off_t));
DECL(ssize_t, pread64, (int, void *, size_t, off64_t));
DECL(ssize_t, __pread_chk, (int, void *, size_t, off_t, size_t));
DECL(ssize_t, __pread64_chk, (int, void *, size_t, off64_t, size_t));
DECL(ssize_t, pwrite, (int, const void *, size_t, off_t));
DECL(ssize_t, pwrite64, (int, const void *, size_t, off64_t));
DECL(ssize_t, readv, (int, const struct iovec *, int));
DECL(ssize_t, writev, (int, const struct iovec *, int));
DECL(ssize_t, preadv, (int, const struct iovec *, int, off_t));
DECL(ssize_t, preadv64, (int, const struct iovec *, int, off64_t));
DECL(ssize_t, pwritev, (int, const struct iovec *, int, off_t));
DECL(ssize_t, pwritev64, (int, const struct iovec *, int, off64_t));
DECL(ssize_t, preadv2, (int, const struct iovec *, int, off_t, int));
DECL(ssize_t, preadv64v2, (int, const struct iovec *, int, off64_t, int));
DECL(ssize_t, pwritev2, (int, const struct iovec *, int, off_t, int));
DECL(ssize_t, pwritev64v2, (int, const struct iovec *, int, off64_t, int));

EXPORT ssize_t read(int fd, void *b, size_t n) { RESOLVE(read); IO_BODY(ssize_t, fd, 0, real_read(fd, b, n), SEQ_OFF, 0) }
EXPORT ssize_t __read_chk(int fd, void *b, size_t n, size_t bl) { RESOLVE(__read_chk); IO_BODY(ssize_t, fd, 0, real___read_chk(fd, b, n, bl), SEQ_OFF, 0) }
EXPORT ssize_t write(int fd, const void *b, size_t n) { RESOLVE(write); IO_BODY(ssize_t, fd, 1, real_write(fd, b, n), SEQ_OFF, 0) }
EXPORT ssize_t pread(int fd, void *b, size_t n, off_t off) { RESOLVE(pread); IO_BODY(ssize_t, fd, 0, real_pread(fd, b, n, off), off, OF_POS) }
EXPORT ssize_t pread64(int fd, void *b, size_t n, off64_t off) { RESOLVE(pread64); IO_BODY(ssize_t, fd, 0, real_pread64(fd, b, n, off), off, OF_POS) }
EXPORT ssize_t __pread_chk(int fd, void *b, size_t n, off_t off, size_t bl) { RESOLVE(__pread_chk); IO_BODY(ssize_t, fd, 0, real___pread_chk(fd, b, n, off, bl), off, OF_POS) }
EXPORT ssize_t __pread64_chk(int fd, void *b, size_t n, off64_t off, size_t bl) { RESOLVE(__pread64_chk); IO_BODY(ssize_t, fd, 0, real___pread64_chk(fd, b, n, off, bl), off, OF_POS) }
EXPORT ssize_t pwrite(int fd, const void *b, size_t n, off_t off) { RESOLVE(pwrite); IO_BODY(ssize_t, fd, 1, real_pwrite(fd, b, n, off), off, OF_POS) }
EXPORT ssize_t pwrite64(int fd, const void *b, size_t n, off64_t off) { RESOLVE(pwrite64); IO_BODY(ssize_t, fd, 1, real_pwrite64(fd, b, n, off), off, OF_POS) }
EXPORT ssize_t readv(int fd, const struct iovec *v, int c) { RESOLVE(readv); IO_BODY(ssize_t, fd, 0, real_readv(fd, v, c), SEQ_OFF, OF_VEC) }
EXPORT ssize_t writev(int fd, const struct iovec *v, int c) { RESOLVE(writev); IO_BODY(ssize_t, fd, 1, real_writev(fd, v, c), SEQ_OFF, OF_VEC) }
EXPORT ssize_t preadv(int fd, const struct iovec *v, int c, off_t off) { RESOLVE(preadv); IO_BODY(ssize_t, fd, 0, real_preadv(fd, v, c, off), off, OF_VEC | OF_POS) }
EXPORT ssize_t preadv64(int fd, const struct iovec *v, int c, off64_t off) { RESOLVE(preadv64); IO_BODY(ssize_t, fd, 0, real_preadv64(fd, v, c, off), off, OF_VEC | OF_POS) }
EXPORT ssize_t pwritev(int fd, const struct iovec *v, int c, off_t off) { RESOLVE(pwritev); IO_BODY(ssize_t, fd, 1, real_pwritev(fd, v, c, off), off, OF_VEC | OF_POS) }
EXPORT ssize_t pwritev64(int fd, const struct iovec *v, int c, off64_t off) { RESOLVE(pwritev64); IO_BODY(ssize_t, fd, 1, real_pwritev64(fd, v, c, off), off, OF_VEC | OF_POS) }
#define V2_OFF (off == -1 ? SEQ_OFF : off)
EXPORT ssize_t preadv2(int fd, const struct iovec *v, int c, off_t off, int fl) { RESOLVE(preadv2); IO_BODY(ssize_t, fd, 0, real_preadv2(fd, v, c, off, fl), V2_OFF, OF_VEC | (off == -1 ? 0 : OF_POS)) }
EXPORT ssize_t preadv64v2(int fd, const struct iovec *v, int c, off64_t off, int fl) { RESOLVE(preadv64v2); IO_BODY(ssize_t, fd, 0, real_preadv64v2(fd, v, c, off, fl), V2_OFF, OF_VEC | (off == -1 ? 0 : OF_POS)) }
EXPORT ssize_t pwritev2(int fd, const struct iovec *v, int c, off_t off, int fl) { RESOLVE(pwritev2); IO_BODY(ssize_t, fd, 1, real_pwritev2(fd, v, c, off, fl), V2_OFF, OF_VEC | (off == -1 ? 0 : OF_POS)) }
EXPORT ssize_t pwritev64v2(int fd, const struct iovec *v, int c, off64_t off, int fl) { RESOLVE(pwritev64v2); IO_BODY(ssize_t, fd, 1, real_pwritev64v2(fd, v, c, off, fl), V2_OFF, OF_VEC | (off == -1 ? 0 : OF_POS)) }

/* copy_file_range / sendfile: a read on the input and a write on the output.  When both are traced the call's time
   is split between them (first half read, second half write): summed, it counts once, as the call did */
static void rec_copy(int in, int out, int64_t *inoff, int64_t *outoff, int64_t r, uint64_t t0, uint64_t t1, int err)
{
    struct ofd *oi = fd_ofd(in), *oo = fd_ofd(out);
    uint64_t tm = t0 + (t1 - t0) / 2;
    if (oi) rec_rw(oi->f, 0, r < 0 ? -1 : inoff ? *inoff - r : (oi->pos >= 0 ? POS_ADVANCE(&oi->pos, r) : -1), r, t0, oo ? tm : t1, OF_COPY, err);
    if (oo) rec_rw(oo->f, 1, r < 0 ? -1 : outoff ? *outoff - r : (oo->pos >= 0 ? POS_ADVANCE(&oo->pos, r) : -1), r, oi ? tm : t0, t1, OF_COPY, err);
}
DECL(ssize_t, copy_file_range, (int, off64_t *, int, off64_t *, size_t, unsigned));
EXPORT ssize_t copy_file_range(int in, off64_t *pin, int out, off64_t *pout, size_t n, unsigned fl)
{
    RESOLVE(copy_file_range);
    if (!g_on || (!fd_ofd(in) && !fd_ofd(out))) return real_copy_file_range(in, pin, out, pout, n, fl);
    uint64_t t0 = NOW();
    ssize_t r = real_copy_file_range(in, pin, out, pout, n, fl);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    rec_copy(in, out, (int64_t *)pin, (int64_t *)pout, r, t0, t1, saved_errno_);
    RESTORE_ERRNO;
    return r;
}
#define SENDFILE_WRAP(name, OFFT)                                                                              \
    DECL(ssize_t, name, (int, int, OFFT *, size_t));                                                           \
    EXPORT ssize_t name(int out, int in, OFFT *off, size_t n)                                                  \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        if (!g_on || (!fd_ofd(in) && !fd_ofd(out))) return real_##name(out, in, off, n);                       \
        uint64_t t0 = NOW();                                                                                   \
        ssize_t r = real_##name(out, in, off, n);                                                              \
        uint64_t t1 = NOW();                                                                                   \
        SAVE_ERRNO;                                                                                            \
        rec_copy(in, out, (int64_t *)off, NULL, r, t0, t1, saved_errno_);                                      \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
SENDFILE_WRAP(sendfile, off_t)
SENDFILE_WRAP(sendfile64, off64_t)

/* lseek */
#define SEEK_WRAP(name, OFFT)                                                                                  \
    DECL(OFFT, name, (int, OFFT, int));                                                                        \
    EXPORT OFFT name(int fd, OFFT off, int wh)                                                                 \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        struct ofd *o;                                                                                         \
        if (!g_on || !(o = fd_ofd(fd))) return real_##name(fd, off, wh);                                       \
        uint64_t t0 = NOW();                                                                                   \
        OFFT r = real_##name(fd, off, wh);                                                                     \
        uint64_t t1 = NOW();                                                                                   \
        SAVE_ERRNO;                                                                                            \
        if (r >= 0) {                                                                                          \
            __atomic_store_n(&o->pos, (int64_t)r, __ATOMIC_RELAXED);                                           \
            CADD(o->f, C_SEEKS, 1);                                                                         \
        } else CADD(o->f, C_ERRORS, 1);                                                                     \
        if (UNLIKELY(g_trace)) trace(OP_SEEK, 0, o->f, r, 0, t0, t1, r < 0 ? saved_errno_ : 0);                \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
SEEK_WRAP(lseek, off_t)
SEEK_WRAP(lseek64, off64_t)

/* fsync, fdatasync, ftruncate, fstat: fd-level metadata */
#define FDMETA_WRAP(name, proto, call, COUNTER, OP)                                                            \
    DECL(int, name, proto);                                                                                    \
    EXPORT int name proto                                                                                      \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        struct ofd *o;                                                                                         \
        if (!g_on || !(o = fd_ofd(fd))) return real_##name call;                                               \
        uint64_t t0 = NOW();                                                                                   \
        int r = real_##name call;                                                                              \
        uint64_t t1 = NOW();                                                                                   \
        SAVE_ERRNO;                                                                                            \
        rec_meta(o->f, COUNTER, OP, t0, t1, r != 0, saved_errno_, -1);                                         \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
FDMETA_WRAP(fsync, (int fd), (fd), C_FSYNCS, OP_FSYNC)
FDMETA_WRAP(fdatasync, (int fd), (fd), C_FSYNCS, OP_FSYNC)
FDMETA_WRAP(ftruncate, (int fd, off_t l), (fd, l), C_TRUNCATES, OP_TRUNCATE)
FDMETA_WRAP(ftruncate64, (int fd, off64_t l), (fd, l), C_TRUNCATES, OP_TRUNCATE)
FDMETA_WRAP(fstat, (int fd, struct stat *s), (fd, s), C_STATS, OP_STAT)
FDMETA_WRAP(fstat64, (int fd, struct stat64 *s), (fd, s), C_STATS, OP_STAT)

/* path-level metadata */
#define PATHMETA_WRAP(name, proto, call, DIRFD, PATH, COUNTER, OP)                                             \
    DECL(int, name, proto);                                                                                    \
    EXPORT int name proto                                                                                      \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        if (!g_on) return real_##name call;                                                                    \
        uint64_t t0 = NOW();                                                                                   \
        int r = real_##name call;                                                                              \
        uint64_t t1 = NOW();                                                                                   \
        SAVE_ERRNO;                                                                                            \
        struct frec *f = frec_at(DIRFD, PATH, 0);                                                              \
        if (f) rec_meta(f, COUNTER, OP, t0, t1, r != 0, saved_errno_, -1);                                     \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
PATHMETA_WRAP(stat, (const char *p, struct stat *s), (p, s), AT_FDCWD, p, C_STATS, OP_STAT)
PATHMETA_WRAP(stat64, (const char *p, struct stat64 *s), (p, s), AT_FDCWD, p, C_STATS, OP_STAT)
PATHMETA_WRAP(lstat, (const char *p, struct stat *s), (p, s), AT_FDCWD, p, C_STATS, OP_STAT)
PATHMETA_WRAP(lstat64, (const char *p, struct stat64 *s), (p, s), AT_FDCWD, p, C_STATS, OP_STAT)
PATHMETA_WRAP(unlink, (const char *p), (p), AT_FDCWD, p, C_UNLINKS, OP_UNLINK)
PATHMETA_WRAP(mkdir, (const char *p, mode_t m), (p, m), AT_FDCWD, p, C_MKDIRS, OP_MKDIR)
PATHMETA_WRAP(mkdirat, (int d, const char *p, mode_t m), (d, p, m), d, p, C_MKDIRS, OP_MKDIR)
PATHMETA_WRAP(rmdir, (const char *p), (p), AT_FDCWD, p, C_RMDIRS, OP_RMDIR)
PATHMETA_WRAP(truncate, (const char *p, off_t l), (p, l), AT_FDCWD, p, C_TRUNCATES, OP_TRUNCATE)
PATHMETA_WRAP(truncate64, (const char *p, off64_t l), (p, l), AT_FDCWD, p, C_TRUNCATES, OP_TRUNCATE)

/* *at stat variants: AT_EMPTY_PATH with "" means the fd itself */
static struct frec *frec_at_or_fd(int d, const char *p, int flags)
{
    if ((flags & AT_EMPTY_PATH) && p && !*p) { struct ofd *o = fd_ofd(d); return o ? o->f : NULL; }
    return frec_at(d, p, 0);
}
#define ATSTAT_WRAP(name, proto, call, DIRFD, PATH, FLAGS)                                                     \
    DECL(int, name, proto);                                                                                    \
    EXPORT int name proto                                                                                      \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        if (!g_on) return real_##name call;                                                                    \
        uint64_t t0 = NOW();                                                                                   \
        int r = real_##name call;                                                                              \
        uint64_t t1 = NOW();                                                                                   \
        SAVE_ERRNO;                                                                                            \
        struct frec *f = frec_at_or_fd(DIRFD, PATH, FLAGS);                                                    \
        if (f) rec_meta(f, C_STATS, OP_STAT, t0, t1, r != 0, saved_errno_, -1);                                \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
ATSTAT_WRAP(fstatat, (int d, const char *p, struct stat *s, int fl), (d, p, s, fl), d, p, fl)
ATSTAT_WRAP(fstatat64, (int d, const char *p, struct stat64 *s, int fl), (d, p, s, fl), d, p, fl)
ATSTAT_WRAP(statx, (int d, const char *p, int fl, unsigned m, struct statx *s), (d, p, fl, m, s), d, p, fl)

/* old-ABI stat entry points (binaries built against glibc < 2.33): compat symbols, resolved by version */
#define XSTAT_WRAP(name, proto, call, DIRFD, PATH, FLAGS)                                                      \
    static int(*real_##name) proto;                                                                            \
    EXPORT int name proto                                                                                      \
    {                                                                                                          \
        if (UNLIKELY(!real_##name)) {                                                                          \
            void *p_ = resolve(#name, "GLIBC_2.2.5");                                                          \
            if (!p_) p_ = resolve(#name, NULL);                                                                \
            if (!p_) missing_symbol(#name);                                                                    \
            real_##name = (int(*) proto)p_;                                                                    \
        }                                                                                                      \
        if (!g_on) return real_##name call;                                                                    \
        uint64_t t0 = NOW();                                                                                   \
        int r = real_##name call;                                                                              \
        uint64_t t1 = NOW();                                                                                   \
        SAVE_ERRNO;                                                                                            \
        struct frec *f = frec_at_or_fd(DIRFD, PATH, FLAGS);                                                    \
        if (f) rec_meta(f, C_STATS, OP_STAT, t0, t1, r != 0, saved_errno_, -1);                                \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
XSTAT_WRAP(__xstat, (int v, const char *p, struct stat *s), (v, p, s), AT_FDCWD, p, 0)
XSTAT_WRAP(__xstat64, (int v, const char *p, struct stat64 *s), (v, p, s), AT_FDCWD, p, 0)
XSTAT_WRAP(__lxstat, (int v, const char *p, struct stat *s), (v, p, s), AT_FDCWD, p, 0)
XSTAT_WRAP(__lxstat64, (int v, const char *p, struct stat64 *s), (v, p, s), AT_FDCWD, p, 0)
XSTAT_WRAP(__fxstat, (int v, int fd, struct stat *s), (v, fd, s), fd, "", AT_EMPTY_PATH)
XSTAT_WRAP(__fxstat64, (int v, int fd, struct stat64 *s), (v, fd, s), fd, "", AT_EMPTY_PATH)
XSTAT_WRAP(__fxstatat, (int v, int d, const char *p, struct stat *s, int fl), (v, d, p, s, fl), d, p, fl)
XSTAT_WRAP(__fxstatat64, (int v, int d, const char *p, struct stat64 *s, int fl), (v, d, p, s, fl), d, p, fl)

DECL(int, unlinkat, (int, const char *, int));
EXPORT int unlinkat(int d, const char *p, int fl)
{
    RESOLVE(unlinkat);
    if (!g_on) return real_unlinkat(d, p, fl);
    uint64_t t0 = NOW();
    int r = real_unlinkat(d, p, fl);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    struct frec *f = frec_at(d, p, 0);
    if (f) rec_meta(f, fl & AT_REMOVEDIR ? C_RMDIRS : C_UNLINKS, fl & AT_REMOVEDIR ? OP_RMDIR : OP_UNLINK, t0, t1, r != 0, saved_errno_, -1);
    RESTORE_ERRNO;
    return r;
}
DECL(int, remove, (const char *));
EXPORT int remove(const char *p)
{
    RESOLVE(remove);
    if (!g_on) return real_remove(p);
    uint64_t t0 = NOW();
    int r = real_remove(p);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    struct frec *f = frec_at(AT_FDCWD, p, 0);
    if (f) rec_meta(f, C_UNLINKS, OP_UNLINK, t0, t1, r != 0, saved_errno_, -1);
    RESTORE_ERRNO;
    return r;
}
static void rec_rename(int od, const char *op, int nd, const char *np, int r, uint64_t t0, uint64_t t1, int err)
{
    struct frec *src = frec_at(od, op, 0), *dst = frec_at(nd, np, 0);
    if (src) rec_meta(src, C_RENAMES, OP_RENAME, t0, t1, r != 0, err, dst ? (int64_t)(dst - g_frecs) : -1);
}
DECL(int, rename, (const char *, const char *));
DECL(int, renameat, (int, const char *, int, const char *));
DECL(int, renameat2, (int, const char *, int, const char *, unsigned));
EXPORT int rename(const char *a, const char *b)
{
    RESOLVE(rename);
    if (!g_on) return real_rename(a, b);
    uint64_t t0 = NOW(); int r = real_rename(a, b); uint64_t t1 = NOW();
    SAVE_ERRNO; rec_rename(AT_FDCWD, a, AT_FDCWD, b, r, t0, t1, saved_errno_); RESTORE_ERRNO;
    return r;
}
EXPORT int renameat(int da, const char *a, int db, const char *b)
{
    RESOLVE(renameat);
    if (!g_on) return real_renameat(da, a, db, b);
    uint64_t t0 = NOW(); int r = real_renameat(da, a, db, b); uint64_t t1 = NOW();
    SAVE_ERRNO; rec_rename(da, a, db, b, r, t0, t1, saved_errno_); RESTORE_ERRNO;
    return r;
}
EXPORT int renameat2(int da, const char *a, int db, const char *b, unsigned fl)
{
    RESOLVE(renameat2);
    if (!g_on) return real_renameat2(da, a, db, b, fl);
    uint64_t t0 = NOW(); int r = real_renameat2(da, a, db, b, fl); uint64_t t1 = NOW();
    SAVE_ERRNO; rec_rename(da, a, db, b, r, t0, t1, saved_errno_); RESTORE_ERRNO;
    return r;
}
/* cwd cache for relative paths */
DECL(int, chdir, (const char *));
DECL(int, fchdir, (int));
EXPORT int chdir(const char *p)
{
    RESOLVE(chdir);
    int r = real_chdir(p);
    if (g_on && r == 0) { SAVE_ERRNO; cwd_update(); RESTORE_ERRNO; }
    return r;
}
EXPORT int fchdir(int fd)
{
    RESOLVE(fchdir);
    int r = real_fchdir(fd);
    if (g_on && r == 0) { SAVE_ERRNO; cwd_update(); RESTORE_ERRNO; }
    return r;
}
/* chroot: later paths get the new root in front (g_root); the log folder is opened before (priv_prepare).  A new
 * root the shim cannot name becomes the stand-in "?root=<st_dev>:<st_ino>", so later paths are marked, not wrong. */
DECL(int, chroot, (const char *));
EXPORT int chroot(const char *p)
{
    RESOLVE(chroot);
    if (!g_on) return real_chroot(p);
    char nr[PATH_MAX];
    size_t n = abs_path(AT_FDCWD, p, nr);
    priv_prepare("chroot", 0);
    int r = real_chroot(p);
    if (r == 0) {
        SAVE_ERRNO;
        struct stat st;
        if (n && nr[0] == '/') { memcpy(g_root, nr, n + 1); g_rootlen = n == 1 ? 0 : n; }
        else if (syscall(SYS_stat, "/", &st) == 0) {
            char *q = g_root;
            s_cpy(q, "?root=", 8); q += 6;
            q = u64_str(q, st.st_dev); *q++ = ':'; q = u64_str(q, st.st_ino);
            g_rootlen = (size_t)(q - g_root);
        }
        cwd_update();
        RESTORE_ERRNO;
    }
    return r;
}
/* A change of user or group may take away the right to write the log folder: the log file is opened before.  A
 * call that changed nothing (a program dropping rights it does not have) leaves no trace. */
static void ids_now(uint32_t id[6])
{
    syscall(SYS_getresuid, &id[0], &id[1], &id[2]);
    syscall(SYS_getresgid, &id[3], &id[4], &id[5]);
}
static void priv_undo(const char *prev_what)
{
    char name[192];
    log_name(name);
    syscall(SYS_unlinkat, g_dirfd, name, 0);
    syscall(SYS_close, g_prefd);
    g_prefd = -1;
    g_priv_what = prev_what;
}
#define SETID_WRAP(name, proto, args)                                                                           \
    DECL(int, name, proto);                                                                                    \
    EXPORT int name proto                                                                                      \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        if (!g_on || g_prefd >= 0) return real_##name args;                                                    \
        uint32_t id0[6], id1[6];                                                                               \
        const char *prev = g_priv_what;                                                                        \
        ids_now(id0);                                                                                          \
        priv_prepare(#name, 1);                                                                                \
        int ret_ = real_##name args;                                                                           \
        SAVE_ERRNO;                                                                                            \
        ids_now(id1);                                                                                          \
        if (g_prefd >= 0 && !memcmp(id0, id1, sizeof id0)) priv_undo(prev);                                    \
        RESTORE_ERRNO;                                                                                         \
        return ret_;                                                                                           \
    }
SETID_WRAP(setuid, (uid_t u), (u))
SETID_WRAP(seteuid, (uid_t u), (u))
SETID_WRAP(setreuid, (uid_t r, uid_t e), (r, e))
SETID_WRAP(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
SETID_WRAP(setgid, (gid_t g), (g))
SETID_WRAP(setegid, (gid_t g), (g))
SETID_WRAP(setregid, (gid_t r, gid_t e), (r, e))
SETID_WRAP(setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))

/* mmap of files: count mappings and bytes mapped */
#define MMAP_WRAP(name, OFFT)                                                                                  \
    DECL(void *, name, (void *, size_t, int, int, int, OFFT));                                                 \
    EXPORT void *name(void *a, size_t l, int pr, int fl, int fd, OFFT off)                                     \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        struct ofd *o;                                                                                         \
        if (!g_on || (fl & MAP_ANONYMOUS) || !(o = fd_ofd(fd))) return real_##name(a, l, pr, fl, fd, off);     \
        uint64_t t0 = NOW();                                                                                   \
        void *r = real_##name(a, l, pr, fl, fd, off);                                                          \
        uint64_t t1 = NOW();                                                                                   \
        SAVE_ERRNO;                                                                                            \
        if (r != MAP_FAILED) { CADD(o->f, C_MMAPS, 1); CADD(o->f, C_MMAP_BYTES, l); }                    \
        else CADD(o->f, C_ERRORS, 1);                                                                       \
        if (UNLIKELY(g_trace)) trace(OP_MMAP, 0, o->f, (int64_t)off, r == MAP_FAILED ? -1 : (int64_t)l, t0, t1, r == MAP_FAILED ? saved_errno_ : 0); \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
MMAP_WRAP(mmap, off_t)
MMAP_WRAP(mmap64, off64_t)
DECL(int, munmap, (void *, size_t));
EXPORT int munmap(void *a, size_t l)
{
    RESOLVE(munmap);
    int r = real_munmap(a, l);
    if (g_on && r == 0) ADD(&g_munmaps, 1);
    return r;
}

/* ---------------------------------------------------------------- stdio */
static inline struct ofd *fp_ofd(FILE *fp) { return fp ? fd_ofd(fp->_fileno) : NULL; }
/* a stdio read/write of `bytes` (< 0 on error) at the stream's logical position */
static inline void rec_stdio(struct ofd *o, int wr, int64_t bytes, uint64_t t0, uint64_t t1, int err)
{
    int64_t off = bytes >= 0 && o->pos >= 0 ? POS_ADVANCE(&o->pos, bytes) : -1;
    rec_rw(o->f, wr, off, bytes, t0, t1, OF_STDIO, err);
}
#define STDIO_BODY(TYPE, FP, WR, CALL, BYTES_EXPR)                                                             \
    struct ofd *o;                                                                                             \
    if (!g_on || !(o = fp_ofd(FP))) return CALL;                                                               \
    uint64_t t0 = NOW();                                                                                       \
    TYPE r = CALL;                                                                                             \
    uint64_t t1 = NOW();                                                                                       \
    SAVE_ERRNO;                                                                                                \
    rec_stdio(o, WR, (int64_t)(BYTES_EXPR), t0, t1, saved_errno_);                                             \
    RESTORE_ERRNO;                                                                                             \
    return r;

static int mode_oflags(const char *m)
{
    int fl = 0;
    if (m[0] == 'w') fl = O_CREAT | O_TRUNC;
    else if (m[0] == 'a') fl = O_CREAT | O_APPEND;
    for (const char *c = m; *c && *c != ','; c++) if (*c == 'x') fl |= O_EXCL;
    return fl;
}
static FILE *fopen_common(FILE *(*fn)(const char *, const char *), const char *p, const char *m)
{
    int fl = mode_oflags(m);
    int created = 0;
    uint64_t t0 = NOW();
    FILE *fp;
    size_t ml = s_len(m);
    if ((fl & O_CREAT) && !(fl & O_EXCL) && ml < 30) {
        char m2[32];
        memcpy(m2, m, ml);
        m2[ml] = 'x'; m2[ml + 1] = 0;
        /* glibc stops parsing mode flags at ',': put the x before a ",ccs=" suffix */
        const char *comma = strchr(m, ',');
        if (comma) { size_t k = (size_t)(comma - m); memcpy(m2, m, k); m2[k] = 'x'; memcpy(m2 + k + 1, comma, ml - k + 1); }
        int e0 = errno;
        fp = fn(p, m2);
        if (fp) created = 1;
        else { errno = e0; fp = fn(p, m); }
    } else {
        fp = fn(p, m);
        created = fp && (fl & O_CREAT);
    }
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    if (fp) reg_open(fp->_fileno, AT_FDCWD, p, fl, created, t0, t1, FF_STDIO);
    else rec_open_failed(AT_FDCWD, p, t0, t1, saved_errno_);
    RESTORE_ERRNO;
    return fp;
}
DECL(FILE *, fopen, (const char *, const char *));
DECL(FILE *, fopen64, (const char *, const char *));
EXPORT FILE *fopen(const char *p, const char *m) { RESOLVE(fopen); if (!g_on) return real_fopen(p, m); return fopen_common(real_fopen, p, m); }
EXPORT FILE *fopen64(const char *p, const char *m) { RESOLVE(fopen64); if (!g_on) return real_fopen64(p, m); return fopen_common(real_fopen64, p, m); }
DECL(FILE *, fdopen, (int, const char *));
EXPORT FILE *fdopen(int fd, const char *m)
{
    RESOLVE(fdopen);
    FILE *fp = real_fdopen(fd, m);
    struct ofd *o;
    if (g_on && fp && (o = fd_ofd(fd))) __atomic_fetch_or(&o->f->flags, FF_STDIO, __ATOMIC_RELAXED);
    return fp;
}
static FILE *freopen_common(FILE *(*fn)(const char *, const char *, FILE *), const char *p, const char *m, FILE *fp)
{
    int oldfd = fp ? fp->_fileno : -1;
    struct ofd *old = p ? fd_take(oldfd) : NULL;
    uint64_t t0 = NOW();
    FILE *r = fn(p, m, fp);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    if (old) rec_close(old, t0, t0, OF_STDIO);
    if (r && p) reg_open(r->_fileno, AT_FDCWD, p, mode_oflags(m), 0, t0, t1, FF_STDIO);
    RESTORE_ERRNO;
    return r;
}
DECL(FILE *, freopen, (const char *, const char *, FILE *));
DECL(FILE *, freopen64, (const char *, const char *, FILE *));
EXPORT FILE *freopen(const char *p, const char *m, FILE *fp) { RESOLVE(freopen); if (!g_on) return real_freopen(p, m, fp); return freopen_common(real_freopen, p, m, fp); }
EXPORT FILE *freopen64(const char *p, const char *m, FILE *fp) { RESOLVE(freopen64); if (!g_on) return real_freopen64(p, m, fp); return freopen_common(real_freopen64, p, m, fp); }
DECL(int, fclose, (FILE *));
EXPORT int fclose(FILE *fp)
{
    RESOLVE(fclose);
    struct ofd *o;
    if (!g_on || !fp || !(o = fd_take(fp->_fileno))) return real_fclose(fp);
    uint64_t t0 = NOW();
    int r = real_fclose(fp);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    rec_close(o, t0, t1, OF_STDIO);
    RESTORE_ERRNO;
    return r;
}

DECL(size_t, fread, (void *, size_t, size_t, FILE *));
DECL(size_t, fread_unlocked, (void *, size_t, size_t, FILE *));
DECL(size_t, __fread_chk, (void *, size_t, size_t, size_t, FILE *));
DECL(size_t, __fread_unlocked_chk, (void *, size_t, size_t, size_t, FILE *));
DECL(size_t, fwrite, (const void *, size_t, size_t, FILE *));
DECL(size_t, fwrite_unlocked, (const void *, size_t, size_t, FILE *));
EXPORT size_t fread(void *b, size_t s, size_t n, FILE *fp) { RESOLVE(fread); STDIO_BODY(size_t, fp, 0, real_fread(b, s, n, fp), r * s) }
EXPORT size_t fread_unlocked(void *b, size_t s, size_t n, FILE *fp) { RESOLVE(fread_unlocked); STDIO_BODY(size_t, fp, 0, real_fread_unlocked(b, s, n, fp), r * s) }
EXPORT size_t __fread_chk(void *b, size_t bl, size_t s, size_t n, FILE *fp) { RESOLVE(__fread_chk); STDIO_BODY(size_t, fp, 0, real___fread_chk(b, bl, s, n, fp), r * s) }
EXPORT size_t __fread_unlocked_chk(void *b, size_t bl, size_t s, size_t n, FILE *fp) { RESOLVE(__fread_unlocked_chk); STDIO_BODY(size_t, fp, 0, real___fread_unlocked_chk(b, bl, s, n, fp), r * s) }
EXPORT size_t fwrite(const void *b, size_t s, size_t n, FILE *fp) { RESOLVE(fwrite); STDIO_BODY(size_t, fp, 1, real_fwrite(b, s, n, fp), r * s) }
EXPORT size_t fwrite_unlocked(const void *b, size_t s, size_t n, FILE *fp) { RESOLVE(fwrite_unlocked); STDIO_BODY(size_t, fp, 1, real_fwrite_unlocked(b, s, n, fp), r * s) }

DECL(char *, fgets, (char *, int, FILE *));
DECL(char *, fgets_unlocked, (char *, int, FILE *));
DECL(char *, __fgets_chk, (char *, size_t, int, FILE *));
DECL(char *, __fgets_unlocked_chk, (char *, size_t, int, FILE *));
EXPORT char *fgets(char *b, int n, FILE *fp) { RESOLVE(fgets); STDIO_BODY(char *, fp, 0, real_fgets(b, n, fp), r ? (int64_t)s_len(r) : 0) }
EXPORT char *fgets_unlocked(char *b, int n, FILE *fp) { RESOLVE(fgets_unlocked); STDIO_BODY(char *, fp, 0, real_fgets_unlocked(b, n, fp), r ? (int64_t)s_len(r) : 0) }
EXPORT char *__fgets_chk(char *b, size_t bl, int n, FILE *fp) { RESOLVE(__fgets_chk); STDIO_BODY(char *, fp, 0, real___fgets_chk(b, bl, n, fp), r ? (int64_t)s_len(r) : 0) }
EXPORT char *__fgets_unlocked_chk(char *b, size_t bl, int n, FILE *fp) { RESOLVE(__fgets_unlocked_chk); STDIO_BODY(char *, fp, 0, real___fgets_unlocked_chk(b, bl, n, fp), r ? (int64_t)s_len(r) : 0) }

DECL(int, fputs, (const char *, FILE *));
DECL(int, fputs_unlocked, (const char *, FILE *));
DECL(int, puts, (const char *));
EXPORT int fputs(const char *s, FILE *fp) { RESOLVE(fputs); STDIO_BODY(int, fp, 1, real_fputs(s, fp), r >= 0 ? (int64_t)s_len(s) : 0) }
EXPORT int fputs_unlocked(const char *s, FILE *fp) { RESOLVE(fputs_unlocked); STDIO_BODY(int, fp, 1, real_fputs_unlocked(s, fp), r >= 0 ? (int64_t)s_len(s) : 0) }
EXPORT int puts(const char *s) { RESOLVE(puts); STDIO_BODY(int, stdout, 1, real_puts(s), r >= 0 ? (int64_t)s_len(s) + 1 : 0) }

#define CHAR_IN(name)                                                                                          \
    DECL(int, name, (FILE *));                                                                                 \
    EXPORT int name(FILE *fp) { RESOLVE(name); STDIO_BODY(int, fp, 0, real_##name(fp), r != EOF ? 1 : 0) }
#define CHAR_OUT(name)                                                                                         \
    DECL(int, name, (int, FILE *));                                                                            \
    EXPORT int name(int c, FILE *fp) { RESOLVE(name); STDIO_BODY(int, fp, 1, real_##name(c, fp), r != EOF ? 1 : 0) }
CHAR_IN(fgetc)
CHAR_IN(getc)
CHAR_IN(_IO_getc)
CHAR_IN(fgetc_unlocked)
CHAR_IN(getc_unlocked)
CHAR_OUT(fputc)
CHAR_OUT(putc)
CHAR_OUT(_IO_putc)
CHAR_OUT(fputc_unlocked)
CHAR_OUT(putc_unlocked)
DECL(int, putchar, (int));
EXPORT int putchar(int c) { RESOLVE(putchar); STDIO_BODY(int, stdout, 1, real_putchar(c), r != EOF ? 1 : 0) }

DECL(ssize_t, getdelim, (char **, size_t *, int, FILE *));
DECL(ssize_t, __getdelim, (char **, size_t *, int, FILE *));
DECL(ssize_t, getline, (char **, size_t *, FILE *));
EXPORT ssize_t getdelim(char **l, size_t *n, int d, FILE *fp) { RESOLVE(getdelim); STDIO_BODY(ssize_t, fp, 0, real_getdelim(l, n, d, fp), r > 0 ? r : 0) }
EXPORT ssize_t __getdelim(char **l, size_t *n, int d, FILE *fp) { RESOLVE(__getdelim); STDIO_BODY(ssize_t, fp, 0, real___getdelim(l, n, d, fp), r > 0 ? r : 0) }
EXPORT ssize_t getline(char **l, size_t *n, FILE *fp) { RESOLVE(getline); STDIO_BODY(ssize_t, fp, 0, real_getline(l, n, fp), r > 0 ? r : 0) }

/* formatted output: every variadic form goes to its v-variant */
DECL(int, vfprintf, (FILE *, const char *, va_list));
DECL(int, __vfprintf_chk, (FILE *, int, const char *, va_list));
EXPORT int vfprintf(FILE *fp, const char *f, va_list ap) { RESOLVE(vfprintf); STDIO_BODY(int, fp, 1, real_vfprintf(fp, f, ap), r >= 0 ? r : 0) }
EXPORT int __vfprintf_chk(FILE *fp, int fl, const char *f, va_list ap) { RESOLVE(__vfprintf_chk); STDIO_BODY(int, fp, 1, real___vfprintf_chk(fp, fl, f, ap), r >= 0 ? r : 0) }
EXPORT int fprintf(FILE *fp, const char *f, ...) { va_list ap; va_start(ap, f); int r = vfprintf(fp, f, ap); va_end(ap); return r; }
EXPORT int __fprintf_chk(FILE *fp, int fl, const char *f, ...) { va_list ap; va_start(ap, f); int r = __vfprintf_chk(fp, fl, f, ap); va_end(ap); return r; }
EXPORT int vprintf(const char *f, va_list ap) { return vfprintf(stdout, f, ap); }
EXPORT int __vprintf_chk(int fl, const char *f, va_list ap) { return __vfprintf_chk(stdout, fl, f, ap); }
EXPORT int printf(const char *f, ...) { va_list ap; va_start(ap, f); int r = vfprintf(stdout, f, ap); va_end(ap); return r; }
EXPORT int __printf_chk(int fl, const char *f, ...) { va_list ap; va_start(ap, f); int r = __vfprintf_chk(stdout, fl, f, ap); va_end(ap); return r; }

/* formatted input: bytes consumed = change of the stream position (0 when the stream cannot tell) */
DECL(off64_t, ftello64, (FILE *));
static int64_t fp_tell(FILE *fp)
{
    RESOLVE(ftello64);
    int e = errno;
    int64_t p = real_ftello64(fp);
    errno = e;
    return p;
}
#define SCANF_BODY(CALL)                                                                                       \
    struct ofd *o;                                                                                             \
    if (!g_on || !(o = fp_ofd(fp))) return CALL;                                                               \
    int64_t p0 = fp_tell(fp);                                                                                  \
    uint64_t t0 = NOW();                                                                                       \
    int r = CALL;                                                                                              \
    uint64_t t1 = NOW();                                                                                       \
    SAVE_ERRNO;                                                                                                \
    int64_t p1 = fp_tell(fp);                                                                                  \
    int64_t nb = p0 >= 0 && p1 >= p0 ? p1 - p0 : 0;                                                            \
    if (p0 >= 0) __atomic_store_n(&o->pos, p0, __ATOMIC_RELAXED);                                              \
    rec_stdio(o, 0, nb, t0, t1, saved_errno_);                                                                 \
    RESTORE_ERRNO;                                                                                             \
    return r;
static int (*real_vfscanf)(FILE *, const char *, va_list);
DECL(int, __isoc99_vfscanf, (FILE *, const char *, va_list));
/* <stdio.h> redirects fscanf/vfscanf to the __isoc99_ names; define the plain symbols under other C names */
EXPORT int mtc_vfscanf(FILE *fp, const char *f, va_list ap) __asm__("vfscanf");
EXPORT int mtc_fscanf(FILE *fp, const char *f, ...) __asm__("fscanf");
EXPORT int mtc_vfscanf(FILE *fp, const char *f, va_list ap) { RESOLVE(vfscanf); SCANF_BODY(real_vfscanf(fp, f, ap)) }
EXPORT int __isoc99_vfscanf(FILE *fp, const char *f, va_list ap) { RESOLVE(__isoc99_vfscanf); SCANF_BODY(real___isoc99_vfscanf(fp, f, ap)) }
EXPORT int mtc_fscanf(FILE *fp, const char *f, ...) { va_list ap; va_start(ap, f); int r = mtc_vfscanf(fp, f, ap); va_end(ap); return r; }
EXPORT int __isoc99_fscanf(FILE *fp, const char *f, ...) { va_list ap; va_start(ap, f); int r = __isoc99_vfscanf(fp, f, ap); va_end(ap); return r; }

/* positioning: stdio seeks count as seeks and set the logical position */
static void rec_fseek(FILE *fp, struct ofd *o, int ok, uint64_t t0, uint64_t t1, int err)
{
    if (ok) {
        __atomic_store_n(&o->pos, fp_tell(fp), __ATOMIC_RELAXED);
        CADD(o->f, C_SEEKS, 1);
    } else CADD(o->f, C_ERRORS, 1);
    if (UNLIKELY(g_trace)) trace(OP_SEEK, OF_STDIO, o->f, ok ? o->pos : -1, 0, t0, t1, ok ? 0 : err);
}
#define FSEEK_WRAP(name, OFFT)                                                                                 \
    DECL(int, name, (FILE *, OFFT, int));                                                                      \
    EXPORT int name(FILE *fp, OFFT off, int wh)                                                                \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        struct ofd *o;                                                                                         \
        if (!g_on || !(o = fp_ofd(fp))) return real_##name(fp, off, wh);                                       \
        uint64_t t0 = NOW();                                                                                   \
        int r = real_##name(fp, off, wh);                                                                      \
        uint64_t t1 = NOW();                                                                                   \
        SAVE_ERRNO;                                                                                            \
        rec_fseek(fp, o, r == 0, t0, t1, saved_errno_);                                                        \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
FSEEK_WRAP(fseek, long)
FSEEK_WRAP(fseeko, off_t)
FSEEK_WRAP(fseeko64, off64_t)
DECL(void, rewind, (FILE *));
EXPORT void rewind(FILE *fp)
{
    RESOLVE(rewind);
    struct ofd *o;
    if (!g_on || !(o = fp_ofd(fp))) { real_rewind(fp); return; }
    uint64_t t0 = NOW();
    real_rewind(fp);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    rec_fseek(fp, o, 1, t0, t1, 0);
    RESTORE_ERRNO;
}
/* ftell/ftello/fflush: passed through (counted as nothing); wrapped only so the list in the issue is explicit */
DECL(long, ftell, (FILE *));
DECL(off_t, ftello, (FILE *));
DECL(int, fflush, (FILE *));
EXPORT long ftell(FILE *fp) { RESOLVE(ftell); return real_ftell(fp); }
EXPORT off_t ftello(FILE *fp) { RESOLVE(ftello); return real_ftello(fp); }
EXPORT off64_t ftello64(FILE *fp) { RESOLVE(ftello64); return real_ftello64(fp); }
EXPORT int fflush(FILE *fp) { RESOLVE(fflush); return real_fflush(fp); }

/* ---------------------------------------------------------------- libgfarm (only called when the program links it) */
typedef int gfarm_error_t;
typedef struct gfs_file *GFS_File;
typedef int64_t gfarm_off_t;
typedef uint32_t gfarm_mode_t;
#define GFARM_ERR_NO_ERROR 0
#define GFARM_FILE_CREATE 0x200
#define GFARM_FILE_EXCLUSIVE 0x800
struct gfslot { GFS_File key; struct ofd *o; };
static struct gfslot g_gf[GF_SLOTS];
#define GF_TOMB ((GFS_File)1)
static unsigned gf_hash(GFS_File g) { return (unsigned)(((uintptr_t)g >> 4) * 2654435761u) & (GF_SLOTS - 1); }
static struct ofd *gf_get(GFS_File g)
{
    unsigned h = gf_hash(g);
    for (unsigned i = 0; i < GF_SLOTS; i++) {
        struct gfslot *s = &g_gf[(h + i) & (GF_SLOTS - 1)];
        GFS_File k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (k == g) return __atomic_load_n(&s->o, __ATOMIC_ACQUIRE);
        if (!k) return NULL;
    }
    return NULL;
}
static void gf_put(GFS_File g, struct ofd *o)
{
    unsigned h = gf_hash(g);
    for (unsigned i = 0; i < GF_SLOTS; i++) {
        struct gfslot *s = &g_gf[(h + i) & (GF_SLOTS - 1)];
        GFS_File k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (k == NULL || k == GF_TOMB) {
            if (__atomic_compare_exchange_n(&s->key, &k, GF_TOMB, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                __atomic_store_n(&s->o, o, __ATOMIC_RELEASE);
                __atomic_store_n(&s->key, g, __ATOMIC_RELEASE);
                return;
            }
        }
    }
    ofd_put(o);
}
static struct ofd *gf_take(GFS_File g)
{
    unsigned h = gf_hash(g);
    for (unsigned i = 0; i < GF_SLOTS; i++) {
        struct gfslot *s = &g_gf[(h + i) & (GF_SLOTS - 1)];
        GFS_File k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (k == g) {
            struct ofd *o = __atomic_exchange_n(&s->o, NULL, __ATOMIC_ACQ_REL);
            __atomic_store_n(&s->key, GF_TOMB, __ATOMIC_RELEASE);
            return o;
        }
        if (!k) return NULL;
    }
    return NULL;
}
static void gf_reg(GFS_File g, const char *url, int created, uint64_t t0, uint64_t t1)
{
    char buf[PATH_MAX];
    size_t n = s_len(url);
    if (n + 1 > sizeof buf) return;
    memcpy(buf, url, n + 1);
    struct frec *f = frec_get(buf, n, FF_GFARM | (created ? FF_CREATED : 0));
    if (!f) return;
    struct ofd *o = ofd_new(f, 0);
    if (o) gf_put(g, o);
    rec_open(f, created, t0, t1, OF_GFARM);
}
DECL(gfarm_error_t, gfs_pio_open, (const char *, int, GFS_File *));
DECL(gfarm_error_t, gfs_pio_create, (const char *, int, gfarm_mode_t, GFS_File *));
DECL(gfarm_error_t, gfs_pio_close, (GFS_File));
DECL(gfarm_error_t, gfs_pio_read, (GFS_File, void *, int, int *));
DECL(gfarm_error_t, gfs_pio_write, (GFS_File, const void *, int, int *));
DECL(gfarm_error_t, gfs_pio_pread, (GFS_File, void *, int, gfarm_off_t, int *));
DECL(gfarm_error_t, gfs_pio_pwrite, (GFS_File, const void *, int, gfarm_off_t, int *));
EXPORT gfarm_error_t gfs_pio_open(const char *url, int fl, GFS_File *gp)
{
    RESOLVE(gfs_pio_open);
    if (!g_on) return real_gfs_pio_open(url, fl, gp);
    uint64_t t0 = NOW();
    gfarm_error_t e = real_gfs_pio_open(url, fl, gp);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    if (e == GFARM_ERR_NO_ERROR && gp && *gp) gf_reg(*gp, url, 0, t0, t1);
    RESTORE_ERRNO;
    return e;
}
EXPORT gfarm_error_t gfs_pio_create(const char *url, int fl, gfarm_mode_t m, GFS_File *gp)
{
    RESOLVE(gfs_pio_create);
    if (!g_on) return real_gfs_pio_create(url, fl, m, gp);
    uint64_t t0 = NOW();
    gfarm_error_t e = real_gfs_pio_create(url, fl, m, gp);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    if (e == GFARM_ERR_NO_ERROR && gp && *gp) gf_reg(*gp, url, 1, t0, t1);
    RESTORE_ERRNO;
    return e;
}
EXPORT gfarm_error_t gfs_pio_close(GFS_File g)
{
    RESOLVE(gfs_pio_close);
    struct ofd *o;
    if (!g_on || !(o = gf_take(g))) return real_gfs_pio_close(g);
    uint64_t t0 = NOW();
    gfarm_error_t e = real_gfs_pio_close(g);
    uint64_t t1 = NOW();
    SAVE_ERRNO;
    rec_close(o, t0, t1, OF_GFARM);
    RESTORE_ERRNO;
    return e;
}
#define GF_IO(CALL, WR, OFF, FL)                                                                               \
    struct ofd *o;                                                                                             \
    if (!g_on || !(o = gf_get(g))) return CALL;                                                                \
    uint64_t t0 = NOW();                                                                                       \
    gfarm_error_t e = CALL;                                                                                    \
    uint64_t t1 = NOW();                                                                                       \
    SAVE_ERRNO;                                                                                                \
    int64_t nb = e == GFARM_ERR_NO_ERROR && np ? *np : -1;                                                     \
    rec_rw(o->f, WR, nb < 0 ? -1 : (OFF), nb, t0, t1, FL, e);                                                  \
    RESTORE_ERRNO;                                                                                             \
    return e;
EXPORT gfarm_error_t gfs_pio_read(GFS_File g, void *b, int n, int *np) { RESOLVE(gfs_pio_read); GF_IO(real_gfs_pio_read(g, b, n, np), 0, POS_ADVANCE(&o->pos, nb), OF_GFARM) }
EXPORT gfarm_error_t gfs_pio_write(GFS_File g, const void *b, int n, int *np) { RESOLVE(gfs_pio_write); GF_IO(real_gfs_pio_write(g, b, n, np), 1, POS_ADVANCE(&o->pos, nb), OF_GFARM) }
EXPORT gfarm_error_t gfs_pio_pread(GFS_File g, void *b, int n, gfarm_off_t off, int *np) { RESOLVE(gfs_pio_pread); GF_IO(real_gfs_pio_pread(g, b, n, off, np), 0, off, OF_GFARM | OF_POS) }
EXPORT gfarm_error_t gfs_pio_pwrite(GFS_File g, const void *b, int n, gfarm_off_t off, int *np) { RESOLVE(gfs_pio_pwrite); GF_IO(real_gfs_pio_pwrite(g, b, n, off, np), 1, off, OF_GFARM | OF_POS) }

/* ---------------------------------------------------------------- vfork */
/* The child of a vfork shares our memory, so it must not touch the record set: tracing is paused (g_on = 0) from
 * before the vfork until the parent resumes, which is exactly the child's life (it may only exec or _exit; its new
 * image traces itself).  A wrapper cannot call vfork and return (the child's return would pop the frame the parent
 * returns through), so on x86-64 the wrapper is a few instructions that make the syscall themselves, keeping the
 * return address in a register like glibc's own vfork.  Elsewhere, and in a multi-threaded process (other threads
 * would run untraced during the pause), vfork runs as a fork. */
DECL(pid_t, fork, (void));
static int g_vfork_paused;
__attribute__((used)) static pid_t vfork_as_fork(void)
{
    RESOLVE(fork);
    return real_fork();
}
#if defined(__x86_64__)
/* 1: make a real vfork (tracing paused if it was on); 0: run as a fork */
__attribute__((used)) static int vfork_prepare(void)
{
    if (!g_on) return 1;
    if (!ST) return 0;
    /* resolve what the child may call before exec, so that it does not run dlsym in the parent's memory */
    RESOLVE(execve); RESOLVE(execv); RESOLVE(execvp); RESOLVE(execvpe); RESOLVE(_exit); RESOLVE(close);
    RESOLVE(dup2); RESOLVE(dup3);
    g_vfork_paused = 1;
    g_on = 0;
    return 1;
}
__attribute__((used)) static long vfork_parent(long r)
{
    if (g_vfork_paused) { g_vfork_paused = 0; g_on = 1; }
    if (r < 0) { errno = (int)-r; return -1; }
    return r;
}
__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork, @function\n"
        "vfork:\n"
        "    subq $8, %rsp\n"                 /* align the stack for the call */
        "    call vfork_prepare\n"
        "    addq $8, %rsp\n"
        "    testl %eax, %eax\n"
        "    jz vfork_as_fork\n"               /* tail call: returns to our caller */
        "    popq %rdi\n"                      /* return address: the child may overwrite the stack slot */
        "    movl $" MTC_STR(SYS_vfork) ", %eax\n"
        "    syscall\n"
        "    pushq %rdi\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"                          /* child: straight back to the caller */
        "    movq %rax, %rdi\n"
        "    jmp vfork_parent\n"               /* parent: resumes tracing, sets errno on failure */
        "1:  ret\n"
        ".size vfork, .-vfork\n");
#else
EXPORT pid_t vfork(void) { return vfork_as_fork(); }
#endif
