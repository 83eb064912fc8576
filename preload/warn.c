/* mtcprof shim: raw writes, the shim's messages and small kernel files, by raw syscalls (async-signal-safe: the
 * signal handler and the log writer use them).  See shim.h. */
#define SHIM_PASSED_STATE
#include "shim.h"

long sys_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        long r = syscall(SYS_write, fd, p, n);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) { errno = ENOSPC; return -1; }
        p += r; n -= (size_t)r;
    }
    return 0;
}
/* The shim's messages go to fd 2 only while it is the stderr the process started with: a program that closed its
 * stderr may have a data file on fd 2 by now, and a warning must never land in it.  Identity = (dev, ino) at start. */
void warn_init(struct shim_warn *w)
{
    struct stat st;
    if (syscall(SYS_fstat, 2, &st) < 0) { w->err_state = 2; return; }
    w->err_dev = st.st_dev; w->err_ino = st.st_ino; w->err_state = 1;
}
void say(struct shim_warn *w, const char *msg, size_t n)
{
    if (w->err_state == 2) return;
    if (w->err_state == 1) {
        struct stat st;
        int saved = errno;
        int same = syscall(SYS_fstat, 2, &st) == 0 && st.st_dev == w->err_dev && st.st_ino == w->err_ino;
        errno = saved;
        if (!same) return;
    }
    sys_write_all(2, msg, n);
}
/* one line "mtcprof: warning: " + the parts (NULL-terminated) + "\n" */
void warn_line(struct shim_warn *w, const char *const *parts)
{
    char msg[2 * PATH_MAX + 256], *p = msg;
    s_cpy(p, "mtcprof: warning: ", 32); p += s_len(p);
    for (int i = 0; parts[i]; i++) { s_cpy(p, parts[i], sizeof msg - (size_t)(p - msg) - 2); p += s_len(p); }
    *p++ = '\n';
    say(w, msg, (size_t)(p - msg));
}
/* the warning that a process image runs (or ends) without a log: at most one per image */
void warn_once(struct shim_warn *w, const char *what, const char *path, int err)
{
    if (__atomic_exchange_n(&w->warned, 1, __ATOMIC_RELAXED)) return;
    char num[24];
    u64_str(num, (uint64_t)err);
    const char *parts[] = {what, " ", path ? path : "", ": errno ", num, " (running untraced)", NULL};
    warn_line(w, parts);
}

/* the first line of a small kernel file, without its newline, by raw calls (no recursion into the wrappers, safe
 * in a signal handler); 0 when unreadable (no /proc in a chroot).  *emfile (if given) is set when the open failed
 * for want of an fd. */
size_t read_line(const char *path, char *buf, size_t cap, int *emfile)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { if (errno == EMFILE && emfile) *emfile = 1; return 0; }
    long n = syscall(SYS_read, fd, buf, cap);
    syscall(SYS_close, fd);
    size_t l = 0;
    while (n > 0 && l < (size_t)n && buf[l] != '\n') l++;
    return n > 0 && l < (size_t)n ? l : 0;     /* a line cut by cap is not one */
}
/* The calling thread's run-queue wait in ns (the second field of /proc/thread-self/schedstat), ~0 when unreadable.
 * Raw syscalls, errno kept: it runs between a wrapped call's return and the wrapper's SAVE_ERRNO. */
uint64_t thread_wait_ns(void)
{
    int e = errno;
    char b[96];
    uint64_t w = ~0ull;
    size_t n = read_line("/proc/thread-self/schedstat", b, sizeof b, NULL), i = 0;
    while (i < n && b[i] != ' ') i++;                              /* past the on-CPU ns */
    if (++i < n && b[i] >= '0' && b[i] <= '9')
        for (w = 0; i < n && b[i] >= '0' && b[i] <= '9'; i++) w = w * 10 + (uint64_t)(b[i] - '0');
    errno = e;
    return w;
}
