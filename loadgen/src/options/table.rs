//! Every option `loadgen run` knows: its fio name, aliases, whether it takes a value, where
//! it may appear, and its help line. Parsing and `loadgen run --help` both read this table.

/// Options in the order given, by canonical name; None is a flag without a value.
pub type Pairs = Vec<(String, Option<String>)>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Belongs to a job (command line before or after `--name`, or a job file section).
    Job,
    /// Belongs to the whole run (command line only; `group_reporting` also in a job file).
    Run,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// `--key=value` or `--key value`.
    Value,
    /// `--key` alone means true; `--key=0` turns it off.
    Flag,
}

pub struct OptionDoc {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub arity: Arity,
    pub scope: Scope,
    pub value: &'static str,
    pub help: &'static str,
}

const fn job(name: &'static str, value: &'static str, help: &'static str) -> OptionDoc {
    OptionDoc {
        name,
        aliases: &[],
        arity: Arity::Value,
        scope: Scope::Job,
        value,
        help,
    }
}

const fn flag(name: &'static str, scope: Scope, help: &'static str) -> OptionDoc {
    OptionDoc {
        name,
        aliases: &[],
        arity: Arity::Flag,
        scope,
        value: "",
        help,
    }
}

const fn run(name: &'static str, value: &'static str, help: &'static str) -> OptionDoc {
    OptionDoc {
        name,
        aliases: &[],
        arity: Arity::Value,
        scope: Scope::Run,
        value,
        help,
    }
}

