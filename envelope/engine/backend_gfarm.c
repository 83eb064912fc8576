/* libgfarm backend: gfs_pio_* on Gfarm paths ("gfarm:///dir/f" or "/dir/f").
 * gfarm_initialize() runs in every worker process: a libgfarm connection must not be shared
 * across fork(), and its set-up (gfmd connect, auth) belongs before the start barrier. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"

#ifdef MTC_WITH_GFARM
#include <gfarm/gfarm.h>

static int gfail(gfarm_error_t e, const char *what, char *msg)
{
    /* codes past GFARM_ERR_NUMBER are libgfarm messages with no errno (and
     * gfarm_error_to_errno() logs a warning for them): report EIO and keep the text */
    int en = e > 0 && e < GFARM_ERR_NUMBER ? gfarm_error_to_errno(e) : EIO;
    snprintf(msg, MTC_MSGLEN, "%s: %s (gfarm error %d)", what, gfarm_error_string(e), e);
    return en > 0 ? en : EIO;
}

static int g_init(char *msg)
{
    gfarm_error_t e = gfarm_initialize(NULL, NULL);
    return e == GFARM_ERR_NO_ERROR ? 0 : gfail(e, "gfarm_initialize", msg);
}

static void g_fini(void) { gfarm_terminate(); }

static int g_create(const char *path, void **h, char *msg)
{
    GFS_File gf;
    gfarm_error_t e = gfs_pio_create(path, GFARM_FILE_WRONLY | GFARM_FILE_TRUNC, 0644, &gf);
    if (e != GFARM_ERR_NO_ERROR)
        return gfail(e, "gfs_pio_create", msg);
    *h = gf;
    return 0;
}

static int g_open_read(const char *path, void **h, char *msg)
{
    GFS_File gf;
    gfarm_error_t e = gfs_pio_open(path, GFARM_FILE_RDONLY, &gf);
    if (e != GFARM_ERR_NO_ERROR)
        return gfail(e, "gfs_pio_open", msg);
    *h = gf;
    return 0;
}

static int g_write(void *h, const char *buf, size_t n, size_t *done, char *msg)
{
    int np;
    gfarm_error_t e = gfs_pio_write(h, buf, (int)n, &np);   /* n <= block <= 1 GiB */
    if (e != GFARM_ERR_NO_ERROR)
        return gfail(e, "gfs_pio_write", msg);
    *done = (size_t)np;
    return 0;
}

static int g_read(void *h, char *buf, size_t n, size_t *got, char *msg)
{
    int np;
    gfarm_error_t e = gfs_pio_read(h, buf, (int)n, &np);
    if (e != GFARM_ERR_NO_ERROR)
        return gfail(e, "gfs_pio_read", msg);
    *got = (size_t)np;
    return 0;
}

static int g_sync(void *h, char *msg)
{
    gfarm_error_t e = gfs_pio_sync(h);
    return e == GFARM_ERR_NO_ERROR ? 0 : gfail(e, "gfs_pio_sync", msg);
}

static int g_close(void *h, char *msg)
{
    gfarm_error_t e = gfs_pio_close(h);
    return e == GFARM_ERR_NO_ERROR ? 0 : gfail(e, "gfs_pio_close", msg);
}

static int g_stat(const char *path, char *msg)
{
    struct gfs_stat st;
    gfarm_error_t e = gfs_stat(path, &st);
    if (e != GFARM_ERR_NO_ERROR)
        return gfail(e, "gfs_stat", msg);
    gfs_stat_free(&st);
    return 0;
}

static int g_fstat(void *h, char *msg)
{
    struct gfs_stat st;
    gfarm_error_t e = gfs_pio_stat(h, &st);
    if (e != GFARM_ERR_NO_ERROR)
        return gfail(e, "gfs_pio_stat", msg);
    gfs_stat_free(&st);
    return 0;
}

const mtc_backend mtc_backend_gfarm = {
    "gfarm", g_init, g_fini, g_create, g_open_read, g_write, g_read, g_sync, g_close, g_stat,
    g_fstat,
};

#else  /* built without libgfarm-dev: the backend exists and says why it cannot run */

static int g_none(char *msg)
{
    snprintf(msg, MTC_MSGLEN, "mtcengine was built without libgfarm (libgfarm-dev missing)");
    return ENOSYS;
}
static void g_fini(void) {}
static int g_path(const char *p, void **h, char *msg) { (void)p; (void)h; return g_none(msg); }
static int g_io(void *h, const char *b, size_t n, size_t *d, char *msg)
{ (void)h; (void)b; (void)n; (void)d; return g_none(msg); }
static int g_rd(void *h, char *b, size_t n, size_t *d, char *msg)
{ (void)h; (void)b; (void)n; (void)d; return g_none(msg); }
static int g_h(void *h, char *msg) { (void)h; return g_none(msg); }
static int g_st(const char *p, char *msg) { (void)p; return g_none(msg); }

const mtc_backend mtc_backend_gfarm = {
    "gfarm", g_none, g_fini, g_path, g_path, g_io, g_rd, g_h, g_h, g_st, g_h,
};
#endif
