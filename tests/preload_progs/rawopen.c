/* Opens FILE with a raw syscall (no wrapper sees it), then reads it with read() and closes it: the shim adopts the
 * fd at its first use.  usage: rawopen FILE ; prints the bytes read */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, argv[1], O_RDONLY);
    if (fd < 0) return 1;
    char buf[100];
    long total = 0, n;
    while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
    if (close(fd)) return 1;
    printf("%ld\n", total);
    return 0;
}
