//! fio job files, the subset loadgen reads: `[global]` and `[job]` sections, `key=value`
//! lines and bare flags, `;` and `#` comments. A `[global]` section applies to the job
//! sections after it, as in fio. Keys are the same options as on the command line.

use crate::options::table::{self, Pairs, Scope};
use crate::options::values::excerpt;

#[derive(Debug)]
pub struct JobFile {
    /// (job name, the global options in force at its section, its own options).
    pub jobs: Vec<(String, Pairs, Pairs)>,
    pub group_reporting: bool,
}

/// Longest line read, as fio's (`OPT_LEN_MAX`).
const MAX_LINE: usize = 8192;

/// fio's reserved words: the page size, megabytes of memory and CPUs of this machine.
fn keyword(word: &str) -> Option<String> {
    // SAFETY: sysconf has no preconditions.
    let conf = |k| unsafe { libc::sysconf(k) }.max(0) as u64;
    match word {
        "pagesize" => Some(conf(libc::_SC_PAGESIZE).to_string()),
        "mb_memory" => {
            Some(((conf(libc::_SC_PHYS_PAGES) * conf(libc::_SC_PAGESIZE)) >> 20).to_string())
        }
        "ncpus" => Some(conf(libc::_SC_NPROCESSORS_CONF).to_string()),
        _ => None,
    }
}

/// Expands `${NAME}` from the environment and fio's `$pagesize`, `$mb_memory`, `$ncpus`, as
/// fio does. A variable that is not set, or any other `$NAME` (which fio would leave as it
/// is, creating a file named `$FILE`, say), is refused.
fn expand(v: &str, at: &str, env: Env<'_>) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(braced) = after.strip_prefix('{') {
            let end = braced
                .find('}')
                .ok_or_else(|| format!("{at}: `${{` without a closing `}}`"))?;
            let name = &braced[..end];
            let Some(env) = env else {
                return Err(format!(
                    "{at}: `${{{}}}`: a job order takes nothing from the host's environment",
                    excerpt(name)
                ));
            };
            let value = env(name).ok_or_else(|| {
                format!(
                    "{at}: environment variable {} is not set (for `${{{}}}`)",
                    excerpt(name),
                    excerpt(name)
                )
            })?;
            out.push_str(&value);
            rest = &braced[end + 1..];
            continue;
        }
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let word = &after[..len];
        if word.is_empty() {
            out.push('$');
            rest = after;
            continue;
        }
        match keyword(word) {
            Some(k) => out.push_str(&k),
            None => {
                return Err(format!(
                    "{at}: `${}` is not expanded; fio takes variables from the environment written `${{{}}}`",
                    excerpt(word),
                    excerpt(word)
                ));
            }
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where `${VAR}` comes from; `None`: nowhere (a job order's files).
type Env<'a> = Option<&'a dyn Fn(&str) -> Option<String>>;

/// A job file of this machine: `${VAR}` from this process's environment.
pub fn parse(text: &str, origin: &str) -> Result<JobFile, String> {
    parse_with(text, origin, Some(&|k| std::env::var(k).ok()))
}

/// A job file a job order carries: `${VAR}` is refused, never taken from the host.
pub fn parse_order(text: &str, origin: &str) -> Result<JobFile, String> {
    parse_with(text, origin, None)
}

fn parse_with(text: &str, origin: &str, env: Env<'_>) -> Result<JobFile, String> {
    // Editors on some systems start UTF-8 files with a byte-order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut global: Pairs = Vec::new();
    let mut jobs: Vec<(String, Pairs, Pairs)> = Vec::new();
    let mut in_global = false;
    let mut group_reporting = false;
    for (n, raw) in text.lines().enumerate() {
        let at = format!("{}:{}", excerpt(origin), n + 1);
        if raw.len() > MAX_LINE {
            return Err(format!(
                "{at}: the line is {} bytes long; job file lines are at most {MAX_LINE}",
                raw.len()
            ));
        }
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
            if name.contains(|c: char| c.is_control()) {
                return Err(format!(
                    "{at}: section `{}` has control characters",
                    excerpt(name)
                ));
            }
            in_global = name == "global";
            if !in_global {
                jobs.push((name.to_string(), global.clone(), Vec::new()));
            }
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(expand(v.trim(), &at, env)?)),
            None => (line, None),
        };
        let doc = table::lookup(key).ok_or_else(|| format!("{at}: {}", table::unknown(key)))?;
        if doc.name == "group_reporting" {
            group_reporting = value.as_deref().is_none_or(|v| v != "0");
            continue;
        }
        if doc.scope != Scope::Job || doc.name == "name" {
            return Err(format!(
                "{at}: `{}` belongs on the command line, not in a job file",
                excerpt(key)
            ));
        }
        if value.is_none() && doc.arity == table::Arity::Value {
            return Err(format!(
                "{at}: `{key}` needs a value (`{key}=...`)",
                key = excerpt(key)
            ));
        }
        let pair = (doc.name.to_string(), value);
        if in_global {
            global.push(pair);
        } else if let Some((_, _, own)) = jobs.last_mut() {
            own.push(pair);
        } else {
            return Err(format!("{at}: `{}` comes before any section", excerpt(key)));
        }
    }
    if jobs.is_empty() {
        return Err(format!("{}: no job sections", excerpt(origin)));
    }
    Ok(JobFile {
        jobs,
        group_reporting,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand_as_fio_does() {
        let env = |k: &str| (k == "DEV").then(|| "/dev/loop7".to_string());
        let env: Env<'_> = Some(&env);
        let jf = parse_with("[a]\nfilename=${DEV}\nnumjobs=$ncpus\n", "f", env).unwrap();
        assert_eq!(jf.jobs[0].2[0].1.as_deref(), Some("/dev/loop7"));
        let cpus = jf.jobs[0].2[1].1.clone().unwrap();
        assert!(cpus.parse::<u32>().unwrap() >= 1);
        let e = parse_with("[a]\nfilename=$FILE\n", "f", env).unwrap_err();
        assert!(e.starts_with("f:2: `$FILE` is not expanded"), "{e}");
        assert!(e.contains("${FILE}"), "{e}");
        let e = parse_with("[a]\nfilename=${NOPE}\n", "f", env).unwrap_err();
        assert!(e.contains("environment variable NOPE is not set"), "{e}");
        assert!(parse_with("[a]\nfilename=${DEV\n", "f", env).is_err());
        let jf = parse_with("[a]\nfilename=/tmp/a$\n", "f", env).unwrap();
        assert_eq!(jf.jobs[0].2[0].1.as_deref(), Some("/tmp/a$"));
    }

    #[test]
    fn a_job_order_takes_nothing_from_the_environment() {
        let path = std::env::var("PATH").unwrap();
        let local = parse("[a]\nfilename=${PATH}\n", "f").unwrap();
        assert_eq!(local.jobs[0].2[0].1.as_deref(), Some(path.as_str()));
        let e = parse_order("[a]\nfilename=${PATH}\n", "f").unwrap_err();
        assert!(e.contains("environment") && !e.contains(&path), "{e}");
        assert!(
            parse_order("[a]\nnumjobs=$ncpus\n", "f").is_ok(),
            "fio's keywords stay"
        );
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let jf = parse("\u{feff}[a]\nrw=write\n", "f").unwrap();
        assert_eq!(jf.jobs[0].0, "a");
    }

    #[test]
    fn bad_files_say_where() {
        assert!(
            parse("[a]\nbogus=1\n", "f")
                .unwrap_err()
                .starts_with("f:2: unknown option --bogus")
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
