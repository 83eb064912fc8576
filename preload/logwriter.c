/* mtcprof shim: writing the log (async-signal-safe).  Every function here is given the process state; the writer reads
 * all of it and changes only its own parts (shim_writer, shim_site).  See shim.h and FORMAT.md. */
#define SHIM_PASSED_STATE
#include "shim.h"

/* ---------------------------------------------------------------- log writer (async-signal-safe) */

static void wb_flush(struct shim_process *p)
{
    if (p->w.len && !p->w.err && sys_write_all(p->w.fd, p->w.buf, p->w.len) < 0) p->w.err = errno ? errno : EIO;
    p->w.total += p->w.len;
    p->w.len = 0;
}
static void wb_put(struct shim_process *p, const void *src, size_t n)
{
    const char *s = src;
    while (n) {
        size_t k = LOG_BUF_BYTES - p->w.len;
        if (k > n) k = n;
        memcpy(p->w.buf + p->w.len, s, k);
        p->w.len += k; s += k; n -= k;
        if (p->w.len == LOG_BUF_BYTES) wb_flush(p);
    }
}
static void wb_pad(struct shim_process *p, size_t n)
{
    static const char z[8];
    if (n % 8) wb_put(p, z, 8 - n % 8);
}
static void wb_rec(struct shim_process *p, uint16_t type, uint32_t len)
{
    uint16_t h[2] = {type, 0};
    wb_put(p, h, 4);
    wb_put(p, &len, 4);
    p->w.nrec++;
}
static void wb_str(struct shim_process *p, uint32_t key, const char *s, size_t n)
{
    uint32_t len = (uint32_t)((8 + n + 7) & ~(size_t)7);
    wb_rec(p, R_STR, len);
    uint32_t kv[2] = {key, (uint32_t)n};
    wb_put(p, kv, 8);
    wb_put(p, s, n);
    wb_pad(p, n);
}
/* STR exe: /proc/self/exe read straight into the buffer, where wb_str would copy it to (no page of its own to
 * touch); the room checked first keeps the record, padding included, short of the buffer's end */
static void wb_exe(struct shim_process *p)
{
    if (LOG_BUF_BYTES - p->w.len < 16 + PATH_MAX + 8) wb_flush(p);
    long n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", p->w.buf + p->w.len + 16, PATH_MAX);
    if (n <= 0) return;
    wb_rec(p, R_STR, (uint32_t)((8 + (size_t)n + 7) & ~(size_t)7));
    uint32_t kv[2] = {S_EXE, (uint32_t)n};
    wb_put(p, kv, 8);
    p->w.len += (size_t)n;                      /* the path, already in place */
    wb_pad(p, (size_t)n);
}
static inline uint64_t tick_ns(const struct shim_process *p, uint64_t t)
{
    return t ? p->clock.real0 + (uint64_t)((double)(int64_t)(t - p->clock.tick0) * p->w.scale) : 0;
}
static inline uint64_t dur_ns(const struct shim_process *p, uint64_t d) { return (uint64_t)((double)d * p->w.scale); }

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
static uint32_t dir_id(struct shim_process *p, struct dir_mru *m, const char *d, uint32_t len)
{
    for (uint32_t k = 0; k < m->n; k++)
        if (m->len[k] == len && !memcmp(m->s[k], d, len)) return mru_front(m, k, m->id[k], m->s[k], len);
    uint32_t id = m->next_id++;
    uint32_t rl = (uint32_t)((8 + len + 7) & ~7u);
    wb_rec(p, R_DIR, rl);
    uint32_t kv[2] = {id, len};
    wb_put(p, kv, 8);
    wb_put(p, d, len);
    wb_pad(p, len);
    return mru_front(m, m->n < MRU_N ? m->n++ : MRU_N - 1, id, d, len);
}
/* FILE record (FORMAT.md): present slots as u32, or u64 when they do not fit; the name relative to a DIR record.
 * Only the slots a file uses are looked at (a typical file uses 5-15 of the 49). */
