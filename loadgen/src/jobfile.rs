//! fio job files, the subset loadgen reads: `[global]` and `[job]` sections, `key=value`
//! lines and bare flags, `;` and `#` comments. A `[global]` section applies to the job
//! sections after it, as in fio. Keys are the same options as on the command line.

use crate::options::parse::Pairs;
use crate::options::table::{self, Scope};

#[derive(Debug)]
pub struct JobFile {
    /// (job name, the global options in force at its section, its own options).
    pub jobs: Vec<(String, Pairs, Pairs)>,
    pub group_reporting: bool,
}

pub fn parse(text: &str, origin: &str) -> Result<JobFile, String> {
    let mut global: Pairs = Vec::new();
    let mut jobs: Vec<(String, Pairs, Pairs)> = Vec::new();
    let mut in_global = false;
    let mut group_reporting = false;
    for (n, raw) in text.lines().enumerate() {
        let at = format!("{origin}:{}", n + 1);
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .ok_or_else(|| format!("{at}: section header without `]`"))?
                .trim();
            if name.is_empty() {
                return Err(format!("{at}: empty section name"));
            }
            in_global = name == "global";
            if !in_global {
                jobs.push((name.to_string(), global.clone(), Vec::new()));
            }
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (line, None),
        };
        let doc = table::lookup(key).ok_or_else(|| format!("{at}: unknown option `{key}`"))?;
        if doc.name == "group_reporting" {
            group_reporting = value.as_deref().is_none_or(|v| v != "0");
            continue;
        }
        if doc.scope != Scope::Job || doc.name == "name" {
            return Err(format!(
                "{at}: `{key}` belongs on the command line, not in a job file"
            ));
        }
        if value.is_none() && doc.arity == table::Arity::Value {
            return Err(format!("{at}: `{key}` needs a value (`{key}=...`)"));
        }
        let pair = (doc.name.to_string(), value);
        if in_global {
            global.push(pair);
        } else if let Some((_, _, own)) = jobs.last_mut() {
            own.push(pair);
        } else {
            return Err(format!("{at}: `{key}` comes before any section"));
        }
    }
    if jobs.is_empty() {
        return Err(format!("{origin}: no job sections"));
    }
    Ok(JobFile {
        jobs,
        group_reporting,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Rw;
    use crate::options::parse::build_job;

    const FILE: &str = "\
; a fio job file
[global]
ioengine=io_uring
direct=1
bs=4k
time_based
runtime=10
group_reporting

[reads]
rw=randread
iodepth=32
filename=/dev/loop7

# second job
[writes]
rw = randwrite
bs=64k
";

    #[test]
    fn sections_inherit_global() {
        let jf = parse(FILE, "t.fio").unwrap();
        assert!(jf.group_reporting);
        assert_eq!(jf.jobs.len(), 2);
        let jobs: Vec<_> = jf
            .jobs
            .iter()
            .map(|(name, g, own)| {
                let np = vec![("name".to_string(), Some(name.clone()))];
                build_job(&[g, &np, own]).unwrap()
            })
            .collect();
        assert_eq!(jobs[0].name, "reads");
        assert_eq!(
            (jobs[0].rw, jobs[0].bs[0], jobs[0].iodepth),
            (Rw::RandRead, 4096, 32)
        );
        assert_eq!((jobs[1].rw, jobs[1].bs[0]), (Rw::RandWrite, 65536));
        assert!(jobs[1].time_based);
        assert_eq!(jobs[1].runtime_ns, Some(10_000_000_000));
    }

    #[test]
    fn bad_files_say_where() {
        assert!(
            parse("[a]\nbogus=1\n", "f")
                .unwrap_err()
                .starts_with("f:2: unknown option")
        );
        assert!(
            parse("bs=4k\n[a]\n", "f")
                .unwrap_err()
                .contains("before any section")
        );
        assert!(
            parse("[global]\nbs=4k\n", "f")
                .unwrap_err()
                .contains("no job sections")
        );
        assert!(parse("[a\n", "f").unwrap_err().contains("without `]`"));
        assert!(
            parse("[a]\nbs\n", "f")
                .unwrap_err()
                .contains("needs a value")
        );
        assert!(
            parse("[a]\noutput-format=json\n", "f")
                .unwrap_err()
                .contains("command line")
        );
    }
}
