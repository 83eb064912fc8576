/* mtcprof shim: paths, file records, open file descriptions, the fd table, the op trace: struct shim_tables, given
 * to every function here.  See shim.h. */
#define SHIM_PASSED_STATE
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
/* After a chroot the kernel's paths (the program's, getcwd's, /proc/self/fd's) are inside the new root: w->root, the
 * new root as seen from the original one, is put in front of them.  Empty without a chroot. */
/* out (normalised, length n) as seen from the original root; 0 if that does not fit.  Called when root_len > 0. */
static size_t add_root(const struct shim_paths *w, char *out, size_t n)
{
    if (out[0] != '/') return n;                   /* an unresolvable stand-in stays as it is */
    if (n == 1) n = 0;                             /* "/" is the root itself */
    if (w->root_len + n + 1 > PATH_MAX) return 0;
    memmove(out + w->root_len, out, n);
    memcpy(out, w->root, w->root_len);
    out[w->root_len + n] = 0;
    return w->root_len + n;
}
/* after a successful chroot to nr (its absolute normalised path, n bytes; 0 if the shim could not make one): later
 * paths get the new root in front, or when it cannot be named the stand-in "?root=<st_dev>:<st_ino>", so that they
 * are marked, not wrong */
void set_root(struct shim_paths *w, const char *nr, size_t n)
{
    struct stat st;
    if (n && nr[0] == '/') { memcpy(w->root, nr, n + 1); w->root_len = n == 1 ? 0 : n; }
    else if (syscall(SYS_stat, "/", &st) == 0) {
        char *q = w->root;
        s_cpy(q, "?root=", 8); q += 6;
        q = u64_str(q, st.st_dev); *q++ = ':'; q = u64_str(q, st.st_ino);
        w->root_len = (size_t)(q - w->root);
    }
    cwd_update(w);
}
/* absolute normalised path of (dirfd, path) into out[PATH_MAX]; 0 on failure.  A path relative to a working
 * directory the shim could not name (the cwd is then a stand-in that does not start with "/") is kept as the
 * stand-in plus the path as given, not normalised: it says which folder, and is never mistaken for an absolute path. */
