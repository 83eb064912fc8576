/* mtcengine: run P worker processes on one host with a synchronised start, each doing K file
 * operations (create | write | read) through one backend (posix | gfarm), and print one
 * machine-readable line per operation (TSV with a header) plus a summary line.
 *
 * Why this shape:
 *  - processes, not threads: libgfarm keeps per-process connection state, and MTC tasks are
 *    processes;
 *  - every worker initialises its backend, then waits on a pipe the parent closes (all wake
 *    at once); with --start-at the parent first sleeps until that CLOCK_REALTIME instant so
 *    engines on several hosts (network namespaces of one kernel, or NTP-synced nodes) start
 *    together and their times compare;
 *  - results go to shared memory, not to a pipe: no syscall between timed ops, and the
 *    records of a worker killed by the timeout survive it;
 *  - --compute-ms lets every worker compute (spin) before its first op, as a task computes what
 *    it writes: a write soon after a CPU burst can cost several times one after idling (on a
 *    2-vCPU VM, 1 MiB in 8 KiB calls: 18.5-21.1 ms after 100 ms of compute, 5.4-6.1 ms after
 *    100 ms of sleep), and the workers otherwise wait idle for the start;
 *  - --gap-us N spins N us between a worker's data calls, as a task computes each row it writes
 *    or after each it reads; the spins are not part of the ops' times (a worker's t_start_ns and
 *    t_end_ns are moved back by the spins before them): on a 2-vCPU VM with TCP_NODELAY, 1.6 MB
 *    in 8 KiB calls took 21-28 ms back to back and 32-40 ms of calls alone 200 us apart
 *    (gfarm2fs's threads idle between calls and are woken for each).
 *  - --idle-ms N sleeps N ms before each of a worker's ops after its first, left out of its times: a small
 *    read costs more the longer the host's I/O path idled before it (1 KiB on a 2-vCPU testbed: 0.8 ms
 *    back to back, 1.0 after 20 ms idle, 1.4 after 50, 1.9 after 300), and a worker's first op follows
 *    the launch's idle, whatever N;
 *  - --hogs N runs N processes that only compute beside the workers, from >= 100 ms before the start
 *    until the last worker ends: a host whose tasks compute while others do I/O (gfarm2fs and gfsd need a
 *    CPU for every call; on a 2-vCPU VM with TCP_NODELAY, 535 KB in 8 KiB calls: ~8 ms idle, ~16 ms beside
 *    one such process per host).
 *  - the summary's cpus, cpu_s and idle_s are the machine's CPU time and idle time from the go to the last
 *    worker's end (/proc/uptime): how busy the machine was while it measured, which makes small ops cheaper
 *    on a VM (vCPUs kept from halting) and large ones dearer (CPUs taken).
 *  - the summary's op_s, op_cpu_s and op_wait_s are the workers' summed time in their timed ops, and their
 *    time on a CPU and ready to run without one over their op loops (/proc/self/schedstat): an op's time holds
 *    the wait for a CPU after it wakes, as a traced task's call does on a busy machine (0 and sched=0 when a
 *    worker's clock could not be read).
 *
 * Exit status: 0 all ops ok, 1 some op failed, 2 bad arguments, 3 timeout (workers killed),
 * 130 interrupted (SIGINT/SIGTERM; what was measured is still printed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"

#define VERSION "1"
#define MAX_PROCS 4096
#define MAX_PATH 4096
#define HOG_LEAD_NS 100000000LL   /* the hogs run at least this long before the go */

enum op { OP_CREATE, OP_WRITE, OP_READ, OP_STAT, OP_FSTAT };
static const char *op_names[] = {"create", "write", "read", "stat", "fstat"};

/* one operation's outcome, in memory shared with the parent */
enum { ST_PENDING = 0, ST_RUNNING = 1, ST_DONE = 2 };
struct rec {
    int64_t t0, t1, bytes, untimed_ns;   /* t1 leaves out untimed_ns: --gap-us spins, fstat's open+close */
    int32_t state, err;
    char msg[MTC_MSGLEN];
};

