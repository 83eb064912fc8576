/* mtcprof shim: paths, file records, open file descriptions, the fd table.  See shim.h. */
#include "shim.h"

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
size_t norm_inplace(char *p)
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
/* already normalised (no "//", "/.", trailing "/"): nearly every path a program passes.  p[n] is the NUL and p has
 * PATH_MAX bytes, so with SSE2 16 bytes are looked at in one step (bytes past the NUL are masked off) */
static inline int is_normal(const char *p, size_t n)
{
    if (n == 0 || p[0] != '/' || (n > 1 && p[n - 1] == '/')) return 0;
    size_t i = 0;
#ifdef __SSE2__
    const __m128i slash = _mm_set1_epi8('/'), dot = _mm_set1_epi8('.');
    for (; i + 1 < n && i + 17 <= PATH_MAX; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(p + i)), b = _mm_loadu_si128((const __m128i *)(p + i + 1));
        unsigned bad = (unsigned)_mm_movemask_epi8(_mm_and_si128(
            _mm_cmpeq_epi8(a, slash), _mm_or_si128(_mm_cmpeq_epi8(b, slash), _mm_cmpeq_epi8(b, dot))));
        if (n - 1 - i < 16) bad &= (1u << (n - 1 - i)) - 1;     /* pairs (p[j], p[j+1]) with j + 1 < n only */
        if (bad) return 0;
    }
#endif
    for (; i + 1 < n; i++)
        if (p[i] == '/' && (p[i + 1] == '/' || p[i + 1] == '.')) return 0;
    return 1;
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
char *g_root;
size_t g_rootlen;
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
size_t abs_path(int dirfd, const char *path, char *out)
{
    if (!path || !*path) return 0;
    size_t n = strlen(path), bl = 0;
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
void cwd_update(void)
{
    long r = syscall(SYS_getcwd, g_cwd, PATH_MAX);
    if (r < 0 || g_cwd[0] != '/') {
        struct stat st;
        char *p = g_cwd;
        s_cpy(p, "?cwd=", 8); p += 5;
        if (syscall(SYS_stat, ".", &st) == 0) { p = u64_str(p, st.st_dev); *p++ = ':'; p = u64_str(p, st.st_ino); }
        else { *p++ = '?'; *p = 0; }
    }
    g_cwd_len = s_len(g_cwd);
}
static inline int prefix_match(const char *p, size_t pl, const char *pre, size_t n)
{
    /* the second and the last byte first: most paths differ from /proc, /sys, /dev at the second, and from a
     * sibling folder (the log folder next to the data) at the last */
    if (pl < n || (n > 1 && (p[1] != pre[1] || p[n - 1] != pre[n - 1])) || memcmp(p, pre, n)) return 0;
    return pl == n || p[n] == '/' || (n > 0 && pre[n - 1] == '/');
}
int excluded(const char *p, size_t pl)
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
 * hash chain with a CAS; a record is fully written before it is published and never unlinked).
 * A bucket read is a cache miss nearly every time (the buckets are 64 KiB, read at random, between system calls
 * that sweep the caches): a 2 KiB bitmap says which chains may be non-empty, so that a new path in an empty
 * bucket (most of them) is only a store there, and while the process has one thread the last record found or made
 * is checked first (a stat then an open of the same path is the common pair). */
