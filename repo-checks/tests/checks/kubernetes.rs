//! The Kubernetes manifests: the DaemonSet holds the unit's capabilities and mounts what the
//! agent reads, the ServiceMonitor and the example scrape job find its pods, and the
//! generated PrometheusRule and dashboard ConfigMaps match their sources.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use stornet_repo_checks::repo::{self, yaml_documents};
use stornet_repo_checks::{grafana, k8s, prom_rules};

use crate::dashboards::expected_uid;

/// The unit's `CapabilityBoundingSet=` as written (`CAP_BPF`, …): the agent runs as root, so
/// that set is what it holds. It must appear exactly once, and no ambient set beside it.
fn unit_capabilities() -> Vec<String> {
    let text = std::fs::read_to_string(repo::path("packaging/stornet-agent.service")).unwrap();
    let setting = |key: &str| -> Vec<&str> {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .collect()
    };
    assert!(
        setting("AmbientCapabilities").is_empty(),
        "AmbientCapabilities= in the unit"
    );
    let values = setting("CapabilityBoundingSet");
    assert_eq!(
        values.len(),
        1,
        "CapabilityBoundingSet= in the unit: {values:?}"
    );
    let names: Vec<String> = values[0].split_whitespace().map(String::from).collect();
    assert!(!names.is_empty(), "CapabilityBoundingSet= is empty");
    names
}

#[test]
fn daemonset_runs_the_agent_with_its_capabilities_and_host_mounts() {
    let docs = yaml_documents("packaging/kubernetes/stornet-agent.yaml");
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["Namespace", "ConfigMap", "DaemonSet"]);
    let config = docs[1]["data"]["stornet-agent.toml"].as_str().unwrap();
    assert!(
        config.contains("[block]") && config.contains("[net]"),
        "{config}"
    );

    let ds = &docs[2];
    assert_eq!(ds["apiVersion"], "apps/v1");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(
        pod["hostNetwork"], true,
        "the node's interfaces and sockets"
    );
    assert_eq!(pod["hostPID"], true, "pid:N namespaces of host processes");
    let labels = &ds["spec"]["template"]["metadata"]["labels"];
    assert_eq!(ds["spec"]["selector"]["matchLabels"], *labels);

    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let image = c["image"].as_str().unwrap();
    let (repo_name, tag) = image.rsplit_once(':').unwrap();
    assert!(repo_name.ends_with("/stornet-agent"), "image {image}");
    assert!(
        !tag.is_empty() && tag != "latest",
        "image {image} needs a version tag"
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--config.file=/etc/stornet-agent/stornet-agent.toml"),
        "{args:?}"
    );
    assert_eq!(c["ports"][0]["containerPort"], 9477);

    holds_the_units_capabilities(c);
    mounts_host_paths_read_only(pod, c);
    the_example_scrape_job_finds_its_pods(ds, c);
}

/// The pod may do exactly what the systemd unit allows, no more and no less: one list of
/// what the agent needs, kept in the unit (Kubernetes spells the names without CAP_).
fn holds_the_units_capabilities(c: &Value) {
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    let added = sc["capabilities"]["add"].as_array().unwrap();
    let caps: BTreeSet<&str> = added.iter().filter_map(|c| c.as_str()).collect();
    assert_eq!(
        caps.len(),
        added.len(),
        "{added:?}: duplicates or non-strings"
    );
    let unit = unit_capabilities();
    let want: BTreeSet<&str> = unit
        .iter()
        .map(|c| {
            c.strip_prefix("CAP_")
                .unwrap_or_else(|| panic!("{c}: no CAP_ prefix"))
        })
        .collect();
    assert!(want.contains("BPF") && want.contains("PERFMON"), "{want:?}");
    assert_eq!(
        caps, want,
        "DaemonSet capabilities differ from the unit's CapabilityBoundingSet"
    );
}

/// Each host path is mounted at the same path in the container.
fn mounts_host_paths_read_only(pod: &Value, c: &Value) {
    let volumes: BTreeMap<&str, &str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| Some((v["name"].as_str()?, v["hostPath"]["path"].as_str()?)))
        .collect();
    let mounts: BTreeMap<&str, &Value> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m))
        .collect();
    for path in [
        "/sys",
        "/sys/kernel/tracing",
        "/sys/kernel/btf",
        "/run/netns",
    ] {
        let (name, _) = volumes
            .iter()
            .find(|(_, p)| **p == path)
            .unwrap_or_else(|| panic!("no hostPath volume for {path}"));
        let m = mounts
            .get(name)
            .unwrap_or_else(|| panic!("volume {name} is not mounted"));
        assert_eq!(m["mountPath"], path, "volume {name}");
        assert_eq!(m["readOnly"], true, "volume {name}");
    }
    assert_eq!(mounts["netns"]["mountPropagation"], "HostToContainer");
}

