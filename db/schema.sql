-- mtcio SQLite store: the one contract between the shim (via ingest), the envelope harness and the predictor.
-- Current schema version: 8 (PRAGMA user_version). db/store.py applies this file to a new db and the migrations
-- in store.MIGRATIONS to an older one. Every statement here is idempotent (IF NOT EXISTS).
-- Conventions: times are CLOCK_REALTIME ns (INTEGER, *_ns) or Unix seconds (REAL: created, measured_at,
-- resolved_at); sizes in bytes; JSON columns hold UTF-8 JSON text; booleans are 0/1.

-- One trace run (ingested shim logs) or one envelope sweep.
CREATE TABLE IF NOT EXISTS runs (
    id      INTEGER PRIMARY KEY,
    name    TEXT UNIQUE NOT NULL,
    kind    TEXT NOT NULL CHECK (kind IN ('trace', 'envelope')),
    created REAL,                        -- Unix seconds when the run row was created
    meta    TEXT                         -- JSON: free-form (ingest: log dir, counts, warnings; envelope: sweep config)
);

-- One measured envelope value (envelope/points.py Point.to_row()); every repeat is its own row.
CREATE TABLE IF NOT EXISTS envelope_points (
    id             INTEGER PRIMARY KEY,
    run_id         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    metric         TEXT NOT NULL,        -- Tm, T1L, B1L, T1R, B1R, TN, BN, TL, BL (DESIGN.md section 3)
    file_size      INTEGER NOT NULL,     -- bytes of one file (of the shared file for TN/BN)
    procs_per_host INTEGER NOT NULL,
    hosts          INTEGER NOT NULL,
    value          REAL,                 -- in unit; NULL for a failed point
    unit           TEXT NOT NULL,        -- ops/s or bytes/s
    repeat         INTEGER NOT NULL,     -- 0-based
    tool           TEXT NOT NULL,
    tool_version   TEXT,
    config         TEXT,                 -- JSON
    ok             INTEGER NOT NULL,     -- 0/1
    error          TEXT,                 -- reason of a failed point
    measured_at    REAL                  -- Unix seconds the row was stored
);
CREATE INDEX IF NOT EXISTS envelope_points_lookup
    ON envelope_points (run_id, metric, file_size, procs_per_host, hosts);

-- ---------------------------------------------------------------------------------------------------------------
-- Trace runs (written by `mtcprof ingest`, schema version 2)

-- Host names seen in any run (the shim's MTCPROF_HOST or uname -n; gfwhere's replica host names).
CREATE TABLE IF NOT EXISTS hosts (
    id   INTEGER PRIMARY KEY,
    name TEXT UNIQUE NOT NULL
);

-- One task attempt: all processes of a run with the same MTCPROF_TASK (a shell and its children). A new attempt
-- starts when a root process starts after an earlier attempt of the same task ended with a nonzero status.
-- Locality columns are filled by ingest once replica hosts are known (NULL: not resolved).
CREATE TABLE IF NOT EXISTS tasks (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,       -- MTCPROF_TASK ('' when unset: then one task per root process tree)
    attempt         INTEGER NOT NULL DEFAULT 1,
    stage           TEXT,                -- MTCPROF_STAGE
    host_id         INTEGER REFERENCES hosts(id),   -- host of the top process
    command         TEXT,                -- argv of the top process's last image, shell-quoted
    start_ns        INTEGER,             -- min start over its processes
    end_ns          INTEGER,             -- max end over its processes
    exit_status     INTEGER,             -- the top process's (-1 unknown / killed by a signal)
    signal          INTEGER,             -- the top process's fatal signal (0 none)
    n_processes     INTEGER,             -- logs (process images) of the task
    bytes_read      INTEGER,
    bytes_written   INTEGER,
    files_read      INTEGER,             -- distinct files with bytes_read > 0
    files_written   INTEGER,
    bytes_read_local   INTEGER,          -- read bytes of files with a replica on the task's host
    bytes_read_remote  INTEGER,
    files_read_local   INTEGER,
    files_read_remote  INTEGER,
    bytes_read_unknown INTEGER,          -- read bytes of files whose replicas are unknown (not on Gfarm, unresolved)
    bytes_written_local INTEGER,         -- written bytes of files that landed on the task's host
    t_io_ns         INTEGER,             -- sum of t_open/read/write/close/meta over its processes
    UNIQUE (run_id, name, attempt)
);
CREATE INDEX IF NOT EXISTS tasks_stage ON tasks (run_id, stage);

