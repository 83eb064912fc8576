/* Prints the return value and errno of a list of calls (many failing); traced and untraced output must match.
 * usage: errno_check DIR  (DIR empty) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static char P[4096];
static const char *path(const char *dir, const char *n) { snprintf(P, sizeof P, "%s/%s", dir, n); return P; }
#define T(expr) do { errno = 4242; long r_ = (long)(expr); printf("%-60s -> %ld errno %d\n", #expr, r_, errno); } while (0)
#define TP(expr) do { errno = 4242; void *r_ = (void *)(expr); printf("%-60s -> %s errno %d\n", #expr, r_ ? "ptr" : "NULL", errno); } while (0)

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    const char *d = argv[1];
    char buf[256];
    struct stat st;
    memset(buf, 'z', sizeof buf);
    T(open(path(d, "nx"), O_RDONLY));
    T(open(path(d, "nxdir/f"), O_CREAT | O_WRONLY, 0644));
    T(open(path(d, "f"), O_CREAT | O_WRONLY, 0640));                         /* fd 3 */
    T(write(3, buf, 10));
    T(open(path(d, "f"), O_CREAT | O_EXCL | O_WRONLY, 0640));
    T(open(path(d, "f"), O_CREAT | O_RDWR, 0600));                           /* fd 4, existing */
    T(read(4, buf, 5));
    T(read(4, buf, 100));
    T(read(4, buf, 100));
    T(read(99, buf, 1));
    T(write(99, buf, 1));
    T(pread(4, buf, 4, -1));
    T(pread(4, buf, 4, 2));
    T(pwrite(4, buf, 4, 100));
    T(lseek(4, 0, 77));
    T(lseek(4, 5, SEEK_END));
    T(lseek(99, 0, SEEK_SET));
    T(dup2(99, 20));
    T(dup(4));                                                               /* 5 */
    T(fcntl(4, F_DUPFD, 30));
    T(fcntl(99, F_DUPFD, 30));
    T(close(30));
    T(close(30));
    T(close(5));
    T(close(99));
    T(fstat(99, &st));
    T(fstat(4, &st) == 0 ? st.st_size : -7);
    T(fsync(99));
    T(ftruncate(99, 0));
    T(ftruncate(4, 50));
    T(mmap(NULL, 10, PROT_READ, MAP_PRIVATE, 99, 0) == MAP_FAILED);
    T(stat(path(d, "nx"), &st));
    T(lstat(path(d, "nx"), &st));
    T(fstatat(AT_FDCWD, path(d, "f"), &st, 0) == 0 ? st.st_size : -7);
    T(unlink(path(d, "nx")));
    T(rename(path(d, "nx"), path(d, "nx2")));
    T(mkdir(path(d, "dd"), 0700));
    T(mkdir(path(d, "dd"), 0700));
    T(open(path(d, "dd/g"), O_CREAT | O_WRONLY, 0600));                    /* 5 */
    T(rmdir(path(d, "dd")));
    T(openat(99, "x", O_RDONLY));
    T(truncate(path(d, "nx"), 0));
    T(symlink(path(d, "target"), path(d, "dangling")) == 0);
    T(open(path(d, "dangling"), O_CREAT | O_WRONLY, 0600));                 /* creates target: 6 */
    T(stat(path(d, "target"), &st) == 0);
    T(creat(path(d, "nxdir/c"), 0600));
    struct iovec iv = {buf, 8};
    T(writev(99, &iv, 1));
    T(readv(4, &iv, 1));
    TP(fopen(path(d, "nx"), "r"));
    TP(fopen(path(d, "nxdir/x"), "w"));
    FILE *fp = fopen(path(d, "s"), "w");
    TP(fp);
    T(fread(buf, 1, 10, fp));
    T(ferror(fp) != 0);
    T(fwrite(buf, 1, 10, fp));
    T(fprintf(fp, "%s %d\n", "abc", 42));
    T(fputs("xyz", fp));
    T(fputc('q', fp));
    T(fseek(fp, -100, SEEK_SET));
    T(ftell(fp));
    T(fclose(fp));
    fp = fopen(path(d, "s"), "r");
    T(fgetc(fp));
    T(fgets(buf, 5, fp) ? (long)strlen(buf) : -1L);
    int x = 0;
    T(fscanf(fp, "%d", &x));
    T(fread(buf, 1, 200, fp));
    T(feof(fp) != 0);
    T(fgetc(fp));
    T(fgets(buf, 5, fp) == NULL);
    T(fclose(fp));
    T(open(path(d, "."), O_WRONLY));
    T(close(3) + close(4) + close(5) + close(6));
    T(access(path(d, "f"), F_OK));
    return 0;
}
