/* mtcprof shim: stdio (FILE *) wrappers.  See shim.h. */
#include "shim.h"

/* ---------------------------------------------------------------- stdio */
static inline struct ofd *fp_ofd(FILE *fp) { return fp ? fd_ofd(TAB, fp->_fileno) : NULL; }
/* a stdio read/write of `bytes` (< 0 on error) at the stream's logical position */
HOT void rec_stdio(struct ofd *o, int wr, int64_t bytes, uint64_t t0, uint64_t t1, int err)
{
    int64_t off = bytes >= 0 && o->pos >= 0 ? POS_ADVANCE(&o->pos, bytes) : -1;
    rec_io(TAB, o->f, wr, off, bytes, t0, t1, OF_STDIO, err);
}
/* glibc's stream flags (libio.h, not installed; part of its ABI: getc_unlocked and putc_unlocked are macros on them) */
#define IO_UNBUFFERED 0x0002
#define IO_LINE_BUF 0x0200
#define IO_CURRENTLY_PUTTING 0x0800
/* A call of n bytes that the stream's buffer serves alone makes no system call: writing, a fully buffered stream in
 * put mode with room for more than n bytes (glibc copies them and flushes nothing); reading, n > 0 bytes already in
 * the buffer.  Such a call is counted with no time, without reading the clock: its time is a copy, not I/O (the
 * flush or refill that does the I/O is timed as any call).  In the op trace such a call is an op of time 0. */
static inline int put_served(const FILE *fp, size_t n)
{
    return (fp->_flags & (IO_UNBUFFERED | IO_LINE_BUF | IO_CURRENTLY_PUTTING)) == IO_CURRENTLY_PUTTING &&
           fp->_IO_write_ptr && (size_t)(fp->_IO_write_end - fp->_IO_write_ptr) > n;
}
static inline int get_served(const FILE *fp, size_t n)
{
    return !(fp->_flags & IO_CURRENTLY_PUTTING) && n && fp->_IO_read_ptr &&
           (size_t)(fp->_IO_read_end - fp->_IO_read_ptr) >= n;
}
#define SERVED(FP, WR, N) ((WR) ? put_served(FP, N) : get_served(FP, N))
/* BUFFERED: the call's byte count known before it (a size_t expression), or 0 when it is not (always timed) */
#define STDIO_BODY_B(TYPE, FP, WR, CALL, BYTES_EXPR, BUFFERED)                                                 \
    struct ofd *o;                                                                                             \
    if (!shim.on || !(o = fp_ofd(FP))) return CALL;                                                            \
    if ((BUFFERED) != 0 && SERVED(FP, WR, BUFFERED)) {                                                         \
        TYPE r = CALL;                                                                                         \
        SAVE_ERRNO;                                                                                            \
        uint64_t t = UNLIKELY(shim.tab.trace) ? NOW() : 0;     /* an op's start */                             \
        rec_stdio(o, WR, (int64_t)(BYTES_EXPR), t, t, saved_errno_);                                           \
        RESTORE_ERRNO;                                                                                         \
        return r;                                                                                              \
    }                                                                                                          \
    uint64_t t0 = CALL_START();                                                                                \
    TYPE r = CALL;                                                                                             \
    uint64_t t1 = CALL_END();                                                                                  \
    SAVE_ERRNO;                                                                                                \
    rec_stdio(o, WR, (int64_t)(BYTES_EXPR), t0, t1, saved_errno_);                                             \
    RESTORE_ERRNO;                                                                                             \
    return r;
#define STDIO_BODY(TYPE, FP, WR, CALL, BYTES_EXPR) STDIO_BODY_B(TYPE, FP, WR, CALL, BYTES_EXPR, 0)

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
    uint64_t t0 = CALL_START();
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
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    if (fp) reg_open(TAB, fp->_fileno, AT_FDCWD, p, fl, created, t0, t1, FF_STDIO);
    else rec_open_failed(TAB, AT_FDCWD, p, t0, t1, saved_errno_);
    RESTORE_ERRNO;
    return fp;
}
DECL(FILE *, fopen, (const char *, const char *));
DECL(FILE *, fopen64, (const char *, const char *));
EXPORT FILE *fopen(const char *p, const char *m) { RESOLVE(fopen); if (!shim.on) return real_fopen(p, m); return fopen_common(real_fopen, p, m); }
EXPORT FILE *fopen64(const char *p, const char *m) { RESOLVE(fopen64); if (!shim.on) return real_fopen64(p, m); return fopen_common(real_fopen64, p, m); }
DECL(FILE *, fdopen, (int, const char *));
EXPORT FILE *fdopen(int fd, const char *m)
{
    RESOLVE(fdopen);
    FILE *fp = real_fdopen(fd, m);
    struct ofd *o;
    if (shim.on && fp && (o = fd_ofd(TAB, fd))) __atomic_fetch_or(&o->f->flags, FF_STDIO, __ATOMIC_RELAXED);
    return fp;
}
static FILE *freopen_common(FILE *(*fn)(const char *, const char *, FILE *), const char *p, const char *m, FILE *fp)
{
    int oldfd = fp ? fp->_fileno : -1;
    struct ofd *old = p ? fd_take(TAB, oldfd) : NULL;
    uint64_t t0 = CALL_START();
    FILE *r = fn(p, m, fp);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    if (old) rec_close(TAB, old, t0, t0, OF_STDIO);
    if (r && p) reg_open(TAB, r->_fileno, AT_FDCWD, p, mode_oflags(m), 0, t0, t1, FF_STDIO);
    RESTORE_ERRNO;
    return r;
}
DECL(FILE *, freopen, (const char *, const char *, FILE *));
DECL(FILE *, freopen64, (const char *, const char *, FILE *));
EXPORT FILE *freopen(const char *p, const char *m, FILE *fp) { RESOLVE(freopen); if (!shim.on) return real_freopen(p, m, fp); return freopen_common(real_freopen, p, m, fp); }
EXPORT FILE *freopen64(const char *p, const char *m, FILE *fp) { RESOLVE(freopen64); if (!shim.on) return real_freopen64(p, m, fp); return freopen_common(real_freopen64, p, m, fp); }
DECL(int, fclose, (FILE *));
EXPORT int fclose(FILE *fp)
{
    RESOLVE(fclose);
    struct ofd *o;
    if (!shim.on || !fp || !(o = fd_take(TAB, fp->_fileno))) return real_fclose(fp);
    uint64_t t0 = CALL_START();
    int r = real_fclose(fp);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    rec_close(TAB, o, t0, t1, OF_STDIO);
    RESTORE_ERRNO;
    return r;
}