/// The example scrape job keeps these pods and their metrics port.
fn the_example_scrape_job_finds_its_pods(ds: &Value, c: &Value) {
    let labels = &ds["spec"]["template"]["metadata"]["labels"];
    let scrape = yaml_documents("dashboards/prometheus/scrape-kubernetes.example.yml");
    let job = &scrape[0]["scrape_configs"][0];
    let keep = |source: &str| -> String {
        job["relabel_configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["source_labels"][0] == source && r["action"] == "keep")
            .and_then(|r| r["regex"].as_str())
            .unwrap_or_else(|| panic!("no keep rule on {source}"))
            .to_string()
    };
    assert_eq!(
        keep("__meta_kubernetes_pod_label_app_kubernetes_io_name"),
        labels["app.kubernetes.io/name"]
    );
    assert_eq!(
        keep("__meta_kubernetes_pod_container_port_name"),
        c["ports"][0]["name"]
    );
    assert_eq!(
        keep("__meta_kubernetes_pod_annotation_prometheus_io_scrape"),
        ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"]
    );
}

#[test]
fn generated_kubernetes_manifests_match_their_sources() {
    let stale = k8s::stale().unwrap();
    assert!(
        stale.is_empty(),
        "{stale:?} differ from the dashboards and rules they are made from; run `cargo xtask k8s`"
    );
}

/// A YAML value as JSON, for comparisons with `yaml_documents`.
fn yaml_as_json(rel: &str) -> Value {
    let mut docs = yaml_documents(rel);
    assert_eq!(docs.len(), 1, "{rel}: one document");
    docs.remove(0)
}

#[test]
fn prometheus_rule_holds_exactly_the_groups_of_the_rule_files() {
    let docs = yaml_documents(k8s::RULES_MANIFEST);
    assert_eq!(docs.len(), 1);
    let rule = &docs[0];
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], "stornet");
    // Parsed, not compared as text: what the operator hands Prometheus is what promtool
    // checks and tests in dashboards/prometheus/.
    let want: Vec<Value> = prom_rules::RULE_FILES
        .iter()
        .flat_map(|rel| yaml_as_json(rel)["groups"].as_array().unwrap().clone())
        .collect();
    assert!(want.len() >= 2, "{want:?}");
    assert_eq!(rule["spec"]["groups"], Value::Array(want));
    assert_eq!(rule["spec"].as_object().unwrap().len(), 1, "only groups");
}

#[test]
fn dashboard_config_maps_carry_every_dashboard_for_the_grafana_sidecar() {
    // Every dashboard in the folder, so that a new one cannot be left out.
    let mut files: Vec<String> = std::fs::read_dir(repo::path("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".json"))
        .map(|f| format!("dashboards/{f}"))
        .collect();
    files.sort();
    assert_eq!(files, grafana::DASHBOARDS);

    let docs = yaml_documents(k8s::DASHBOARDS_MANIFEST);
    assert_eq!(docs.len(), files.len(), "one ConfigMap per dashboard");
    let mut uids = BTreeSet::new();
    for (doc, rel) in docs.iter().zip(&files) {
        let (name, key) = k8s::dashboard_names(rel).unwrap();
        assert_eq!(doc["apiVersion"], "v1");
        assert_eq!(doc["kind"], "ConfigMap");
        assert_eq!(doc["metadata"]["name"], name.as_str());
        assert_eq!(doc["metadata"]["namespace"], "stornet");
        // The sidecar matches the label's value as a string; an unquoted 1 would be a
        // number, which Kubernetes refuses in labels.
        assert_eq!(
            doc["metadata"]["labels"]["grafana_dashboard"], "1",
            "{name}"
        );
        let data = doc["data"].as_object().unwrap();
        assert_eq!(data.len(), 1, "{name}: one dashboard");
        let text = data[&key].as_str().unwrap();
        assert!(
            text == std::fs::read_to_string(repo::path(rel)).unwrap(),
            "{name}: not the text of {rel}; run `cargo xtask k8s`"
        );
        let json: Value = serde_json::from_str(text).unwrap();
        let uid = json["uid"].as_str().unwrap();
        assert_eq!(uid, expected_uid(json["title"].as_str().unwrap()));
        assert!(uids.insert(uid.to_string()), "uid {uid} twice");
    }
}

#[test]
fn service_monitor_scrapes_every_agent_pod_by_its_metrics_port() {
    let agent = yaml_documents("packaging/kubernetes/stornet-agent.yaml");
    let ds = &agent[2];
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    let port = &ds["spec"]["template"]["spec"]["containers"][0]["ports"][0];

    let docs = yaml_documents("packaging/kubernetes/stornet-servicemonitor.yaml");
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["Service", "ServiceMonitor"]);
    let (svc, sm) = (&docs[0], &docs[1]);
    assert_eq!(svc["metadata"]["namespace"], ds["metadata"]["namespace"]);
    assert_eq!(sm["metadata"]["namespace"], ds["metadata"]["namespace"]);
    assert_eq!(svc["spec"]["clusterIP"], "None", "headless");
    assert_eq!(
        svc["spec"]["selector"], *pod_labels,
        "selects the agent pods"
    );
    let svc_ports = svc["spec"]["ports"].as_array().unwrap();
    assert_eq!(svc_ports.len(), 1);
    let sp = &svc_ports[0];
    assert_eq!(sp["name"], port["name"]);
    assert_eq!(sp["port"], port["containerPort"]);
    assert_eq!(sp["targetPort"], port["name"]);

    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    let selector = sm["spec"]["selector"]["matchLabels"].as_object().unwrap();
    for (k, v) in selector {
        assert_eq!(svc["metadata"]["labels"][k], *v, "Service label {k}");
    }
    let endpoints = sm["spec"]["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 1);
    let ep = &endpoints[0];
    assert_eq!(ep["port"], sp["name"], "the Service port, by name");
    assert_eq!(ep["path"], "/metrics");
    let instance = ep["relabelings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["targetLabel"] == "instance")
        .expect("instance set to the node name");
    assert_eq!(
        instance["sourceLabels"],
        json!(["__meta_kubernetes_pod_node_name"])
    );
}
