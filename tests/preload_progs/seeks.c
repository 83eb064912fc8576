/* Seeks with exactly known counts (see tests/test_preload_counts.py): usage: seeks DIR (DIR exists, empty).
 * S: fd-level, 4 seeks of which 2 to the end (SEEK_END, SEEK_DATA); T: a stream, 3 seeks of which 1 to the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "seeks: line %d: %s failed: %s\n", __LINE__, #x, strerror(errno)); exit(1); } } while (0)
static char P[4096];
static const char *path(const char *dir, const char *n) { snprintf(P, sizeof P, "%s/%s", dir, n); return P; }

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    int fd = open(path(argv[1], "S"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "0123456789", 10) == 10);
    CHECK(lseek(fd, 0, SEEK_END) == 10);
    CHECK(lseek(fd, 0, SEEK_DATA) == 0);
    CHECK(lseek(fd, 2, SEEK_SET) == 2);
    CHECK(lseek(fd, 1, SEEK_CUR) == 3);
    CHECK(lseek(fd, 0, SEEK_HOLE + 100) == -1 && errno == EINVAL);     /* failed: an error, not a seek */
    CHECK(close(fd) == 0);
    FILE *fp = fopen(path(argv[1], "T"), "w+");
    CHECK(fp);
    CHECK(fputs("abcdef", fp) >= 0);
    CHECK(fseek(fp, 0, SEEK_END) == 0);
    CHECK(fseeko(fp, 1, SEEK_SET) == 0);
    rewind(fp);
    CHECK(fclose(fp) == 0);
    return 0;
}