static struct frec *g_last;            /* single-threaded only */
static inline struct frec *found(struct frec *f, uint32_t flags)
{
    if ((f->flags & flags) != flags) __atomic_fetch_or(&f->flags, flags, __ATOMIC_RELAXED);
    return f;
}
struct frec *frec_get(const char *p, size_t pl, uint32_t flags)
{
    uint32_t h = hash_path(p, pl);
    int st = ST;
    struct frec *f = g_last;
    if (st && f && f->hash == h && f->path_len == pl && !memcmp(g_paths + f->path_off, p, pl)) return found(f, flags);
    uint32_t b = h & (NBUCKETS - 1), *bkt = &g_bkt[b];
    uint64_t *used = &g_bkt_used[b >> 6], bit = 1ull << (b & 63);
    uint32_t head = 0;
    if (!st || (*used & bit)) {
        head = __atomic_load_n(bkt, __ATOMIC_ACQUIRE);
        if ((f = chain_find(head, 0, p, pl, h))) {
            if (st) g_last = f;
            return found(f, flags);
        }
    }
    /* new record */
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
    if (st) {
        f->next = head;
        *used |= bit;
        __atomic_store_n(bkt, idx + 1, __ATOMIC_RELEASE);
        return g_last = f;
    }
    __atomic_fetch_or(used, bit, __ATOMIC_RELEASE);      /* set before the chain can become non-empty */
    for (;;) {
        f->next = head;
        if (__atomic_compare_exchange_n(bkt, &head, idx + 1, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) return f;
        /* another record was pushed meanwhile (head now holds it): is it ours? */
        struct frec *g = chain_find(head, f->next, p, pl, h);
        if (g) {
            /* lost the race: our record stays unused (no counters, never written) */
            f->path_len = 0; f->hash = 0;
            return found(g, flags);
        }
    }
}
struct frec *frec_at(int dirfd, const char *path, uint32_t flags)
{
    char buf[PATH_MAX];
    size_t n = abs_path(dirfd, path, buf);
    if (!n || excluded(buf, n)) return NULL;
    return frec_get(buf, n, flags);
}

/* ofd pool: Treiber stack with a tag against ABA */
struct ofd *ofd_new(struct frec *f, int64_t pos)
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
void ofd_put(struct ofd *o)
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
void fd_install(int fd, struct ofd *o)
{
    if ((unsigned)fd >= FD_MAX) { ofd_put(o); return; }
    if (ST) { struct ofd *old = g_fdtab[fd]; __atomic_store_n(&g_fdtab[fd], o, __ATOMIC_RELEASE); ofd_put(old); return; }
    ofd_put(__atomic_exchange_n(&g_fdtab[fd], o, __ATOMIC_ACQ_REL));
}
struct ofd *fd_take(int fd)
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
struct ofd *fd_adopt(int fd)
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

/* the rare paths of the counter helpers (shim.h), kept out of every wrapper */
/* the cold part of f, handed out at its first use: the next one in order, or if a race between threads used them
 * all up, the one kept for f in the second half of the pool (g_cold has 2 * FREC_MAX) */
static struct fcold *cold_of(struct frec *f)
{
    uint32_t c = __atomic_load_n(&f->cold, __ATOMIC_ACQUIRE);
    if (LIKELY(c)) return &g_cold[c - 1];
    uint32_t i = ST ? g_ncold++ : __atomic_fetch_add(&g_ncold, 1, __ATOMIC_RELAXED);
    if (i >= FREC_MAX) i = FREC_MAX + (uint32_t)(f - g_frecs);
    uint32_t none = 0;
    if (__atomic_compare_exchange_n(&f->cold, &none, i + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return &g_cold[i];
    return &g_cold[none - 1];          /* another thread gave f one first (the slot taken here stays unused) */
}
__attribute__((noinline, cold)) void cold_add(struct frec *f, unsigned word, uint64_t v)
{
    ADD((uint64_t *)cold_of(f) + word, v);
}
static inline int gettid_cached(void)
{
    if (UNLIKELY(!t_tid)) t_tid = (int)syscall(SYS_gettid);
    return t_tid;
}
__attribute__((noinline)) void trace(uint16_t op, uint16_t fl, const struct frec *f, int64_t off, int64_t len,
                                     uint64_t t0, uint64_t t1, int err)
{
    uint64_t i = ST ? g_nops++ : __atomic_fetch_add(&g_nops, 1, __ATOMIC_RELAXED);
    if (i >= g_ops_max) return;
    struct mtc_op_rec *o = &g_ops[i];
    o->start_ns = t0; o->dur_ns = t1 - t0; o->offset = off; o->length = len;
    o->file = (uint32_t)(f - g_frecs); o->tid = (uint32_t)gettid_cached(); o->op = op; o->flags = fl; o->err = err;
}

void rec_read(struct frec *f, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl, int err)
{
    rec_rw(f, 0, off, n, t0, t1, fl, err);
}
void rec_write(struct frec *f, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl, int err)
{
    rec_rw(f, 1, off, n, t0, t1, fl, err);
}

/* counters of a successful open (fd, stdio stream or Gfarm handle) */
void rec_open(struct frec *f, int created, uint64_t t0, uint64_t t1, uint16_t fl)
{
    CADD(f, C_OPENS, 1);
    if (created) CADD(f, C_CREATES, 1);
    TADD(f, C_T_OPEN, t1 - t0);
    MINU_NZ(WCTR(f, C_FIRST_OPEN), t0);
    if (UNLIKELY(g_trace)) trace(OP_OPEN, (uint16_t)(fl | (created ? OF_CREATED : 0)), f, -1, 0, t0, t1, 0);
}
/* register a successful open of (dirfd, path) as fd */
void reg_open(int fd, int dirfd, const char *path, int oflags, int created, uint64_t t0, uint64_t t1,
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
void rec_open_failed(int dirfd, const char *path, uint64_t t0, uint64_t t1, int err)
{
    struct frec *f = frec_at(dirfd, path, 0);
    if (!f) return;
    CADD(f, C_ERRORS, 1);
    TADD(f, C_T_OPEN, t1 - t0);
    if (UNLIKELY(g_trace)) trace(OP_OPEN, 0, f, -1, -1, t0, t1, err);
}
void rec_close(struct ofd *o, uint64_t t0, uint64_t t1, uint16_t fl)
{
    struct frec *f = o->f;
    CADD(f, C_CLOSES, 1);
    TADD(f, C_T_CLOSE, t1 - t0);
    MAXU(WCTR(f, C_LAST_CLOSE), t1);
    if (UNLIKELY(g_trace)) trace(OP_CLOSE, fl, f, -1, 0, t0, t1, 0);
    ofd_put(o);
}


