/* mtcprof shim: the process state, real-symbol lookup, start, fork, signals.  See shim.h and FORMAT.md. */
#include "shim.h"

/* ---------------------------------------------------------------- state */
/* the process state (shim.h: struct shim_process), the only definition; what is not zero at start is set here.
 * Cache-line aligned: the fields every wrapped call reads (on, tab.fdtab, tab.trace, tab.cpu_wait) share one line. */
__attribute__((aligned(64))) struct shim_process shim = {
    .end = {.exit_status = -1},
    .tab = {.ofd_bump = 1},
    .site = {.dirfd = -1, .prefd = -1},
    .w = {.sched_path = "/proc/self/schedstat"},
};
static TLS int t_resolving;

/* ---------------------------------------------------------------- real symbols */
static void *fallback_sym(const char *name);
void *resolve(const char *name, const char *version)
{
    void *p;
    if (t_resolving) {               /* dlsym re-entered one of our wrappers */
        p = fallback_sym(name);
        if (p) return p;
        static const char m[] = "mtcprof: recursive symbol resolution, aborting\n";
        say(&shim.warn, m, sizeof m - 1);
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
    say(&shim.warn, msg, n);
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
/* the clock's base and the kernel's counters at the image's start (or a fork child's fork).  A fork child's
 * /proc/self/schedstat at its fork is "0 0 0" (the kernel starts a new task's counters at zero): not read, which
 * saves every fork an open of /proc (~4 us) and counts the child's wait for its first CPU too. */
static void time_base(struct shim_clock *c, int fork_child)
{
    c->uptime0_len = read_line("/proc/uptime", c->uptime0, sizeof c->uptime0, NULL);
    if (fork_child) { memcpy(c->sched0, "0 0 0", 5); c->sched0_len = 5; }
    else c->sched0_len = read_line("/proc/self/schedstat", c->sched0, sizeof c->sched0, NULL);
    c->tick0 = NOW();
    c->mono0 = clock_ns(CLOCK_MONOTONIC);
    c->real0 = clock_ns(CLOCK_REALTIME);
#ifndef HAVE_TSC
    c->tick0 = c->mono0;
#endif
}
static const int g_fatal[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGPIPE,
                              SIGXCPU, SIGXFSZ, SIGUSR1, SIGUSR2, SIGALRM};
static void on_fatal(int sig)
{
    int saved = errno;
    shim.end.signal = sig;
    if (shim.on) write_log(&shim, E_SIGNAL);     /* off in a vfork child, whose memory is its parent's */
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
    if (!shim.on) return;
    t_tid = 0;
    shim.id.parent_start_ns = shim.clock.real0;
    shim.id.origin = 1;
    shim.id.pid = (pid_t)syscall(SYS_getpid);
    time_base(&shim.clock, 1);
    tables_fork_child(&shim.tab);
    shim.end = (struct shim_end){.exit_status = -1};
    log_fork_child(&shim);
}
/* The log folder must be the user's: owned by the (real or effective) user or root, not writable by others unless
 * it is sticky (like /tmp: others may add files but not remove or replace this user's; a shared folder for tasks
 * that run as several users, as the Pwrake plugin and the testbed make), and if it is a symlink, the link too is the
 * user's or root's.  Else another user could have made it (0777, or a link to a folder of theirs) to read, remove or
 * replace the logs.  Returns NULL if the folder is fine (site->dir_dev/ino set), else the problem, with *err the
 * errno to name. */
static int uid_trusted(uint32_t u) { return u == 0 || u == (uint32_t)syscall(SYS_geteuid) || u == (uint32_t)syscall(SYS_getuid); }
static const char *log_dir_problem(struct shim_site *site, const char *d, int *err)
{
    struct stat st;
    if (syscall(SYS_lstat, d, &st) < 0) { *err = errno; return "log folder missing"; }
    if (S_ISLNK(st.st_mode) && !uid_trusted(st.st_uid)) { *err = EPERM; return "log folder is a symlink owned by another user:"; }
    /* not a link: lstat said all stat would */
    if (S_ISLNK(st.st_mode) && syscall(SYS_stat, d, &st) < 0) { *err = errno; return "log folder missing"; }
    if (!S_ISDIR(st.st_mode)) { *err = ENOTDIR; return "log folder is not a directory"; }
    if (!uid_trusted(st.st_uid)) { *err = EPERM; return "log folder owned by another user:"; }
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
        *err = EPERM; return "log folder writable by others:";
    }
    if (syscall(SYS_faccessat, AT_FDCWD, d, W_OK | X_OK, 0) < 0) { *err = errno; return "log folder not writable"; }
    site->dir_dev = st.st_dev; site->dir_ino = st.st_ino;
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
        warn_line(&shim.warn, parts);
        return TRACE_MAX_DEFAULT;
    }
    if (big || v > TRACE_MAX_CAP) {
        u64_str(num, TRACE_MAX_CAP);
        const char *parts[] = {"MTCPROF_TRACE_MAX=", m, " is more than the most the shim keeps; using ", num, NULL};
        warn_line(&shim.warn, parts);
        return TRACE_MAX_CAP;
    }
    return v;
}
static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}
/* the next string of the packed area (*bump): s cut to cap - 1 bytes */
static char *str_keep(char **bump, const char *s, size_t cap)
{
    char *d = *bump;
    s_cpy(d, s, cap);
    *bump += s_len(d) + 1;
    return d;
}
#define PREFIX_STORE 8192
/* the packed strings (argv, 8 strings of at most PATH_MAX, the online CPU list, the prefixes), then the log buffer and
 * the room for the working directory */