size_t abs_path(struct shim_tables *t, int dirfd, const char *path, char *out)
{
    const struct shim_paths *w = &t->where;
    if (!path || !*path) return 0;
    size_t n = strlen(path), bl = 0;
    int rooted = 1;                                /* the result is in the current root's terms */
    if (path[0] != '/') {
        if (dirfd == AT_FDCWD) {
            bl = w->cwd_len;
            if (bl + 1 + n + 1 > PATH_MAX) return 0;
            memcpy(out, w->cwd, bl);
        } else {
            struct ofd *o = fd_ofd(t, dirfd);
            if (o && o->f->path_len + 1 + n + 1 <= PATH_MAX) {
                bl = o->f->path_len;
                memcpy(out, t->paths + o->f->path_off, bl);
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
    return UNLIKELY(w->root_len) && rooted ? add_root(w, out, len) : len;
}
/* w->cwd: the working directory, or when getcwd cannot name it (longer than PATH_MAX, or outside the root) the
 * stand-in "?cwd=<st_dev>:<st_ino>" (FORMAT.md) */
void cwd_update(struct shim_paths *w)
{
    w->gen++;
    w->cwd = w->cwd_room;
    long r = syscall(SYS_getcwd, w->cwd, PATH_MAX);
    if (r < 0 || w->cwd[0] != '/') {
        struct stat st;
        char *p = w->cwd;
        s_cpy(p, "?cwd=", 8); p += 5;
        if (syscall(SYS_stat, ".", &st) == 0) { p = u64_str(p, st.st_dev); *p++ = ':'; p = u64_str(p, st.st_ino); }
        else { *p++ = '?'; *p = 0; }
    }
    w->cwd_len = s_len(w->cwd);
}
/* the `:`-separated absolute prefixes of raw into arr (at most max), copied into *store (up to store_end) */
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
/* which paths are recorded: never /proc, /sys, /dev and the log folder, nor those under MTCPROF_EXCLUDE (excl_raw);
 * if MTCPROF_INCLUDE (incl_raw) is set, only those under it */
void path_filters(struct shim_paths *w, const char *log_dir, const char *excl_raw, const char *incl_raw, char **store,
                  char *store_end)
{
    static const char *dflt[] = {"/proc", "/sys", "/dev"};
    for (int i = 0; i < 3; i++) { w->excl[w->nexcl] = dflt[i]; w->excl_len[w->nexcl++] = s_len(dflt[i]); }
    w->excl[w->nexcl] = log_dir; w->excl_len[w->nexcl++] = s_len(log_dir);
    parse_prefixes(excl_raw, w->excl, w->excl_len, &w->nexcl, MAX_PREFIX + 4, store, store_end);
    parse_prefixes(incl_raw, w->incl, w->incl_len, &w->nincl, MAX_PREFIX, store, store_end);
}
static inline int prefix_match(const char *p, size_t pl, const char *pre, size_t n)
{
    /* the second and the last byte first: most paths differ from /proc, /sys, /dev at the second, and from a
     * sibling folder (the log folder next to the data) at the last */
    if (pl < n || (n > 1 && (p[1] != pre[1] || p[n - 1] != pre[n - 1])) || memcmp(p, pre, n)) return 0;
    return pl == n || p[n] == '/' || (n > 0 && pre[n - 1] == '/');
}
int excluded(const struct shim_paths *w, const char *p, size_t pl)
{
    for (int i = 0; i < w->nexcl; i++)
        if (prefix_match(p, pl, w->excl[i], w->excl_len[i])) return 1;
    if (!w->nincl) return 0;
    for (int i = 0; i < w->nincl; i++)
        if (prefix_match(p, pl, w->incl[i], w->incl_len[i])) return 0;
    return 1;
}
/* the record of p in the chain starting at v, stopping at stop (index + 1); NULL if absent */
static struct frec *chain_find(const struct shim_tables *t, uint32_t v, uint32_t stop, const char *p, size_t pl,
                               uint32_t h)
{
    for (; v && v != stop; v = __atomic_load_n(&t->frecs[v - 1].next, __ATOMIC_RELAXED)) {
        struct frec *f = &t->frecs[v - 1];
        if (f->hash == h && f->path_len == pl && !memcmp(t->paths + f->path_off, p, pl)) return f;
    }
    return NULL;
}
/* find or create the record of an absolute normalised path; lock-free (records are pushed on the head of their
 * hash chain with a CAS; a record is fully written before it is published and never unlinked).
 * A bucket read is a cache miss nearly every time (the buckets are 64 KiB, read at random, between system calls
 * that sweep the caches): a 2 KiB bitmap says which chains may be non-empty, so that a new path in an empty
 * bucket (most of them) is only a store there, and while the process has one thread the last record found or made
 * is checked first (a stat then an open of the same path is the common pair). */
static inline struct frec *found(struct frec *f, uint32_t flags)
{
    if ((f->flags & flags) != flags) __atomic_fetch_or(&f->flags, flags, __ATOMIC_RELAXED);
    return f;
}
/* A process that makes many records touches a new page of records every 32 files and of paths every ~200: from the
 * second 64 KiB of each on, the next 64 KiB is faulted in by one madvise as it is entered (a fault costs ~1.5 us in a
 * VM, a page populated with 15 others a fraction of that; cp -r of 2,000 files: 202 faults of the shim's -> 90).
 * The first 64 KiB fault page by page, so that a process with a few files pays for no more than it touches.  Without
 * MADV_POPULATE_WRITE (Linux < 5.14) pages fault as before. */
#define PREFAULT_BYTES (64u << 10)
/* At the MANY_FILES-th record the rest of the first 64 KiB of records and of paths, and the path hash's buckets
 * (64 KiB read at random: a process with a few hundred files touches every page of them), are faulted in by three
 * madvise calls instead of ~40 faults one by one (cp -r of 2,000 files: 183 page faults of the process -> 156). */
#define MANY_FILES 128u
static void prefault_many(const struct shim_tables *t, uint64_t po)
{
    syscall(SYS_madvise, &t->frecs[MANY_FILES], PREFAULT_BYTES - MANY_FILES * sizeof(struct frec), MADV_POPULATE_WRITE);
    uint64_t from = po & ~(uint64_t)4095;
    if (from < PREFAULT_BYTES) syscall(SYS_madvise, t->paths + from, PREFAULT_BYTES - from, MADV_POPULATE_WRITE);
    syscall(SYS_madvise, t->bkt, sizeof(uint32_t) * NBUCKETS, MADV_POPULATE_WRITE);
}
static void prefault(const struct shim_tables *t, uint32_t idx, uint64_t po, size_t n)
{
    int saved = errno;
    if (idx == MANY_FILES) prefault_many(t, po);
    if (idx && idx % (PREFAULT_BYTES / sizeof(struct frec)) == 0)          /* FREC_MAX is a multiple of it */
        syscall(SYS_madvise, &t->frecs[idx], PREFAULT_BYTES, MADV_POPULATE_WRITE);
    uint64_t chunk = (po + n) / PREFAULT_BYTES;                            /* the path's last byte is at po + n - 1 */
    if (chunk != po / PREFAULT_BYTES && (chunk + 1) * PREFAULT_BYTES <= PATHS_BYTES)
        syscall(SYS_madvise, t->paths + chunk * PREFAULT_BYTES, PREFAULT_BYTES, MADV_POPULATE_WRITE);
    errno = saved;
}
struct frec *frec_get(struct shim_tables *t, const char *p, size_t pl, uint32_t flags)
{
    uint32_t h = hash_path(p, pl);
    int st = ST;
    struct frec *f = t->last;
    if (st && f && f->hash == h && f->path_len == pl && !memcmp(t->paths + f->path_off, p, pl)) return found(f, flags);
    uint32_t b = h & (NBUCKETS - 1), *bkt = &t->bkt[b];
    uint64_t *used = &t->bkt_used[b >> 6], bit = 1ull << (b & 63);
    uint32_t head = 0;
    if (!st || (*used & bit)) {
        head = __atomic_load_n(bkt, __ATOMIC_ACQUIRE);
        if ((f = chain_find(t, head, 0, p, pl, h))) {
            if (st) t->last = f;
            return found(f, flags);
        }
    }
    /* new record */
    uint32_t idx = st ? t->nfrec++ : __atomic_fetch_add(&t->nfrec, 1, __ATOMIC_RELAXED);
    uint64_t po = st ? (t->paths_used += pl + 1) - (pl + 1) : __atomic_fetch_add(&t->paths_used, pl + 1, __ATOMIC_RELAXED);
    if (idx >= FREC_MAX || po + pl + 1 > PATHS_BYTES) {
        if (idx >= FREC_MAX) __atomic_store_n(&t->nfrec, FREC_MAX, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->files_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    f = &t->frecs[idx];
    prefault(t, idx, po, pl + 1);
    memcpy(t->paths + po, p, pl + 1);
    f->flags = (uint16_t)flags; f->path_len = (uint16_t)pl; f->hash = h; f->path_off = (uint32_t)po;
    if (st) {
        f->next = head;
        *used |= bit;
        __atomic_store_n(bkt, idx + 1, __ATOMIC_RELEASE);
        return t->last = f;
    }
    __atomic_fetch_or(used, bit, __ATOMIC_RELEASE);      /* set before the chain can become non-empty */
    for (;;) {
        f->next = head;
        if (__atomic_compare_exchange_n(bkt, &head, idx + 1, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) return f;
        /* another record was pushed meanwhile (head now holds it): is it ours? */
        struct frec *g = chain_find(t, head, f->next, p, pl, h);
        if (g) {
            /* lost the race: our record stays unused (no counters, never written) */
            f->path_len = 0; f->hash = 0;
            return found(g, flags);
        }
    }
}
struct frec *frec_at(struct shim_tables *t, int dirfd, const char *path, uint32_t flags)
{
    /* a path that does not depend on dirfd: remembered with the cwd and root it was resolved under (t->memo) */
    size_t pl = 0;
    int memo = ST && path && (dirfd == AT_FDCWD || path[0] == '/');
    if (memo) {
        pl = strlen(path);
        if (t->memo_f && pl == t->memo_len && t->memo_gen == t->where.gen && !memcmp(path, t->memo, pl))
            return found(t->memo_f, flags);
    }
    char buf[PATH_MAX];
    size_t n = abs_path(t, dirfd, path, buf);
    if (!n || excluded(&t->where, buf, n)) return NULL;
    struct frec *f = frec_get(t, buf, n, flags);
    if (memo && f && pl < sizeof t->memo) {
        memcpy(t->memo, path, pl);
        t->memo_len = (uint32_t)pl; t->memo_gen = t->where.gen; t->memo_f = f;
    }
    return f;
}

/* ofd pool: Treiber stack with a tag against ABA */
struct ofd *ofd_new(struct shim_tables *t, struct frec *f, int64_t pos)
{
    uint32_t idx;
    uint64_t h = __atomic_load_n(&t->ofd_free, __ATOMIC_ACQUIRE);
    if (ST) {
        idx = (uint32_t)h;
        if (idx) t->ofd_free = ((h >> 32) + 1) << 32 | t->ofds[idx].next;
        else if ((idx = t->ofd_bump++) >= OFD_MAX) { t->ofd_bump = OFD_MAX; return NULL; }
    } else for (;;) {
        idx = (uint32_t)h;
        if (!idx) {
            idx = __atomic_fetch_add(&t->ofd_bump, 1, __ATOMIC_RELAXED);
            if (idx >= OFD_MAX) return NULL;
            break;
        }
        uint64_t nh = ((h >> 32) + 1) << 32 | __atomic_load_n(&t->ofds[idx].next, __ATOMIC_RELAXED);
        if (__atomic_compare_exchange_n(&t->ofd_free, &h, nh, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
    }
    struct ofd *o = &t->ofds[idx];
    o->f = f; o->pos = pos; o->refs = 1;
    return o;
}
void ofd_put(struct shim_tables *t, struct ofd *o)
{
    if (o <= FD_NONE) return;
    uint32_t idx = (uint32_t)(o - t->ofds);
    if (ST) {
        if (--o->refs) return;
        o->next = (uint32_t)t->ofd_free;
        t->ofd_free = ((t->ofd_free >> 32) + 1) << 32 | idx;
        return;
    }
    if (__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL)) return;
    uint64_t h = __atomic_load_n(&t->ofd_free, __ATOMIC_ACQUIRE);
    do {
        __atomic_store_n(&o->next, (uint32_t)h, __ATOMIC_RELAXED);
    } while (!__atomic_compare_exchange_n(&t->ofd_free, &h, ((h >> 32) + 1) << 32 | idx, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE));
}
void fd_install(struct shim_tables *t, int fd, struct ofd *o)
{
    if ((unsigned)fd >= FD_MAX) { ofd_put(t, o); return; }
    if (ST) { struct ofd *old = t->fdtab[fd]; __atomic_store_n(&t->fdtab[fd], o, __ATOMIC_RELEASE); ofd_put(t, old); return; }
    ofd_put(t, __atomic_exchange_n(&t->fdtab[fd], o, __ATOMIC_ACQ_REL));
}
struct ofd *fd_take(struct shim_tables *t, int fd)
{
    if ((unsigned)fd >= FD_MAX) return NULL;
    struct ofd *o = __atomic_load_n(&t->fdtab[fd], __ATOMIC_RELAXED);
    if (!o) return NULL;
    if (ST) t->fdtab[fd] = NULL;
    else o = __atomic_exchange_n(&t->fdtab[fd], NULL, __ATOMIC_ACQ_REL);
    return o == FD_NONE ? NULL : o;
}
/* first use of an fd the shim did not see opened: a regular file gets a record (flag inherited) under the path
 * /proc/self/fd gives, anything else is marked FD_NONE.  A closed fd is left unmarked. */
struct ofd *fd_adopt(struct shim_tables *t, int fd)
{
    int saved = errno;
    struct stat st;
    struct ofd *o = FD_NONE;
    if (syscall(SYS_fstat, fd, &st)) { errno = saved; return NULL; }
    if (S_ISREG(st.st_mode)) {
        char path[PATH_MAX];
        if (fd_path(fd, path) > 0) {
            size_t pl = norm_inplace(path);
            if (UNLIKELY(t->where.root_len)) pl = add_root(&t->where, path, pl);
            struct frec *f = !pl || excluded(&t->where, path, pl) ? NULL : frec_get(t, path, pl, FF_INHERITED);
            long pos = f ? syscall(SYS_lseek, fd, 0, SEEK_CUR) : -1;
            struct ofd *n = f ? ofd_new(t, f, pos < 0 ? -1 : pos) : NULL;
            if (n) o = n;
        }
    }
    struct ofd *cur = NULL;
    if (!__atomic_compare_exchange_n(&t->fdtab[fd], &cur, o, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        ofd_put(t, o);            /* another thread adopted (or opened) it first */
        o = cur;
    }
    errno = saved;
    return o > FD_NONE ? o : NULL;
}

/* the rare paths of the counter helpers (shim.h), kept out of every wrapper */
/* the cold part of f, handed out at its first use: the next one in order, or if a race between threads used them
 * all up, the one kept for f in the second half of the pool (t->cold has 2 * FREC_MAX) */
static struct fcold *cold_of(struct shim_tables *t, struct frec *f)
{
    uint32_t c = __atomic_load_n(&f->cold, __ATOMIC_ACQUIRE);
    if (LIKELY(c)) return &t->cold[c - 1];
    uint32_t i = ST ? t->ncold++ : __atomic_fetch_add(&t->ncold, 1, __ATOMIC_RELAXED);
    if (i >= FREC_MAX) i = FREC_MAX + (uint32_t)(f - t->frecs);
    uint32_t none = 0;
    if (__atomic_compare_exchange_n(&f->cold, &none, i + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return &t->cold[i];
    return &t->cold[none - 1];          /* another thread gave f one first (the slot taken here stays unused) */
}
__attribute__((noinline, cold)) void cold_add(struct shim_tables *t, struct frec *f, unsigned word, uint64_t v)
{
    ADD((uint64_t *)cold_of(t, f) + word, v);
}
/* per thread: its id for the op trace, and the run-queue wait of its current call (shim.h: CALL_START, TADD) */
TLS int t_tid;
TLS uint64_t t_cw0, t_cw;
static inline int gettid_cached(void)
{
    if (UNLIKELY(!t_tid)) t_tid = (int)syscall(SYS_gettid);
    return t_tid;
}
__attribute__((noinline)) void trace(struct shim_tables *t, uint16_t op, uint16_t fl, const struct frec *f, int64_t off,
                                     int64_t len, uint64_t t0, uint64_t t1, int err)
{
    uint64_t i = ST ? t->nops++ : __atomic_fetch_add(&t->nops, 1, __ATOMIC_RELAXED);
    if (i >= t->ops_max) return;
    struct mtc_op_rec *o = &t->ops[i];
    o->start_ns = t0; o->dur_ns = t1 - t0; o->offset = off; o->length = len;
    o->file = frec_id(t, f); o->tid = (uint32_t)gettid_cached(); o->op = op; o->flags = fl; o->err = err;
}

void rec_read(struct shim_tables *t, struct frec *f, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl,
              int err)
{
    rec_rw(t, f, 0, off, n, t0, t1, fl, err);
}
void rec_write(struct shim_tables *t, struct frec *f, int64_t off, int64_t n, uint64_t t0, uint64_t t1, uint16_t fl,
               int err)
{
    rec_rw(t, f, 1, off, n, t0, t1, fl, err);
}

/* counters of a successful open (fd, stdio stream or Gfarm handle) */
void rec_open(struct shim_tables *t, struct frec *f, int created, uint64_t t0, uint64_t t1, uint16_t fl)
{
    CADD(t, f, C_OPENS, 1);
    if (created) CADD(t, f, C_CREATES, 1);
    TADD(t, f, C_T_OPEN, t1 - t0);
    MINU_NZ(WCTR(f, C_FIRST_OPEN), t0);
    if (UNLIKELY(t->trace)) trace(t, OP_OPEN, (uint16_t)(fl | (created ? OF_CREATED : 0)), f, -1, 0, t0, t1, 0);
}
/* register a successful open of (dirfd, path) as fd */
void reg_open(struct shim_tables *t, int fd, int dirfd, const char *path, int oflags, int created, uint64_t t0,
              uint64_t t1, uint32_t ff)
{
    struct frec *f = frec_at(t, dirfd, path, ff | (created ? FF_CREATED : 0));
    if (!f) { fd_install(t, fd, FD_NONE); return; }
    int64_t pos = 0;
    if (oflags & O_APPEND) {
        struct stat st;
        pos = syscall(SYS_fstat, fd, &st) == 0 ? (int64_t)st.st_size : -1;
    }
    struct ofd *o = ofd_new(t, f, pos);
    fd_install(t, fd, o ? o : FD_NONE);
    rec_open(t, f, created, t0, t1, ff & FF_STDIO ? OF_STDIO : 0);
}
/* a failed open counts as an error on its path (failed lookups are metadata load too) */
void rec_open_failed(struct shim_tables *t, int dirfd, const char *path, uint64_t t0, uint64_t t1, int err)
{
    struct frec *f = frec_at(t, dirfd, path, 0);
    if (!f) return;
    CADD(t, f, C_ERRORS, 1);
    TADD(t, f, C_T_OPEN, t1 - t0);
    if (UNLIKELY(t->trace)) trace(t, OP_OPEN, 0, f, -1, -1, t0, t1, err);
}
void rec_close(struct shim_tables *t, struct ofd *o, uint64_t t0, uint64_t t1, uint16_t fl)
{
    struct frec *f = o->f;
    CADD(t, f, C_CLOSES, 1);
    TADD(t, f, C_T_CLOSE, t1 - t0);
    MAXU(WCTR(f, C_LAST_CLOSE), t1);
    if (UNLIKELY(t->trace)) trace(t, OP_CLOSE, fl, f, -1, 0, t0, t1, 0);
    ofd_put(t, o);
}

/* a record with at least one nonzero counter (the log has a FILE record for it) */
int frec_active(const struct shim_tables *t, const struct frec *f)
{
    if (!f->path_len) return 0;
    for (int i = 0; i < NHOT; i++)
        if (f->c[i]) return 1;
    for (int i = 0; i < NWIDE; i++)
        if (f->w[i]) return 1;
    const struct fcold *x = cold_if(t, f);
    if (x) {
        for (int i = 0; i < NCOLD; i++)
            if (x->c[i]) return 1;
        for (int i = 0; i < NHOT; i++)
            if (x->c_hi[i]) return 1;
    }
    return 0;
}
/* the image recorded something: a traced op or a file with a nonzero counter */
int tables_active(const struct shim_tables *t)
{
    uint32_t n = t->nfrec > FREC_MAX ? FREC_MAX : t->nfrec;
    int active = t->nops > 0;
    for (uint32_t i = 0; i < n && !active; i++) active = frec_active(t, &t->frecs[i]);
    return active;
}
/* a fork child's fresh record set: paths and the fd table are kept (fds are inherited), every counter is zeroed */
void tables_fork_child(struct shim_tables *t)
{
    t->cw_ns = t->cw_calls = 0;
    uint32_t n = t->nfrec > FREC_MAX ? FREC_MAX : t->nfrec;
    for (uint32_t i = 0; i < n; i++) {
        struct frec *f = &t->frecs[i];
        memset(f->w, 0, sizeof f->w);
        memset(f->c, 0, sizeof f->c);
        memset(f->hr, 0, sizeof f->hr);
        memset(f->hw, 0, sizeof f->hw);
        f->flags = (uint16_t)((f->flags | FF_INHERITED) & ~FF_CREATED);
        f->cold = 0;
    }
    /* cold parts: drop the pages (they read back as zeros) rather than touching every one; the ones in use only
     * (a walk of the whole reservation's page tables costs every fork a few us) */
    if (t->ncold) {                     /* past FREC_MAX: the second half of the pool is in use too (cold_of) */
        size_t used = t->ncold >= FREC_MAX ? 2 * (size_t)FREC_MAX : t->ncold;
        syscall(SYS_madvise, t->cold, (used * sizeof(struct fcold) + 4095) & ~(size_t)4095, MADV_DONTNEED);
    }
    t->ncold = 0;
    t->nops = 0; t->munmaps = 0; t->files_dropped = 0;
}