-- One process image = one shim log. Unique per run by (host, pid, start_ns): re-ingest adds nothing.
CREATE TABLE IF NOT EXISTS processes (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    task_id         INTEGER REFERENCES tasks(id) ON DELETE SET NULL,
    host_id         INTEGER NOT NULL REFERENCES hosts(id),
    pid             INTEGER NOT NULL,
    ppid            INTEGER,
    uid             INTEGER,
    origin          TEXT,                -- exec | fork
    start_ns        INTEGER NOT NULL,
    end_ns          INTEGER,
    exit_status     INTEGER,
    ended_by        TEXT,                -- main_return exit _exit exec signal destructor unknown
    signal          INTEGER,
    parent_start_ns INTEGER,             -- fork child: start of the parent image's log
    chain_prev_id   INTEGER REFERENCES processes(id),   -- previous image of the same (host, pid) exec chain
    exe             TEXT,
    argv            TEXT,                -- JSON list
    cwd             TEXT,
    task            TEXT,                -- MTCPROF_TASK as logged
    stage           TEXT,
    run_label       TEXT,                -- MTCPROF_RUN as logged
    gfarm_mounts    TEXT,                -- JSON list of fuse.gfarm2fs mount points
    ops_traced      INTEGER,
    ops_dropped     INTEGER,
    files_dropped   INTEGER,
    munmaps         INTEGER,
    trace_ops       INTEGER,
    shim_version    TEXT,
    log_path        TEXT,
    log_complete    INTEGER NOT NULL,    -- 0: truncated/corrupt, only the valid prefix was ingested
    log_error       TEXT,                -- reader's message (with byte offset) for an incomplete log
    -- the machine's CPU clock at the image's start and end (/proc/uptime; idle summed over the CPUs): its busy
    -- share while a stage ran (NULL from logs without it); last: added by ALTER
    cpus            INTEGER,
    uptime_start_s  REAL, idle_start_s REAL, uptime_end_s REAL, idle_end_s REAL,
    -- the image's main thread from its start to its end (/proc/self/schedstat): seconds on a CPU, seconds ready to
    -- run without one (a blocking call's measured time holds the wait after its wake-up), times put on a CPU (NULL
    -- from logs without it); last: added by ALTER
    sched_cpu_s     REAL, sched_wait_s REAL, sched_slices INTEGER,
    -- with MTCPROF_CPU_WAIT=1: the traced calls' wait for a CPU (the thread's run-queue wait read around each call)
    -- in seconds, and how many calls were timed so (NULL without it); last: added by ALTER
    io_cpu_wait_s   REAL, io_cpu_wait_calls INTEGER,
    UNIQUE (run_id, host_id, pid, start_ns)
);
CREATE INDEX IF NOT EXISTS processes_task ON processes (task_id);

-- One file per run and trace path. replica_hosts/resolved_at stay NULL until resolved (gfwhere).
CREATE TABLE IF NOT EXISTS files (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    path          TEXT NOT NULL,         -- as the shim recorded it (absolute, lexically normalised)
    gfarm_path    TEXT,                  -- path inside Gfarm when under a gfarm2fs mount (or a gfarm URL), else NULL
    size          INTEGER,               -- bytes: stat at ingest, else the largest offset any process reached
    size_source   TEXT,                  -- stat | max_offset
    replica_hosts TEXT,                  -- JSON list of host names (gfwhere), [] when none
    resolved_at   REAL,                  -- Unix seconds when replica_hosts was resolved
    resolve_error TEXT,
    UNIQUE (run_id, path)
);

