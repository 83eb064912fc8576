/* mtcprof shim: state, warnings, real-symbol lookup, start, fork, signals.  See shim.h and FORMAT.md. */
#include "shim.h"

/* ---------------------------------------------------------------- state */
int g_on;                      /* 1: tracing; 0: pure pass-through */
pid_t g_pid;
uint32_t g_origin;
uint64_t g_parent_start_ns;
char g_uptime0[48];
size_t g_uptime0_len;
char g_sched0[80];
size_t g_sched0_len;
/* The strings of a traced process live at the start of its memory reservation, packed one after the other (the
 * working directory, which changes, last, with room for PATH_MAX): a process touches one or two pages for all of
 * them instead of one page per PATH_MAX-sized array. */
char *g_dir, *g_host, *g_run, *g_task, *g_stage, *g_cwd, *g_cwd0;
size_t g_cwd_len;
char *g_incl_raw, *g_excl_raw, *g_mounts_raw;
int g_mounts_given;           /* MTCPROF_GFARM_MOUNTS set: the launcher listed the gfarm2fs mounts */
const char *g_incl[MAX_PREFIX], *g_excl[MAX_PREFIX + 4];
size_t g_incl_len[MAX_PREFIX], g_excl_len[MAX_PREFIX + 4];
int g_nincl, g_nexcl;
char *g_argvbuf;              /* argv as it was at start (programs may rewrite theirs), at most ARGV_MAX_BYTES */
size_t g_argvlen;
int g_argvtrunc;

struct ofd **g_fdtab;          /* FD_MAX entries, in the reservation (tracing only) */
struct frec *g_frecs;          /* FREC_MAX records (lazily backed mmap) */
uint32_t g_nfrec, g_files_dropped;
struct fcold *g_cold;          /* 2 * FREC_MAX cold parts, handed out in order of use (lazily backed mmap) */
uint32_t g_ncold;
uint32_t *g_bkt;               /* NBUCKETS chain heads: frec index + 1 */
uint64_t *g_bkt_used;          /* NBUCKETS bits: the chain may be non-empty (tables.c: frec_get) */
char *g_paths;
uint64_t g_paths_used;
struct ofd *g_ofds;            /* ofd pool, index 0 unused */
uint64_t g_ofd_free;           /* Treiber stack head: tag << 32 | index */
uint32_t g_ofd_bump = 1;

int g_trace;
int g_cpu_wait;
uint64_t g_cw_ns, g_cw_calls;
TLS uint64_t t_cw0, t_cw;
struct mtc_op_rec *g_ops;
uint64_t g_nops, g_ops_max;
uint64_t g_munmaps;

/* clock: ticks (TSC or monotonic ns) -> realtime ns */
uint64_t g_tick0, g_mono0, g_real0;

/* exit bookkeeping */
int g_exit_status = -1;
uint32_t g_ended_by;
int g_signal;
int g_flushing;                /* 1 once a log was written (or is being written) */
int g_warned;

TLS int t_tid;
static TLS int t_resolving;

/* ---------------------------------------------------------------- warnings (async-signal-safe) */
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
static int g_err_state;               /* 0: not taken yet (write), 1: taken, 2: fd 2 was closed at start (never write) */
static uint64_t g_err_dev, g_err_ino;
static void err_identity(void)
{
    struct stat st;
    if (syscall(SYS_fstat, 2, &st) < 0) { g_err_state = 2; return; }
    g_err_dev = st.st_dev; g_err_ino = st.st_ino; g_err_state = 1;
}
void say(const char *msg, size_t n)
{
    if (g_err_state == 2) return;
    if (g_err_state == 1) {
        struct stat st;
        int saved = errno;
        int same = syscall(SYS_fstat, 2, &st) == 0 && st.st_dev == g_err_dev && st.st_ino == g_err_ino;
        errno = saved;
        if (!same) return;
    }
    sys_write_all(2, msg, n);
}
/* one line "mtcprof: warning: " + the parts (NULL-terminated) + "\n" */
void warn_line(const char *const *parts)
{
    char msg[2 * PATH_MAX + 256], *p = msg;
    s_cpy(p, "mtcprof: warning: ", 32); p += s_len(p);
    for (int i = 0; parts[i]; i++) { s_cpy(p, parts[i], sizeof msg - (size_t)(p - msg) - 2); p += s_len(p); }
    *p++ = '\n';
    say(msg, (size_t)(p - msg));
}
/* the warning that a process image runs (or ends) without a log: at most one per image */
void warn_once(const char *what, const char *path, int err)
{
    if (__atomic_exchange_n(&g_warned, 1, __ATOMIC_RELAXED)) return;
    char num[24];
    u64_str(num, (uint64_t)err);
    const char *parts[] = {what, " ", path ? path : "", ": errno ", num, " (running untraced)", NULL};
    warn_line(parts);
}