pub const OPTIONS: &[OptionDoc] = &[
    job(
        "name",
        "NAME",
        "start a new job called NAME; options before the first --name apply to every job",
    ),
    job(
        "filename",
        "PATH[:PATH]",
        "file or block device to run on; several, separated by `:`, take turns (default: NAME.JOBNUM.0 in --directory)",
    ),
    job(
        "directory",
        "DIR",
        "where to create files when --filename is not given (default: .)",
    ),
    job(
        "size",
        "SIZE",
        "bytes of the target each job uses (4k, 1G, 50%); default: the whole file or device",
    ),
    job(
        "filesize",
        "SIZE",
        "size of the job's file, as fio's with one file per job: --size when that is not given (a range is refused)",
    ),
    job(
        "nrfiles",
        "N",
        "files per job thread when --filename names none, --size divided among them (default: 1)",
    ),
    job(
        "filename_format",
        "NAME",
        "names of those files: $jobname, $jobnum, $filenum replaced (default: $jobname.$jobnum.$filenum), in --directory",
    ),
    job(
        "openfiles",
        "N",
        "accepted when at least --nrfiles: loadgen keeps every file of a job open",
    ),
    job(
        "file_service_type",
        "TYPE[:N]",
        "which file the next IO goes to: roundrobin (default; N IOs each), sequential (one file's region, then the next), random (a file drawn every N IOs)",
    ),
    flag(
        "unlink",
        Scope::Job,
        "remove the job's files when the run ends",
    ),
    job(
        "offset",
        "SIZE",
        "start of the job's region in each file (bytes or % of the file)",
    ),
    job(
        "offset_increment",
        "SIZE",
        "each clone of --numjobs starts this much further (clone N at offset + N x SIZE)",
    ),
    OptionDoc {
        aliases: &["io_limit"],
        ..job(
            "io_size",
            "SIZE",
            "bytes to transfer (default: --size); more than --size goes over the region again",
        )
    },
    job(
        "loops",
        "N",
        "run the size-based workload N times (default: 1)",
    ),
    job(
        "number_ios",
        "N",
        "stop after N IOs (counted before any other end)",
    ),
    OptionDoc {
        aliases: &["readwrite"],
        ..job(
            "rw",
            "RW",
            "read, write, randread, randwrite, readwrite (rw), randrw (default: read), trim, randtrim (holes punched in a file); `:N` as fio: sequential IO skips N bytes after each IO (back, if negative), random IO takes a new offset every N IOs",
        )
    },
    job(
        "rwmixread",
        "PCT",
        "percentage of reads in readwrite/randrw (default: 50)",
    ),
    job(
        "rwmixwrite",
        "PCT",
        "percentage of writes in readwrite/randrw",
    ),
    OptionDoc {
        aliases: &["blocksize"],
        ..job(
            "bs",
            "SIZE[,SIZE]",
            "IO size (default: 4k); SIZE,SIZE gives reads and writes their own, as in fio",
        )
    },
    OptionDoc {
        aliases: &["blocksize_range"],
        ..job(
            "bsrange",
            "MIN-MAX[,MIN-MAX]",
            "IO sizes drawn uniformly from the multiples of MIN up to MAX (reads[,writes])",
        )
    },
    OptionDoc {
        aliases: &["blocksize_split"],
        ..job(
            "bssplit",
            "SIZE/PCT:...[,...]",
            "IO sizes in the given shares, e.g. 4k/70:64k/30 (reads[,writes])",
        )
    },
    job(
        "bs_sweep",
        "SIZE,SIZE...",
        "sweep: run once per IO size (reads and writes alike), one result per point (loadgen's own)",
    ),
    job("iodepth", "N", "IOs in flight per job (default: 1)"),
    OptionDoc {
        aliases: &["iodepth_batch"],
        ..job(
            "iodepth_batch_submit",
            "N",
            "submit IOs N at a time (default: 1, each as soon as it is prepared; 0: the whole depth at once)",
        )
    },
    job(
        "iodepth_sweep",
        "N,N...",
        "sweep: run once per depth, one result per point (loadgen's own)",
    ),
    job(
        "numjobs",
        "N",
        "threads running this job, each with its own ring (default: 1)",
    ),
    OptionDoc {
        aliases: &["timeout"],
        ..job(
            "runtime",
            "TIME",
            "stop after TIME (60 = 60 s; 500ms, 2m, 1h)",
        )
    },
    flag(
        "time_based",
        Scope::Job,
        "run for --runtime even when --size has been covered (loops over it)",
    ),
    job(
        "ramp_time",
        "TIME",
        "run this long before measuring; ramp IOs are not in the results",
    ),
    job(
        "rate_iops",
        "R[,W]",
        "IOs per second per job (reads[,writes], as in fio) on a schedule; latency counts from each IO's scheduled start",
    ),
    job(
        "rate",
        "R[,W]",
        "bytes per second per job (reads[,writes]; 1m = 1 MiB/s), on a schedule like --rate_iops",
    ),
    OptionDoc {
        aliases: &["ratemin"],
        ..job(
            "rate_min",
            "R[,W]",
            "the job fails when its bytes per second (reads[,writes]) fall below R in a --rate_cycle window, after 2 s to settle (as fio)",
        )
    },
    job(
        "rate_iops_min",
        "R[,W]",
        "the job fails when its IOs per second (reads[,writes]) fall below R in a --rate_cycle window, like --rate_min",
    ),
    OptionDoc {
        aliases: &["ratecycle"],
        ..job(
            "rate_cycle",
            "MS",
            "window of --rate_min and --rate_iops_min, in milliseconds (default: 1000)",
        )
    },
    OptionDoc {
        aliases: &["ss"],
        ..job(
            "steadystate",
            "CRIT:LIMIT[%]",
            "with --ss_dur: stop the job when its IOPS or bandwidth settle: iops, bw (every sample within LIMIT of the window's mean), iops_slope, bw_slope (the window's slope below LIMIT); default iops_slope:0.01%",
        )
    },
    OptionDoc {
        aliases: &["ss_dur"],
        ..job(
            "steadystate_duration",
            "TIME",
            "the steady state window: this many 1 s samples of IOPS and bandwidth (default 0: no steady state check)",
        )
    },
    OptionDoc {
        aliases: &["ss_ramp"],
        ..job(
            "steadystate_ramp_time",
            "TIME",
            "start the steady state samples this long after the job's ramp (default 0)",
        )
    },
    job(
        "startdelay",
        "TIME[-TIME]",
        "start the job this long after its group (bare numbers are seconds; a range: each thread draws its delay in it)",
    ),
    job(
        "io_submit_mode",
        "inline|offload",
        "inline (default) or offload: IOs go out on their schedule whatever the completions do (the job's ring does both; see docs)",
    ),
    job(
        "exit_what",
        "group|stonewall|all",
        "what --exitall ends: the job's reporting group (default), every job running, or every job",
    ),
    job(
        "allow_file_create",
        "0|1",
        "0: a job whose file does not exist is refused rather than created (default 1)",
    ),
    job(
        "prio",
        "0-7",
        "IO priority level of the job's threads (ioprio_set)",
    ),
    job(
        "prioclass",
        "0-3",
        "IO priority class of the job's threads: 1 realtime, 2 best effort, 3 idle",
    ),
    job(
        "cmdprio_percentage",
        "PCT[,PCT]",
        "this share of the IOs (reads, writes) carry --cmdprio_class/--cmdprio in their io_uring entry",
    ),
    job(
        "cmdprio_class",
        "1-3[,1-3]",
        "class of the IOs --cmdprio_percentage or --cmdprio_bssplit pick (default 1, realtime)",
    ),
    job(
        "cmdprio",
        "0-7[,0-7]",
        "level of the IOs --cmdprio_percentage or --cmdprio_bssplit pick (default 0)",
    ),
    job(
        "cmdprio_bssplit",
        "BS/PCT[/CLASS/LEVEL]:…[,…]",
        "per IO size, the share of its IOs with a priority (and which)",
    ),
    flag(
        "log_prio",
        Scope::Job,
        "latency logs give each IO's priority (0xCLASS-LEVEL) rather than 1 for realtime, 0 else",
    ),
    job(
        "flow",
        "WEIGHT",
        "fio's flow control: the jobs of one --flow_id issue IOs in the ratio of their weights",
    ),
    job(
        "flow_id",
        "N",
        "the flow a job's --flow weight counts in (default 0)",
    ),
    job(
        "flow_sleep",
        "USEC",
        "how long a job ahead of its flow share waits before it tries again (default 0)",
    ),
    job(
        "numa_cpu_nodes",
        "NODES",
        "run the job's threads on these NUMA nodes' CPUs (`0`, `0-1`, `0,2`, `all`)",
    ),
    job(
        "numa_mem_policy",
        "MODE[:NODES]",
        "memory policy of the job's threads: default, local, prefer:N, bind:NODES, interleave:NODES",
    ),
    flag(
        "exitall_on_error",
        Scope::Job,
        "accepted: when a job fails, loadgen always ends the other jobs and runs no later group",
    ),
    flag(
        "exitall",
        Scope::Job,
        "when this job ends, the other jobs of its group end too (as fio's)",
    ),
    job(
        "continue_on_error",
        "none|read|write|io|verify|all",
        "errors of these kinds do not end the job when --ignore_error lists them (default lists: EIO, EILSEQ); they are counted in total_err and first_error, as fio's",
    ),
    job(
        "ignore_error",
        "READ,WRITE,VERIFY",
        "the errors --continue_on_error goes on after, per kind: `:`-separated names or numbers, e.g. `,ENOSPC` (trims are writes)",
    ),
    job(
        "error_dump",
        "0|1",
        "1 (default): each error --continue_on_error goes on after is named on stderr as it happens",
    ),
    job(
        "fallocate",
        "none|posix|keep|native|truncate",
        "how a file the job only writes is laid out: allocated (posix, keep, native) or extended (truncate) as fio's, or left to grow (none); not given: written whole",
    ),
    job(
        "create_on_open",
        "0|1",
        "1: the file is created empty when the job opens it, not laid out",
    ),
    job(
        "verify_fatal",
        "0|1",
        "1: the first corrupt block ends the job (default 0: every block is checked and each corrupt one reported)",
    ),
    job(
        "verify_async",
        "N",
        "accepted: loadgen checks each block in the job thread as its read completes",
    ),
    job(
        "rate_process",
        "linear|poisson",
        "how IOs of a rate are spaced: evenly (default) or as Poisson arrivals",
    ),
    job(
        "direct",
        "0|1",
        "O_DIRECT (default: 0, as in fio: through the page cache; --direct=1 measures the device)",
    ),
    job("buffered", "0|1", "the opposite of --direct"),
    OptionDoc {
        arity: Arity::Flag,
        ..job(
            "verify",
            "[crc32c]",
            "write a header (offset, generation, crc32c) into every block and check it on read",
        )
    },
    job(
        "verify_pattern",
        "0xHEX|N|\"TEXT\"...",
        "the bytes after each block's verify header (fio's default: random data), checked byte by byte on read; turns --verify on unless given",
    ),
    job(
        "verify_interval",
        "SIZE",
        "a verify header every SIZE bytes of each block, each checked on its own (default: one per block; SIZE divides --bs)",
    ),
    flag(
        "fill_device",
        Scope::Job,
        "write until the file system (or the device) is full: ENOSPC ends the workload, not the run, as fio's (sequential writes; refused in a job order)",
    ),
    flag(
        "create_serialize",
        Scope::Job,
        "accepted for fio job files; loadgen lays out its files one after the other before the run",
    ),
    job(
        "do_verify",
        "0|1",
        "read back and check what the job wrote, after its workload (default 1)",
    ),
    job(
        "verify_backlog",
        "N",
        "read back and check the blocks written every N blocks, during the workload (default: all at the end)",
    ),
    job(
        "verify_dump",
        "0|1",
        "write a corrupt block as read and as written to NAME.OFFSET.received and NAME.OFFSET.expected in the working directory (default 0)",
    ),
    job(
        "buffer_pattern",
        "0xHEX|N|\"TEXT\"...",
        "fill write buffers with these bytes, repeated from the start of each buffer (default: random data)",
    ),
    flag(
        "zero_buffers",
        Scope::Job,
        "fill write buffers with zeros (default: random data)",
    ),
    flag(
        "refill_buffers",
        Scope::Job,
        "new data for every write: the random part is taken from a per-job pool and stamped unique every 512 bytes (default 0; on with compression or dedupe)",
    ),
    job(
        "scramble_buffers",
        "0|1",
        "make each write's data unique by stamping every 512 bytes with the IO's offset and a counter (default 1, 0 with --zero_buffers)",
    ),
    job(
        "buffer_compress_percentage",
        "PCT",
        "each chunk of a write is PCT % fill (zeros or --buffer_pattern) after random data, so it compresses to about that (default: not set)",
    ),
    job(
        "buffer_compress_chunk",
        "SIZE",
        "the chunk --buffer_compress_percentage lays out (default 512; 0: the block size)",
    ),
    job(
        "dedupe_percentage",
        "PCT",
        "PCT % of writes are copies of an earlier block (see --dedupe_mode), so storage that deduplicates stores that much less (default: 0)",
    ),
    job(
        "dedupe_mode",
        "repeat|working_set",
        "a duplicate repeats the last unique block (repeat, default) or one of the job's first unique blocks, its working set (working_set)",
    ),
    job(
        "dedupe_working_set_percentage",
        "PCT",
        "the working set of dedupe_mode=working_set: this share of the job's region in blocks (default 5)",
    ),
    job(
        "dedupe_global",
        "0|1",
        "jobs running together with this set share one working set, spread evenly among them (default 0)",
    ),
    job(
        "ioengine",
        "ENGINE",
        "io_uring (default; libaio runs as io_uring), or sync / psync: one IO at a time with read/write or pread/pwrite",
    ),
    job(
        "random_generator",
        "tausworthe|tausworthe64|lfsr",
        "lfsr: random offsets visit every block once per pass over the region, as fio's; the others: independent draws from loadgen's own generator (default)",
    ),
    job(
        "rw_sequencer",
        "sequential|identical",
        "with rw=randread:N, the N-1 IOs after each random one follow on from it (default) or repeat its offset",
    ),
    OptionDoc {
        aliases: &["ba"],
        ..job(
            "blockalign",
            "SIZE[,SIZE]",
            "random offsets are multiples of SIZE (reads[,writes]; default: the IO size)",
        )
    },
    job(
        "random_distribution",
        "DIST",
        "where random IOs land: random, zipf:THETA, pareto:H, normal:DEV, zoned:A/S:..., zoned_abs:A/SIZE:...",
    ),
    job(
        "fsync",
        "N",
        "fsync after every N writes (the IOs in flight finish first, and the next wait for it)",
    ),
    job(
        "fdatasync",
        "N",
        "fdatasync after every N writes, like --fsync",
    ),
    flag(
        "end_fsync",
        Scope::Job,
        "fsync the files when the workload is done",
    ),
    job(
        "thinktime",
        "TIME",
        "pause this long (bare numbers are microseconds) after every --thinktime_blocks IOs, once the IOs in flight are done",
    ),
    job(
        "thinktime_spin",
        "TIME",
        "spend the first part of each --thinktime spinning on the CPU",
    ),
    job(
        "thinktime_blocks",
        "N",
        "IOs between think times (default: 1)",
    ),
    flag(
        "registerfiles",
        Scope::Job,
        "accepted for fio command lines; loadgen always registers its files",
    ),
    flag(
        "fixedbufs",
        Scope::Job,
        "accepted for fio command lines; loadgen always registers its buffers",
    ),
    OptionDoc {
        aliases: &["threads"],
        ..flag(
            "thread",
            Scope::Job,
            "accepted for fio command lines; jobs are always threads",
        )
    },
    flag(
        "gtod_reduce",
        Scope::Job,
        "accepted for fio job files; loadgen's clock costs little, and it keeps every latency",
    ),
    job(
        "clocksource",
        "SOURCE",
        "accepted for fio job files; loadgen's clock is CLOCK_MONOTONIC",
    ),
    job(
        "description",
        "TEXT",
        "a description of the job, as in fio (kept, not used)",
    ),
    OptionDoc {
        aliases: &["wait_for_previous"],
        ..flag(
            "stonewall",
            Scope::Job,
            "start this job when every job before it has ended; it starts a new group (as fio's, also `wait_for_previous`)",
        )
    },
    flag(
        "new_group",
        Scope::Job,
        "start a new reporting group with this job (as fio's)",
    ),
    job(
        "wait_for",
        "NAME",
        "start this job when job NAME, the one just before it, has ended (as fio's)",
    ),
    flag(
        "norandommap",
        Scope::Job,
        "accepted for fio command lines; random offsets never use a map",
    ),
    flag(
        "randrepeat",
        Scope::Job,
        "same random offsets on every run (default: 1)",
    ),
    OptionDoc {
        arity: Arity::Flag,
        ..job(
            "write_lat_log",
            "[NAME]",
            "fio's latency logs NAME_lat.N.log, NAME_slat.N.log, NAME_clat.N.log (ns; NAME: the job's name)",
        )
    },
    OptionDoc {
        arity: Arity::Flag,
        ..job(
            "write_bw_log",
            "[NAME]",
            "fio's bandwidth log NAME_bw.N.log (KiB/s)",
        )
    },
    OptionDoc {
        arity: Arity::Flag,
        ..job("write_iops_log", "[NAME]", "fio's IOPS log NAME_iops.N.log")
    },
    OptionDoc {
        arity: Arity::Flag,
        ..job(
            "write_hist_log",
            "[NAME]",
            "fio's histogram log NAME_clat_hist.N.log, a line per --log_hist_msec window",
        )
    },
    job(
        "log_avg_msec",
        "MS",
        "average the logs over windows of MS milliseconds (default: a line per IO)",
    ),
    job(
        "log_offset",
        "0|1",
        "a column after the IO size in the latency, bandwidth and IOPS logs: the IO's offset in its file (0 on averaged lines), as fio's",
    ),
    job(
        "log_hist_msec",
        "MS",
        "window of the histogram log, in milliseconds",
    ),
    job(
        "latency_target",
        "TIME",
        "find the highest depth (up to --iodepth) at which IOs meet TIME (bare numbers are microseconds), as fio",
    ),
    job(
        "latency_window",
        "TIME",
        "length of each step of the --latency_target search (default: 1s; bare numbers are microseconds)",
    ),
    job(
        "latency_percentile",
        "PCT",
        "share of a step's IOs that must meet --latency_target (default: 100)",
    ),
    flag(
        "latency_run",
        Scope::Job,
        "keep adjusting the depth until --runtime ends instead of stopping at the depth found",
    ),
    job(
        "percentile_list",
        "P:P...",
        "the completion-latency percentiles reported (default: fio's 1 to 99.99), e.g. 99:99.9:99.99",
    ),
    flag(
        "group_reporting",
        Scope::Run,
        "report one merged entry per sweep point instead of one per job",
    ),
    run(
        "profile",
        "NAME",
        "preset workload: hcibench-easy, io-size-sweep, queue-depth-sweep (options given override it)",
    ),
    run(
        "output-format",
        "FMT[,FMT]",
        "normal (readable text, default), json (fio's layout plus loadgen's own keys), json+ (also latency bins), terse (fio's minimal)",
    ),
    flag(
        "minimal",
        Scope::Run,
        "fio's terse format (the same as --output-format=terse)",
    ),
    run(
        "output",
        "FILE",
        "write the report to FILE instead of stdout",
    ),
    run(
        "interval",
        "TIME",
        "length of one timeline interval (default: 1s)",
    ),
    run(
        "status-interval",
        "TIME",
        "print interim results (in the --output-format) this often, as fio does",
    ),
    run(
        "metrics-address",
        "ADDR",
        "serve the run's live metrics for Prometheus on ADDR (e.g. 127.0.0.1:9478)",
    ),
    run(
        "agent",
        "[NAME=]URL",
        "sample a stornet-agent's /metrics every interval into the run record (repeatable; the host loadgen runs on first)",
    ),
    run(
        "agent-ca-file",
        "FILE",
        "CA certificates (PEM) that verify https agents, instead of the Mozilla roots",
    ),
    run(
        "agent-cert-file",
        "FILE",
        "client certificate (PEM) for agents that require mutual TLS (with --agent-key-file)",
    ),
    run(
        "agent-key-file",
        "FILE",
        "private key (PEM) of --agent-cert-file",
    ),
    flag(
        "agent-insecure-skip-verify",
        Scope::Run,
        "accept any certificate from https agents (tests only: anyone between can read and change the samples)",
    ),
    run(
        "agent-bearer-token-file",
        "FILE",
        "send the token in FILE as `Authorization: Bearer` to agents whose URL has no user:password@",
    ),
    run(
        "record",
        "FILE",
        "write a run record (options, timeline, histograms, agents' series) for `loadgen analyze`",
    ),
    flag(
        "force-destroy-data",
        Scope::Run,
        "write to a block device even if it carries a filesystem or partition signature",
    ),
    run(
        "eta",
        "WHEN",
        "progress bar on stderr: auto (when it is a terminal, default) or never",
    ),
    run(
        "replica",
        "ADDR:PORT",
        "also send every write to this replica (`loadgen serve`); repeat for more. A write completes when all have acknowledged; reads stay local",
    ),
    run(
        "replica_token_file",
        "FILE",
        "file holding the token the replicas expect (as given to `loadgen serve --token-file`)",
    ),
    run(
        "replica_timeout",
        "TIME",
        "a replica that leaves a write (or the connect and handshake) unanswered this long has failed (default: 5s)",
    ),
    run(
        "client",
        "[NAME=]HOST[:PORT]",
        "run the job on this host's `loadgen serve --jobs-listen` (default port 7481), all hosts at one instant; repeat for more, or give a file with one host per line. Options after a --client are that host's own",
    ),
    run(
        "client-token-file",
        "FILE",
        "file holding the token the hosts' `loadgen serve --token-file` expects",
    ),
    run(
        "client-timeout",
        "TIME",
        "a host silent this long (at connect, while preparing, while running) has failed: the others are stopped (default: 10s)",
    ),
    run(
        "replica-volume-prefix",
        "NAME",
        "put NAME. before every replica volume's name (a cluster host's name: what `loadgen serve` gives its jobs)",
    ),
    flag(
        "start-gate",
        Scope::Run,
        "after the checks and the layout, print `ready` and wait for `start UNIX_NS` or `abort` on stdin (how `loadgen serve` runs a job order)",
    ),
    flag(
        "parse-only",
        Scope::Run,
        "check the options and job files and exit, running nothing (as fio's)",
    ),
    job(
        "zonemode",
        "none|strided",
        "strided: fio's plain zones, --zonesize bytes of sequential IO in each zone of --zonerange bytes, then --zoneskip bytes left out (zbd, a zoned block device's zones, is refused)",
    ),
    job(
        "zonesize",
        "SIZE",
        "with --zonemode=strided, bytes of IO in each zone before the next",
    ),
    job(
        "zonerange",
        "SIZE",
        "with --zonemode=strided, bytes each zone spans (default --zonesize)",
    ),
    job(
        "zoneskip",
        "SIZE",
        "with --zonemode=strided, bytes left out after each zone (default 0)",
    ),
    run(
        "section",
        "NAME",
        "run only the job file sections called NAME (repeatable; `[global]` applies as always), as fio's --section",
    ),
    flag("help", Scope::Run, "print this list"),
];

