/* 8 threads x N ops: threads 0-3 write(16 B) to their own file, threads 4-7 pread(8 B) one shared fd and
 * fwrite(8 B) one shared FILE.  usage: threads DIR [N] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *dir;
static long N = 100000;
static int shared_fd;
static FILE *shared_fp;
static void *work(void *arg)
{
    long t = (long)arg;
    char buf[64] = {0}, p[4096];
    if (t < 4) {
        snprintf(p, sizeof p, "%s/own%ld", dir, t);
        int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0) abort();
        for (long i = 0; i < N; i++) if (write(fd, buf, 16) != 16) abort();
        close(fd);
    } else {
        for (long i = 0; i < N; i++) {
            if (pread(shared_fd, buf, 8, (i % 512) * 8) != 8) abort();
            if (i % 4 == 0 && fwrite(buf, 8, 1, shared_fp) != 1) abort();
        }
    }
    return NULL;
}
int main(int argc, char **argv)
{
    dir = argv[1];
    if (argc > 2) N = atol(argv[2]);
    char p[4096], z[4096] = {0};
    snprintf(p, sizeof p, "%s/shared", dir);
    shared_fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (shared_fd < 0 || write(shared_fd, z, 4096) != 4096) return 1;
    snprintf(p, sizeof p, "%s/sharedout", dir);
    shared_fp = fopen(p, "w");
    pthread_t th[8];
    for (long i = 0; i < 8; i++) pthread_create(&th[i], NULL, work, (void *)i);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    fclose(shared_fp);
    close(shared_fd);
    return 0;
}
