//! Checks of the Kubernetes manifests for cluster stress runs (`loadgen-cluster.yaml`: the
//! hosts, `loadgen-run.yaml`: the controller): they agree with each other and with the
//! agent's DaemonSet, and the real `loadgen` takes their arguments. For that, each
//! container's arguments are made what Kubernetes would make them (`$(VAR)` from the
//! downward API, mount paths in a temporary directory, the Secret's token file) and run
//! up to a point where loadgen has parsed and checked everything but starts nothing: `serve`
//! with its job port already taken, `run` with every host refusing the connection.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use stornet_lab::fs::TempDir;
use stornet_repo_checks::repo::{self, yaml_documents};

const CLUSTER: &str = "packaging/kubernetes/loadgen-cluster.yaml";
const RUN: &str = "packaging/kubernetes/loadgen-run.yaml";
const AGENT: &str = "packaging/kubernetes/stornet-agent.yaml";
/// Where the image's recipe puts loadgen.
const CONTAINERFILE: &str = "packaging/kubernetes/Containerfile";
/// What a `--replica` holds until the operator writes the node's IP in.
const PLACEHOLDER: &str = "NODE-IP-OF-";

/// The one document of `kind`.
fn doc<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

/// The pod template's spec and its one container.
fn pod(workload: &Value) -> (&Value, &Value) {
    let spec = &workload["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "one container");
    (spec, &containers[0])
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("not a string: {s}"))
                .into()
        })
        .collect()
}

/// The values of `--key=value` arguments. Every option in the manifests is written with
/// `=`, so that no value is a list item of its own.
fn values<'a>(args: &'a [String], key: &str) -> Vec<&'a str> {
    args.iter()
        .filter_map(|a| a.strip_prefix("--")?.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

fn one<'a>(args: &'a [String], key: &str) -> &'a str {
    match values(args, key)[..] {
        [v] => v,
        ref v => panic!("--{key} given {} times in {args:?}", v.len()),
    }
}

/// `$(VAR)` replaced as Kubernetes does with the container's environment: literal values,
/// and the downward API fields in `fields`.
fn expand(arg: &str, container: &Value, fields: &BTreeMap<&str, String>) -> String {
    let mut out = arg.to_string();
    for e in container["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap();
        let value = match (&e["value"], &e["valueFrom"]["fieldRef"]["fieldPath"]) {
            (Value::String(v), _) => v.clone(),
            (_, Value::String(f)) => fields
                .get(f.as_str())
                .unwrap_or_else(|| panic!("env {name}: no value for field {f} in this test"))
                .clone(),
            _ => panic!("env {name}: only values and fieldRefs are handled here: {e}"),
        };
        out = out.replace(&format!("$({name})"), &value);
    }
    assert!(
        !out.contains("$("),
        "{arg}: a variable the container does not define"
    );
    out
}

/// The mounts of a container: mount path and the volume mounted there.
fn mounts<'a>(spec: &'a Value, container: &'a Value) -> Vec<(&'a str, &'a Value)> {
    container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let name = &m["name"];
            let volume = spec["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == *name)
                .unwrap_or_else(|| panic!("no volume {name}"));
            (m["mountPath"].as_str().unwrap(), volume)
        })
        .collect()
}

/// The mount `path` is in: its mount path and volume.
fn mount_of<'a>(mounts: &[(&'a str, &'a Value)], path: &str) -> (&'a str, &'a Value) {
    *mounts
        .iter()
        .find(|(m, _)| path == *m || path.starts_with(&format!("{m}/")))
        .unwrap_or_else(|| panic!("{path} is on no volume (the root file system is read-only)"))
}

/// `arg` with a path value under a mount path moved to that mount's directory in `root`.
fn relocate(arg: &str, mounts: &[(&str, &Value)], root: &Path) -> String {
    let Some((key, value)) = arg.split_once('=') else {
        return arg.to_string();
    };
    for (m, v) in mounts {
        if let Some(rest) = value.strip_prefix(m)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            let dir = root.join(v["name"].as_str().unwrap());
            std::fs::create_dir_all(&dir).unwrap();
            return format!("{key}={}{rest}", dir.display());
        }
    }
    arg.to_string()
}

