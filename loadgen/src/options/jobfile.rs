//! fio job files as fio reads them: `[global]` and `[job]` sections, `key=value` lines and
//! bare flags, `;` and `#` comments (whole lines, and the rest of a line, as fio strips
//! them), `include FILE` lines. A `[global]` section applies to the job sections after it,
//! as in fio. Keys are the same options as on the command line.

use std::path::{Component, Path, PathBuf};

use crate::options::table::{self, Pairs, Scope};
use crate::options::values::excerpt;

#[derive(Debug)]
pub struct JobFile {
    /// (job name, the global options in force at its section, its own options).
    pub jobs: Vec<(String, Pairs, Pairs)>,
    pub group_reporting: bool,
    /// The names of every job section, those `--section` left out too.
    pub sections: Vec<String>,
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
fn expand(v: &str, at: &str, env: Env<'_>, names: bool) -> Result<String, String> {
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
            // `filename_format`'s own keywords, replaced per job thread and file.
            None if names && matches!(word, "jobname" | "jobnum" | "filenum") => {
                out.push('$');
                out.push_str(word);
            }
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

/// A job file of this machine: `${VAR}` from this process's environment, `include`
/// files beside it or below its directory (`dir`).
/// With `only` not empty, only the job sections so named are read (fio's `--section`):
/// the others are skipped unread, as fio skips them.
pub fn parse(text: &str, origin: &str, only: &[String]) -> Result<JobFile, String> {
    let dir = Path::new(origin)
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let lines = lines(text, origin, Some(&dir))?;
    parse_lines(&lines, origin, Some(&|k| std::env::var(k).ok()), only)
}

/// A job file a job order carries: `${VAR}` is refused, never taken from the host, and so
/// is `include` (the host reads no file of its own).
pub fn parse_order(text: &str, origin: &str, only: &[String]) -> Result<JobFile, String> {
    parse_lines(&lines(text, origin, None)?, origin, None, only)
}

#[cfg(test)]
fn parse_with(text: &str, origin: &str, env: Env<'_>) -> Result<JobFile, String> {
    parse_lines(&lines(text, origin, None)?, origin, env, &[])
}

/// How deep `include`s nest, and how many one job file may pull in.
const MAX_INCLUDE_DEPTH: usize = 8;
const MAX_INCLUDES: usize = 64;

/// The lines of a job file with its `include`s in place, each with where it is
/// (`FILE:LINE`), comments stripped and blank lines left out.
fn lines(text: &str, origin: &str, dir: Option<&Path>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut stack = Vec::new();
    let mut count = 0;
    lines_into(text, origin, dir, &mut stack, &mut count, &mut out)?;
    Ok(out)
}

fn lines_into(
    text: &str,
    origin: &str,
    dir: Option<&Path>,
    stack: &mut Vec<PathBuf>,
    count: &mut usize,
    out: &mut Vec<(String, String)>,
) -> Result<(), String> {
    // Editors on some systems start UTF-8 files with a byte-order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (n, raw) in text.lines().enumerate() {
        let at = format!("{}:{}", excerpt(origin), n + 1);
        if raw.len() > MAX_LINE {
            return Err(format!(
                "{at}: the line is {} bytes long; job file lines are at most {MAX_LINE}",
                raw.len()
            ));
        }
        // As fio, a `;` or `#` starts a comment anywhere on a line.
        let line = raw.split([';', '#']).next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some(name) = line
            .strip_prefix("include")
            .filter(|r| r.starts_with([' ', '\t']))
            .map(str::trim)
        else {
            out.push((at, line.to_string()));
            continue;
        };
        let Some(dir) = dir else {
            return Err(format!(
                "{at}: `include {}`: a job order carries its job files whole; put the options in it",
                excerpt(name)
            ));
        };
        let rel = Path::new(name);
        if name.is_empty()
            || !rel
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "{at}: `include {}`: only files beside the job file or below its directory are included (no absolute path, no `..`)",
                excerpt(name)
            ));
        }
        let path = dir.join(rel);
        *count += 1;
        if *count > MAX_INCLUDES || stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(format!(
                "{at}: `include {}`: more than {MAX_INCLUDES} includes or {MAX_INCLUDE_DEPTH} levels deep",
                excerpt(name)
            ));
        }
        let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if stack.contains(&key) {
            return Err(format!(
                "{at}: `include {}` includes a file that includes it (a loop)",
                excerpt(name)
            ));
        }
        let text = crate::files::read_text(&path, crate::files::MAX_JOB_FILE)
            .map_err(|e| format!("{at}: cannot read include file {}: {e}", excerpt(name)))?;
        stack.push(key);
        let shown = path.display().to_string();
        let sub = path.parent().unwrap_or(dir).to_path_buf();
        lines_into(&text, &shown, Some(&sub), stack, count, out)?;
        stack.pop();
    }
    Ok(())
}