-- Per process x file counters from the shim (all of them, preload/FORMAT.md FILE record), plus the size histograms.
CREATE TABLE IF NOT EXISTS file_access (
    process_id    INTEGER NOT NULL REFERENCES processes(id) ON DELETE CASCADE,
    fid           INTEGER NOT NULL,      -- file_id in the log (ops refer to it)
    file_id       INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    flags         INTEGER NOT NULL,      -- 0x1 created 0x2 inherited 0x4 stdio 0x8 gfarm 0x10 posix
    opens INTEGER, creates INTEGER, closes INTEGER, reads INTEGER, writes INTEGER,
    bytes_read INTEGER, bytes_written INTEGER, seeks INTEGER, read_discont INTEGER, write_discont INTEGER,
    max_offset INTEGER, stats INTEGER, fsyncs INTEGER, unlinks INTEGER, renames INTEGER, mkdirs INTEGER,
    rmdirs INTEGER, truncates INTEGER, mmaps INTEGER, mmap_bytes INTEGER, dups INTEGER, errors INTEGER,
    t_open_ns INTEGER, t_read_ns INTEGER, t_write_ns INTEGER, t_close_ns INTEGER, t_meta_ns INTEGER,
    first_open_ns INTEGER, last_close_ns INTEGER,
    -- request-size bins (Darshan's): 0-100, 100-1K, 1K-10K, 10K-100K, 100K-1M, 1M-4M, 4M-10M, 10M-100M, 100M-1G, 1G+
    hr0 INTEGER, hr1 INTEGER, hr2 INTEGER, hr3 INTEGER, hr4 INTEGER,
    hr5 INTEGER, hr6 INTEGER, hr7 INTEGER, hr8 INTEGER, hr9 INTEGER,
    hw0 INTEGER, hw1 INTEGER, hw2 INTEGER, hw3 INTEGER, hw4 INTEGER,
    hw5 INTEGER, hw6 INTEGER, hw7 INTEGER, hw8 INTEGER, hw9 INTEGER,
    seeks_end     INTEGER DEFAULT 0,     -- seeks to the end (log format 3; 0 from older logs); last: added by ALTER
    PRIMARY KEY (process_id, fid)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS file_access_file ON file_access (file_id);

-- Op trace (MTCPROF_TRACE=ops), stored compactly: one row per process (and chunk of <= 1 Mi ops), `data` holds
-- n_ops packed little-endian 48-byte records exactly as in the log (db/logformat.py OP_DTYPE: start_ns u8,
-- dur_ns u8, offset i8, length i8, file u4 (= file_access.fid of that process), tid u4, op u2, flags u2, err i4).
-- Op codes: 1 open 2 close 3 read 4 write 5 seek 6 stat 7 fsync 8 mmap 9 unlink 10 rename 11 mkdir 12 rmdir
-- 13 truncate 14 dup. Decode with api.Store.ops() (one numpy.frombuffer per row).
CREATE TABLE IF NOT EXISTS ops (
    process_id INTEGER NOT NULL REFERENCES processes(id) ON DELETE CASCADE,
    chunk      INTEGER NOT NULL,
    n_ops      INTEGER NOT NULL,
    first_ns   INTEGER,
    last_ns    INTEGER,
    data       BLOB NOT NULL,
    PRIMARY KEY (process_id, chunk)
) WITHOUT ROWID;

-- What a capture could not tell about a process (Darshan logs, `mtcprof ingest --from darshan`; the shim's own
-- limits are processes.files_dropped/ops_dropped): one row per process x kind, x file when it is about one file.
-- kind: not_wrapped (calls Darshan does not count), module_partial (Darshan's record limit: files missing; detail
-- the module), dxt_partial (fewer DXT segments than counted reads/writes), host_unknown (db/darshan_log.GAP_TEXT).
CREATE TABLE IF NOT EXISTS capture_gaps (
    process_id INTEGER NOT NULL REFERENCES processes(id) ON DELETE CASCADE,
    fid        INTEGER,                  -- file_access.fid of that process; NULL: the whole process
    kind       TEXT NOT NULL,
    detail     TEXT
);
CREATE INDEX IF NOT EXISTS capture_gaps_process ON capture_gaps (process_id);

-- Ingest warnings kept with the run (truncated/corrupt logs, unresolved replicas ...).
CREATE TABLE IF NOT EXISTS ingest_warnings (
    id       INTEGER PRIMARY KEY,
    run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    log_path TEXT,
    offset   INTEGER,
    message  TEXT NOT NULL
);

-- ---------------------------------------------------------------------------------------------------------------
-- Predictor (written by mtcpredict)

CREATE TABLE IF NOT EXISTS predictions (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER REFERENCES runs(id) ON DELETE CASCADE,   -- trace run the workflow model came from
    stage           TEXT NOT NULL,
    envelope_run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
    variant         TEXT NOT NULL,       -- model variant, e.g. 'seed' (faithful eq. 1-3) or a refinement name
    N               INTEGER,             -- tasks
    C               INTEGER,             -- hosts
    D               REAL,                -- per-task input (read) or output (write) bytes
    D_N             REAL,                -- shared (N-to-1) input bytes
    alpha           REAL,                -- local fraction of 1-to-1 reads
    inputs          TEXT,                -- JSON: every input incl. the envelope values used
    predicted_s     REAL NOT NULL,
    terms           TEXT,                -- JSON: term name -> seconds
    bottleneck      TEXT,                -- name of the dominant term
    created         REAL
);
CREATE INDEX IF NOT EXISTS predictions_run ON predictions (run_id, stage);

CREATE TABLE IF NOT EXISTS validations (
    id            INTEGER PRIMARY KEY,
    prediction_id INTEGER NOT NULL REFERENCES predictions(id) ON DELETE CASCADE,
    measured_s    REAL NOT NULL,
    ratio         REAL,                  -- predicted / measured
    source        TEXT,                  -- how measured_s was obtained
    created       REAL
);
CREATE INDEX IF NOT EXISTS validations_prediction ON validations (prediction_id);

-- Pwrake's own profile of a traced run (`pwrake -L DIR`: task.csv, command.csv), imported by `mtcprof
-- pwrake-import` next to the traced tasks; pwrake_tasks.name = tasks.name.  preq_loc has one letter per
-- prerequisite as Pwrake wrote it: L (a replica on exec_host), R (remote), n (not known) -- Gfarm mode only.
CREATE TABLE IF NOT EXISTS pwrake_tasks (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    pwrake_id     INTEGER,               -- task_id in Pwrake's files
    name          TEXT NOT NULL,
    start_time    TEXT,                  -- as Pwrake wrote them (local time, ms)
    end_time      TEXT,
    elap_s        REAL,
    preq          TEXT,                  -- JSON list of prerequisite names
    preq_host     TEXT,                  -- JSON list: hosts Pwrake suggested from input locations
    preq_loc      TEXT,
    preq_local    INTEGER,               -- count of L in preq_loc (NULL when Pwrake knew no location)
    preq_remote   INTEGER,               -- count of R
    exec_host     TEXT,
    shell_id      INTEGER,
    has_action    INTEGER,
    executed      INTEGER,
    ncore         REAL,
    file_size     INTEGER,               -- the task's output file, when it is a file task
    file_host     TEXT,                  -- JSON list: hosts holding the output
    write_loc     TEXT,                  -- L / R: output on exec_host or not
    n_commands    INTEGER,               -- rows of command.csv for this task
    status        TEXT,                  -- last command's status (an exit code or Pwrake's word)
    UNIQUE (run_id, name)
);