/// A token where the Secret's file would be.
fn write_token(path: &str) {
    let p = PathBuf::from(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, "0123456789abcdef\n").unwrap();
}

/// Runs the release `loadgen` and returns its exit status and stderr; one that does not end
/// within 30 s started something it should not have, and is killed.
fn loadgen(args: &[String]) -> (Option<i32>, String) {
    let mut child = Command::new(stornet_lab::bins::path("loadgen"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loadgen {args:?} kept running: it started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The port of `ADDR:PORT` or `$(VAR):PORT`.
fn port(addr: &str) -> u16 {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{addr}: no port"))
}

/// The container port called `name`.
fn container_port(container: &Value, name: &str) -> u16 {
    container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap_or_else(|| panic!("no container port {name}")) as u16
}

#[test]
fn loadgen_manifests_agree_with_each_other_and_the_agent() {
    let agent_docs = yaml_documents(AGENT);
    let agent = doc(&agent_docs, "DaemonSet");
    let namespace = &agent["metadata"]["namespace"];

    let cluster = yaml_documents(CLUSTER);
    let kinds: Vec<&str> = cluster.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["Service", "StatefulSet"]);
    let run_docs = yaml_documents(RUN);
    let kinds: Vec<&str> = run_docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["PersistentVolumeClaim", "Job"]);
    for d in cluster.iter().chain(&run_docs) {
        assert_eq!(
            d["metadata"]["namespace"], *namespace,
            "{}",
            d["metadata"]["name"]
        );
    }
    let (svc, sts) = (&cluster[0], &cluster[1]);
    hosts_are_one_per_node(svc, sts);
    let hosts = serve_matches_the_agent_and_the_service(agent, svc, sts);
    controller_reaches_every_host(&run_docs, svc, sts, &hosts);
}

/// The hosts: one per labelled node, on the node's network, by stable names.
fn hosts_are_one_per_node(svc: &Value, sts: &Value) {
    let (spec, _) = pod(sts);
    let labels = &sts["spec"]["template"]["metadata"]["labels"];
    assert_eq!(sts["spec"]["selector"]["matchLabels"], *labels);
    assert_eq!(sts["spec"]["serviceName"], svc["metadata"]["name"]);
    assert_eq!(svc["spec"]["clusterIP"], "None", "headless: a name per pod");
    assert_eq!(svc["spec"]["selector"], *labels);
    assert_eq!(spec["hostNetwork"], true, "the node's network and IP");
    assert!(
        !spec["nodeSelector"].as_object().unwrap().is_empty(),
        "the chosen nodes"
    );
    let anti =
        &spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    assert_eq!(anti[0]["labelSelector"]["matchLabels"], *labels);
    assert_eq!(anti[0]["topologyKey"], "kubernetes.io/hostname");
}

/// What the controller must agree with in the hosts' `loadgen serve`.
struct Hosts<'a> {
    image: &'a str,
    command: Vec<String>,
    /// `--listen` and `--jobs-listen`.
    replication: String,
    jobs: String,
    /// `--token-file`, the mount it is under and the Secret behind that.
    token: String,
    token_mount: &'a str,
    secret: &'a Value,
}