fn parse_lines(
    lines: &[(String, String)],
    origin: &str,
    env: Env<'_>,
    only: &[String],
) -> Result<JobFile, String> {
    let mut global: Pairs = Vec::new();
    let mut jobs: Vec<(String, Pairs, Pairs)> = Vec::new();
    let mut sections = Vec::new();
    let mut in_global = false;
    let mut skipping = false;
    let mut group_reporting = false;
    for (at, line) in lines {
        let (at, line) = (at.as_str(), line.as_str());
        if skipping && !line.starts_with('[') {
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
            skipping = false;
            if !in_global {
                sections.push(name.to_string());
                skipping = !only.is_empty() && !only.iter().any(|o| o == name);
                if !skipping {
                    jobs.push((name.to_string(), global.clone(), Vec::new()));
                }
            }
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => {
                let names = table::lookup(k.trim()).is_some_and(|d| d.name == "filename_format");
                (k.trim(), Some(expand(v.trim(), at, env, names)?))
            }
            None => (line, None),
        };
        let doc = table::lookup(key).ok_or_else(|| format!("{at}: {}", table::unknown(key)))?;
        // Refused where it is, before the options of the zoned device that follow it.
        if doc.name == "zonemode" && value.as_deref().map(str::trim) == Some("zbd") {
            return Err(format!("{at}: --zonemode={}", super::zones::ZBD));
        }
        if doc.name == "group_reporting" {
            group_reporting = value.as_deref().is_none_or(|v| v != "0");
            continue;
        }
        // `name=` in a section names its job, as in fio.
        if doc.name == "name"
            && !in_global
            && let (Some((job, _, _)), Some(v)) = (jobs.last_mut(), &value)
        {
            *job = v.clone();
            continue;
        }
        if doc.scope != Scope::Job {
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
    if sections.is_empty() {
        return Err(format!("{}: no job sections", excerpt(origin)));
    }
    Ok(JobFile {
        jobs,
        group_reporting,
        sections,
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
        let jf = parse_with(
            "[a]\nfilename_format=d/$jobname.$jobnum.$filenum\n",
            "f",
            env,
        )
        .unwrap();
        assert_eq!(
            jf.jobs[0].2[0].1.as_deref(),
            Some("d/$jobname.$jobnum.$filenum"),
            "kept for the file names"
        );
        assert!(parse_with("[a]\nfilename=$jobname\n", "f", env).is_err());
        let jf = parse_with("[a]\nfilename=/tmp/a$\n", "f", env).unwrap();
        assert_eq!(jf.jobs[0].2[0].1.as_deref(), Some("/tmp/a$"));
    }

    #[test]
    fn a_job_order_takes_nothing_from_the_environment() {
        let path = std::env::var("PATH").unwrap();
        let local = parse("[a]\nfilename=${PATH}\n", "f", &[]).unwrap();
        assert_eq!(local.jobs[0].2[0].1.as_deref(), Some(path.as_str()));
        let e = parse_order("[a]\nfilename=${PATH}\n", "f", &[]).unwrap_err();
        assert!(e.contains("environment") && !e.contains(&path), "{e}");
        assert!(
            parse_order("[a]\nnumjobs=$ncpus\n", "f", &[]).is_ok(),
            "fio's keywords stay"
        );
    }

    /// fio's `--section`: only the sections named are read; the others are skipped unread
    /// (a `${VAR}` there that is not set is no error), `[global]` applies as always.
    #[test]
    fn sections_named_are_the_only_jobs_read() {
        let text = "[global]\nbs=8k\n[default]\n[override]\nrw=${LOADGEN_TEST_UNSET_VAR}\n";
        let e = parse(text, "f", &[]).unwrap_err();
        assert!(e.contains("LOADGEN_TEST_UNSET_VAR is not set"), "{e}");
        let jf = parse(text, "f", &["default".to_string()]).unwrap();
        assert_eq!(jf.jobs.len(), 1);
        assert_eq!(jf.jobs[0].0, "default");
        assert_eq!(jf.jobs[0].1[0], ("bs".to_string(), Some("8k".to_string())));
        assert_eq!(jf.sections, ["default", "override"]);
        let jf = parse(text, "f", &["nope".to_string()]).unwrap();
        assert!(jf.jobs.is_empty());
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let jf = parse("\u{feff}[a]\nrw=write\n", "f", &[]).unwrap();
        assert_eq!(jf.jobs[0].0, "a");
    }

    #[test]
    fn sections_name_and_describe_their_jobs_and_comments_end_lines() {
        let jf = parse(
            "[global]\nbs=4k ; fio strips this\n[a]\nname=reader # and this\ndescription=reads\nrw=read;x\n",
            "f",
            &[],
        )
        .unwrap();
        let (name, global, own) = &jf.jobs[0];
        assert_eq!(name, "reader");
        assert_eq!(global[0], ("bs".to_string(), Some("4k".to_string())));
        assert_eq!(
            own[0],
            ("description".to_string(), Some("reads".to_string()))
        );
        assert_eq!(own[1], ("rw".to_string(), Some("read".to_string())));
    }

    #[test]
    fn includes_stay_beside_the_job_file_and_end() {
        let dir = std::env::temp_dir().join(format!("loadgen-include-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let main = dir.join("main.fio");
        std::fs::write(dir.join("sub/common.fio"), "bs=8k\ninclude more.fio\n").unwrap();
        std::fs::write(dir.join("sub/more.fio"), "iodepth=4\n").unwrap();
        std::fs::write(dir.join("loop.fio"), "include loop.fio\n").unwrap();
        let main_s = main.display().to_string();
        let jf = parse("[a]\ninclude sub/common.fio\nrw=write\n", &main_s, &[]).unwrap();
        let keys: Vec<_> = jf.jobs[0].2.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["bs", "iodepth", "rw"]);
        for (text, needle) in [
            ("[a]\ninclude /etc/passwd\n", "no absolute path"),
            ("[a]\ninclude ../x.fio\n", "no `..`"),
            ("[a]\ninclude loop.fio\n", "a loop"),
            (
                "[a]\ninclude none.fio\n",
                "cannot read include file none.fio",
            ),
        ] {
            let e = parse(text, &main_s, &[]).unwrap_err();
            assert!(e.contains(needle) && !e.contains('\n'), "{e}");
        }
        let e = parse_order("[a]\ninclude sub/common.fio\n", &main_s, &[]).unwrap_err();
        assert!(e.contains("job order"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_say_where() {
        assert!(
            parse("[a]\nbogus=1\n", "f", &[])
                .unwrap_err()
                .starts_with("f:2: unknown option --bogus")
        );
        assert!(
            parse("bs=4k\n[a]\n", "f", &[])
                .unwrap_err()
                .contains("before any section")
        );
        assert!(
            parse("[global]\nbs=4k\n", "f", &[])
                .unwrap_err()
                .contains("no job sections")
        );
        assert!(parse("[a\n", "f", &[]).unwrap_err().contains("without `]`"));
        assert!(
            parse("[a]\nbs\n", "f", &[])
                .unwrap_err()
                .contains("needs a value")
        );
        assert!(
            parse("[a]\noutput-format=json\n", "f", &[])
                .unwrap_err()
                .contains("command line")
        );
    }
}