static const uint8_t hot_slot[NHOT] = {
    [H_OPENS] = C_OPENS, [H_CREATES] = C_CREATES, [H_CLOSES] = C_CLOSES, [H_READS] = C_READS,
    [H_WRITES] = C_WRITES, [H_BYTES_READ] = C_BYTES_READ, [H_BYTES_WRITTEN] = C_BYTES_WRITTEN,
    [H_STATS] = C_STATS, [H_ERRORS] = C_ERRORS, [H_T_OPEN] = C_T_OPEN, [H_T_READ] = C_T_READ,
    [H_T_WRITE] = C_T_WRITE, [H_T_CLOSE] = C_T_CLOSE, [H_T_META] = C_T_META};
/* the fast path below writes the hot counters in slot order, which relies on this layout */
_Static_assert((int)H_OPENS == (int)C_OPENS && (int)H_BYTES_WRITTEN == (int)C_BYTES_WRITTEN && H_BYTES_WRITTEN == 6 && H_STATS == 7 &&
               H_ERRORS == 8 && H_T_OPEN == 9 && H_T_META == NHOT - 1 && C_T_META - C_T_OPEN == H_T_META - H_T_OPEN &&
               C_MAX_OFFSET < C_STATS && C_STATS < C_ERRORS && C_ERRORS < C_T_OPEN && C_LAST_CLOSE == C_FIRST_OPEN + 1
               && C_FIRST_OPEN == C_T_META + 1, "hot counters in slot order");
_Static_assert(__builtin_offsetof(struct frec, hw) == __builtin_offsetof(struct frec, hr) + NBINS &&
               __builtin_offsetof(struct frec, hr) + 20 <= sizeof(struct frec) &&
               __builtin_offsetof(struct frec, c) + 64 <= sizeof(struct frec), "16-byte loads stay in the record");
/* bit i set when f->c[i] != 0 */
static inline unsigned hot_nonzero(const struct frec *f)
{
#ifdef __SSE2__
    const __m128i z = _mm_setzero_si128();
    unsigned eq = 0;
    for (int i = 0; i < 4; i++)                        /* c[12..15]: the last load reads 8 bytes past c, masked off */
        eq |= (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(
                  _mm_loadu_si128((const __m128i *)(const void *)(f->c + 4 * i)), z))) << (4 * i);
    return ~eq & ((1u << NHOT) - 1);
#else
    unsigned m = 0;
    for (int i = 0; i < NHOT; i++) if (f->c[i]) m |= 1u << i;
    return m;
#endif
}
/* bits 0..9: hr[b] != 0; bits 10..19: hw[b] != 0 */
static inline unsigned bins_nonzero(const struct frec *f)
{
#ifdef __SSE2__
    const __m128i z = _mm_setzero_si128();
    unsigned a = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)f->hr), z));
    unsigned b = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(f->hr + 4)), z));
    return (a & 0x3ffu) | ((b >> 6) & 0x3ffu) << NBINS;   /* the second load holds hr[4..9] then hw[0..9] */
#else
    unsigned m = 0;
    const uint8_t *bins = (const uint8_t *)f + __builtin_offsetof(struct frec, hr);     /* hw follows hr */
    for (int i = 0; i < 2 * NBINS; i++) if (bins[i]) m |= 1u << i;
    return m;
