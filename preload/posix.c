/* mtcprof shim: fd-level (POSIX) wrappers, process end, exec and vfork.  See shim.h. */
#include "shim.h"

/* ---------------------------------------------------------------- process end and exec */
DECL(void, exit, (int));
DECL(void, _exit, (int));
DECL(void, _Exit, (int));
EXPORT void exit(int status)
{
    RESOLVE(exit);
    if (shim.on && !shim.end.ended_by) { shim.end.exit_status = status & 0xff; shim.end.ended_by = E_EXIT; }
    real_exit(status);
    __builtin_unreachable();
}
EXPORT void _exit(int status)
{
    RESOLVE(_exit);
    if (shim.on) { if (!shim.end.ended_by) { shim.end.exit_status = status & 0xff; shim.end.ended_by = E__EXIT; } write_log(&shim, E__EXIT); }
    real__exit(status);
    __builtin_unreachable();
}
EXPORT void _Exit(int status)
{
    RESOLVE(_Exit);
    if (shim.on) { if (!shim.end.ended_by) { shim.end.exit_status = status & 0xff; shim.end.ended_by = E__EXIT; } write_log(&shim, E__EXIT); }
    real__Exit(status);
    __builtin_unreachable();
}
/* before exec: write this image's log if it did any file I/O (the new image starts its own log) */
static int pre_exec(void)
{
    if (!shim.on || !tables_active(TAB)) return 0;
    uint32_t eb = shim.end.ended_by;
    shim.end.ended_by = 0;
    write_log(&shim, E_EXEC);
    shim.end.ended_by = eb;
    return 1;
}
static void post_exec_failed(int wrote)
{
    if (wrote) { int e = errno; __atomic_store_n(&shim.end.flushing, 0, __ATOMIC_RELEASE); errno = e; }
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
    if (!shim.on) return CALL_ORIG;                                                                            \
    int created = 0, fd, errno0_ = errno;                                                                      \
    uint64_t t0 = CALL_START();                                                                                \
    if (is_creat(FLAGS) && !((FLAGS) & O_EXCL)) {                                                              \
        fd = CALL_EXCL;                                                                                        \
        if (fd >= 0) created = 1;                                                                              \
        else { errno = errno0_; fd = CALL_ORIG; }                                                              \
    } else {                                                                                                   \
        fd = CALL_ORIG;                                                                                        \
        created = fd >= 0 && is_creat(FLAGS);                                                                  \
    }                                                                                                          \
    uint64_t t1 = CALL_END();                                                                                  \
    SAVE_ERRNO;                                                                                                \
    if (fd >= 0) reg_open(TAB, fd, DIRFD, PATH, FLAGS, created, t0, t1, FF_POSIX);                             \
    else rec_open_failed(TAB, DIRFD, PATH, t0, t1, saved_errno_);                                              \
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
        if (!shim.on) return real_##name call;                                                                 \
        uint64_t t0 = CALL_START();                                                                            \
        int fd = real_##name call;                                                                             \
        uint64_t t1 = CALL_END();                                                                              \
        if (fd >= 0) { SAVE_ERRNO; reg_open(TAB, fd, AT_FDCWD, t, O_CREAT, 1, t0, t1, FF_POSIX); RESTORE_ERRNO; } \
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
    if (!shim.on || !(o = fd_take(TAB, fd))) return real_close(fd);
    uint64_t t0 = CALL_START();
    int r = real_close(fd);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    if (r == 0 || saved_errno_ != EBADF) rec_close(TAB, o, t0, t1, 0);
    else ofd_put(TAB, o);
    RESTORE_ERRNO;
    return r;
}
DECL(int, close_range, (unsigned, unsigned, int));
EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
    RESOLVE(close_range);
    int r = real_close_range(lo, hi, flags);
    if (shim.on && r == 0 && !(flags & CLOSE_RANGE_CLOEXEC)) {
        SAVE_ERRNO;
        uint64_t t = NOW();
        for (unsigned fd = lo; fd <= hi && fd < FD_MAX; fd++) {
            struct ofd *o = fd_take(TAB, (int)fd);
            if (o) rec_close(TAB, o, t, t, 0);
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
    if (shim.on) {
        SAVE_ERRNO;
        uint64_t t = NOW();
        for (int fd = lo < 0 ? 0 : lo; fd < FD_MAX; fd++) {
            struct ofd *o = fd_take(TAB, fd);
            if (o) rec_close(TAB, o, t, t, 0);
        }
        RESTORE_ERRNO;
    }
}
static void rec_dup(int oldfd, int newfd, uint64_t t0, uint64_t t1)
{
    struct ofd *o = fd_ofd(TAB, oldfd);
    if (oldfd == newfd) return;
    if (!o) { fd_install(TAB, newfd, FD_NONE); return; }   /* newfd now refers to something untracked */
    __atomic_fetch_add(&o->refs, 1, __ATOMIC_ACQ_REL);
    fd_install(TAB, newfd, o);
    CADD(TAB, o->f, C_DUPS, 1);
    if (UNLIKELY(shim.tab.trace)) trace(TAB, OP_DUP, 0, o->f, newfd, 0, t0, t1, 0);
}
/* a dup's time goes only into the op trace: without it, no clock read */
#define TRACE_CLOCK() (UNLIKELY(shim.tab.trace) ? NOW() : 0)
DECL(int, dup, (int));
DECL(int, dup2, (int, int));
DECL(int, dup3, (int, int, int));
EXPORT int dup(int fd)
{
    RESOLVE(dup);
    if (!shim.on) return real_dup(fd);
    uint64_t t0 = TRACE_CLOCK();
    int r = real_dup(fd);
    uint64_t t1 = TRACE_CLOCK();
    if (r >= 0) { SAVE_ERRNO; rec_dup(fd, r, t0, t1); RESTORE_ERRNO; }
    return r;
}
EXPORT int dup2(int fd, int nfd)
{
    RESOLVE(dup2);
    if (!shim.on) return real_dup2(fd, nfd);
    uint64_t t0 = TRACE_CLOCK();
    int r = real_dup2(fd, nfd);
    uint64_t t1 = TRACE_CLOCK();
    if (r >= 0) { SAVE_ERRNO; rec_dup(fd, r, t0, t1); RESTORE_ERRNO; }
    return r;
}
EXPORT int dup3(int fd, int nfd, int fl)
{
    RESOLVE(dup3);
    if (!shim.on) return real_dup3(fd, nfd, fl);
    uint64_t t0 = TRACE_CLOCK();
    int r = real_dup3(fd, nfd, fl);
    uint64_t t1 = TRACE_CLOCK();
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
        if (!shim.on || (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)) return real_##name(fd, cmd, arg);          \
        uint64_t t0 = TRACE_CLOCK();                                                                           \
        int r = real_##name(fd, cmd, arg);                                                                     \
        uint64_t t1 = TRACE_CLOCK();                                                                           \
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
    if (!shim.on || !(o = fd_ofd(TAB, FD))) return CALL;                                                       \
    uint64_t t0 = CALL_START();                                                                                \
    TYPE r = CALL;                                                                                             \
    uint64_t t1 = CALL_END();                                                                                  \
    SAVE_ERRNO;                                                                                                \
    rec_io(TAB, o->f, WR, (r >= 0 ? (OFFSET_EXPR) : -1), (int64_t)r, t0, t1, FL, saved_errno_);                \
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
    struct ofd *oi = fd_ofd(TAB, in), *oo = fd_ofd(TAB, out);
    uint64_t tm = t0 + (t1 - t0) / 2;
    if (oi) rec_io(TAB, oi->f, 0, r < 0 ? -1 : inoff ? *inoff - r : (oi->pos >= 0 ? POS_ADVANCE(&oi->pos, r) : -1), r, t0, oo ? tm : t1, OF_COPY, err);
    if (oo) rec_io(TAB, oo->f, 1, r < 0 ? -1 : outoff ? *outoff - r : (oo->pos >= 0 ? POS_ADVANCE(&oo->pos, r) : -1), r, oi ? tm : t0, t1, OF_COPY, err);
}
DECL(ssize_t, copy_file_range, (int, off64_t *, int, off64_t *, size_t, unsigned));
EXPORT ssize_t copy_file_range(int in, off64_t *pin, int out, off64_t *pout, size_t n, unsigned fl)
{
    RESOLVE(copy_file_range);
    if (!shim.on || (!fd_ofd(TAB, in) && !fd_ofd(TAB, out))) return real_copy_file_range(in, pin, out, pout, n, fl);
    uint64_t t0 = CALL_START();
    ssize_t r = real_copy_file_range(in, pin, out, pout, n, fl);
    uint64_t t1 = CALL_END();
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
        if (!shim.on || (!fd_ofd(TAB, in) && !fd_ofd(TAB, out))) return real_##name(out, in, off, n);          \
        uint64_t t0 = CALL_START();                                                                            \
        ssize_t r = real_##name(out, in, off, n);                                                              \
        uint64_t t1 = CALL_END();                                                                              \
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
        if (!shim.on || !(o = fd_ofd(TAB, fd))) return real_##name(fd, off, wh);                               \
        uint64_t t0 = CALL_START();                                                                            \
        OFFT r = real_##name(fd, off, wh);                                                                     \
        uint64_t t1 = CALL_END();                                                                              \
        SAVE_ERRNO;                                                                                            \
        if (r >= 0) {                                                                                          \
            __atomic_store_n(&o->pos, (int64_t)r, __ATOMIC_RELAXED);                                           \
            CADD(TAB, o->f, C_SEEKS, 1);                                                                       \
            if (wh == SEEK_END || wh == SEEK_DATA || wh == SEEK_HOLE)                                          \
                CADD(TAB, o->f, C_SEEKS_END, 1);                                                               \
        } else CADD(TAB, o->f, C_ERRORS, 1);                                                                   \
        TADD(TAB, o->f, C_T_META, t1 - t0);  /* on FUSE a SEEK_END asks the daemon for the size */             \
        if (UNLIKELY(shim.tab.trace)) trace(TAB, OP_SEEK, 0, o->f, r, 0, t0, t1, r < 0 ? saved_errno_ : 0);    \
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
        if (!shim.on || !(o = fd_ofd(TAB, fd))) return real_##name call;                                       \
        uint64_t t0 = CALL_START();                                                                            \
        int r = real_##name call;                                                                              \
        uint64_t t1 = CALL_END();                                                                              \
        SAVE_ERRNO;                                                                                            \
        rec_meta(TAB, o->f, COUNTER, OP, t0, t1, r != 0, saved_errno_, -1);                                    \
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
#define META_WRAP(name, proto, call, RECORD, COUNTER, OP)                                                      \
    DECL(int, name, proto);                                                                                    \
    EXPORT int name proto                                                                                      \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        if (!shim.on) return real_##name call;                                                                 \
        uint64_t t0 = CALL_START();                                                                            \
        int r = real_##name call;                                                                              \
        uint64_t t1 = CALL_END();                                                                              \
        SAVE_ERRNO;                                                                                            \
        struct frec *f = RECORD;                                                                               \
        if (f) rec_meta(TAB, f, COUNTER, OP, t0, t1, r != 0, saved_errno_, -1);                                \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }
#define PATHMETA_WRAP(name, proto, call, DIRFD, PATH, COUNTER, OP) \
    META_WRAP(name, proto, call, frec_at(TAB, DIRFD, PATH, 0), COUNTER, OP)
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
    if ((flags & AT_EMPTY_PATH) && p && !*p) { struct ofd *o = fd_ofd(TAB, d); return o ? o->f : NULL; }
    return frec_at(TAB, d, p, 0);
}
#define ATSTAT_WRAP(name, proto, call, DIRFD, PATH, FLAGS) \
    META_WRAP(name, proto, call, frec_at_or_fd(DIRFD, PATH, FLAGS), C_STATS, OP_STAT)
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
        if (!shim.on) return real_##name call;                                                                 \
        uint64_t t0 = CALL_START();                                                                            \
        int r = real_##name call;                                                                              \
        uint64_t t1 = CALL_END();                                                                              \
        SAVE_ERRNO;                                                                                            \
        struct frec *f = frec_at_or_fd(DIRFD, PATH, FLAGS);                                                    \
        if (f) rec_meta(TAB, f, C_STATS, OP_STAT, t0, t1, r != 0, saved_errno_, -1);                           \
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
    if (!shim.on) return real_unlinkat(d, p, fl);
    uint64_t t0 = CALL_START();
    int r = real_unlinkat(d, p, fl);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    struct frec *f = frec_at(TAB, d, p, 0);
    if (f) rec_meta(TAB, f, fl & AT_REMOVEDIR ? C_RMDIRS : C_UNLINKS, fl & AT_REMOVEDIR ? OP_RMDIR : OP_UNLINK, t0, t1, r != 0, saved_errno_, -1);
    RESTORE_ERRNO;
    return r;
}
DECL(int, remove, (const char *));
EXPORT int remove(const char *p)
{
    RESOLVE(remove);
    if (!shim.on) return real_remove(p);
    uint64_t t0 = CALL_START();
    int r = real_remove(p);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    struct frec *f = frec_at(TAB, AT_FDCWD, p, 0);
    if (f) rec_meta(TAB, f, C_UNLINKS, OP_UNLINK, t0, t1, r != 0, saved_errno_, -1);
    RESTORE_ERRNO;
    return r;
}
static void rec_rename(int od, const char *op, int nd, const char *np, int r, uint64_t t0, uint64_t t1, int err)
{
    struct frec *src = frec_at(TAB, od, op, 0), *dst = frec_at(TAB, nd, np, 0);
    if (src) rec_meta(TAB, src, C_RENAMES, OP_RENAME, t0, t1, r != 0, err, dst ? (int64_t)frec_id(TAB, dst) : -1);
}
DECL(int, rename, (const char *, const char *));
DECL(int, renameat, (int, const char *, int, const char *));
DECL(int, renameat2, (int, const char *, int, const char *, unsigned));
EXPORT int rename(const char *a, const char *b)
{
    RESOLVE(rename);
    if (!shim.on) return real_rename(a, b);
    uint64_t t0 = CALL_START(); int r = real_rename(a, b); uint64_t t1 = CALL_END();
    SAVE_ERRNO; rec_rename(AT_FDCWD, a, AT_FDCWD, b, r, t0, t1, saved_errno_); RESTORE_ERRNO;
    return r;
}
EXPORT int renameat(int da, const char *a, int db, const char *b)
{
    RESOLVE(renameat);
    if (!shim.on) return real_renameat(da, a, db, b);
    uint64_t t0 = CALL_START(); int r = real_renameat(da, a, db, b); uint64_t t1 = CALL_END();
    SAVE_ERRNO; rec_rename(da, a, db, b, r, t0, t1, saved_errno_); RESTORE_ERRNO;
    return r;
}
EXPORT int renameat2(int da, const char *a, int db, const char *b, unsigned fl)
{
    RESOLVE(renameat2);
    if (!shim.on) return real_renameat2(da, a, db, b, fl);
    uint64_t t0 = CALL_START(); int r = real_renameat2(da, a, db, b, fl); uint64_t t1 = CALL_END();
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
    if (shim.on && r == 0) { SAVE_ERRNO; cwd_update(&shim.tab.where); RESTORE_ERRNO; }
    return r;
}
EXPORT int fchdir(int fd)
{
    RESOLVE(fchdir);
    int r = real_fchdir(fd);
    if (shim.on && r == 0) { SAVE_ERRNO; cwd_update(&shim.tab.where); RESTORE_ERRNO; }
    return r;
}
/* chroot: later paths get the new root in front (tables.c: set_root); the log folder is opened before
 * (priv_prepare). */
