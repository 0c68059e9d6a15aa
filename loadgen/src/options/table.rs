//! Every option `loadgen run` knows: its fio name, aliases, whether it takes a value, where
//! it may appear, and its help line. Parsing and `loadgen run --help` both read this table.

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
        "PATH",
        "file or block device to run on (default: NAME.JOBNUM.0 in --directory)",
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
    OptionDoc {
        aliases: &["readwrite"],
        ..job(
            "rw",
            "RW",
            "read, write, randread, randwrite, readwrite (rw), randrw (default: read)",
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
    job(
        "rate_process",
        "linear|poisson",
        "how IOs of a rate are spaced: evenly (default) or as Poisson arrivals",
    ),
    job(
        "direct",
        "0|1",
        "O_DIRECT (default: 1, unlike fio; --direct=0 goes through the page cache)",
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
        "ioengine",
        "io_uring",
        "accepted for fio command lines: io_uring or libaio; loadgen always uses io_uring",
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
    flag(
        "thread",
        Scope::Job,
        "accepted for fio command lines; jobs are always threads",
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
    flag("help", Scope::Run, "print this list"),
];

/// Canonical form of a key: lower case, `-` and `_` equivalent, aliases resolved.
pub fn lookup(key: &str) -> Option<&'static OptionDoc> {
    let k = key.to_ascii_lowercase().replace('-', "_");
    OPTIONS.iter().find(|o| {
        o.name.replace('-', "_") == k || o.aliases.iter().any(|a| a.replace('-', "_") == k)
    })
}

/// The text of `loadgen run --help`.
pub fn help() -> String {
    let mut s = String::from(
        "Usage: loadgen run [OPTIONS] [JOBFILE...]\n\n\
         Runs a storage workload with fio's option names and value syntax (a fio command line\n\
         works with `fio` replaced by `loadgen run`). Options take `--key=value` or `--key value`.\n\n\
         Options:\n",
    );
    for o in OPTIONS {
        let lhs = if o.value.is_empty() {
            format!("--{}", o.name)
        } else {
            format!("--{}={}", o.name, o.value)
        };
        s.push_str(&format!("  {lhs:<28} {}\n", o.help));
    }
    s.push_str(
        "\nExit status: 0 success, 1 run-time failure (an IO error, a failed replica),\n\
         2 bad options or refused target, 3 --verify found corrupt data.\n",
    );
    s
}

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
        assert!(help().contains("--rate_iops=R[,W]"));
        assert_eq!(lookup("blocksize_split").unwrap().name, "bssplit");
        assert_eq!(lookup("iodepth-sweep").unwrap().name, "iodepth_sweep");
    }
}