/* ---------------------------------------------------------------- real symbols */
static void *fallback_sym(const char *name);
void *resolve(const char *name, const char *version)
{
    void *p;
    if (t_resolving) {               /* dlsym re-entered one of our wrappers */
        p = fallback_sym(name);
        if (p) return p;
        static const char m[] = "mtcprof: recursive symbol resolution, aborting\n";
        say(m, sizeof m - 1);
        abort();
    }
    t_resolving = 1;
    p = version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
    t_resolving = 0;
    return p;
}
void missing_symbol(const char *name)
{
    char msg[256];
    s_cpy(msg, "mtcprof: cannot resolve real symbol ", sizeof msg);
    s_cpy(msg + s_len(msg), name, sizeof msg - s_len(msg) - 2);
    size_t n = s_len(msg);
    msg[n++] = '\n';
    say(msg, n);
    abort();
}

/* fallbacks used only when dlsym itself re-enters a wrapper: raw syscalls */
static int fb_open(const char *p, int f, ...) { va_list a; va_start(a, f); int m = va_arg(a, int); va_end(a); return (int)syscall(SYS_openat, AT_FDCWD, p, f, m); }
static ssize_t fb_read(int fd, void *b, size_t n) { return syscall(SYS_read, fd, b, n); }
static ssize_t fb_write(int fd, const void *b, size_t n) { return syscall(SYS_write, fd, b, n); }
static int fb_close(int fd) { return (int)syscall(SYS_close, fd); }
static int fb_fstat(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }
static void *fallback_sym(const char *name)
{
    if (!strcmp(name, "open") || !strcmp(name, "open64")) return (void *)fb_open;
    if (!strcmp(name, "read")) return (void *)fb_read;
    if (!strcmp(name, "write")) return (void *)fb_write;
    if (!strcmp(name, "close")) return (void *)fb_close;
    if (!strcmp(name, "fstat") || !strcmp(name, "fstat64")) return (void *)fb_fstat;
    return NULL;
}

/* ---------------------------------------------------------------- init, fork, signals */
static void *arena(size_t bytes)
{
    long r = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return (r == -1 || (unsigned long)r > -4096UL) ? NULL : (void *)r;
}
static void parse_prefixes(const char *raw, const char **arr, size_t *lens, int *n, int max, char **store,
                           char *store_end)
{
    const char *s = raw;
    while (s && *s && *n < max) {
        const char *e = strchr(s, ':');
        size_t l = e ? (size_t)(e - s) : s_len(s);
        if (l && *store + l + 1 < store_end && s[0] == '/') {
            memcpy(*store, s, l);
            (*store)[l] = 0;
            while (l > 1 && (*store)[l - 1] == '/') (*store)[--l] = 0;
            arr[*n] = *store; lens[*n] = l; (*n)++;
            *store += l + 1;
        }
        s = e ? e + 1 : NULL;
    }
}
/* the first line of a small kernel file, without its newline, by raw calls (no recursion into the wrappers, safe
 * in a signal handler); 0 when unreadable (no /proc in a chroot) */
int g_fd_short;
size_t read_line(const char *path, char *buf, size_t cap)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { if (errno == EMFILE) g_fd_short = 1; return 0; }
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
    size_t n = read_line("/proc/thread-self/schedstat", b, sizeof b), i = 0;
    while (i < n && b[i] != ' ') i++;                              /* past the on-CPU ns */
    if (++i < n && b[i] >= '0' && b[i] <= '9')
        for (w = 0; i < n && b[i] >= '0' && b[i] <= '9'; i++) w = w * 10 + (uint64_t)(b[i] - '0');
    errno = e;
    return w;
}
static void time_base(void)
{
    g_uptime0_len = read_line("/proc/uptime", g_uptime0, sizeof g_uptime0);
    g_sched0_len = read_line("/proc/self/schedstat", g_sched0, sizeof g_sched0);
    g_tick0 = NOW();
    g_mono0 = clock_ns(CLOCK_MONOTONIC);
    g_real0 = clock_ns(CLOCK_REALTIME);
#ifndef HAVE_TSC
    g_tick0 = g_mono0;
#endif
}
static const int g_fatal[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGPIPE,
                              SIGXCPU, SIGXFSZ, SIGUSR1, SIGUSR2, SIGALRM};
