/* A process tree: fork (no exec), fork+exec, vfork+exec, posix_spawn, and a shell pipeline via system().
 * usage: proctree DIR            (root)
 *        proctree leaf DIR NAME  (writes DIR/NAME, 100 bytes) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static void put(const char *dir, const char *name, int n)
{
    char p[4096], buf[256];
    memset(buf, 'p', sizeof buf);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd)) { perror(p); exit(1); }
}
static void wait_ok(pid_t pid, int expect)
{
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != expect) { fprintf(stderr, "child %d bad status %d\n", pid, st); exit(1); }
}
int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "leaf")) { put(argv[2], argv[3], 100); return 0; }
    const char *d = argv[1];
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0) return 1;
    self[n] = 0;
    put(d, "root_before", 10);
    pid_t p = fork();
    if (p == 0) { put(d, "forked", 20); exit(3); }
    wait_ok(p, 3);
    p = fork();
    if (p == 0) { execl(self, self, "leaf", d, "fork_exec", (char *)NULL); _exit(127); }
    wait_ok(p, 0);
    p = vfork();
    if (p == 0) { execl(self, self, "leaf", d, "vfork_exec", (char *)NULL); _exit(127); }
    wait_ok(p, 0);
    char *av[] = {self, "leaf", (char *)d, "spawned", NULL};
    if (posix_spawn(&p, self, NULL, NULL, av, environ)) return 1;
    wait_ok(p, 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cat %s/root_before %s/forked | sha256sum > %s/pipe_out", d, d, d);
    if (system(cmd) != 0) return 1;
    put(d, "root_after", 30);
    return 0;
}
