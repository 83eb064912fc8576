/* A scripted mix of I/O calls with exactly known counts per file (see tests/test_preload_counts.py).
 * usage: scripted DIR   (DIR must exist and be empty) */
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

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "scripted: line %d: %s failed: %s\n", __LINE__, #x, strerror(errno)); exit(1); } } while (0)
static char P[4096];
static const char *path(const char *dir, const char *n) { snprintf(P, sizeof P, "%s/%s", dir, n); return P; }

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    const char *d = argv[1];
    char buf[4096], s[64];
    memset(buf, 'a', sizeof buf);

    /* A: fd-level writes */
    int fd = open(path(d, "A"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0);
    for (int i = 0; i < 3; i++) CHECK(write(fd, buf, 100) == 100);          /* 0..300 */
    CHECK(pwrite(fd, buf, 50, 1000) == 50);                                 /* discont 1, end 1050 */
    struct iovec iv[2] = {{buf, 10}, {buf, 20}};
    CHECK(writev(fd, iv, 2) == 30);                                         /* at 300: discont 2 */
    CHECK(fsync(fd) == 0);
    CHECK(close(fd) == 0);

    /* A: fd-level reads, dup'd fds */
    fd = open(path(d, "A"), O_RDONLY);
    CHECK(fd >= 0);
    CHECK(read(fd, buf, 64) == 64);                                         /* @0 */
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    struct iovec rv[2] = {{buf, 32}, {buf + 32, 32}};
    CHECK(readv(fd, rv, 2) == 64);                                          /* @0: discont 1 */
    CHECK(pread(fd, buf, 10, 1040) == 10);                                  /* discont 2 */
    int fd2 = dup(fd);
    CHECK(fd2 >= 0);
    CHECK(read(fd2, buf, 100) == 100);                                      /* @64: discont 3 */
    CHECK(dup2(fd, 50) == 50);
    CHECK(read(50, buf, 16) == 16);                                         /* @164 */
    void *m = mmap(NULL, 1050, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(m != MAP_FAILED);
    CHECK(munmap(m, 1050) == 0);
    CHECK(close(fd) == 0);
    CHECK(close(fd2) == 0);
    CHECK(close(50) == 0);

    /* B: stdio writes: 64 + 64 + 6 + 5 + 1 + 58 = 198 bytes; a's at 0..128 */
    FILE *fp = fopen(path(d, "B"), "w");
    CHECK(fp);
    CHECK(fwrite(buf, 16, 4, fp) == 4);
    CHECK(fwrite(buf, 16, 4, fp) == 4);
    CHECK(fprintf(fp, "%d\n", 12345) == 6);
    CHECK(fputs("hello", fp) >= 0);
    CHECK(fputc('x', fp) == 'x');
    CHECK(fwrite("\n0123456789012345678901234567890123456789012345678901234\n", 1, 58, fp) == 58);
    CHECK(fclose(fp) == 0);

    /* B: stdio reads */
    fp = fopen(path(d, "B"), "r");
    CHECK(fp);
    CHECK(fread(buf, 1, 100, fp) == 100);                                   /* @0 */
    CHECK(fseek(fp, 128, SEEK_SET) == 0);
    CHECK(fgets(s, sizeof s, fp) && !strcmp(s, "12345\n"));                 /* @128: discont 1, 6 bytes */
    CHECK(fgetc(fp) == 'h');                                                /* 1 byte */
    CHECK(fscanf(fp, "%63s", s) == 1 && !strcmp(s, "ellox"));               /* 5 bytes */
    CHECK(fclose(fp) == 0);

    /* metadata */
    struct stat st;
    CHECK(stat(path(d, "B"), &st) == 0 && st.st_size == 198);
    CHECK(lstat(path(d, "B"), &st) == 0);
    CHECK(truncate(path(d, "B"), 10) == 0);
    CHECK(stat(path(d, "NX"), &st) == -1 && errno == ENOENT);               /* NX: errors 1 */
    CHECK(open(path(d, "NX"), O_RDONLY) == -1 && errno == ENOENT);          /* NX: errors 2 */
    CHECK(mkdir(path(d, "D"), 0755) == 0);
    CHECK(rmdir(path(d, "D")) == 0);
    char a2[4096];
    snprintf(a2, sizeof a2, "%s/A2", d);
    CHECK(rename(path(d, "A"), a2) == 0);
    CHECK(unlink(a2) == 0);

    /* C: creat + ftruncate + fstat */
    fd = creat(path(d, "C"), 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "1234567", 7) == 7);
    CHECK(ftruncate(fd, 3) == 0);
    CHECK(fstat(fd, &st) == 0 && st.st_size == 3);
    CHECK(close(fd) == 0);

    /* E: openat relative to a directory fd, then reopen (no create) via a relative path after chdir */
    int dfd = open(d, O_RDONLY | O_DIRECTORY);
    CHECK(dfd >= 0);
    fd = openat(dfd, "E", O_CREAT | O_WRONLY, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "abcde", 5) == 5);
    CHECK(close(fd) == 0);
    CHECK(chdir(d) == 0);
    CHECK(mkdir("sub", 0755) == 0);
    fd = open("./sub/../E", O_CREAT | O_WRONLY | O_APPEND, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "fg", 2) == 2);                                         /* append at 5: continuous */
    CHECK(close(fd) == 0);
    CHECK(close(dfd) == 0);

    /* F: copy_file_range from C (3 bytes) */
    int in = open("C", O_RDONLY), out = open("F", O_CREAT | O_WRONLY | O_EXCL, 0600);
    CHECK(in >= 0 && out >= 0);
    CHECK(copy_file_range(in, NULL, out, NULL, 100, 0) == 3);
    CHECK(close(in) == 0 && close(out) == 0);
    return 0;
}