static void on_fatal(int sig)
{
    int saved = errno;
    g_signal = sig;
    if (g_on) write_log(E_SIGNAL);     /* off in a vfork child, whose memory is its parent's */
    /* re-raise with the original (default) disposition */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, sig);
    syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &ss, NULL, 8);
    syscall(SYS_tgkill, (int)syscall(SYS_getpid), (int)syscall(SYS_gettid), sig);
    errno = saved;   /* synchronous faults re-fault on return with SIG_DFL */
}
static void install_signals(void)
{
    for (size_t i = 0; i < sizeof g_fatal / sizeof g_fatal[0]; i++) {
        /* one call per signal: install, and put the old disposition back if it was not the default */
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(g_fatal[i], &sa, &old)) continue;
        if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) sigaction(g_fatal[i], &old, NULL);
    }
}
static void atfork_child(void)
{
    if (!g_on) return;
    t_tid = 0;
    g_parent_start_ns = g_real0;
    g_origin = 1;
    g_pid = (pid_t)syscall(SYS_getpid);
    g_cw_ns = g_cw_calls = 0;
    time_base();
    /* fresh record set: keep paths and the fd table (fds are inherited), zero every counter */
    uint32_t n = g_nfrec > FREC_MAX ? FREC_MAX : g_nfrec;
    for (uint32_t i = 0; i < n; i++) {
        struct frec *f = &g_frecs[i];
        memset(f->w, 0, sizeof f->w);
        memset(f->c, 0, sizeof f->c);
        memset(f->hr, 0, sizeof f->hr);
        memset(f->hw, 0, sizeof f->hw);
        f->flags = (uint16_t)((f->flags | FF_INHERITED) & ~FF_CREATED);
        f->cold = 0;
    }
    /* cold parts: drop the pages (they read back as zeros) rather than touching every one */
    syscall(SYS_madvise, g_cold, sizeof(struct fcold) * 2 * FREC_MAX, MADV_DONTNEED);
    g_ncold = 0;
    g_nops = 0; g_munmaps = 0; g_files_dropped = 0;
    g_exit_status = -1; g_ended_by = 0; g_signal = 0;
    g_flushing = 0;
    /* the parent's log file opened in place is the parent's: this child writes its own (g_dirfd stays) */
    if (g_prefd >= 0) { syscall(SYS_close, g_prefd); g_prefd = -1; }
}
/* The log folder must be the user's: owned by the (real or effective) user or root, not writable by others unless
 * it is sticky (like /tmp: others may add files but not remove or replace this user's; a shared folder for tasks
 * that run as several users, as the Pwrake plugin and the testbed make), and if it is a symlink, the link too is the
 * user's or root's.  Else another user could have made it (0777, or a link to a folder of theirs) to read, remove or
 * replace the logs.  Returns NULL if the folder is fine (g_dir_dev/ino set), else the problem, with *err the errno
 * to name. */
static int uid_trusted(uint32_t u) { return u == 0 || u == (uint32_t)syscall(SYS_geteuid) || u == (uint32_t)syscall(SYS_getuid); }
static const char *log_dir_problem(const char *d, int *err)
{
    struct stat st;
    if (syscall(SYS_lstat, d, &st) < 0) { *err = errno; return "log folder missing"; }
    if (S_ISLNK(st.st_mode) && !uid_trusted(st.st_uid)) { *err = EPERM; return "log folder is a symlink owned by another user:"; }
    if (syscall(SYS_stat, d, &st) < 0) { *err = errno; return "log folder missing"; }
    if (!S_ISDIR(st.st_mode)) { *err = ENOTDIR; return "log folder is not a directory"; }
    if (!uid_trusted(st.st_uid)) { *err = EPERM; return "log folder owned by another user:"; }
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
        *err = EPERM; return "log folder writable by others:";
    }
    if (syscall(SYS_faccessat, AT_FDCWD, d, W_OK | X_OK, 0) < 0) { *err = errno; return "log folder not writable"; }
    g_dir_dev = st.st_dev; g_dir_ino = st.st_ino;
    return NULL;
}
/* MTCPROF_TRACE_MAX: digits only; above the cap, the cap (more would not fit the address space, and the byte count
 * would overflow); anything else, the default.  One warning either way. */
