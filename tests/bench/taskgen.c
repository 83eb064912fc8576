/* Task generator for tests/bench/ingest_bench.py: runs N tasks, each its own process image under the shim.
 *   taskgen run N PARALLEL DIR OPS LIB LOGDIR   parent (untraced): fork + exec "taskgen task ..." per task with
 *                                                LD_PRELOAD, MTCPROF_DIR/TASK/STAGE set, PARALLEL at a time
 *   taskgen task I DIR OPS                       one task: reads its own input (DIR/in/I%1000) and the shared
 *                                                DIR/shared, appends 100 bytes to DIR/out/I%1000; with OPS > 0 it
 *                                                does OPS extra 16-byte preads (for the op-trace variant) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *m) { perror(m); exit(1); }

static int task(long i, const char *dir, long ops)
{
    char p[4096], buf[65536];
    snprintf(p, sizeof p, "%s/in/%ld", dir, i % 1000);
    int fd = open(p, O_RDONLY);
    if (fd < 0) die(p);
    while (read(fd, buf, sizeof buf) > 0) {}
    for (long k = 0; k < ops; k++)
        if (pread(fd, buf, 16, (k * 16) % 4096) < 0) die("pread");
    close(fd);
    snprintf(p, sizeof p, "%s/shared", dir);
    fd = open(p, O_RDONLY);
    if (fd < 0) die(p);
    while (read(fd, buf, sizeof buf) > 0) {}
    close(fd);
    snprintf(p, sizeof p, "%s/out/%ld", dir, i % 1000);
    fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) die(p);
    memset(buf, 'x', 100);
    if (write(fd, buf, 100) != 100) die("write");
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "task"))
        return task(atol(argv[2]), argv[3], atol(argv[4]));
    if (argc != 9 || strcmp(argv[1], "run")) {
        fprintf(stderr, "usage: taskgen run N PARALLEL DIR OPS LIB LOGDIR TRACE | taskgen task I DIR OPS X\n");
        return 2;
    }
    long n = atol(argv[2]), par = atol(argv[3]);
    const char *dir = argv[4], *ops = argv[5], *lib = argv[6], *logdir = argv[7], *trace = argv[8];
    long running = 0, failed = 0;
    for (long i = 0; i < n; i++) {
        if (running >= par) {
            int st;
            if (wait(&st) < 0) die("wait");
            running--;
            failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            char t[32], s[32], idx[32];
            snprintf(t, sizeof t, "t%ld", i);
            snprintf(s, sizeof s, "stage%ld", i % 3);
            snprintf(idx, sizeof idx, "%ld", i);
            setenv("LD_PRELOAD", lib, 1);
            setenv("MTCPROF_DIR", logdir, 1);
            setenv("MTCPROF_TASK", t, 1);
            setenv("MTCPROF_STAGE", s, 1);
            setenv("MTCPROF_RUN", "bench", 1);
            if (!strcmp(trace, "ops")) setenv("MTCPROF_TRACE", "ops", 1);
            execl("/proc/self/exe", "taskgen", "task", idx, dir, ops, "x", (char *)NULL);
            _exit(127);
        }
        running++;
    }
    while (running > 0) {
        int st;
        if (wait(&st) < 0) die("wait");
        running--;
        failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    if (failed) { fprintf(stderr, "taskgen: %ld tasks failed\n", failed); return 1; }
    return 0;
}