DECL(int, chroot, (const char *));
EXPORT int chroot(const char *p)
{
    RESOLVE(chroot);
    if (!shim.on) return real_chroot(p);
    char nr[PATH_MAX];
    size_t n = abs_path(TAB, AT_FDCWD, p, nr);
    priv_prepare(&shim, "chroot", 0);
    int r = real_chroot(p);
    if (r == 0) { SAVE_ERRNO; set_root(&shim.tab.where, nr, n); RESTORE_ERRNO; }
    return r;
}
/* A change of user or group may take away the right to write the log folder: the log file is opened before.  A
 * call that changed nothing (a program dropping rights it does not have) leaves no trace. */
static void ids_now(uint32_t id[6])
{
    syscall(SYS_getresuid, &id[0], &id[1], &id[2]);
    syscall(SYS_getresgid, &id[3], &id[4], &id[5]);
}
#define SETID_WRAP(name, proto, args)                                                                           \
    DECL(int, name, proto);                                                                                    \
    EXPORT int name proto                                                                                      \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        if (!shim.on || shim.site.prefd >= 0) return real_##name args;                                         \
        uint32_t id0[6], id1[6];                                                                               \
        const char *prev = shim.site.priv_what;                                                                \
        ids_now(id0);                                                                                          \
        priv_prepare(&shim, #name, 1);                                                                         \
        int ret_ = real_##name args;                                                                           \
        SAVE_ERRNO;                                                                                            \
        ids_now(id1);                                                                                          \
        if (shim.site.prefd >= 0 && !memcmp(id0, id1, sizeof id0)) priv_undo(&shim, prev);                     \
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
        if (!shim.on || (fl & MAP_ANONYMOUS) || !(o = fd_ofd(TAB, fd))) return real_##name(a, l, pr, fl, fd, off); \
        uint64_t t0 = CALL_START();                                                                            \
        void *r = real_##name(a, l, pr, fl, fd, off);                                                          \
        uint64_t t1 = CALL_END();                                                                              \
        SAVE_ERRNO;                                                                                            \
        if (r != MAP_FAILED) { CADD(TAB, o->f, C_MMAPS, 1); CADD(TAB, o->f, C_MMAP_BYTES, l); }                \
        else CADD(TAB, o->f, C_ERRORS, 1);                                                                     \
        if (UNLIKELY(shim.tab.trace)) trace(TAB, OP_MMAP, 0, o->f, (int64_t)off, r == MAP_FAILED ? -1 : (int64_t)l, t0, t1, r == MAP_FAILED ? saved_errno_ : 0); \
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
    if (shim.on && r == 0) ADD(&shim.tab.munmaps, 1);
    return r;
}

