/* vfork semantics kept under the shim: the child shares the parent's memory, and what it does to its own fds
 * (close) does not change the parent's.  usage: vforkshare FILE   prints the value the child stored */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int g_shared;
int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "abc", 3) != 3) return 1;
    pid_t p = vfork();
    if (p == 0) { g_shared = 42; close(fd); _exit(0); }
    int st;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st)) return 1;
    if (write(fd, "defg", 4) != 4 || close(fd)) return 1;
    printf("%d\n", g_shared);
    return 0;
}
