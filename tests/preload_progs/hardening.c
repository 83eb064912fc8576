/* Situations the shim must survive without losing or misplacing what it records (tests/test_preload_hardening.py).
 * usage: hardening longcwd DIR | stderr DATAFILE LOGDIR | setuid DIR | setsame DIR | chroot JAIL | writes DIR */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "hardening: line %d: %s failed: %s\n", __LINE__, #x, strerror(errno)); exit(1); } } while (0)

static void put(const char *path, int n)
{
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "0123456789abcdefghij", (size_t)n) == n);
    CHECK(close(fd) == 0);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 3);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "longcwd")) {          /* a working directory of > PATH_MAX bytes, then a relative create */
        char seg[201];
        memset(seg, 'd', 200);
        seg[200] = 0;
        CHECK(chdir(argv[2]) == 0);
        for (int i = 0; i < 25; i++) { CHECK(mkdir(seg, 0755) == 0); CHECK(chdir(seg) == 0); }
        char buf[64];
        CHECK(getcwd(buf, sizeof buf) == NULL && (errno == ENAMETOOLONG || errno == ERANGE));
        put("data", 10);
        return 0;
    }
    if (!strcmp(cmd, "stderr")) {           /* fd 2 becomes a data file; the log folder goes away */
        CHECK(argc == 4);
        CHECK(close(2) == 0);
        int fd = open(argv[2], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd != 2) return 3;
        if (write(fd, "DATA\n", 5) != 5) return 4;
        if (rmdir(argv[3]) != 0) return 5;
        return 0;
    }
    if (!strcmp(cmd, "setuid")) {           /* 10 bytes as root, 20 more after becoming nobody */
        char p[4096];
        snprintf(p, sizeof p, "%s/f", argv[2]);
        int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        CHECK(fd >= 0);
        CHECK(write(fd, "0123456789", 10) == 10);
        CHECK(setgid(65534) == 0 && setuid(65534) == 0);
        CHECK(write(fd, "0123456789abcdefghij", 20) == 20);
        CHECK(close(fd) == 0);
        return 0;
    }
    if (!strcmp(cmd, "writes")) {           /* 1 open, 300 one-byte writes, 1 close: 302 ops */
        char p[4096];
        snprintf(p, sizeof p, "%s/w", argv[2]);
        int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        CHECK(fd >= 0);
        for (int i = 0; i < 300; i++) CHECK(write(fd, "x", 1) == 1);
        CHECK(close(fd) == 0);
        return 0;
    }
    if (!strcmp(cmd, "setsame")) {          /* set the ids the process already has */
        CHECK(setgid(getgid()) == 0 && setuid(getuid()) == 0 && setresuid(geteuid(), (uid_t)-1, (uid_t)-1) == 0);
        char p[4096];
        snprintf(p, sizeof p, "%s/f", argv[2]);
        put(p, 4);
        return 0;
    }
    if (!strcmp(cmd, "chroot")) {           /* 3 bytes before, 7 + 5 inside the new root */
        char p[4096];
        snprintf(p, sizeof p, "%s/pre", argv[2]);
        put(p, 3);
        CHECK(chroot(argv[2]) == 0);
        CHECK(chdir("/") == 0);
        put("x", 7);
        put("/./y", 5);
        return 0;
    }
    return 2;
}
