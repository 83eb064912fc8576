/* POSIX backend: open/read/write/close, e.g. on a gfarm2fs mount. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"

#define FD(h) ((int)(intptr_t)(h) - 1)   /* handle = fd + 1 so fd 0 is not NULL */

static int fail(int e, const char *what, char *msg)
{
    snprintf(msg, MTC_MSGLEN, "%s: %s", what, strerror(e));
    return e;
}

static int p_init(char *msg) { (void)msg; return 0; }
static void p_fini(void) {}

static int p_create(const char *path, void **h, char *msg)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return fail(errno, "open(O_CREAT)", msg);
    *h = (void *)(intptr_t)(fd + 1);
    return 0;
}

static int p_open_read(const char *path, void **h, char *msg)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return fail(errno, "open", msg);
    *h = (void *)(intptr_t)(fd + 1);
    return 0;
}

static int p_write(void *h, const char *buf, size_t n, size_t *done, char *msg)
{
    ssize_t r;
    do r = write(FD(h), buf, n); while (r < 0 && errno == EINTR);
    if (r < 0)
        return fail(errno, "write", msg);
    *done = (size_t)r;
    return 0;
}

static int p_read(void *h, char *buf, size_t n, size_t *got, char *msg)
{
    ssize_t r;
    do r = read(FD(h), buf, n); while (r < 0 && errno == EINTR);
    if (r < 0)
        return fail(errno, "read", msg);
    *got = (size_t)r;
    return 0;
}

static int p_sync(void *h, char *msg)
{
    return fsync(FD(h)) ? fail(errno, "fsync", msg) : 0;
}

static int p_close(void *h, char *msg)
{
    /* close() reports deferred write errors (NFS, FUSE): they count as a failed op */
    return close(FD(h)) ? fail(errno, "close", msg) : 0;
}

static int p_stat(const char *path, char *msg)
{
    struct stat st;
    return stat(path, &st) ? fail(errno, "stat", msg) : 0;
}

static int p_fstat(void *h, char *msg)
{
    struct stat st;
    return fstat(FD(h), &st) ? fail(errno, "fstat", msg) : 0;
}

const mtc_backend mtc_backend_posix = {
    "posix", p_init, p_fini, p_create, p_open_read, p_write, p_read, p_sync, p_close, p_stat,
    p_fstat,
};