#define TRACE_MAX_DEFAULT (1ull << 22)
#define TRACE_MAX_CAP (1ull << 30)          /* 48 GiB of lazily touched memory */
static uint64_t trace_max(const char *m)
{
    if (!m || !*m) return TRACE_MAX_DEFAULT;
    uint64_t v = 0;
    int big = 0;
    const char *c = m;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (v > TRACE_MAX_CAP) big = 1;
        else v = v * 10 + (uint64_t)(*c - '0');
    }
    char num[24];
    if (*c) {
        u64_str(num, TRACE_MAX_DEFAULT);
        const char *parts[] = {"MTCPROF_TRACE_MAX=", m, " is not a number of ops; using ", num, NULL};
        warn_line(parts);
        return TRACE_MAX_DEFAULT;
    }
    if (big || v > TRACE_MAX_CAP) {
        u64_str(num, TRACE_MAX_CAP);
        const char *parts[] = {"MTCPROF_TRACE_MAX=", m, " is more than the most the shim keeps; using ", num, NULL};
        warn_line(parts);
        return TRACE_MAX_CAP;
    }
    return v;
}
static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}
/* the next string of the packed area: s cut to cap - 1 bytes */
static char *g_sbump;
static char *str_keep(const char *s, size_t cap)
{
    char *d = g_sbump;
    s_cpy(d, s, cap);
    g_sbump += s_len(d) + 1;
    return d;
}
#define PREFIX_STORE 8192
/* the packed strings (argv, 8 strings of at most PATH_MAX, the prefixes, the working directory) */
#define STRINGS_BYTES (ARGV_MAX_BYTES + 8 * PATH_MAX + PREFIX_STORE + PATH_MAX + 64)