#endif
}
/* slot k's value at v: u32, or u64 (bit k in *wide) when it does not fit; bit k in *mask */
static inline char *put_slot(char *v, int k, uint64_t x, uint64_t *mask, uint64_t *wide)
{
    *mask |= 1ull << k;
    if (x >> 32) { *wide |= 1ull << k; __builtin_memcpy(v, &x, 8); return v + 8; }
    uint32_t w = (uint32_t)x;
    __builtin_memcpy(v, &w, 4);
    return v + 4;
}
/* a file with a cold part: every slot gathered first (rare) */
static char *put_all_slots(const struct shim_process *p, const struct frec *f, const struct fcold *cx, char *v,
                           uint64_t start_ns, uint64_t *mask, uint64_t *wide)
{
    uint64_t x[NSLOTS] = {0};
    for (int k = 0; k < NCOUNTERS; k++) if (g_cmap[k] < 0) x[k] = cx->c[~g_cmap[k]];
    for (int k = 0; k < NHOT; k++) x[hot_slot[k]] = f->c[k] + cx->c_hi[k];
    for (int k = 0; k < NBINS; k++) {
        x[NCOUNTERS + k] = f->hr[k] + cx->hr_hi[k];
        x[NCOUNTERS + NBINS + k] = f->hw[k] + cx->hw_hi[k];
    }
    x[C_MAX_OFFSET] = f->w[W_MAX_OFFSET];
    for (int k = C_T_OPEN; k <= C_T_META; k++) x[k] = dur_ns(p, x[k]);
    for (int k = 0; k < NSLOTS; k++) {
        if (k == C_FIRST_OPEN || k == C_LAST_CLOSE) {     /* present when set, even if the offset rounds to 0 */
            uint64_t t = f->w[k == C_FIRST_OPEN ? W_FIRST_OPEN : W_LAST_CLOSE];
            if (t) { t = tick_ns(p, t); v = put_slot(v, k, t > start_ns ? t - start_ns : 0, mask, wide); }
        } else if (x[k]) v = put_slot(v, k, x[k], mask, wide);
    }
    return v;
}
static void wb_file(struct shim_process *p, const struct frec *f, struct dir_mru *mru, uint64_t start_ns)
{
    const char *path = p->tab.paths + f->path_off;
    uint32_t plen = f->path_len;
    const char *last = memrchr(path, '/', plen);
    uint32_t slash = last ? (uint32_t)(last - path) + 1 : 0;
    uint32_t dir = dir_id(p, mru, path, slash ? slash - 1 : 0);
    uint32_t nlen = plen - slash;
    /* at most 40 + 8 * NSLOTS + name + 8 bytes of padding, built in place */
    if (p->w.len + 40 + 8 * NSLOTS + nlen + 8 > LOG_BUF_BYTES) wb_flush(p);
    char *r = p->w.buf + p->w.len, *v = r + 40;
    uint64_t mask = 0, wide = 0;
    const struct fcold *cx = cold_if(&p->tab, f);
    if (UNLIKELY(cx)) v = put_all_slots(p, f, cx, v, start_ns, &mask, &wide);
    else {                                  /* slot order: hot 0-6, max_offset, stats, errors, times, bins */
        unsigned hm = hot_nonzero(f), bm = bins_nonzero(f);
        for (unsigned m = hm & 0x7fu; m; m &= m - 1) {
            int k = __builtin_ctz(m);
            v = put_slot(v, k, f->c[k], &mask, &wide);
        }
        if (f->w[W_MAX_OFFSET]) v = put_slot(v, C_MAX_OFFSET, f->w[W_MAX_OFFSET], &mask, &wide);
        if (hm & 1u << H_STATS) v = put_slot(v, C_STATS, f->c[H_STATS], &mask, &wide);
        if (hm & 1u << H_ERRORS) v = put_slot(v, C_ERRORS, f->c[H_ERRORS], &mask, &wide);
        for (unsigned m = hm >> H_T_OPEN; m; m &= m - 1) {
            int j = __builtin_ctz(m);
            uint64_t d = dur_ns(p, f->c[H_T_OPEN + j]);
            if (d) v = put_slot(v, C_T_OPEN + j, d, &mask, &wide);     /* under 1 ns: absent, as a zero count */
        }
        for (int k = 0; k < 2; k++) {       /* timestamps: present when set, even if the offset rounds to 0 */
            uint64_t t = f->w[k ? W_LAST_CLOSE : W_FIRST_OPEN];
            if (t) { t = tick_ns(p, t); v = put_slot(v, C_FIRST_OPEN + k, t > start_ns ? t - start_ns : 0, &mask, &wide); }
        }
        const uint8_t *bins = (const uint8_t *)f + __builtin_offsetof(struct frec, hr);     /* hw follows hr */
        for (unsigned m = bm; m; m &= m - 1) {
            int b = __builtin_ctz(m);
            v = put_slot(v, NCOUNTERS + b, bins[b], &mask, &wide);
        }
    }
    memcpy(v, path + slash, nlen);
    v += nlen;
    uint64_t zero = 0;
    __builtin_memcpy(v, &zero, 8);          /* padding to 8 bytes (the buffer has room, see above) */
    v = r + ((v - r + 7) & ~(ptrdiff_t)7);
    uint32_t len = (uint32_t)(v - r - 8);
    uint16_t th[2] = {R_FILE, 0}, fl[2] = {f->flags, (uint16_t)nlen};
    uint32_t id = frec_id(&p->tab, f);
    uint8_t cn[4] = {NCOUNTERS, NBINS, 0, 0};
    __builtin_memcpy(r, th, 4);
    __builtin_memcpy(r + 4, &len, 4);
    __builtin_memcpy(r + 8, &id, 4);
    __builtin_memcpy(r + 12, fl, 4);
    __builtin_memcpy(r + 16, &dir, 4);
    __builtin_memcpy(r + 20, cn, 4);
    __builtin_memcpy(r + 24, &mask, 8);
    __builtin_memcpy(r + 32, &wide, 8);
    p->w.len += 8 + len;
    p->w.nrec++;
}
/* gfarm2fs mount points from /proc/self/mounts */
static void wb_mounts(struct shim_process *p)
{
    char buf[8192];
    size_t have = 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/mounts", O_RDONLY | O_CLOEXEC);
    if (fd < 0) { if (errno == EMFILE) p->w.fd_short = 1; return; }
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
                wb_str(p, S_GFARM_MOUNT, mp, o);
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
void snapshot_argv(struct shim_task *id, int argc, char **argv)
{
    size_t n = 0;
    for (int i = 0; argv && i < argc && argv[i]; i++) {
        size_t l = s_len(argv[i]) + 1;
        if (n + l > ARGV_MAX_BYTES) { id->argv_trunc = 1; break; }
        memcpy(id->argv + n, argv[i], l);
        n += l;
    }
    id->argv_len = n;
}

static void wb_argv(struct shim_process *p)
{
    wb_str(p, S_ARGV, p->id.argv, p->id.argv_len);
    if (p->id.argv_trunc) wb_str(p, S_ARGV_TRUNCATED, "1", 1);
}

/* ---------------------------------------------------------------- where the log goes */
/* The log folder is found by its path at the end, except after a chroot or a change of user: then the path may lead
 * elsewhere (inside the new root) or to a folder the new user may not write.  Before such a call the shim opens the
 * folder (site.dirfd, used if it is still the folder checked at start) and, for a change of user, the log file
 * itself (site.prefd), which is then written in place instead of through a temp file. */
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
void log_name(const struct shim_process *p, char *out)
{
    char *o = out;
    if (p->id.host[0] == '.' || !p->id.host[0]) *o++ = '_';
    s_cpy(o, p->id.host, 128);
    o += s_len(o); *o++ = '.';
    o = u64_str(o, (uint64_t)p->id.pid); *o++ = '.';
    o = u64_str(o, p->clock.real0);
    s_cpy(o, ".mtclog", 8);
}
static void join(char *out, size_t cap, const char *dir, const char *pre, const char *name, const char *post)
{
    const char *parts[] = {dir, "/", pre, name, post};
    char *p = out;
    for (int i = 0; i < 5; i++) { s_cpy(p, parts[i], cap - (size_t)(p - out)); p += s_len(p); }
}
/* before a chroot or a change of user (what: the call's name); async-signal-safe */
void priv_prepare(struct shim_process *p, const char *what, int user)
{
    if (!p->on) return;
    int saved = errno;
    if (!p->site.priv_what) p->site.priv_what = what;
    if (!p->site.exe_len) {
        long r = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", p->site.exe, PATH_MAX);
        p->site.exe_len = r > 0 ? r : -1;
    }
    if (p->site.dirfd < 0) {
        int fd = (int)syscall(SYS_openat, AT_FDCWD, p->id.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0 && fd_is(fd, p->site.dir_dev, p->site.dir_ino)) p->site.dirfd = fd_high(fd);
        else if (fd >= 0) syscall(SYS_close, fd);
    }
    if (user && p->site.prefd < 0 && p->site.dirfd >= 0) {
        char name[192];
        log_name(p, name);
        int fd = (int)syscall(SYS_openat, p->site.dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        struct stat st;
        if (fd >= 0 && syscall(SYS_fstat, fd, &st) == 0) {
            p->site.prefd = fd_high(fd); p->site.pre_dev = st.st_dev; p->site.pre_ino = st.st_ino;
        } else if (fd >= 0) syscall(SYS_close, fd);
    }
    errno = saved;
}
static void priv_warn(struct shim_process *p, const char *fin)
{
    if (!p->site.priv_what || __atomic_exchange_n(&p->site.priv_warned, 1, __ATOMIC_RELAXED)) return;
    const char *parts[] = {p->site.priv_what, "() during the run: log written to ", fin,
                           p->tab.where.root_len ? " outside the new root (paths after it have the new root in front)"
                                     : " through the folder and file opened before it", NULL};
    warn_line(&p->warn, parts);
}

/* undo priv_prepare's log file opened in place, after a change of user that changed nothing (prev_what: the call
 * noted before it) */
void priv_undo(struct shim_process *p, const char *prev_what)
{
    char name[192];
    log_name(p, name);
    syscall(SYS_unlinkat, p->site.dirfd, name, 0);
    syscall(SYS_close, p->site.prefd);
    p->site.prefd = -1;
    p->site.priv_what = prev_what;
}
/* a fork child: the parent's log file opened in place is the parent's (the child writes its own; the folder's
 * handle stays) */
void log_fork_child(struct shim_process *p)
{
    if (p->site.prefd >= 0) { syscall(SYS_close, p->site.prefd); p->site.prefd = -1; }
}

/* STR key "<pre> <start> <now>": a kernel file's first line as read at the image's start (start, len) and as it
 * reads now, after pre (n bytes already in b, which has 192) */
static void wb_then_now(struct shim_process *p, uint32_t key, char *b, size_t n, const char *start, size_t len, const char *path)
{
    if (n) b[n++] = ' ';
    memcpy(b + n, start, len);
    n += len;
    b[n++] = ' ';
    size_t l = read_line(path, b + n, 192 - n, &p->w.fd_short);
    if (l) wb_str(p, key, b, n + l);
}

/* the number of CPUs in a kernel CPU list ("0-1,4" -> 3); 0 if it is not one */
static unsigned cpu_count(const char *on, size_t lo)
{
    unsigned cpus = 0, a = 0, v = 0;
    int range = 0, digits = 0;
    for (size_t i = 0; i <= lo; i++) {
        char c = i < lo ? on[i] : ',';
        if (c >= '0' && c <= '9') { v = v * 10 + (unsigned)(c - '0'); digits = 1; }
        else if (c == '-' && digits && !range) { a = v; v = 0; range = 1; digits = 0; }
        else if (c == ',' && digits) { cpus += range ? (v >= a ? v - a + 1 : 0) : 1; v = 0; range = 0; digits = 0; }
        else return 0;
    }
    return cpus;
}
/* STR cpu_clock "<online CPUs> <up s> <idle s> <up s> <idle s>": /proc/uptime at the image's start and now, idle
 * summed over the CPUs; ingest turns them into the machine's busy share while a stage ran (FORMAT.md).  The CPU list
 * is the launcher's (MTCPROF_CPUS_ONLINE) when it gave a valid one, else read here. */
static void cpu_clock(struct shim_process *p)
{
    char on[64], b[192];
    if (!p->clock.uptime0_len) return;
    unsigned cpus = p->opt.cpus_online ? cpu_count(p->opt.cpus_online, s_len(p->opt.cpus_online)) : 0;
    if (!cpus) {
        size_t lo = read_line("/sys/devices/system/cpu/online", on, sizeof on, &p->w.fd_short);
        if (!lo || !(cpus = cpu_count(on, lo))) return;
    }
    wb_then_now(p, S_CPU_CLOCK, b, (size_t)(u64_str(b, cpus) - b), p->clock.uptime0, p->clock.uptime0_len, "/proc/uptime");
}

/* STR sched "<on-CPU ns> <waiting ns> <timeslices> <on-CPU ns> <waiting ns> <timeslices>": /proc/self/schedstat
 * (the main thread's) at the image's start and now; ingest turns the waits into the share of a stage's time its
 * processes were ready to run but had no CPU, which a blocking call's measured time includes (FORMAT.md) */
static void sched_clock(struct shim_process *p)
{
    char b[192];
    if (p->clock.sched0_len) wb_then_now(p, S_SCHED, b, 0, p->clock.sched0, p->clock.sched0_len, p->w.sched_path);
}

/* STR cpu_wait "<waiting ns> <calls>" (MTCPROF_CPU_WAIT=1): the timed calls' wait for a CPU, summed over the calls
 * whose time a file's counters took, and how many (FORMAT.md) */
static void cpu_wait_sum(struct shim_process *p)
{
    char b[48], *e;
    if (!p->tab.cpu_wait) return;
    e = u64_str(b, p->tab.cw_ns);
    *e++ = ' ';
    e = u64_str(e, p->tab.cw_calls);
    wb_str(p, S_CPU_WAIT, b, (size_t)(e - b));
}

/* the end of the image, taken once by write_log (a log written again, or by a child, says the same) */
#define LOG_NO_FD 1                    /* write_image: no fd left for the log (EMFILE), nothing written or warned */

/* Write this image's log: 0 written, -1 failed (warned), LOG_NO_FD when an open of its own failed with EMFILE and
 * last_try is 0 (then nothing is left behind: the caller makes room, see write_in_child). */
static int write_image(struct shim_process *p, int last_try)
{
    int saved = errno;
    uint64_t t_end = p->w.t_end, real_end = p->w.real_end;
    uint64_t start_ns = p->clock.real0;
    /* names: <dir>/<host>.<pid>.<start_ns>.mtclog, written as .<same>.tmp then renamed; or in place (p->site.prefd) */
    /* the names are as long as they need (a PATH_MAX buffer each would touch new stack pages at every exit) */
    size_t dl = s_len(p->id.dir), cap = dl + 1 + 1 + 192 + 4 + 1;
    char name[192], fin[cap], tmp[cap];
    log_name(p, name);
    join(fin, cap, p->id.dir, "", name, "");
    join(tmp, cap, p->id.dir, ".", name, ".tmp");
    int dfd = AT_FDCWD;
    const char *tname = tmp, *fname = fin;
    if (p->site.dirfd >= 0 && fd_is(p->site.dirfd, p->site.dir_dev, p->site.dir_ino)) { dfd = p->site.dirfd; tname = tmp + dl + 1; fname = fin + dl + 1; }
    int in_place = p->site.prefd >= 0 && fd_is(p->site.prefd, p->site.pre_dev, p->site.pre_ino);

    if (in_place) {
        p->w.fd = p->site.prefd;
        syscall(SYS_ftruncate, p->w.fd, 0);          /* a failed exec's log is rewritten */
        syscall(SYS_lseek, p->w.fd, 0, SEEK_SET);
    } else {
        p->w.fd = (int)syscall(SYS_openat, dfd, tname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (p->w.fd < 0 && errno == EMFILE && !last_try) { errno = saved; return LOG_NO_FD; }
        if (p->w.fd < 0) { warn_once(&p->warn, "cannot create log", tmp, errno); errno = saved; return -1; }
    }
    p->w.len = 0; p->w.err = 0; p->w.nrec = 0; p->w.total = 0;
    /* a log of many files fills the whole buffer: its pages faulted in at once (see prefault in tables.c) */
    if (__atomic_load_n(&p->tab.nfrec, __ATOMIC_RELAXED) >= 512)
        syscall(SYS_madvise, (uintptr_t)p->w.buf & ~(uintptr_t)4095, LOG_BUF_BYTES + 4096, MADV_POPULATE_WRITE);

    /* header */
    char hdr[32] = {0};
    memcpy(hdr, MTC_MAGIC, 8);
    uint16_t v16[2] = {MTC_VERSION, 32};
    uint32_t bom = MTC_BOM;
    memcpy(hdr + 8, v16, 4);
    memcpy(hdr + 12, &bom, 4);
    memcpy(hdr + 16, &real_end, 8);
    wb_put(p, hdr, 32);

    uint32_t nf = 0, nfrec = __atomic_load_n(&p->tab.nfrec, __ATOMIC_ACQUIRE);
    if (nfrec > FREC_MAX) nfrec = FREC_MAX;
    uint64_t nops = __atomic_load_n(&p->tab.nops, __ATOMIC_ACQUIRE);
    uint64_t traced = nops < p->tab.ops_max ? nops : p->tab.ops_max;

    struct mtc_proc_rec pr;
    memset(&pr, 0, sizeof pr);
    pr.pid = p->id.pid;
    pr.ppid = p->w.ppid_end;
    pr.uid = (uint32_t)syscall(SYS_getuid);
    pr.origin = p->id.origin;
    pr.start_ns = start_ns;
    pr.end_ns = tick_ns(p, t_end);
    pr.exit_status = p->end.exit_status;
    pr.ended_by = p->end.ended_by;
    pr.signal = p->end.signal;
    pr.n_files = 0;                   /* set below, once the FILE records are written */
    pr.ops_traced = traced;
    pr.ops_dropped = nops - traced;
    pr.files_dropped = p->tab.files_dropped;
    pr.trace_flags = p->tab.trace ? 1 : 0;
    pr.munmaps = p->tab.munmaps;
    pr.parent_start_ns = p->id.parent_start_ns;
    wb_rec(p, R_PROC, sizeof pr);
    wb_put(p, &pr, sizeof pr);

    wb_str(p, S_HOST, p->id.host, s_len(p->id.host));
    if (p->id.run[0]) wb_str(p, S_RUN, p->id.run, s_len(p->id.run));
    if (p->id.task[0]) wb_str(p, S_TASK, p->id.task, s_len(p->id.task));
    if (p->id.stage[0]) wb_str(p, S_STAGE, p->id.stage, s_len(p->id.stage));
    if (p->site.exe_len > 0) wb_str(p, S_EXE, p->site.exe, (size_t)p->site.exe_len);
    else wb_exe(p);
    wb_argv(p);
    wb_str(p, S_CWD, p->id.cwd0, s_len(p->id.cwd0));
    wb_str(p, S_LOGDIR, p->id.dir, s_len(p->id.dir));
    if (p->opt.incl_raw[0]) wb_str(p, S_INCLUDE, p->opt.incl_raw, s_len(p->opt.incl_raw));
    if (p->opt.excl_raw[0]) wb_str(p, S_EXCLUDE, p->opt.excl_raw, s_len(p->opt.excl_raw));
    wb_str(p, S_SHIM_VERSION, SHIM_VERSION, sizeof SHIM_VERSION - 1);
    cpu_clock(p);
    sched_clock(p);
    cpu_wait_sum(p);
    if (p->opt.mounts_given) {
        for (const char *m = p->opt.mounts_raw; *m;) {
            const char *e = strchr(m, ':');
            size_t l = e ? (size_t)(e - m) : s_len(m);
            if (l) wb_str(p, S_GFARM_MOUNT, m, l);
            m += l + (e != NULL);
        }
    } else wb_mounts(p);

    struct dir_mru mru = {0};
    for (uint32_t i = 0; i < nfrec; i++) {
        const struct frec *f = &p->tab.frecs[i];
        if (frec_active(&p->tab, f)) { wb_file(p, f, &mru, start_ns); nf++; }
    }
    {   /* n_files of the PROC record (header 32 + record header 8): still in the buffer, or written already */
        const size_t at = 32 + 8 + __builtin_offsetof(struct mtc_proc_rec, n_files);
        if (p->w.total == 0) memcpy(p->w.buf + at, &nf, 4);
        else if (syscall(SYS_pwrite64, p->w.fd, &nf, 4, (long)at) != 4 && !p->w.err) p->w.err = errno ? errno : EIO;
    }
    /* op trace: records of at most 1M ops each */
    for (uint64_t done = 0; done < traced;) {
        uint64_t k = traced - done;
        if (k > (1u << 20)) k = 1u << 20;
        wb_rec(p, R_OPS, (uint32_t)(8 + k * sizeof(struct mtc_op_rec)));
        uint32_t oh[2] = {(uint32_t)k, (uint32_t)sizeof(struct mtc_op_rec)};
        wb_put(p, oh, 8);
        for (uint64_t j = 0; j < k; j++) {
            struct mtc_op_rec o = p->tab.ops[done + j];
            o.start_ns = tick_ns(p, o.start_ns);
            o.dur_ns = dur_ns(p, o.dur_ns);
            if (o.op == OP_RENAME) {}   /* offset holds the destination file id */
            wb_put(p, &o, sizeof o);
        }
        done += k;
    }
    uint32_t nrec = (uint32_t)p->w.nrec;
    wb_rec(p, R_END, 16);
    uint64_t total = p->w.total + p->w.len - 8;
    uint32_t e2[2] = {nrec, 0};
    wb_put(p, e2, 8);
    wb_put(p, &total, 8);
    wb_flush(p);
    if (p->w.fd_short && !last_try) {     /* a kernel file could not be read for want of an fd: written again */
        if (!in_place) { syscall(SYS_close, p->w.fd); syscall(SYS_unlinkat, dfd, tname, 0); }
        errno = saved;
        return LOG_NO_FD;
    }
    if (in_place) {                    /* kept open: a failed exec writes it again */
        if (p->w.err) {
            syscall(SYS_ftruncate, p->w.fd, 0);
            syscall(SYS_unlinkat, dfd, fname, 0);
            warn_once(&p->warn, "cannot write log", fin, p->w.err);
            errno = saved;
            return -1;
        }
        priv_warn(p, fin);
        errno = saved;
        return 0;
    }
    syscall(SYS_close, p->w.fd);
    if (p->w.err) {
        syscall(SYS_unlinkat, dfd, tname, 0);
        warn_once(&p->warn, "cannot write log", tmp, p->w.err);
        errno = saved;
        return -1;
    }
    if (syscall(SYS_renameat, dfd, tname, dfd, fname) < 0) {
        warn_once(&p->warn, "cannot rename log", fin, errno);
        syscall(SYS_unlinkat, dfd, tname, 0);
        errno = saved;
        return -1;
    }
    priv_warn(p, fin);
    errno = saved;
    return 0;
}

/* A process at its fd limit (EMFILE) at its end: the log is written by a short-lived copy of it (clone without
 * CLONE_VM or CLONE_FILES: its own copies of the memory and of the fd table) that closes three of its copies of
 * the program's fds to make room.  The program keeps every fd, number and limit it had: nothing is reserved (a
 * reserved fd would leave the program one fd fewer, and a dup'd one can be closed by a program that closes every
 * fd), nothing is raised (RLIMIT_NOFILE cannot be when the soft limit is the hard one).  The copy's exit signal is
 * 0, so it sends no SIGCHLD and the program's wait() never sees it (only __WALL or __WCLONE does); a close in it
 * drops no lock of the program's (POSIX locks belong to the program's fd table, flock()s to the description the
 * program still holds).  Costs a clone only in this case.  Returns as write_image, LOG_NO_FD if no copy could be
 * made. */
static int write_in_child(struct shim_process *p)
{
    long pid = syscall(SYS_clone, 0UL, 0UL, 0UL, 0UL, 0UL);
    if (pid < 0) return LOG_NO_FD;
    if (pid == 0) {
        uint64_t all = ~0ull;          /* the program's handlers are not run in the copy (a Ctrl-C ends it) */
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, 8);
        for (int fd = 3, freed = 0; freed < 3 && fd < FD_MAX; fd++)
            if (fd != p->site.dirfd && fd != p->site.prefd && syscall(SYS_close, fd) == 0) freed++;
        char *sp = p->w.sched_path;       /* /proc/self is the copy now: the program's own */
        s_cpy(sp, "/proc/", 8); sp += 6;
        sp = u64_str(sp, (uint64_t)p->id.pid);
        s_cpy(sp, "/schedstat", 12);
        p->w.fd_short = 0;
        syscall(SYS_exit_group, write_image(p, 1) == 0 ? 0 : 1);
    }
    int st = 0;
    long w;
    do w = syscall(SYS_wait4, (int)pid, &st, __WALL, NULL); while (w < 0 && errno == EINTR);
    if (w < 0) return 0;               /* reaped elsewhere (a ptrace supervisor): it ran, and warned if it failed */
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Write the log; returns 0 on success.  Only one writer ever runs (p->end.flushing). */
int write_log(struct shim_process *p, uint32_t ended_by)
{
    if (__atomic_exchange_n(&p->end.flushing, 1, __ATOMIC_ACQ_REL)) return 0;
    int saved = errno;
    if (!p->end.ended_by) p->end.ended_by = ended_by;
    p->w.t_end = NOW();
    uint64_t mono_end = clock_ns(CLOCK_MONOTONIC);
    p->w.real_end = clock_ns(CLOCK_REALTIME);
#ifdef HAVE_TSC
    p->w.scale = p->w.t_end > p->clock.tick0 ? (double)(mono_end - p->clock.mono0) / (double)(p->w.t_end - p->clock.tick0) : 1.0;
#else
    (void)mono_end;
    p->w.scale = 1.0;
#endif
    p->w.ppid_end = (int32_t)syscall(SYS_getppid);
    p->w.fd_short = 0;
    int r = write_image(p, 0);
    if (r == LOG_NO_FD) r = write_in_child(p);
    if (r == LOG_NO_FD) { p->w.fd_short = 0; r = write_image(p, 1); }    /* no copy: the log without what needs an fd */
    errno = saved;
    return r;
}