static struct {
    const mtc_backend *be;
    enum op op;
    int procs, files, fsync, rank_base, compute_ms, hogs, gap_us, idle_ms;
    int64_t size, block, start_at;
    double timeout;
    const char *pattern;
    char **list;
    int nlist;
    char host[256];
} o;

static struct rec *recs;          /* procs x files */
static volatile int32_t *ready;   /* procs: worker passed its init */
struct sched { int64_t cpu_ns, wait_ns; int32_t ok; };
static struct sched *scheds;      /* procs: the worker's scheduler clock over its op loop */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: mtcengine --op create|write|read|stat|fstat --path PATTERN|--file-list FILE [options]\n"
"  --backend posix|gfarm   I/O interface (default posix; gfarm = libgfarm gfs_pio_*)\n"
"  --op OP                 create: create+close (writes --size bytes if given);\n"
"                          write: create+write --size bytes in --block chunks+close;\n"
"                          read: open+read to EOF+close (--size, if given, must match);\n"
"                          stat: the attributes of an existing file (stat / gfs_stat)\n"
"                          fstat: open, read one call, close, open, fstat, close; only\n"
"                          the fstat is timed (as glibc's fseek to the end after a re-open)\n"
"  --procs P               worker processes (default 1)\n"
"  --files-per-proc K      operations per worker (default 1)\n"
"  --size S, --block B     bytes per file, bytes per call (default 1MiB); k/m/g suffixes\n"
"  --path PATTERN          {rank} (= rank-base + local rank), {lrank}, {i}, {host} are\n"
"                          replaced; no placeholder = every worker uses the same file\n"
"  --file-list FILE        one path per line; op i of rank r uses line (r*K+i) mod lines\n"
"  --rank-base N           global rank of local worker 0 (several hosts, one pattern)\n"
"  --start-at EPOCH_NS     start all workers at this CLOCK_REALTIME instant\n"
"  --timeout SEC           kill workers still running SEC s after launch (default 300)\n"
"  --fsync                 fsync before close on create/write\n"
"  --compute-ms N          every worker computes (spins) N ms after the start, before its\n"
"                          first op, which is timed from then (default 0)\n"
"  --gap-us N              every worker computes (spins) N us between two data calls of\n"
"                          an op; the op's time leaves the spins out (default 0)\n"
"  --idle-ms N             every worker sleeps N ms before each op after its first; the\n"
"                          op's time leaves the sleep out (default 0)\n"
"  --hogs N                N more processes compute (spin) from >= 100 ms before the start\n"
"                          until the last worker ends: I/O beside a CPU load (default 0)\n"
"output: '#' meta line, TSV header, one line per op, '#summary' line (key=value)\n");
}

static void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mtcengine: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n(mtcengine --help for usage)\n", stderr);
    va_end(ap);
    exit(2);
}

static int64_t parse_size(const char *s, const char *opt)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        die_usage("%s: not a size: '%s'", opt, s);
    int64_t m = 1;
    switch (*end) {
    case 'k': case 'K': m = 1LL << 10; end++; break;
    case 'm': case 'M': m = 1LL << 20; end++; break;
    case 'g': case 'G': m = 1LL << 30; end++; break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end || v > INT64_MAX / m)
        die_usage("%s: not a size: '%s'", opt, s);
    return v * m;
}

static long parse_int(const char *s, const char *opt, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die_usage("%s: expected an integer in [%ld, %ld], got '%s'", opt, lo, hi, s);
    return v;
}

static void read_list(const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f)
        die_usage("--file-list %s: %s", file, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (!n)
            continue;
        o.list = realloc(o.list, sizeof(char *) * (o.nlist + 1));
        if (!o.list) { perror("realloc"); exit(2); }
        o.list[o.nlist++] = strdup(line);
    }
    free(line);
    fclose(f);
    if (!o.nlist)
        die_usage("--file-list %s: no paths in it", file);
}

