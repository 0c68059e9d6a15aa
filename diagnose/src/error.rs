//! How a diagnosis can fail, and the exit status each failure gets.

/// 0 a verdict (whatever it is), 1 run-time failure, 2 bad options or an unreadable record.
#[derive(Debug)]
pub enum Failure {
    /// Bad options, a file that is not a readable run record, an untrusted certificate.
    Usage(String),
    /// Prometheus cannot be reached or fails, the report cannot be printed.
    Runtime(anyhow::Error),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }

    /// One line, for stderr.
    pub fn message(&self) -> String {
        match self {
            Failure::Usage(m) => m.clone(),
            Failure::Runtime(e) => format!("{e:#}").replace('\n', " "),
        }
    }
}