/// The hosts' `loadgen serve`: the agent's image, the node's own address on the Service's
/// ports, the node's agent, its data on the node's disk and its token from a Secret.
fn serve_matches_the_agent_and_the_service<'a>(
    agent: &'a Value,
    svc: &Value,
    sts: &'a Value,
) -> Hosts<'a> {
    let (agent_pod, agent_c) = pod(agent);
    let (spec, serve) = pod(sts);
    // One image for the agent, the hosts and the controller: one loadgen version.
    let image = agent_c["image"].as_str().unwrap();
    assert_eq!(serve["image"], image);
    let command = strings(&serve["command"]);
    let containerfile = std::fs::read_to_string(repo::path(CONTAINERFILE)).unwrap();
    assert!(
        containerfile
            .lines()
            .any(|l| l.trim() == format!("COPY target/release/loadgen {}", command[0])),
        "the image holds no {}",
        command[0]
    );

    let args = strings(&serve["args"]);
    assert_eq!(args[0], "serve");
    let env_field = |c: &Value, name: &str| -> String {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["valueFrom"]["fieldRef"]["fieldPath"].as_str())
            .unwrap_or_else(|| panic!("no env {name} from a field"))
            .to_string()
    };
    assert_eq!(env_field(serve, "HOST_IP"), "status.hostIP");
    let replication = one(&args, "listen");
    let jobs = one(&args, "jobs-listen");
    // The node's own address, which a job leaves out of its replicas.
    assert_eq!(replication.rsplit_once(':').unwrap().0, "$(HOST_IP)");
    assert_eq!(jobs.rsplit_once(':').unwrap().0, "$(HOST_IP)");
    assert_eq!(port(replication), container_port(serve, "replication"));
    assert_eq!(port(jobs), container_port(serve, "jobs"));
    for p in svc["spec"]["ports"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        assert_eq!(
            p["port"],
            container_port(serve, name),
            "Service port {name}"
        );
    }

    // The node's agent: on the node's network at its metrics port.
    assert_eq!(agent_pod["hostNetwork"], true);
    assert_eq!(
        one(&args, "agent"),
        format!("http://$(HOST_IP):{}", container_port(agent_c, "metrics"))
    );

    let serve_mounts = mounts(spec, serve);
    let (_, data) = mount_of(&serve_mounts, one(&args, "dir"));
    assert!(
        data["hostPath"]["path"].is_string(),
        "--dir on the node's disk"
    );
    let token = one(&args, "token-file");
    let (token_mount, token_volume) = mount_of(&serve_mounts, token);
    let secret = &token_volume["secret"]["secretName"];
    assert!(secret.is_string(), "the token from a Secret");
    let sc = &serve["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    // A job's report, record and log go to the temp dir before the controller has them.
    mount_of(&serve_mounts, "/tmp/loadgen-job-1-0");
    assert_eq!(
        sc["seccompProfile"]["type"], "Unconfined",
        "RuntimeDefault refuses io_uring (containerd 2.0, Docker 25)"
    );
    Hosts {
        image,
        command,
        replication: replication.to_string(),
        jobs: jobs.to_string(),
        token: token.to_string(),
        token_mount,
        secret,
    }
}

/// The controller: every host by its pod's DNS name, every host's replication address, the
/// hosts' token, its results on a claim that outlives the pod.
fn controller_reaches_every_host(run_docs: &[Value], svc: &Value, sts: &Value, hosts: &Hosts) {
    let job = &run_docs[1];
    assert_eq!(
        job["spec"]["backoffLimit"], 0,
        "a stress run is not retried"
    );
    let (job_spec, controller) = pod(job);
    assert_eq!(job_spec["restartPolicy"], "Never");
    assert_eq!(controller["image"], hosts.image);
    assert_eq!(strings(&controller["command"]), hosts.command);
    let cargs = strings(&controller["args"]);
    assert_eq!(cargs[0], "run");
    let replicas = sts["spec"]["replicas"].as_u64().unwrap();
    assert!(replicas >= 2, "a cluster");
    let sts_name = sts["metadata"]["name"].as_str().unwrap();
    let svc_name = svc["metadata"]["name"].as_str().unwrap();
    let pods: Vec<String> = (0..replicas).map(|i| format!("{sts_name}-{i}")).collect();
    let want: Vec<String> = pods
        .iter()
        .map(|p| format!("{p}={p}.{svc_name}:{}", port(&hosts.jobs)))
        .collect();
    assert_eq!(values(&cargs, "client"), want);
    let first = cargs
        .iter()
        .position(|a| a.starts_with("--client="))
        .unwrap();
    assert!(
        cargs[first..].iter().all(|a| a.starts_with("--client=")),
        "--client last: what follows one is that host's own"
    );
    let want: Vec<String> = pods
        .iter()
        .map(|p| format!("{PLACEHOLDER}{p}:{}", port(&hosts.replication)))
        .collect();
    assert_eq!(values(&cargs, "replica"), want, "one replica per host");

    let run_mounts = mounts(job_spec, controller);
    let (m, v) = mount_of(&run_mounts, one(&cargs, "client-token-file"));
    assert_eq!(v["secret"]["secretName"], *hosts.secret, "the hosts' token");
    assert_eq!(
        one(&cargs, "client-token-file").strip_prefix(m),
        hosts.token.strip_prefix(hosts.token_mount),
        "the same key of the Secret"
    );
    let claim = &run_docs[0]["metadata"]["name"];
    for key in ["output", "record"] {
        let (_, v) = mount_of(&run_mounts, one(&cargs, key));
        assert_eq!(
            v["persistentVolumeClaim"]["claimName"], *claim,
            "--{key} outlives the pod"
        );
    }
    assert_eq!(one(&cargs, "output-format"), "json");
    // The HCIBench-like shape docs/operations.md describes.
    for (key, value) in [("rw", "randrw"), ("rwmixread", "70"), ("bs", "4k")] {
        assert_eq!(one(&cargs, key), value);
    }
    for key in [
        "numjobs",
        "iodepth",
        "size",
        "ramp_time",
        "runtime",
        "direct",
    ] {
        one(&cargs, key);
    }
    assert!(cargs.iter().any(|a| a == "--time_based"));
}