/* the path of operation i of local rank r */
static void path_of(int r, int i, char *out)
{
    if (o.list) {
        long k = ((long)(o.rank_base + r) * o.files + i) % o.nlist;
        snprintf(out, MAX_PATH, "%s", o.list[k]);
        return;
    }
    size_t n = 0;
    for (const char *p = o.pattern; *p && n < MAX_PATH - 32; ) {
        if (!strncmp(p, "{rank}", 6)) {
            n += snprintf(out + n, MAX_PATH - n, "%d", o.rank_base + r); p += 6;
        } else if (!strncmp(p, "{lrank}", 7)) {
            n += snprintf(out + n, MAX_PATH - n, "%d", r); p += 7;
        } else if (!strncmp(p, "{i}", 3)) {
            n += snprintf(out + n, MAX_PATH - n, "%d", i); p += 3;
        } else if (!strncmp(p, "{host}", 6)) {
            n += snprintf(out + n, MAX_PATH - n, "%s", o.host); p += 6;
        } else {
            out[n++] = *p++;
        }
    }
    out[n < MAX_PATH ? n : MAX_PATH - 1] = 0;
}

/* ---------------------------------------------------------------- worker process */
static void spin_until(int64_t until)
{
    volatile uint64_t x = 1;
    while (now_ns() < until)
        for (int k = 0; k < 100; k++)
            x = x * 6364136223846793005ULL + 1;
}

/* the machine's CPU clock (/proc/uptime: seconds up, seconds idle summed over the CPUs); 0 when unreadable */
static int uptime(double *up, double *idle)
{
    FILE *f = fopen("/proc/uptime", "r");
    int ok = f && fscanf(f, "%lf %lf", up, idle) == 2;
    if (f) fclose(f);
    return ok;
}

/* this thread's time on a CPU and ready to run without one (/proc/self/schedstat); 0 when unreadable */
static int schedstat(int64_t *cpu, int64_t *wait)
{
    FILE *f = fopen("/proc/self/schedstat", "r");
    long long c, w;
    int ok = f && fscanf(f, "%lld %lld", &c, &w) == 2;
    if (f) fclose(f);
    if (ok) { *cpu = c; *wait = w; }
    return ok;
}

/* sleep ns nanoseconds, through signals */
static void sleep_ns(int64_t ns)
{
    struct timespec d = {ns / 1000000000, (long)(ns % 1000000000)};
    while (nanosleep(&d, &d) < 0 && errno == EINTR)
        ;
}

/* --gap-us: compute between two data calls; returns the ns spun, which the op's time leaves out */
static int64_t gap(void)
{
    if (o.gap_us <= 0)
        return 0;
    int64_t t = now_ns();
    spin_until(t + (int64_t)o.gap_us * 1000);
    return now_ns() - t;
}

