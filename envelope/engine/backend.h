/* One I/O backend of mtcengine (like IOR's aiori.h): the engine times calls through this
 * table, so POSIX (a gfarm2fs mount) and libgfarm (gfs_pio_*) are measured by the same code.
 * Every call returns 0 or a positive errno-like code and then writes a short reason to msg. */
#ifndef MTC_BACKEND_H
#define MTC_BACKEND_H
#include <stddef.h>

#define MTC_MSGLEN 96

typedef struct mtc_backend {
    const char *name;
    int (*init)(char *msg);                      /* once per worker process, before the barrier */
    void (*fini)(void);
    int (*create)(const char *path, void **h, char *msg);      /* create or truncate, write-only */
    int (*open_read)(const char *path, void **h, char *msg);
    int (*write)(void *h, const char *buf, size_t n, size_t *done, char *msg);
    int (*read)(void *h, char *buf, size_t n, size_t *got, char *msg);  /* *got == 0: EOF */
    int (*sync)(void *h, char *msg);
    int (*close)(void *h, char *msg);
    int (*stat)(const char *path, char *msg);   /* the file's attributes, nothing else */
    int (*fstat)(void *h, char *msg);           /* an open file's attributes */
} mtc_backend;

extern const mtc_backend mtc_backend_posix;
extern const mtc_backend mtc_backend_gfarm;   /* stubs returning ENOSYS when built without libgfarm */

#endif