#[test]
fn loadgen_manifests_serve_args_pass_loadgen_serve() {
    let cluster = yaml_documents(CLUSTER);
    let (spec, serve) = pod(doc(&cluster, "StatefulSet"));
    let root = TempDir::new("k8s-serve").unwrap();
    // A loopback address of this test's own for the node's IP.
    let pid = std::process::id();
    let host_ip = Ipv4Addr::new(127, 77, (pid >> 8) as u8, pid as u8);
    let fields = BTreeMap::from([("status.hostIP", host_ip.to_string())]);
    let m = mounts(spec, serve);
    let args: Vec<String> = strings(&serve["args"])
        .iter()
        .map(|a| relocate(&expand(a, serve, &fields), &m, &root.path))
        .collect();
    write_token(one(&args, "token-file"));
    // serve checks the token, --dir, --allow-device and --agent, then binds the job port:
    // with that port taken it stops there, having listened on nothing.
    let jobs: SocketAddr = one(&args, "jobs-listen").parse().unwrap();
    let _taken = TcpListener::bind(jobs).unwrap_or_else(|e| panic!("binding {jobs}: {e}"));
    let (code, stderr) = loadgen(&args);
    assert!(
        stderr.starts_with(&format!("loadgen: --jobs-listen {jobs}: "))
            && stderr.contains("in use"),
        "{args:?}: {stderr}"
    );
    assert_eq!(code, Some(2), "{stderr}");
}

#[test]
fn loadgen_manifests_run_args_pass_loadgen_run() {
    let run_docs = yaml_documents(RUN);
    let (spec, controller) = pod(doc(&run_docs, "Job"));
    let root = TempDir::new("k8s-run").unwrap();
    let fields = BTreeMap::from([("metadata.name", "loadgen-run-test".to_string())]);
    let m = mounts(spec, controller);
    let args: Vec<String> = strings(&controller["args"])
        .iter()
        .map(|a| relocate(&expand(a, controller, &fields), &m, &root.path))
        .collect();
    write_token(one(&args, "client-token-file"));

    // As shipped, the placeholders stop it before it reaches any host.
    let (code, stderr) = loadgen(&args);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--replica") && stderr.contains(PLACEHOLDER),
        "{stderr}"
    );

    // With addresses written in and hosts that refuse the connection, it checks every option,
    // the token and the output files, then refuses to start, naming every host.
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut names = Vec::new();
    let filled: Vec<String> = args
        .iter()
        .map(|a| {
            if let Some(c) = a.strip_prefix("--client=") {
                let (name, _) = c.split_once('=').unwrap();
                names.push(format!("host {name}"));
                format!("--client={name}={refused}")
            } else if let Some(r) = a.strip_prefix("--replica=") {
                let n = values(&args, "replica")
                    .iter()
                    .position(|v| *v == r)
                    .unwrap();
                format!("--replica=198.18.0.{}:{}", n + 1, port(r))
            } else {
                a.clone()
            }
        })
        .collect();
    let (code, stderr) = loadgen(&filled);
    let want = format!("loadgen: error: cannot start: {} (", names.join(", "));
    assert!(stderr.contains(&want), "{want:?} not in:\n{stderr}");
    assert_eq!(code, Some(1), "{stderr}");
}