/// fio options loadgen does not run (docs/loadgen.md lists them): refused by name, rather
/// than silently measuring something other than asked.
pub const FIO_UNSUPPORTED: &[&str] = &[
    "allrandrepeat",
    "bs_is_seq_rand",
    "bs_unaligned",
    "bwavgtime",
    "clat_percentiles",
    "cpumask",
    "cpus_allowed",
    "disable_bw_measurement",
    "disable_clat",
    "disable_lat",
    "disable_slat",
    "fsync_on_close",
    "hipri",
    "invalidate",
    "iodepth_batch_complete",
    "iodepth_batch_complete_max",
    "iodepth_batch_complete_min",
    "iodepth_low",
    "iopsavgtime",
    "kb_base",
    "lat_percentiles",
    "lockfile",
    "log_compression",
    "log_max_value",
    "max_latency",
    "nice",
    "offset_align",
    "percentage_random",
    "per_job_logs",
    "randseed",
    "rate_ignore_thinktime",
    "read_iolog",
    "replay_redirect",
    "rwmixcycle",
    "serialize_overlap",
    "sig_figs",
    "size_increment",
    "slat_percentiles",
    "sqthread_poll",
    "sync",
    "unified_rw_reporting",
    "unit_base",
    "write_iolog",
];

/// Why loadgen does not run some of fio's options, for the one line that refuses them.
const WHY: &[(&[&str], &str)] = &[
    (
        &[
            "max_open_zones",
            "job_max_open_zones",
            "ignore_zone_limits",
            "read_beyond_wp",
            "zone_reset_threshold",
            "zone_reset_frequency",
            "zonecapacity",
        ],
        "it is for a zoned block device (zonemode=zbd), which loadgen does not drive",
    ),
    (
        &["verify_offset"],
        "loadgen's verify header starts each block (or each --verify_interval of it)",
    ),
    (
        &["read_iolog", "write_iolog", "replay_redirect"],
        "IO logs are not replayed or written",
    ),
    (
        &["cpumask", "cpus_allowed"],
        "jobs are bound to CPUs by NUMA node only (numa_cpu_nodes)",
    ),
];