#define STRINGS_BYTES (ARGV_MAX_BYTES + 8 * PATH_MAX + CPUS_ONLINE_MAX + PREFIX_STORE + 64)

/* The strings of a traced process live at the start of its memory reservation, packed one after the other, then the
 * log buffer: a process touches one or two pages for all of them and a short log instead of one page per
 * PATH_MAX-sized array. */
__attribute__((constructor(101))) static void mtc_init(int argc, char **argv, char **envp)
{
    (void)envp;
    const char *dir = getenv("MTCPROF_DIR");
    if (!dir || !*dir) return;                  /* not configured: pure pass-through */
    int saved = errno;
    struct shim_task *id = &shim.id;
    struct shim_opts *opt = &shim.opt;
    struct shim_tables *t = &shim.tab;
    struct shim_paths *w = &shim.tab.where;
    /* one reservation for everything (pages are backed only when touched): the strings, log buffer, cwd room, root
     * and exe, then the tables */
    const size_t parts[] = {STRINGS_BYTES + 64 + LOG_BUF_BYTES + 3 * PATH_MAX, sizeof(struct frec) * FREC_MAX,
                            sizeof(struct fcold) * 2 * FREC_MAX, sizeof(uint32_t) * NBUCKETS, PATHS_BYTES,
                            sizeof(struct ofd) * OFD_MAX, NBUCKETS / 8, sizeof(struct ofd *) * FD_MAX,
                            GF_SLOT_BYTES * GF_SLOTS};
    size_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) total += (parts[i] + 4095) & ~(size_t)4095;
    char *mem0 = arena(total), *mem = mem0;
    if (!mem) { warn_once(&shim.warn, "cannot reserve memory", "", ENOMEM); errno = saved; return; }
    char *bump = mem;
    w->root = mem + STRINGS_BYTES + 64 + LOG_BUF_BYTES + PATH_MAX;   /* after the strings, log buffer, cwd room */
    shim.site.exe = w->root + PATH_MAX;
    mem += (parts[0] + 4095) & ~(size_t)4095;
    t->frecs = (struct frec *)mem; mem += (parts[1] + 4095) & ~(size_t)4095;
    t->cold = (struct fcold *)mem; mem += (parts[2] + 4095) & ~(size_t)4095;
    t->bkt = (uint32_t *)mem; mem += (parts[3] + 4095) & ~(size_t)4095;
    t->paths = mem; mem += (parts[4] + 4095) & ~(size_t)4095;
    t->ofds = (struct ofd *)mem; mem += (parts[5] + 4095) & ~(size_t)4095;
    t->bkt_used = (uint64_t *)mem; mem += (parts[6] + 4095) & ~(size_t)4095;
    t->fdtab = (struct ofd **)mem; mem += (parts[7] + 4095) & ~(size_t)4095;
    shim.gf_slots = mem;

    id->argv = bump;
    snapshot_argv(id, argc, argv);
    bump += id->argv_len;
    warn_init(&shim.warn);
    id->pid = (pid_t)syscall(SYS_getpid);
    w->cwd_room = bump;                         /* the start directory, kept as cwd0 */
    cwd_update(w);
    id->cwd0 = w->cwd;
    bump += w->cwd_len + 1;
    id->dir = bump;
    if (dir[0] == '/') s_cpy(id->dir, dir, PATH_MAX);
    else if (w->cwd[0] != '/') { warn_once(&shim.warn, "log folder relative to an unnamed working directory:", dir, ENAMETOOLONG); goto untraced; }
    else { s_cpy(id->dir, w->cwd, PATH_MAX); size_t l = s_len(id->dir); id->dir[l] = '/'; s_cpy(id->dir + l + 1, dir, PATH_MAX - l - 1); }
    bump += norm_inplace(id->dir) + 1;
    int derr = 0;
    const char *problem = log_dir_problem(&shim.site, id->dir, &derr);
    if (problem) { warn_once(&shim.warn, problem, id->dir, derr); goto untraced; }

    const char *h = getenv("MTCPROF_HOST");
    if (h && *h) id->host = str_keep(&bump, h, 256);
    else { struct utsname u; id->host = str_keep(&bump, syscall(SYS_uname, &u) == 0 ? u.nodename : "localhost", 256); }
    for (char *c = id->host; *c; c++) if (*c == '/') *c = '_';
    id->run = str_keep(&bump, env_or("MTCPROF_RUN", ""), 256);
    id->task = str_keep(&bump, env_or("MTCPROF_TASK", ""), 256);
    id->stage = str_keep(&bump, env_or("MTCPROF_STAGE", ""), 256);
    opt->incl_raw = str_keep(&bump, env_or("MTCPROF_INCLUDE", ""), 4096);
    opt->excl_raw = str_keep(&bump, env_or("MTCPROF_EXCLUDE", ""), 4096);
    const char *gm = getenv("MTCPROF_GFARM_MOUNTS");
    opt->mounts_given = gm != NULL;
    opt->mounts_raw = str_keep(&bump, gm ? gm : "", 4096);
    opt->cpus_online = str_keep(&bump, env_or("MTCPROF_CPUS_ONLINE", ""), CPUS_ONLINE_MAX);
    path_filters(w, id->dir, opt->excl_raw, opt->incl_raw, &bump, bump + PREFIX_STORE);
    /* the log buffer right after the strings, so that a short log is built in the page they are in (a page of
     * its own would be one more first-touch fault, ~2 us, in every process), then the room for the working
     * directory once it changes (until then w->cwd is cwd0) */
    shim.w.buf = (char *)(((uintptr_t)bump + 63) & ~(uintptr_t)63);
    w->cwd_room = shim.w.buf + LOG_BUF_BYTES;

    const char *tr = env_or("MTCPROF_TRACE", "");
    if (!strcmp(tr, "ops")) {
        t->ops_max = trace_max(getenv("MTCPROF_TRACE_MAX"));
        t->ops = t->ops_max ? arena(t->ops_max * sizeof(struct mtc_op_rec)) : NULL;
        if (t->ops_max && !t->ops) {
            char num[24];
            u64_str(num, t->ops_max);
            const char *msg[] = {"cannot reserve memory for ", num, " traced ops: op trace off", NULL};
            warn_line(&shim.warn, msg);
            t->ops_max = 0;
        }
        t->trace = t->ops != NULL;
    }
    t->cpu_wait = !strcmp(env_or("MTCPROF_CPU_WAIT", ""), "1");
    time_base(&shim.clock, 0);
    install_signals();
    pthread_atfork(NULL, NULL, atfork_child);
    __atomic_store_n(&shim.on, 1, __ATOMIC_RELEASE);
    errno = saved;
    return;
untraced:
    syscall(SYS_munmap, mem0, total);
    errno = saved;
}
__attribute__((destructor(101))) static void mtc_fini(void)
{
    if (shim.on) write_log(&shim, E_DESTRUCTOR);
}

/* main()'s return value: wrap __libc_start_main.  The program's main is kept outside the process state: it is set
 * before the shim's constructor runs, traced or not. */
static int (*g_main)(int, char **, char **);
static int main_hook(int argc, char **argv, char **envp)
{
    int r = g_main(argc, argv, envp);
    if (shim.on && !shim.end.ended_by) { shim.end.exit_status = r & 0xff; shim.end.ended_by = E_MAIN_RETURN; }
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
