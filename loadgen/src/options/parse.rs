//! fio's command-line model: options before the first `--name` are global, each `--name`
//! starts a job, positional arguments are job files. Profiles supply defaults that every
//! option given explicitly overrides.

use std::path::PathBuf;

use super::table::{self, Arity, Pairs, Scope};
use super::{JobOptions, Plan, RunSettings};
use super::{jobfile, profiles};

pub enum Parsed {
    Help,
    Plan(Box<Plan>),
}

/// Builds one job from layers of options, later layers overriding earlier ones.
pub fn build_job(layers: &[&Pairs]) -> Result<JobOptions, String> {
    let mut job = JobOptions::default();
    for layer in layers {
        for (k, v) in layer.iter() {
            job.set(k, v.as_deref())?;
        }
    }
    // fio's `filesize`: the size of each of the job's files, so the job's size is that
    // times the files unless `size` says otherwise; a `size` larger than the files is cut
    // to them, as fio's.
    if let Some(fs) = job.filesize {
        let files = job.file_count().max(1) as u64;
        let total = fs.saturating_mul(files);
        match job.size {
            None => job.size = Some(super::values::SizeSpec::Bytes(total)),
            Some(super::values::SizeSpec::Bytes(s)) if s >= total => {
                job.size = Some(super::values::SizeSpec::Bytes(total));
            }
            Some(_) => {
                return Err(format!(
                    "--filesize={fs} with another --size: loadgen divides --size among the job's {files} file(s), so --size must be at least {total} or left out"
                ));
            }
        }
    }
    Ok(job)
}

/// Where the job files of a command line come from.
#[derive(Clone, Copy, Debug)]
pub enum JobFiles<'a> {
    /// Read from this machine; `${VAR}` in them from this process's environment.
    Local,
    /// Carried by a job order as (name on its command line, content): nothing is read from
    /// the machine and nothing taken from its environment.
    Given(&'a [(String, String)]),
}

pub fn parse_args(args: &[String]) -> Result<Parsed, String> {
    parse_args_from(args, JobFiles::Local)
}

