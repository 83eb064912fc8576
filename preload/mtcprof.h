/* mtcprof log format, version 3 — the binary layout shared by the shim (writer) and db/logformat.py (reader).
 * See FORMAT.md.  Everything is in the writer's native byte order; the header's byte-order mark tells which. */
#ifndef MTCPROF_H
#define MTCPROF_H
#include <stdint.h>

#define MTC_MAGIC "MTCPLOG"         /* 8 bytes with the NUL */
#define MTC_VERSION 3
#define MTC_BOM 0x01020304u

enum mtc_rec_type { R_PROC = 1, R_STR = 2, R_FILE = 3, R_OPS = 4, R_DIR = 5, R_END = 15 };

enum mtc_str_key {
    S_HOST = 1, S_RUN, S_TASK, S_STAGE, S_EXE, S_ARGV, S_CWD, S_GFARM_MOUNT, S_LOGDIR,
    S_INCLUDE, S_EXCLUDE, S_SHIM_VERSION, S_ARGV_TRUNCATED, S_CPU_CLOCK, S_SCHED, S_CPU_WAIT
};

enum mtc_ended_by { E_UNKNOWN = 0, E_MAIN_RETURN, E_EXIT, E__EXIT, E_EXEC, E_SIGNAL, E_DESTRUCTOR };

/* per process x file counters, in on-disk order */
enum mtc_counter {
    C_OPENS, C_CREATES, C_CLOSES, C_READS, C_WRITES, C_BYTES_READ, C_BYTES_WRITTEN, C_SEEKS,
    C_READ_DISCONT, C_WRITE_DISCONT, C_MAX_OFFSET, C_STATS, C_FSYNCS, C_UNLINKS, C_RENAMES,
    C_MKDIRS, C_RMDIRS, C_TRUNCATES, C_MMAPS, C_MMAP_BYTES, C_DUPS, C_ERRORS,
    C_T_OPEN, C_T_READ, C_T_WRITE, C_T_CLOSE, C_T_META, C_FIRST_OPEN, C_LAST_CLOSE, C_SEEKS_END,
    NCOUNTERS
};
#define NBINS 10
#define NSLOTS (NCOUNTERS + 2 * NBINS)
_Static_assert(NSLOTS <= 64, "FILE record slot mask is 64 bits");

/* file flags */
#define FF_CREATED   0x1u   /* at least one open by this process created the file */
#define FF_INHERITED 0x2u   /* fd was already open when the process image started (or inherited over fork) */
#define FF_STDIO     0x4u   /* accessed through stdio */
#define FF_GFARM     0x8u   /* a Gfarm path accessed through libgfarm gfs_pio_* */
#define FF_POSIX     0x10u  /* accessed through fd-level calls */

/* op codes of the trace */
enum mtc_op {
    OP_OPEN = 1, OP_CLOSE, OP_READ, OP_WRITE, OP_SEEK, OP_STAT, OP_FSYNC, OP_MMAP, OP_UNLINK,
    OP_RENAME, OP_MKDIR, OP_RMDIR, OP_TRUNCATE, OP_DUP
};
/* op flags */
#define OF_CREATED 0x1u
#define OF_STDIO   0x2u
#define OF_GFARM   0x4u
#define OF_POS     0x8u    /* positional (pread/pwrite) */
#define OF_VEC     0x10u   /* vectored (readv/writev) */
#define OF_COPY    0x20u   /* half of copy_file_range/sendfile */

struct mtc_op_rec {            /* 48 bytes, fixed */
    uint64_t start_ns;         /* CLOCK_REALTIME ns (converted from the monotonic op clock) */
    uint64_t dur_ns;
    int64_t offset;            /* -1 unknown; for RENAME the destination file id */
    int64_t length;            /* bytes transferred (return value), -1 on error */
    uint32_t file;             /* file id (FILE record) */
    uint32_t tid;
    uint16_t op;
    uint16_t flags;
    int32_t err;               /* errno when the call failed, else 0 */
};

struct mtc_proc_rec {          /* 96 bytes, fixed */
    int32_t pid, ppid;
    uint32_t uid, origin;      /* origin: 0 = process image started by exec, 1 = fork child */
    uint64_t start_ns, end_ns;
    int32_t exit_status;       /* -1 unknown */
    uint32_t ended_by;
    int32_t signal;
    uint32_t n_files;
    uint64_t ops_traced, ops_dropped;
    uint32_t files_dropped, trace_flags;  /* bit 0: op trace on */
    uint64_t munmaps;
    uint64_t parent_start_ns;  /* fork child: start_ns of the parent image's log */
    uint64_t reserved;
};
#endif