static int one_op(const char *path, char *buf, struct rec *rc)
{
    void *h = NULL;
    int e;
    int64_t bytes = 0;
    char *msg = rc->msg;
    rc->untimed_ns = 0;

    if (o.op == OP_STAT) {      /* no handle: one lookup of an existing file's attributes */
        rc->bytes = 0;
        return o.be->stat(path, msg);
    }
    if (o.op == OP_FSTAT) {     /* open, read, close, open, fstat, close: only the fstat is timed */
        int64_t t0 = now_ns();
        size_t got = 0;
        char cmsg[MTC_MSGLEN];
        if ((e = o.be->open_read(path, &h, msg)))
            return e;
        e = o.be->read(h, buf, (size_t)o.block, &got, msg);
        int ce = o.be->close(h, e ? cmsg : msg);
        if (e || ce || (e = o.be->open_read(path, &h, msg)))
            return e ? e : ce;
        int64_t t1 = now_ns();
        e = o.be->fstat(h, msg);
        int64_t t2 = now_ns();
        ce = o.be->close(h, cmsg);
        rc->untimed_ns = (t1 - t0) + (now_ns() - t2);
        rc->bytes = 0;
        if (!e && ce)
            memcpy(msg, cmsg, MTC_MSGLEN);
        return e ? e : ce;
    }
    if (o.op == OP_READ) {
        if ((e = o.be->open_read(path, &h, msg)))
            return e;
        for (;;) {
            size_t got = 0;
            if ((e = o.be->read(h, buf, (size_t)o.block, &got, msg)))
                break;
            if (!got)
                break;
            bytes += (int64_t)got;
            if (o.size <= 0 || bytes < o.size)     /* none after the last call */
                rc->untimed_ns += gap();
        }
    } else {
        if ((e = o.be->create(path, &h, msg)))
            return e;
        while (!e && bytes < o.size) {
            size_t n = (size_t)(o.size - bytes < o.block ? o.size - bytes : o.block), done = 0;
            if ((e = o.be->write(h, buf, n, &done, msg)))
                break;
            if (!done) { e = EIO; snprintf(msg, MTC_MSGLEN, "write: wrote 0 bytes"); }
            bytes += (int64_t)done;
            if (bytes < o.size)
                rc->untimed_ns += gap();
        }
        if (!e && o.fsync)
            e = o.be->sync(h, msg);
    }
    char cmsg[MTC_MSGLEN];
    int ce = o.be->close(h, cmsg);
    if (!e && ce) {
        e = ce;
        memcpy(msg, cmsg, MTC_MSGLEN);
    }
    rc->bytes = bytes;
    if (!e && o.op == OP_READ && o.size > 0 && bytes != o.size) {
        snprintf(msg, MTC_MSGLEN, "short read: %lld of %lld bytes", (long long)bytes,
                 (long long)o.size);
        e = EIO;
    }
    return e;
}

static void worker(int r, int go_r, int ready_w)
{
    struct rec *mine = recs + (size_t)r * o.files;
    char msg[MTC_MSGLEN] = "";
    int e = o.be->init(msg), failed = 0;
    if (e) {           /* every op of this worker fails with the init error */
        for (int i = 0; i < o.files; i++) {
            mine[i].err = e;
            memcpy(mine[i].msg, msg, MTC_MSGLEN);
            __atomic_store_n(&mine[i].state, ST_DONE, __ATOMIC_RELEASE);
        }
        ready[r] = 1;
        if (write(ready_w, "x", 1) < 0) { /* the parent sees ready[] anyway */ }
        _exit(1);
    }
    size_t bsz = (size_t)o.block;
    char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, bsz)) {
        perror("posix_memalign");
        _exit(1);
    }
    for (size_t k = 0; k < bsz; k++)   /* not zeros: nothing may compress or skip them */
        buf[k] = (char)('a' + (k + (size_t)r) % 26);

    ready[r] = 1;
    if (write(ready_w, "x", 1) < 0) { }
    close(ready_w);
    char c;
    while (read(go_r, &c, 1) < 0 && errno == EINTR)   /* EOF = go */
        ;
    close(go_r);
    if (o.compute_ms > 0)     /* wall-clock deadline: workers sharing a core end together */
        spin_until(now_ns() + (int64_t)o.compute_ms * 1000000);

    char path[MAX_PATH];
    int64_t spun = 0;     /* untimed ns so far: the worker's times leave them out, op after op */
    int64_t cpu0 = 0, wait0 = 0, cpu1 = 0, wait1 = 0;
    int clocked = schedstat(&cpu0, &wait0);
    for (int i = 0; i < o.files; i++) {
        struct rec *rc = mine + i;
        path_of(r, i, path);
        if (i > 0 && o.idle_ms > 0) {
            int64_t t = now_ns();
            sleep_ns((int64_t)o.idle_ms * 1000000);
            spun += now_ns() - t;
        }
        rc->t0 = now_ns() - spun;
        __atomic_store_n(&rc->state, ST_RUNNING, __ATOMIC_RELEASE);
        rc->err = one_op(path, buf, rc);
        spun += rc->untimed_ns;
        rc->t1 = now_ns() - spun;
        __atomic_store_n(&rc->state, ST_DONE, __ATOMIC_RELEASE);
        failed |= rc->err != 0;
    }
    if (clocked && schedstat(&cpu1, &wait1))
        scheds[r] = (struct sched){cpu1 - cpu0, wait1 - wait0, 1};
    o.be->fini();
    _exit(failed);
}