/// The message for an option that is not in the table: fio's options are named as such,
/// with why loadgen does not run them where that is known.
pub fn unknown(key: &str) -> String {
    let k = key.to_ascii_lowercase().replace('-', "_");
    let shown = super::values::excerpt(key);
    if let Some((_, why)) = WHY.iter().find(|(keys, _)| keys.contains(&k.as_str())) {
        format!("--{shown} is a fio option loadgen does not run: {why}")
    } else if FIO_UNSUPPORTED.contains(&k.as_str()) {
        format!(
            "--{shown} is a fio option loadgen does not support (docs/loadgen.md lists fio's options and what loadgen does with them)"
        )
    } else {
        format!("unknown option --{shown} (`loadgen run --help` lists the options)")
    }
}

/// Canonical form of a key: lower case, `-` and `_` equivalent, aliases resolved.
pub fn lookup(key: &str) -> Option<&'static OptionDoc> {
    let k = key.to_ascii_lowercase().replace('-', "_");
    OPTIONS.iter().find(|o| {
        o.name.replace('-', "_") == k || o.aliases.iter().any(|a| a.replace('-', "_") == k)
    })
}

/// The text of `loadgen run --help`.
pub fn help() -> String {
    let mut s = format!("Usage: loadgen run [OPTIONS] [JOBFILE...]\n\n{HELP_INTRO}\n\nOptions:\n");
    for o in OPTIONS {
        let lhs = if o.value.is_empty() {
            format!("--{}", o.name)
        } else {
            format!("--{}={}", o.name, o.value)
        };
        s.push_str(&format!("  {lhs:<28} {}\n", o.help));
    }
    s.push_str(&format!("\n{EXIT_STATUS}\n"));
    s
}

