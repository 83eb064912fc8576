/* Micro-benchmark loop: usage bench_io pread|fwrite FILE N ; prints ns per call */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
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
    } else {
        FILE *fp = fopen(argv[2], "w");
        if (!fp) return 1;
        t0 = now();
        for (long i = 0; i < n; i++) {
            if (fwrite(buf, 64, 1, fp) != 1) return 1;
            if ((i & 65535) == 65535) rewind(fp);
        }
        t1 = now();
        fclose(fp);
    }
    printf("%.2f\n", (t1 - t0) / n);
    return 0;
}
