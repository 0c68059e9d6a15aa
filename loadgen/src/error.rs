//! How a run can fail, and the exit status each failure gets.

/// 0 success, 1 run-time failure, 2 bad options or refused target, 3 corrupt data found.
#[derive(Debug)]
pub enum Failure {
    /// Bad options, a bad job file, a missing or unsuitable target, a refused device.
    Usage(String),
    /// Something failed while running (an IO error, a system call).
    Runtime(anyhow::Error),
    /// --verify found corrupt blocks (already listed on stderr).
    Corrupt(u64),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Runtime(_) => 1,
            Failure::Corrupt(_) => 3,
        }
    }

    /// One line, for stderr.
    pub fn message(&self) -> String {
        match self {
            Failure::Usage(m) => m.clone(),
            Failure::Runtime(e) => format!("{e:#}").replace('\n', " "),
            Failure::Corrupt(n) => format!("--verify found {n} corrupt block(s)"),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        Failure::Runtime(e)
    }
}

/// `loadgen analyze` fails as `stornet analyze` does.
impl From<diagnose::Failure> for Failure {
    fn from(f: diagnose::Failure) -> Failure {
        match f {
            diagnose::Failure::Usage(m) => Failure::Usage(m),
            diagnose::Failure::Runtime(e) => Failure::Runtime(e),
        }
    }
}
