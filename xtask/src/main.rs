//! stornet's task runner: `cargo xtask <task>`.

mod background;
mod circles;
mod cmd;
mod demo;
mod dep_policy;
mod fuzz;
mod image;
mod k8s;
mod lab;
mod ldd;
mod package;
mod setup;
mod test;
mod unused_deps;
mod vm;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "stornet's setup, test tiers, benchmarks and lab"
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// The buffer shootout (root): replicated IO through a shallow- and a deep-buffer
    /// switch in the lab, side by side, with stornet's verdicts and HTML reports.
    Demo {
        /// Do not run setup first.
        #[arg(long)]
        skip_setup: bool,
    },
    /// The lab on this machine (root).
    Lab {
        #[command(subcommand)]
        action: LabAction,
    },
    /// List the import circles between the modules of each crate (the lint step fails on
    /// any).
    Circles,
    /// List the dependencies a crate declares and never names in its code (the lint step
    /// fails on any).
    UnusedDeps,
    /// Check every dependency's licence and source against the policy in the root
    /// Cargo.toml, and list crates built in more than one version (the lint step runs it).
    DepPolicy,
    /// Install what the build and tests need (idempotent; skips what is present).
    Setup,
    /// Set up, build and run stornet-agent in the foreground (root).
    Agent {
        /// Arguments passed to stornet-agent.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a benchmark (root); prints stornet against its reference, as ratios.
    Bench {
        #[arg(value_enum)]
        name: stornet_bench::Bench,
        /// How long the soak bench runs.
        #[arg(long, default_value_t = 30)]
        minutes: u64,
        /// The diagnosis benches: only the cases whose label contains this (e.g. `loss`).
        #[arg(long)]
        cases: Option<String>,
        /// The diagnosis benches: repetitions of each case.
        #[arg(long, default_value_t = 3)]
        reps: usize,
    },
    /// Fuzz every parser of outside input (cargo-fuzz, nightly), each for a set time from
    /// the seeds in fuzz/corpus; a crash fails with the input saved under fuzz/artifacts.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Only this target.
        #[arg(long)]
        target: Option<String>,
        /// An unoptimized build without AddressSanitizer (as the unit tier runs): it
        /// compiles in about half the time, and executes slower.
        #[arg(long)]
        quick: bool,
        /// Do not run setup first.
        #[arg(long)]
        skip_setup: bool,
    },
    /// Build the stornet-agent container image (the agent, and loadgen for cluster stress
    /// runs) without a container daemon (root; installs buildah if missing):
    /// target/stornet-agent-image.tar, an OCI archive, checked by running both from it.
    Image {
        /// The image name and tag inside the archive.
        #[arg(long)]
        tag: Option<String>,
    },
    /// Write the generated Kubernetes manifests (packaging/kubernetes/stornet-rules.yaml
    /// and stornet-dashboards.yaml) from the rule files and dashboards.
    K8s {
        /// Only say which files differ from their sources; fail if any does.
        #[arg(long)]
        check: bool,
    },
    /// The vm tier alone, or a part of it: the agent's tests in qemu guests of each kernel.
    Vm {
        /// Only these kernel series (`5.10`, `6.1`, `6.12`, `7.3`); repeatable.
        #[arg(long = "kernel")]
        kernels: Vec<String>,
        /// Only these boots (`drivers`, `lockdown`, `systemd`); repeatable.
        #[arg(long = "boot")]
        boots: Vec<String>,
        /// Only the tests whose names contain this (`fabrics::`, …); repeatable.
        #[arg(long = "test")]
        tests: Vec<String>,
        /// Write the kernel support table of docs/agent.md from this run.
        #[arg(long)]
        bless: bool,
    },
    /// Build the Debian packages (stornet-agent, stornet, loadgen) into target/debian and
    /// check them with lintian.
    Package {
        /// Do not run setup first.
        #[arg(long)]
        skip_setup: bool,
    },
    /// Run setup, lint, unit tests, privileged integration tests, scenarios and the vm tier.
    Test {
        /// Run only this tier.
        #[arg(long, value_enum)]
        tier: Option<test::Tier>,
        /// Do not run setup first.
        #[arg(long)]
        skip_setup: bool,
    },
}

#[derive(Subcommand)]
enum LabAction {
    /// Remove what killed lab runs and tests left behind (namespaces, loop devices, cgroups,
    /// files and processes whose creating process is gone), and say what was removed.
    Clean,
    /// Bring up a Ceph cluster (Debian's packages) on lab hosts, with an agent on every OSD
    /// host and a Prometheus scraping them and the mgr; print how to use it; remove it all
    /// on Ctrl-C.
    Ceph {
        /// OSD hosts (one OSD each).
        #[arg(long, default_value_t = 3)]
        osds: usize,
        /// Do not run setup first.
        #[arg(long)]
        skip_setup: bool,
    },
}

fn run_agent(args: &[String]) -> anyhow::Result<()> {
    setup::setup()?;
    cmd::step("build stornet-agent", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "stornet-agent"]))
    })?;
    let bin = cmd::workspace_root().join("target/release/stornet-agent");
    let listen = args
        .iter()
        .find_map(|a| a.strip_prefix("--web.listen-address="))
        .unwrap_or(":9477");
    println!(
        "stornet-agent: metrics at http://localhost{}/metrics (Ctrl-C stops it)",
        listen.trim_start_matches(|c| c != ':')
    );
    cmd::run(std::process::Command::new(bin).args(args))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Demo { skip_setup } => demo::demo(skip_setup),
        Task::Lab {
            action: LabAction::Clean,
        } => lab::clean(),
        Task::Lab {
            action: LabAction::Ceph { osds, skip_setup },
        } => lab::ceph(osds, skip_setup),
        Task::Setup => setup::setup(),
        Task::Circles => circles::check(&cmd::workspace_root()),
        Task::UnusedDeps => unused_deps::check(&cmd::workspace_root()),
        Task::DepPolicy => dep_policy::check(&cmd::workspace_root()),
        Task::Package { skip_setup } => (if skip_setup { Ok(()) } else { setup::setup() })
            .and_then(|()| package::package().map(drop)),
        Task::Fuzz {
            seconds,
            target,
            quick,
            skip_setup,
        } => {
            let build = if quick {
                fuzz::Build::Quick
            } else {
                fuzz::Build::Thorough
            };
            (if skip_setup { Ok(()) } else { setup::setup() })
                .and_then(|()| fuzz::fuzz(seconds, target.as_deref(), build))
        }
        Task::Test { tier, skip_setup } => test::test(tier, skip_setup),
        Task::Agent { args } => run_agent(&args),
        Task::Bench {
            name,
            minutes,
            cases,
            reps,
        } => stornet_bench::run(name, minutes, cases.as_deref(), reps),
        Task::K8s { check } => k8s::manifests(check),
        Task::Image { tag } => image::image(tag),
        Task::Vm {
            kernels,
            boots,
            tests,
            bless,
        } => vm::run(&vm::Options {
            kernels,
            boots,
            tests,
            bless,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}