/* a process that only computes, until killed, its parent gone or the deadline passed */
static void hog(int64_t deadline)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    volatile uint64_t x = 1;
    while (now_ns() < deadline)
        for (int k = 0; k < 100000; k++)
            x = x * 6364136223846793005ULL + 1;
    _exit(0);
}

/* ---------------------------------------------------------------- parent */
static void clean(char *s)
{
    for (; *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r')
            *s = ' ';
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"backend", 1, 0, 'b'}, {"op", 1, 0, 'o'}, {"procs", 1, 0, 'p'},
        {"size", 1, 0, 's'}, {"block", 1, 0, 'B'}, {"files-per-proc", 1, 0, 'k'},
        {"path", 1, 0, 'P'}, {"file-list", 1, 0, 'L'}, {"start-at", 1, 0, 'S'},
        {"timeout", 1, 0, 't'}, {"fsync", 0, 0, 'f'}, {"rank-base", 1, 0, 'r'}, {"compute-ms", 1, 0, 'c'},
        {"hogs", 1, 0, 'H'}, {"gap-us", 1, 0, 'g'}, {"idle-ms", 1, 0, 'I'}, {"help", 0, 0, 'h'},
        {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
    const char *opname = NULL, *bename = "posix", *listfile = NULL;
    int size_given = 0;
    o.procs = 1; o.files = 1; o.block = 1 << 20; o.timeout = 300; o.start_at = -1;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'b': bename = optarg; break;
        case 'o': opname = optarg; break;
        case 'p': o.procs = (int)parse_int(optarg, "--procs", 1, MAX_PROCS); break;
        case 's': o.size = parse_size(optarg, "--size"); size_given = 1; break;
        case 'B': o.block = parse_size(optarg, "--block"); break;
        case 'k': o.files = (int)parse_int(optarg, "--files-per-proc", 1, 10000000); break;
        case 'P': o.pattern = optarg; break;
        case 'L': listfile = optarg; break;
        case 'S': {
            char *end;
            errno = 0;
            o.start_at = strtoll(optarg, &end, 10);
            if (errno || end == optarg || *end || o.start_at < 0)
                die_usage("--start-at: expected nanoseconds since the epoch, got '%s'", optarg);
            break;
        }
        case 't': {
            char *end;
            o.timeout = strtod(optarg, &end);
            if (end == optarg || *end || !(o.timeout > 0))
                die_usage("--timeout: expected seconds > 0, got '%s'", optarg);
            break;
        }
        case 'f': o.fsync = 1; break;
        case 'r': o.rank_base = (int)parse_int(optarg, "--rank-base", 0, 1 << 30); break;
        case 'c': o.compute_ms = (int)parse_int(optarg, "--compute-ms", 0, 600000); break;
        case 'g': o.gap_us = (int)parse_int(optarg, "--gap-us", 0, 10000000); break;
        case 'I': o.idle_ms = (int)parse_int(optarg, "--idle-ms", 0, 600000); break;
        case 'H': o.hogs = (int)parse_int(optarg, "--hogs", 0, MAX_PROCS); break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("mtcengine %s\n", VERSION); return 0;
        default:
            die_usage("unknown option or missing value: '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        die_usage("unexpected argument '%s'", argv[optind]);
    if (!opname)
        die_usage("--op is required (create, write, read, stat or fstat)");
    if (!strcmp(opname, "create")) o.op = OP_CREATE;
    else if (!strcmp(opname, "write")) o.op = OP_WRITE;
    else if (!strcmp(opname, "read")) o.op = OP_READ;
    else if (!strcmp(opname, "stat")) o.op = OP_STAT;
    else if (!strcmp(opname, "fstat")) o.op = OP_FSTAT;
    else die_usage("--op: expected create, write, read, stat or fstat, got '%s'", opname);
    if (!strcmp(bename, "posix")) o.be = &mtc_backend_posix;
    else if (!strcmp(bename, "gfarm")) o.be = &mtc_backend_gfarm;
    else die_usage("--backend: expected posix or gfarm, got '%s'", bename);
    if (!o.pattern == !listfile)
        die_usage("give exactly one of --path PATTERN and --file-list FILE");
    if (o.pattern && !*o.pattern)
        die_usage("--path: empty pattern");
    if (o.op == OP_WRITE && !size_given)
        die_usage("--op write needs --size");
    if (o.block <= 0 || o.block > (1 << 30))
        die_usage("--block: expected 1 byte .. 1 GiB");
    if ((o.op == OP_CREATE || o.op == OP_WRITE) && o.size > 0 && o.block > o.size)
        o.block = o.size;           /* no bigger buffer than one file */
    if (listfile)
        read_list(listfile);
    if (gethostname(o.host, sizeof o.host - 1))
        strcpy(o.host, "unknown");

    size_t nrec = (size_t)o.procs * o.files;
    recs = mmap(NULL, nrec * sizeof *recs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ready = mmap(NULL, sizeof(int32_t) * o.procs, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    scheds = mmap(NULL, sizeof *scheds * o.procs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (recs == MAP_FAILED || ready == MAP_FAILED || scheds == MAP_FAILED) {
        perror("mtcengine: mmap");
        return 2;
    }

    /* the parent takes SIGCHLD/SIGINT/SIGTERM with sigtimedwait: no busy polling */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD); sigaddset(&set, SIGINT); sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, &old);

    int go[2], rdy[2];
    if (pipe(go) || pipe(rdy)) {
        perror("mtcengine: pipe");
        return 2;
    }
    fflush(stdout);
    pid_t *pids = calloc(o.procs, sizeof *pids);
    int *alive = calloc(o.procs, sizeof *alive), *status = calloc(o.procs, sizeof *status);
    int64_t t_launch = now_ns(), deadline = t_launch + (int64_t)(o.timeout * 1e9);
    int nalive = 0;
    for (int r = 0; r < o.procs; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("mtcengine: fork");
            for (int q = 0; q < r; q++) kill(pids[q], SIGKILL);
            return 2;
        }
        if (pid == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            signal(SIGINT, SIG_DFL);
            close(go[1]);
            close(rdy[0]);
            worker(r, go[0], rdy[1]);
        }
        pids[r] = pid;
        alive[r] = 1;
        nalive++;
    }
    close(go[0]);
    close(rdy[1]);

    int timed_out = 0, interrupted = 0;
    int64_t t_go = 0;

    /* the hogs start now, before the barrier and the start wait: forked at the go, a hog's first time slice came
       with the workers' first ops (one 16 KiB read: 6.8-11.5 ms beside it, 1.6 once it ran, 2.5 without it) */
    pid_t *hogs = calloc(o.hogs ? o.hogs : 1, sizeof *hogs);
    int nhogs = 0;
    for (; nhogs < o.hogs; nhogs++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("mtcengine: fork (hog)");
            break;
        }
        if (pid == 0) {
            close(go[1]);                       /* the workers' go is this pipe's EOF */
            close(rdy[0]);
            hog(deadline);
        }
        hogs[nhogs] = pid;
    }
    int64_t t_hogs = now_ns();

#define REAP() do { int st_; pid_t p_; \
        while ((p_ = waitpid(-1, &st_, WNOHANG)) > 0) \
            for (int q = 0; q < o.procs; q++) \
                if (pids[q] == p_ && alive[q]) { alive[q] = 0; status[q] = st_; nalive--; } \
    } while (0)
#define PENDING_STOP() do { siginfo_t si_; struct timespec z_ = {0, 0}; \
        while (sigtimedwait(&set, &si_, &z_) > 0) \
            if (si_.si_signo != SIGCHLD) interrupted = 1; \
    } while (0)

    /* barrier: every worker is ready (or dead) */
    for (;;) {
        REAP();
        PENDING_STOP();
        int n = 0;
        for (int r = 0; r < o.procs; r++)
            n += ready[r] || !alive[r];
        if (n == o.procs || interrupted)
            break;
        int64_t left = deadline - now_ns();
        if (left <= 0) { timed_out = 1; break; }
        struct pollfd pf = {rdy[0], POLLIN, 0};
        int ms = left / 1000000 > 50 ? 50 : (int)(left / 1000000) + 1;
        if (poll(&pf, 1, ms) > 0) {
            char b[256];
            if (read(rdy[0], b, sizeof b) < 0) { }
        }
    }
    if (!timed_out && !interrupted && o.start_at > 0) {
        struct timespec ts = {o.start_at / 1000000000, o.start_at % 1000000000};
        while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    if (nhogs && t_hogs + HOG_LEAD_NS > now_ns())   /* a load already running when the first op comes */
        sleep_ns(t_hogs + HOG_LEAD_NS - now_ns());
    double up_go = 0, idle_go = 0, up_stop = 0, idle_stop = 0;
    int clock_ok = uptime(&up_go, &idle_go);    /* the machine's busy share from the go to the last worker's end */
    t_go = now_ns();
    close(go[1]);                               /* go: every worker's read() returns 0 */

    while (nalive > 0 && !timed_out && !interrupted) {
        int64_t left = deadline - now_ns();
        if (left <= 0) { timed_out = 1; break; }
        struct timespec ts = {left / 1000000000, left % 1000000000};
        siginfo_t si;
        int s = sigtimedwait(&set, &si, &ts);
        if (s == SIGINT || s == SIGTERM)
            interrupted = 1;
        REAP();
    }
    int64_t t_stop = now_ns();
    clock_ok = clock_ok && uptime(&up_stop, &idle_stop);
    for (int q = 0; q < nhogs; q++) {           /* the load ends with the last worker */
        kill(hogs[q], SIGKILL);
        waitpid(hogs[q], NULL, 0);
    }
    if (nalive > 0) {            /* timeout or interrupt: kill, then reap (bounded wait) */
        for (int r = 0; r < o.procs; r++)
            if (alive[r])
                kill(pids[r], SIGKILL);
        int64_t until = now_ns() + 2000000000LL;
        while (nalive > 0 && now_ns() < until) {
            struct timespec ts = {0, 20000000};
            siginfo_t si;
            sigtimedwait(&set, &si, &ts);
            REAP();
        }
    }

    /* ---------------------------------------------------------------- report */
    printf("#mtcengine\tversion=%s\tbackend=%s\top=%s\tprocs=%d\tfiles_per_proc=%d\t"
           "size=%lld\tblock=%lld\tfsync=%d\trank_base=%d\thost=%s\tstart_at=%lld\t"
           "timeout_s=%g\tcompute_ms=%d\thogs=%d\tgap_us=%d\tidle_ms=%d\n", VERSION, o.be->name, op_names[o.op],
           o.procs, o.files, (long long)o.size, (long long)o.block, o.fsync, o.rank_base, o.host,
           (long long)o.start_at, o.timeout, o.compute_ms, o.hogs, o.gap_us, o.idle_ms);
    printf("rank\ti\top\tpath\tbytes\tt_start_ns\tt_end_ns\tok\terrno\terror\n");
    long ok = 0, failed = 0;
    int64_t bytes = 0, first = INT64_MAX, last = 0, op_ns = 0;
    char path[MAX_PATH];
    for (int r = 0; r < o.procs; r++) {
        for (int i = 0; i < o.files; i++) {
            struct rec *rc = recs + (size_t)r * o.files + i;
            int st = __atomic_load_n(&rc->state, __ATOMIC_ACQUIRE);
            char why[160] = "-";
            int good = 0, err = rc->err;
            int64_t t0 = rc->t0, t1 = rc->t1;
            if (st == ST_DONE && !err) {
                good = 1;
            } else if (st == ST_DONE) {
                snprintf(why, sizeof why, "%s", rc->msg[0] ? rc->msg : strerror(err));
            } else {
                const char *cause = timed_out ? "timeout" : interrupted ? "interrupted" :
                    "worker died";
                if (!timed_out && !interrupted && WIFSIGNALED(status[r]))
                    snprintf(why, sizeof why, "worker died of signal %d", WTERMSIG(status[r]));
                else if (st == ST_RUNNING)
                    snprintf(why, sizeof why, "%s: still running after %.3f s, killed", cause,
                             (t_stop - t0) / 1e9);
                else
                    snprintf(why, sizeof why, "%s: not started", cause);
                err = timed_out ? ETIMEDOUT : interrupted ? EINTR : ECHILD;
                if (st == ST_RUNNING) t1 = t_stop; else t0 = t1 = 0;
            }
            clean(why);
            path_of(r, i, path);
            clean(path);
            printf("%d\t%d\t%s\t%s\t%lld\t%lld\t%lld\t%d\t%d\t%s\n", o.rank_base + r, i,
                   op_names[o.op], path, (long long)rc->bytes, (long long)t0, (long long)t1,
                   good, good ? 0 : err, why);
            if (good) {
                ok++;
                bytes += rc->bytes;
                op_ns += t1 - t0;
                if (t0 < first) first = t0;
                if (t1 > last) last = t1;
            } else {
                failed++;
            }
        }
    }
    double span = ok ? (last - first) / 1e9 : 0;
    int rc = interrupted ? 130 : timed_out ? 3 : failed ? 1 : 0;
    long ncpu = clock_ok ? sysconf(_SC_NPROCESSORS_ONLN) : 0L;
    int64_t op_cpu = 0, op_wait = 0;
    int sched_ok = 1;
    for (int r = 0; r < o.procs; r++) {
        sched_ok &= scheds[r].ok;
        op_cpu += scheds[r].cpu_ns;
        op_wait += scheds[r].wait_ns;
    }
    if (!sched_ok)
        op_cpu = op_wait = 0;
    printf("#summary\tops=%ld\tok=%ld\tfailed=%ld\tbytes=%lld\tt_first_start_ns=%lld\t"
           "t_last_end_ns=%lld\tspan_s=%.9f\tops_per_s=%.6f\tbytes_per_s=%.3f\tt_launch_ns=%lld\t"
           "t_go_ns=%lld\tlate_ns=%lld\ttimed_out=%d\tinterrupted=%d\texit=%d\tcpus=%ld\tcpu_s=%.2f\tidle_s=%.2f\t"
           "op_s=%.6f\tsched=%d\top_cpu_s=%.6f\top_wait_s=%.6f\n",
           (long)nrec, ok, failed, (long long)bytes, (long long)(ok ? first : 0),
           (long long)last, span, span > 0 ? ok / span : 0.0, span > 0 ? bytes / span : 0.0,
           (long long)t_launch, (long long)t_go,
           (long long)(o.start_at > 0 && t_go > o.start_at ? t_go - o.start_at : 0),
           timed_out, interrupted, rc, ncpu, ncpu * (up_stop - up_go), clock_ok ? idle_stop - idle_go : 0.0,
           op_ns / 1e9, sched_ok, op_cpu / 1e9, op_wait / 1e9);
    fflush(stdout);
    if (nalive > 0)
        fprintf(stderr, "mtcengine: %d worker(s) did not die after SIGKILL (stuck in the "
                "kernel?); exiting without them\n", nalive);
    return rc;
}