/* ---------------------------------------------------------------- vfork */
/* The child of a vfork shares our memory, so it must not touch the record set: tracing is paused (shim.on = 0) from
 * before the vfork until the parent resumes, which is exactly the child's life (it may only exec or _exit; its new
 * image traces itself).  A wrapper cannot call vfork and return (the child's return would pop the frame the parent
 * returns through), so on x86-64 the wrapper is a few instructions that make the syscall themselves, keeping the
 * return address in a register like glibc's own vfork.  Elsewhere, and in a multi-threaded process (other threads
 * would run untraced during the pause), vfork runs as a fork. */
DECL(pid_t, fork, (void));
__attribute__((used)) static pid_t vfork_as_fork(void)
{
    RESOLVE(fork);
    return real_fork();
}
#if defined(__x86_64__)
/* 1: make a real vfork (tracing paused if it was on); 0: run as a fork */
__attribute__((used)) static int vfork_prepare(void)
{
    if (!shim.on) return 1;
    if (!ST) return 0;
    /* resolve what the child may call before exec, so that it does not run dlsym in the parent's memory */
    RESOLVE(execve); RESOLVE(execv); RESOLVE(execvp); RESOLVE(execvpe); RESOLVE(_exit); RESOLVE(close);
    RESOLVE(dup2); RESOLVE(dup3);
    shim.vfork_paused = 1;
    shim.on = 0;
    return 1;
}
__attribute__((used)) static long vfork_parent(long r)
{
    if (shim.vfork_paused) { shim.vfork_paused = 0; shim.on = 1; }
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

