/* Micro-benchmark loop: usage bench_io pread|fwrite|openclose FILE N ; prints ns per call.
 * The time is the process's CPU time (user + system) over the timed loop: on a shared machine it leaves out the
 * time the process waited for a CPU, which a wall clock would add to whichever arm was unlucky. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
int main(int argc, char **argv)
{
    if (argc != 4) return 2;
    long n = atol(argv[3]);
    char buf[64];
    memset(buf, 'b', sizeof buf);
    double t0, t1;
    if (!strcmp(argv[1], "pread")) {
        int fd = open(argv[2], O_RDONLY);
        if (fd < 0) return 1;
        for (long i = 0; i < 1000; i++) if (pread(fd, buf, 1, i & 1023) != 1) return 1;
        t0 = now();
        for (long i = 0; i < n; i++) if (pread(fd, buf, 1, i & 1023) != 1) return 1;
        t1 = now();
        close(fd);
    } else if (!strcmp(argv[1], "fwrite")) {
        FILE *fp = fopen(argv[2], "w");
        if (!fp) return 1;
        t0 = now();
        for (long i = 0; i < n; i++) {
            if (fwrite(buf, 64, 1, fp) != 1) return 1;
            if ((i & 65535) == 65535) rewind(fp);
        }
        t1 = now();
        fclose(fp);
    } else if (!strcmp(argv[1], "openclose")) {
        for (long i = 0; i < 100; i++) { int fd = open(argv[2], O_RDONLY); if (fd < 0 || close(fd)) return 1; }
        t0 = now();
        for (long i = 0; i < n; i++) { int fd = open(argv[2], O_RDONLY); if (fd < 0 || close(fd)) return 1; }
        t1 = now();
    } else return 2;
    printf("%.2f\n", (t1 - t0) / n);
    return 0;
}