/// `loadgen run` (given as clap has it, for its name and summary) with the table's options, for
/// its man page and shell completions. The options are parsed by [`super::parse`], not by clap:
/// this only describes them.
pub fn command(run: clap::Command) -> clap::Command {
    let mut cmd = clap::Command::new("run")
        .about(run.get_about().cloned().unwrap_or_default())
        .long_about(HELP_INTRO)
        .override_usage("loadgen run [OPTIONS] [JOBFILE...]")
        .disable_help_flag(true)
        .after_help(EXIT_STATUS);
    for o in OPTIONS {
        // Man pages do not show clap's aliases: the help line names them.
        let help = match o.aliases {
            [] => o.help.to_string(),
            aliases => format!("{} (also --{})", o.help, aliases.join(", --")),
        };
        let mut arg = clap::Arg::new(o.name)
            .long(o.name)
            .visible_aliases(o.aliases.iter().copied())
            .help(help);
        arg = match o.arity {
            Arity::Value => arg.value_name(o.value),
            Arity::Flag => arg.action(clap::ArgAction::SetTrue),
        };
        cmd = cmd.arg(arg);
    }
    cmd.arg(
        clap::Arg::new("JOBFILE")
            .num_args(0..)
            .value_hint(clap::ValueHint::FilePath)
            .help("fio job files to run"),
    )
}