DECL(size_t, fread, (void *, size_t, size_t, FILE *));
DECL(size_t, fread_unlocked, (void *, size_t, size_t, FILE *));
DECL(size_t, __fread_chk, (void *, size_t, size_t, size_t, FILE *));
DECL(size_t, __fread_unlocked_chk, (void *, size_t, size_t, size_t, FILE *));
DECL(size_t, fwrite, (const void *, size_t, size_t, FILE *));
DECL(size_t, fwrite_unlocked, (const void *, size_t, size_t, FILE *));
EXPORT size_t fread(void *b, size_t s, size_t n, FILE *fp) { RESOLVE(fread); STDIO_BODY_B(size_t, fp, 0, real_fread(b, s, n, fp), r * s, s * n) }
EXPORT size_t fread_unlocked(void *b, size_t s, size_t n, FILE *fp) { RESOLVE(fread_unlocked); STDIO_BODY_B(size_t, fp, 0, real_fread_unlocked(b, s, n, fp), r * s, s * n) }
EXPORT size_t __fread_chk(void *b, size_t bl, size_t s, size_t n, FILE *fp) { RESOLVE(__fread_chk); STDIO_BODY_B(size_t, fp, 0, real___fread_chk(b, bl, s, n, fp), r * s, s * n) }
EXPORT size_t __fread_unlocked_chk(void *b, size_t bl, size_t s, size_t n, FILE *fp) { RESOLVE(__fread_unlocked_chk); STDIO_BODY_B(size_t, fp, 0, real___fread_unlocked_chk(b, bl, s, n, fp), r * s, s * n) }
EXPORT size_t fwrite(const void *b, size_t s, size_t n, FILE *fp) { RESOLVE(fwrite); STDIO_BODY_B(size_t, fp, 1, real_fwrite(b, s, n, fp), r * s, s * n) }
EXPORT size_t fwrite_unlocked(const void *b, size_t s, size_t n, FILE *fp) { RESOLVE(fwrite_unlocked); STDIO_BODY_B(size_t, fp, 1, real_fwrite_unlocked(b, s, n, fp), r * s, s * n) }

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
    EXPORT int name(FILE *fp) { RESOLVE(name); STDIO_BODY_B(int, fp, 0, real_##name(fp), r != EOF ? 1 : 0, 1) }
#define CHAR_OUT(name)                                                                                         \
    DECL(int, name, (int, FILE *));                                                                            \
    EXPORT int name(int c, FILE *fp) { RESOLVE(name); STDIO_BODY_B(int, fp, 1, real_##name(c, fp), r != EOF ? 1 : 0, 1) }
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
    if (!shim.on || !(o = fp_ofd(fp))) return CALL;                                                            \
    int64_t p0 = fp_tell(fp);                                                                                  \
    uint64_t t0 = CALL_START();                                                                                \
    int r = CALL;                                                                                              \
    uint64_t t1 = CALL_END();                                                                                  \
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
static void rec_fseek(FILE *fp, struct ofd *o, int ok, int wh, uint64_t t0, uint64_t t1, int err)
{
    if (ok) {
        __atomic_store_n(&o->pos, fp_tell(fp), __ATOMIC_RELAXED);
        CADD(TAB, o->f, C_SEEKS, 1);
        if (wh == SEEK_END) CADD(TAB, o->f, C_SEEKS_END, 1);
    } else CADD(TAB, o->f, C_ERRORS, 1);
    TADD(TAB, o->f, C_T_META, t1 - t0);      /* a seek may flush the stream's buffer or ask for the size */
    if (UNLIKELY(shim.tab.trace)) trace(TAB, OP_SEEK, OF_STDIO, o->f, ok ? o->pos : -1, 0, t0, t1, ok ? 0 : err);
}
#define FSEEK_WRAP(name, OFFT)                                                                                 \
    DECL(int, name, (FILE *, OFFT, int));                                                                      \
    EXPORT int name(FILE *fp, OFFT off, int wh)                                                                \
    {                                                                                                          \
        RESOLVE(name);                                                                                         \
        struct ofd *o;                                                                                         \
        if (!shim.on || !(o = fp_ofd(fp))) return real_##name(fp, off, wh);                                    \
        uint64_t t0 = CALL_START();                                                                            \
        int r = real_##name(fp, off, wh);                                                                      \
        uint64_t t1 = CALL_END();                                                                              \
        SAVE_ERRNO;                                                                                            \
        rec_fseek(fp, o, r == 0, wh, t0, t1, saved_errno_);                                                    \
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
    if (!shim.on || !(o = fp_ofd(fp))) { real_rewind(fp); return; }
    uint64_t t0 = CALL_START();
    real_rewind(fp);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    rec_fseek(fp, o, 1, SEEK_SET, t0, t1, 0);
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