__attribute__((constructor(101))) static void mtc_init(int argc, char **argv, char **envp)
{
    (void)envp;
    const char *dir = getenv("MTCPROF_DIR");
    if (!dir || !*dir) return;                  /* not configured: pure pass-through */
    int saved = errno;
    /* one reservation for everything (pages are backed only when touched): the strings, root, exe and log buffer,
     * then the tables */
    const size_t parts[] = {STRINGS_BYTES + 2 * PATH_MAX + LOG_BUF_BYTES, sizeof(struct frec) * FREC_MAX,
                            sizeof(struct fcold) * 2 * FREC_MAX, sizeof(uint32_t) * NBUCKETS, PATHS_BYTES,
                            sizeof(struct ofd) * OFD_MAX, NBUCKETS / 8, sizeof(struct ofd *) * FD_MAX};
    size_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) total += (parts[i] + 4095) & ~(size_t)4095;
    char *mem0 = arena(total), *mem = mem0;
    if (!mem) { warn_once("cannot reserve memory", "", ENOMEM); errno = saved; return; }
    g_sbump = mem;
    g_root = mem + STRINGS_BYTES;
    g_exe = g_root + PATH_MAX;
    g_wbuf = g_exe + PATH_MAX;
    mem += (parts[0] + 4095) & ~(size_t)4095;
    g_frecs = (struct frec *)mem; mem += (parts[1] + 4095) & ~(size_t)4095;
    g_cold = (struct fcold *)mem; mem += (parts[2] + 4095) & ~(size_t)4095;
    g_bkt = (uint32_t *)mem; mem += (parts[3] + 4095) & ~(size_t)4095;
    g_paths = mem; mem += (parts[4] + 4095) & ~(size_t)4095;
    g_ofds = (struct ofd *)mem; mem += (parts[5] + 4095) & ~(size_t)4095;
    g_bkt_used = (uint64_t *)mem; mem += (parts[6] + 4095) & ~(size_t)4095;
    g_fdtab = (struct ofd **)mem;

    g_argvbuf = g_sbump;
    snapshot_argv(argc, argv);
    g_sbump += g_argvlen;
    err_identity();
    g_pid = (pid_t)syscall(SYS_getpid);
    g_cwd = g_sbump;                            /* for now: the start directory, kept as g_cwd0 */
    cwd_update();
    g_cwd0 = g_cwd;
    g_sbump += g_cwd_len + 1;
    g_dir = g_sbump;
    if (dir[0] == '/') s_cpy(g_dir, dir, PATH_MAX);
    else if (g_cwd[0] != '/') { warn_once("log folder relative to an unnamed working directory:", dir, ENAMETOOLONG); goto untraced; }
    else { s_cpy(g_dir, g_cwd, PATH_MAX); size_t l = s_len(g_dir); g_dir[l] = '/'; s_cpy(g_dir + l + 1, dir, PATH_MAX - l - 1); }
    g_sbump += norm_inplace(g_dir) + 1;
    int derr = 0;
    const char *problem = log_dir_problem(g_dir, &derr);
    if (problem) { warn_once(problem, g_dir, derr); goto untraced; }

    const char *h = getenv("MTCPROF_HOST");
    if (h && *h) g_host = str_keep(h, 256);
    else { struct utsname u; g_host = str_keep(uname(&u) == 0 ? u.nodename : "localhost", 256); }
    for (char *c = g_host; *c; c++) if (*c == '/') *c = '_';
    g_run = str_keep(env_or("MTCPROF_RUN", ""), 256);
    g_task = str_keep(env_or("MTCPROF_TASK", ""), 256);
    g_stage = str_keep(env_or("MTCPROF_STAGE", ""), 256);
    g_incl_raw = str_keep(env_or("MTCPROF_INCLUDE", ""), 4096);
    g_excl_raw = str_keep(env_or("MTCPROF_EXCLUDE", ""), 4096);
    const char *gm = getenv("MTCPROF_GFARM_MOUNTS");
    g_mounts_given = gm != NULL;
    g_mounts_raw = str_keep(gm ? gm : "", 4096);
    char *store = g_sbump, *store_end = g_sbump + PREFIX_STORE;
    static const char *dflt[] = {"/proc", "/sys", "/dev"};
    for (int i = 0; i < 3; i++) { g_excl[g_nexcl] = dflt[i]; g_excl_len[g_nexcl++] = s_len(dflt[i]); }
    g_excl[g_nexcl] = g_dir; g_excl_len[g_nexcl++] = s_len(g_dir);
    parse_prefixes(g_excl_raw, g_excl, g_excl_len, &g_nexcl, MAX_PREFIX + 4, &store, store_end);
    parse_prefixes(g_incl_raw, g_incl, g_incl_len, &g_nincl, MAX_PREFIX, &store, store_end);
    g_sbump = store;
    g_cwd = g_sbump;                            /* the working directory from now on: room for PATH_MAX */
    memcpy(g_cwd, g_cwd0, g_cwd_len + 1);

    const char *tr = env_or("MTCPROF_TRACE", "");
    if (!strcmp(tr, "ops")) {
        g_ops_max = trace_max(getenv("MTCPROF_TRACE_MAX"));
        g_ops = g_ops_max ? arena(g_ops_max * sizeof(struct mtc_op_rec)) : NULL;
        if (g_ops_max && !g_ops) {
            char num[24];
            u64_str(num, g_ops_max);
            const char *parts[] = {"cannot reserve memory for ", num, " traced ops: op trace off", NULL};
            warn_line(parts);
            g_ops_max = 0;
        }
        g_trace = g_ops != NULL;
    }
    g_cpu_wait = !strcmp(env_or("MTCPROF_CPU_WAIT", ""), "1");
    time_base();
    install_signals();
    pthread_atfork(NULL, NULL, atfork_child);
    __atomic_store_n(&g_on, 1, __ATOMIC_RELEASE);
    errno = saved;
    return;
untraced:
    syscall(SYS_munmap, mem0, total);
    errno = saved;
}
__attribute__((destructor(101))) static void mtc_fini(void)
{
    if (g_on) write_log(E_DESTRUCTOR);
}

/* main()'s return value: wrap __libc_start_main */
static int (*g_main)(int, char **, char **);
static int main_hook(int argc, char **argv, char **envp)
{
    int r = g_main(argc, argv, envp);
    if (g_on && !g_ended_by) { g_exit_status = r & 0xff; g_ended_by = E_MAIN_RETURN; }
    return r;
}
DECL(int, __libc_start_main, (int (*)(int, char **, char **), int, char **, void (*)(void), void (*)(void),
                              void (*)(void), void *));
EXPORT int __libc_start_main(int (*m)(int, char **, char **), int argc, char **argv, void (*init)(void),
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    RESOLVE(__libc_start_main);
    g_main = m;
    return real___libc_start_main(main_hook, argc, argv, init, fini, rtld_fini, stack_end);
}