const HELP_INTRO: &str = "Runs a storage workload with fio's option names and value syntax (a fio command line\n\
     works with `fio` replaced by `loadgen run`). Options take `--key=value` or `--key value`.";

const EXIT_STATUS: &str = "Exit status: 0 success, 1 run-time failure (an IO error, a failed replica),\n\
     2 bad options or refused target, 3 --verify found corrupt data.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_accept_fio_spellings() {
        assert_eq!(lookup("blocksize").unwrap().name, "bs");
        assert_eq!(lookup("readwrite").unwrap().name, "rw");
        assert_eq!(lookup("output_format").unwrap().name, "output-format");
        assert_eq!(lookup("time-based").unwrap().name, "time_based");
        assert!(lookup("bogus").is_none());
        assert!(unknown("verify_offset").contains("fio option loadgen does not run: "));
        assert!(unknown("kb_base").contains("fio option loadgen does not support"));
        for (keys, _) in WHY {
            for k in *keys {
                assert!(lookup(k).is_none(), "{k} has a reason and is in the table");
            }
        }
        assert!(unknown("bogus").starts_with("unknown option --bogus"));
        for k in FIO_UNSUPPORTED {
            assert!(
                lookup(k).is_none(),
                "{k} is in the table and in the unsupported list"
            );
        }
        assert!(help().contains("--rate_iops=R[,W]"));
        assert_eq!(lookup("blocksize_split").unwrap().name, "bssplit");
        assert_eq!(lookup("ba").unwrap().name, "blockalign");
        assert_eq!(lookup("ratemin").unwrap().name, "rate_min");
        assert_eq!(lookup("ratecycle").unwrap().name, "rate_cycle");
        assert_eq!(lookup("iodepth-sweep").unwrap().name, "iodepth_sweep");
    }

    /// The man page and the bash completion of `loadgen run` name every option of the table
    /// and every alias, as `--NAME`.
    #[test]
    fn man_page_and_completion_name_every_option() {
        let cmd = command(clap::Command::new("run").about("Run a workload"));
        cmd.clone().debug_assert();
        let dir = std::env::temp_dir().join(format!("loadgen-docs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        cli_docs::write(cmd, &dir).unwrap();
        // roff writes a dash as `\-`; an option ends at a space, `=`, `,` or `]`.
        let page = std::fs::read_to_string(dir.join("man/run.1"))
            .unwrap()
            .replace("\\-", "-");
        let bash = std::fs::read_to_string(dir.join("completions/run.bash")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let named = |text: &str, opt: &str| {
            text.match_indices(opt).any(|(i, _)| {
                !text[i + opt.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            })
        };
        assert!(page.contains("Exit status"));
        for o in OPTIONS {
            for name in std::iter::once(&o.name).chain(o.aliases) {
                let opt = format!("--{name}");
                assert!(named(&page, &opt), "the man page lacks {opt}");
                assert!(named(&bash, &opt), "the bash completion lacks {opt}");
            }
        }
    }
}
