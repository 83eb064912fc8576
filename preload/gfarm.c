/* mtcprof shim: libgfarm wrappers (only called when the program links libgfarm).  See shim.h. */
#include "shim.h"

/* ---------------------------------------------------------------- libgfarm (only called when the program links it) */
typedef int gfarm_error_t;
typedef struct gfs_file *GFS_File;
typedef int64_t gfarm_off_t;
typedef uint32_t gfarm_mode_t;
#define GFARM_ERR_NO_ERROR 0
#define GFARM_FILE_CREATE 0x200
#define GFARM_FILE_EXCLUSIVE 0x800
struct gfslot { GFS_File key; struct ofd *o; };
/* the handle table lives in the shim's memory reservation (shim.gf_slots, GF_SLOTS slots), not in .bss: 64 KiB of
 * .bss past the data page costs every process that loads the shim one more mapping (an mmap and a split of the
 * library's reserved range); the wrappers reach it only while tracing, after the reservation is made */
_Static_assert(sizeof(struct gfslot) == GF_SLOT_BYTES, "shim.h reserves GF_SLOT_BYTES per gfarm handle slot");
#define g_gf ((struct gfslot *)shim.gf_slots)
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
    ofd_put(TAB, o);
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
    struct frec *f = frec_get(TAB, buf, n, FF_GFARM | (created ? FF_CREATED : 0));
    if (!f) return;
    struct ofd *o = ofd_new(TAB, f, 0);
    if (o) gf_put(g, o);
    rec_open(TAB, f, created, t0, t1, OF_GFARM);
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
    if (!shim.on) return real_gfs_pio_open(url, fl, gp);
    uint64_t t0 = CALL_START();
    gfarm_error_t e = real_gfs_pio_open(url, fl, gp);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    if (e == GFARM_ERR_NO_ERROR && gp && *gp) gf_reg(*gp, url, 0, t0, t1);
    RESTORE_ERRNO;
    return e;
}
EXPORT gfarm_error_t gfs_pio_create(const char *url, int fl, gfarm_mode_t m, GFS_File *gp)
{
    RESOLVE(gfs_pio_create);
    if (!shim.on) return real_gfs_pio_create(url, fl, m, gp);
    uint64_t t0 = CALL_START();
    gfarm_error_t e = real_gfs_pio_create(url, fl, m, gp);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    if (e == GFARM_ERR_NO_ERROR && gp && *gp) gf_reg(*gp, url, 1, t0, t1);
    RESTORE_ERRNO;
    return e;
}
EXPORT gfarm_error_t gfs_pio_close(GFS_File g)
{
    RESOLVE(gfs_pio_close);
    struct ofd *o;
    if (!shim.on || !(o = gf_take(g))) return real_gfs_pio_close(g);
    uint64_t t0 = CALL_START();
    gfarm_error_t e = real_gfs_pio_close(g);
    uint64_t t1 = CALL_END();
    SAVE_ERRNO;
    rec_close(TAB, o, t0, t1, OF_GFARM);
    RESTORE_ERRNO;
    return e;
}
#define GF_IO(CALL, WR, OFF, FL)                                                                               \
    struct ofd *o;                                                                                             \
    if (!shim.on || !(o = gf_get(g))) return CALL;                                                             \
    uint64_t t0 = CALL_START();                                                                                \
    gfarm_error_t e = CALL;                                                                                    \
    uint64_t t1 = CALL_END();                                                                                  \
    SAVE_ERRNO;                                                                                                \
    int64_t nb = e == GFARM_ERR_NO_ERROR && np ? *np : -1;                                                     \
    rec_io(TAB, o->f, WR, nb < 0 ? -1 : (OFF), nb, t0, t1, FL, e);                                             \
    RESTORE_ERRNO;                                                                                             \
    return e;
EXPORT gfarm_error_t gfs_pio_read(GFS_File g, void *b, int n, int *np) { RESOLVE(gfs_pio_read); GF_IO(real_gfs_pio_read(g, b, n, np), 0, POS_ADVANCE(&o->pos, nb), OF_GFARM) }
EXPORT gfarm_error_t gfs_pio_write(GFS_File g, const void *b, int n, int *np) { RESOLVE(gfs_pio_write); GF_IO(real_gfs_pio_write(g, b, n, np), 1, POS_ADVANCE(&o->pos, nb), OF_GFARM) }
EXPORT gfarm_error_t gfs_pio_pread(GFS_File g, void *b, int n, gfarm_off_t off, int *np) { RESOLVE(gfs_pio_pread); GF_IO(real_gfs_pio_pread(g, b, n, off, np), 0, off, OF_GFARM | OF_POS) }
EXPORT gfarm_error_t gfs_pio_pwrite(GFS_File g, const void *b, int n, gfarm_off_t off, int *np) { RESOLVE(gfs_pio_pwrite); GF_IO(real_gfs_pio_pwrite(g, b, n, off, np), 1, off, OF_GFARM | OF_POS) }

