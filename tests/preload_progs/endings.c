/* Ways a process ends.  usage: endings MODE FILE   MODE: return exit _exit _Exit sigterm kill segv abort */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int *volatile bad;
int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    const char *m = argv[1];
    int fd = open(argv[2], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "0123456789", 10) != 10) return 1;
    if (!strcmp(m, "return")) return 9;
    if (!strcmp(m, "exit")) exit(7);
    if (!strcmp(m, "_exit")) _exit(5);
    if (!strcmp(m, "_Exit")) _Exit(6);
    if (!strcmp(m, "sigterm")) raise(SIGTERM);
    if (!strcmp(m, "kill")) { write(1, "ready\n", 6); for (;;) pause(); }
    if (!strcmp(m, "segv")) { *bad = 1; }
    if (!strcmp(m, "abort")) abort();
    return 3;
}
