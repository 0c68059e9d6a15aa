//! Man pages and shell completions of a program, written from its clap command line, so that
//! they list exactly the options the program takes. Each of stornet-agent, stornet and loadgen
//! has a hidden `generate-docs DIR` subcommand that calls [`write`]; `cargo xtask package`
//! runs it and ships the files in the Debian packages.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap_complete::Shell;

/// The hidden `generate-docs` subcommand.
#[derive(clap::Args, Debug)]
pub struct GenerateDocs {
    /// Directory to write `man/*.1` and `completions/` into (created if missing).
    pub dir: PathBuf,
}

impl GenerateDocs {
    /// Writes the documents of `cmd` (the program's whole command line); on failure prints one
    /// line and gives exit code 1.
    pub fn run(&self, cmd: clap::Command) -> ExitCode {
        let name = cmd.get_name().to_string();
        match write(cmd, &self.dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{name}: generate-docs {}: {e}", self.dir.display());
                ExitCode::FAILURE
            }
        }
    }
}

/// Writes into `dir`: `man/NAME.1` and one page per visible subcommand (`man/NAME-SUB.1`),
/// and the completions `completions/NAME.bash`, `completions/_NAME` (zsh) and
/// `completions/NAME.fish`. The man pages leave hidden subcommands out; clap_complete's
/// scripts offer them too.
pub fn write(mut cmd: clap::Command, dir: &Path) -> io::Result<()> {
    let name = cmd.get_name().to_string();
    let man = dir.join("man");
    std::fs::create_dir_all(&man)?;
    clap_mangen::generate_to(cmd.clone(), &man)?;
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, &name, &completions)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> clap::Command {
        clap::Command::new("prog")
            .version("1.0")
            .about("An example")
            .arg(
                clap::Arg::new("shown")
                    .long("shown")
                    .help("a visible option"),
            )
            .subcommand(
                clap::Command::new("sub")
                    .about("A subcommand")
                    .arg(clap::Arg::new("depth").long("depth").value_name("N")),
            )
            .subcommand(clap::Command::new("secret").hide(true))
    }

    #[test]
    fn pages_and_completions_cover_the_visible_command_line() {
        let dir = std::env::temp_dir().join(format!("cli-docs-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(example(), &dir).unwrap();
        let mut pages: Vec<String> = std::fs::read_dir(dir.join("man"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        pages.sort();
        assert_eq!(pages, ["prog-sub.1", "prog.1"]);
        let sub = std::fs::read_to_string(dir.join("man/prog-sub.1")).unwrap();
        // roff escapes the dashes of an option.
        assert!(sub.contains(r"\-\-depth"), "{sub}");
        let bash = std::fs::read_to_string(dir.join("completions/prog.bash")).unwrap();
        assert!(bash.contains("--shown") && bash.contains("--depth"));
        assert!(bash.contains("complete -F _prog"), "{bash}");
        let zsh = std::fs::read_to_string(dir.join("completions/_prog")).unwrap();
        assert!(zsh.starts_with("#compdef prog"), "{zsh}");
        let fish = std::fs::read_to_string(dir.join("completions/prog.fish")).unwrap();
        assert!(fish.contains("-l depth"), "{fish}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