/// As [`parse_args`], with the job files from `files`.
pub fn parse_args_from(args: &[String], files_from: JobFiles<'_>) -> Result<Parsed, String> {
    let mut settings = RunSettings::default();
    let mut global: Pairs = Vec::new();
    let mut cli_jobs: Vec<Pairs> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "-h" {
            return Ok(Parsed::Help);
        }
        let Some(body) = a.strip_prefix("--") else {
            if a.starts_with('-') && a.len() > 1 {
                return Err(format!(
                    "unknown option {a} (loadgen run takes --key=value options; `loadgen run --help` lists them)"
                ));
            }
            files.push(PathBuf::from(a));
            continue;
        };
        let (key, inline) = match body.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (body, None),
        };
        let doc = table::lookup(key).ok_or_else(|| table::unknown(key))?;
        if doc.name == "help" {
            return Ok(Parsed::Help);
        }
        let value = match (doc.arity, inline) {
            (_, Some(v)) => Some(v),
            (Arity::Flag, None) => None,
            (Arity::Value, None) => {
                let v = args
                    .get(i)
                    .ok_or_else(|| format!("--{} needs a value", doc.name))?;
                i += 1;
                Some(v.clone())
            }
        };
        match doc.scope {
            Scope::Run => settings.set(doc.name, value.as_deref())?,
            Scope::Job if doc.name == "name" => {
                cli_jobs.push(vec![("name".to_string(), value)]);
            }
            Scope::Job => {
                let pair = (doc.name.to_string(), value);
                match cli_jobs.last_mut() {
                    Some(job) => job.push(pair),
                    None => global.push(pair),
                }
            }
        }
    }

    let profile: Pairs = match &settings.profile {
        Some(p) => profiles::pairs(p)?,
        None => Vec::new(),
    };
    let mut global_options = std::collections::BTreeMap::new();
    let mut note_globals = |pairs: &Pairs| {
        for (k, v) in pairs {
            if let Some(v) = v {
                global_options.insert(k.clone(), v.clone());
            }
        }
    };
    note_globals(&global);
    let mut jobs = Vec::new();
    let mut job_files = Vec::new();
    let mut sections_seen: Vec<String> = Vec::new();
    for f in &files {
        let origin = f.display().to_string();
        let jf = match files_from {
            JobFiles::Local => {
                let text = crate::files::read_text(f, crate::files::MAX_JOB_FILE)
                    .map_err(|e| format!("cannot read job file {origin}: {e}"))?;
                let jf = jobfile::parse(&text, &origin, &settings.sections)?;
                job_files.push((origin.clone(), text));
                jf
            }
            JobFiles::Given(given) => {
                let (_, text) = given.iter().find(|(n, _)| *n == origin).ok_or_else(|| {
                    format!(
                        "refused: job file {}: a job order carries its job files, the host reads none of its own",
                        super::values::excerpt(&origin)
                    )
                })?;
                let jf = jobfile::parse_order(text, &origin, &settings.sections)?;
                job_files.push((origin.clone(), text.clone()));
                jf
            }
        };
        settings.group_reporting |= jf.group_reporting;
        sections_seen.extend(jf.sections.iter().cloned());
        for (name, section_global, section) in &jf.jobs {
            note_globals(section_global);
            let name_pair: Pairs = vec![("name".into(), Some(name.clone()))];
            // Global command-line options override the job file: `loadgen run --runtime=5 x.fio`.
            jobs.push(
                build_job(&[&profile, section_global, &name_pair, section, &global]).map_err(
                    |e| {
                        format!(
                            "{}: job {}: {e}",
                            super::values::excerpt(&origin),
                            super::values::excerpt(name)
                        )
                    },
                )?,
            );
        }
    }
    // fio runs nothing for a `--section` no job file has; a misspelt name is refused.
    if let Some(s) = settings
        .sections
        .iter()
        .find(|s| !sections_seen.contains(s))
    {
        return Err(format!(
            "--section={}: no job file has a section so named",
            super::values::excerpt(s)
        ));
    }
    for j in &cli_jobs {
        jobs.push(build_job(&[&profile, &global, j])?);
    }
    if jobs.is_empty() {
        jobs.push(build_job(&[&profile, &global])?);
    }
    Ok(Parsed::Plan(Box::new(Plan {
        settings,
        jobs,
        global_options,
        args: args.to_vec(),
        job_files,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Rw;

    /// A job file with a global section and two jobs.
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
    fn job_file_sections_inherit_global() {
        let jf = jobfile::parse(FILE, "t.fio", &[]).unwrap();
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
    fn filesize_is_the_size_of_the_jobs_one_file() {
        let p = plan(&["--filesize=1m"]).unwrap();
        assert_eq!(
            p.jobs[0].size,
            Some(crate::options::values::SizeSpec::Bytes(1 << 20))
        );
        assert!(plan(&["--filesize=1m", "--size=1m"]).is_ok());
        let p = plan(&["--filesize=1m", "--size=4m"]).unwrap();
        assert_eq!(
            p.jobs[0].size,
            Some(crate::options::values::SizeSpec::Bytes(1 << 20)),
            "a larger size is cut to the file's, as fio's"
        );
        let e = plan(&["--filesize=2m", "--size=1m"]).unwrap_err();
        assert!(e.contains("--filesize=2097152 with another --size"), "{e}");
        let p = plan(&["--filesize=1m", "--nrfiles=3"]).unwrap();
        assert_eq!(
            p.jobs[0].size,
            Some(crate::options::values::SizeSpec::Bytes(3 << 20)),
            "each of the three files is 1m, as fio's"
        );
        let e = plan(&["--filesize=1k-8k"]).unwrap_err();
        assert!(e.contains("not a range"), "{e}");
    }

    #[test]
    fn job_file_errors_about_long_lines_stay_short() {
        let long = "x".repeat(100_000);
        for text in [
            format!("[a]\n{long}\n"),
            format!("[a]\n{}\n", "y".repeat(5000)),
            format!("[a]\nbs={}\n", "9".repeat(5000)),
            format!("[{}]\nbogus\n", "z".repeat(3000)),
        ] {
            let e = match jobfile::parse(&text, "f", &[]) {
                Err(e) => e,
                Ok(jf) => {
                    let (name, g, own) = &jf.jobs[0];
                    let np = vec![("name".to_string(), Some(name.clone()))];
                    build_job(&[g, &np, own]).unwrap_err()
                }
            };
            assert!(
                e.len() < 200 && !e.contains('\n'),
                "{} bytes: {}",
                e.len(),
                &e[..80]
            );
        }
    }

    fn plan(args: &[&str]) -> Result<Plan, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse_args(&v)? {
            Parsed::Plan(p) => Ok(*p),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn a_fio_command_line_parses() {
        let p = plan(&[
            "--name=randread",
            "--filename=/dev/loop3",
            "--ioengine=io_uring",
            "--registerfiles",
            "--fixedbufs",
            "--direct=1",
            "--rw=randread",
            "--bs=4k",
            "--iodepth",
            "32",
            "--numjobs=2",
            "--time_based",
            "--runtime=60",
            "--ramp_time=2",
            "--group_reporting",
            "--output-format=json",
        ])
        .unwrap();
        assert_eq!(p.jobs.len(), 1);
        let j = &p.jobs[0];
        assert_eq!(j.name, "randread");
        assert_eq!(j.rw, Rw::RandRead);
        assert_eq!(j.iodepth, 32);
        assert_eq!(j.numjobs, 2);
        assert!(j.time_based && j.direct);
        assert_eq!(j.runtime_ns, Some(60_000_000_000));
        assert_eq!(j.ramp_time_ns, 2_000_000_000);
        assert!(p.settings.group_reporting);
        assert!(p.settings.output_format.json && !p.settings.output_format.normal);
        let p = plan(&["--output-format=normal,json+"]).unwrap();
        let f = p.settings.output_format;
        assert!(f.normal && f.json && f.json_plus && !f.terse);
        assert_eq!(String::from(f), "normal,json+");
        assert!(plan(&["--minimal"]).unwrap().settings.output_format.terse);
    }

    #[test]
    fn globals_apply_to_every_job_and_jobs_override() {
        let p = plan(&["--bs=8k", "--name=a", "--rw=write", "--name=b", "--bs=16k"]).unwrap();
        assert_eq!(p.jobs.len(), 2);
        assert_eq!(p.global_options["bs"], "8k");
        assert_eq!((p.jobs[0].name.as_str(), p.jobs[0].bs[0]), ("a", 8192));
        assert_eq!(p.jobs[0].rw, Rw::Write);
        assert_eq!((p.jobs[1].name.as_str(), p.jobs[1].bs[0]), ("b", 16384));
        assert_eq!(p.jobs[1].rw, Rw::Read);
    }

    #[test]
    fn profiles_give_defaults_that_options_override() {
        let p = plan(&["--profile=hcibench-easy", "--runtime=5"]).unwrap();
        let j = &p.jobs[0];
        assert_eq!((j.rw, j.rwmixread, j.bs[0]), (Rw::RandRw, 70, 4096));
        assert_eq!(j.runtime_ns, Some(5_000_000_000));
        let p = plan(&["--profile", "io-size-sweep"]).unwrap();
        assert_eq!(p.jobs[0].bs_sweep.first(), Some(&4096));
        assert_eq!(p.jobs[0].bs_sweep.last(), Some(&(256 << 10)));
        let p = plan(&["--profile", "queue-depth-sweep"]).unwrap();
        assert_eq!(p.jobs[0].iodepth_sweep, vec![1, 2, 4, 8, 16, 32, 64]);
        // An option given overrides the profile's sweep.
        let p = plan(&["--profile=io-size-sweep", "--bs=8k"]).unwrap();
        assert!(p.jobs[0].bs_sweep.is_empty());
        assert_eq!(p.jobs[0].bs, vec![8192]);
        assert!(
            plan(&["--profile=nope"])
                .unwrap_err()
                .contains("unknown profile")
        );
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(
            plan(&["--bogus=1"])
                .unwrap_err()
                .contains("unknown option --bogus")
        );
        assert!(plan(&["--iodepth=0"]).unwrap_err().contains("iodepth"));
        assert!(plan(&["--bs"]).unwrap_err().contains("needs a value"));
        assert!(plan(&["-x"]).unwrap_err().contains("unknown option -x"));
        assert!(plan(&["--output-format=xml"]).is_err());
        assert!(matches!(
            parse_args(&["--help".to_string()]),
            Ok(Parsed::Help)
        ));
    }
}
