//! Checks of the monitoring files that need no root: the Grafana dashboards import cleanly
//! and read only metrics the agent exports (`docs/metrics.md`) or the recording rules
//! define; the rules pass promtool and its unit tests cover every alert; the example
//! Prometheus configuration and the Kubernetes manifests are well formed; the DaemonSet
//! holds the unit's capabilities; the generated PrometheusRule and dashboard ConfigMaps
//! match their sources.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::grafana::{Dashboard, variable_refs};
use crate::metric_docs::{self, MetricDoc};
use crate::privilege::require_tool;
use crate::prom_rules::{self, promtool};
use crate::promql::{self, Selector};
use crate::repo;

/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];
/// Panel types that ship with Grafana (no plugins).
const CORE_PANELS: [&str; 7] = [
    "timeseries",
    "heatmap",
    "state-timeline",
    "stat",
    "table",
    "bargauge",
    "text",
];
/// Variables Grafana itself defines.
const BUILTINS: [&str; 3] = ["__rate_interval", "__interval", "__range"];
/// The classic dashboard schema of current Grafana releases.
const SCHEMA_VERSION: u64 = 42;

fn ds_var() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

/// Everything a query may read, with the labels it may match on (None: not checked).
struct Known {
    exported: BTreeMap<String, MetricDoc>,
    recorded: BTreeMap<String, String>,
    alerts: Vec<String>,
}

impl Known {
    fn load() -> Known {
        let rules = prom_rules::load_all().unwrap();
        Known {
            exported: metric_docs::series_names(&metric_docs::load().unwrap()),
            recorded: prom_rules::recorded(&rules),
            alerts: rules.iter().filter_map(|r| r.alert.clone()).collect(),
        }
    }

    /// Problems with one selector: unknown metric names, labels the metric does not have.
    fn check(&self, s: &Selector, recorded: &BTreeMap<String, String>) -> Vec<String> {
        let names = match s.metric_names() {
            Ok(n) => n,
            Err(e) => return vec![e.to_string()],
        };
        let mut problems = Vec::new();
        for name in names {
            let labels: Option<Vec<String>> = if let Some(doc) = self.exported.get(&name) {
                Some(doc.labels.clone())
            } else if recorded.contains_key(&name) {
                None
            } else if name == "ALERTS" {
                for m in s.matchers.iter().filter(|m| m.label == "alertname") {
                    let re = regex_lite(&m.value);
                    if !self.alerts.iter().any(|a| re(a)) {
                        problems.push(format!("ALERTS: alertname {:?} matches no alert", m.value));
                    }
                }
                Some(vec!["alertname".into(), "alertstate".into()])
            } else {
                problems.push(format!(
                    "{name}: neither in docs/metrics.md nor a recording rule"
                ));
                continue;
            };
            if let Some(labels) = labels {
                for m in &s.matchers {
                    if m.label != "__name__"
                        && !TARGET_LABELS.contains(&m.label.as_str())
                        && !labels.contains(&m.label)
                    {
                        problems.push(format!("{name} has no label {:?}", m.label));
                    }
                }
            }
        }
        problems
    }
}

/// A matcher for the simple regexes dashboards use on alert names: a literal with an
/// optional trailing `.*`.
fn regex_lite(re: &str) -> impl Fn(&str) -> bool + '_ {
    move |s: &str| match re.strip_suffix(".*") {
        Some(prefix) => s.starts_with(prefix),
        None => s == re,
    }
}

/// Calls `f` on every (key, value) pair anywhere in `v`.
fn walk(v: &Value, f: &mut dyn FnMut(&str, &Value)) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                f(k, x);
                walk(x, f);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| walk(x, f)),
        _ => {}
    }
}

fn expected_variables(title: &str) -> &'static [&'static str] {
    match title {
        "stornet / Host storage" => &["datasource", "instance", "device"],
        "stornet / Network congestion" => &["datasource", "instance", "peer"],
        "stornet / Storage vs network" => &["datasource", "instance", "device", "peer"],
        other => panic!("unexpected dashboard {other:?}"),
    }
}

/// The fixed uid of each dashboard: the file name with a `stornet-` prefix (Grafana allows
/// up to 40 characters of letters, digits, `-` and `_`).
fn expected_uid(title: &str) -> &'static str {
    match title {
        "stornet / Host storage" => "stornet-host-storage",
        "stornet / Network congestion" => "stornet-network-congestion",
        "stornet / Storage vs network" => "stornet-storage-vs-network",
        other => panic!("unexpected dashboard {other:?}"),
    }
}

#[test]
fn dashboards_are_importable_into_grafana() {
    let dashboards = Dashboard::load_all().unwrap();
    let titles: BTreeSet<&str> = dashboards.iter().map(|d| d.title()).collect();
    assert_eq!(
        titles,
        [
            "stornet / Host storage",
            "stornet / Network congestion",
            "stornet / Storage vs network"
        ]
        .into()
    );
    for d in &dashboards {
        let f = &d.file;
        assert_eq!(d.json["schemaVersion"], SCHEMA_VERSION, "{f}");
        assert!(d.json["id"].is_null(), "{f}: id must be null");
        // A fixed dashboard uid keeps its URL (/d/<uid>) and bookmarks stable across
        // re-imports and lets the Grafana sidecar replace the dashboard in place instead of
        // adding a copy; every other uid must be the data source variable.
        let uid = d.json["uid"]
            .as_str()
            .unwrap_or_else(|| panic!("{f}: no uid"));
        assert_eq!(uid, expected_uid(d.title()), "{f}");
        let mut rest = d.json.clone();
        rest.as_object_mut().unwrap().remove("uid");
        let mut problems = Vec::new();
        walk(&rest, &mut |k, v| match k {
            "datasource" if *v != ds_var() => problems.push(format!(
                "datasource {v} is not the ${{datasource}} variable"
            )),
            "uid" if *v != json!("${datasource}") => problems.push(format!("fixed uid {v}")),
            "pluginVersion" | "__inputs" | "__requires" | "gnetId" => {
                problems.push(format!("export artifact {k}"))
            }
            _ => {}
        });
        assert!(problems.is_empty(), "{f}: {problems:#?}");

        // Variables: the data source first, then label_values queries through it.
        let vars = d.variables().unwrap();
        let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
        for want in expected_variables(d.title()) {
            assert!(names.contains(want), "{f}: no variable {want} in {names:?}");
        }
        assert_eq!(vars[0].name, "datasource", "{f}");
        assert_eq!(vars[0].kind, "datasource", "{f}");
        assert_eq!(vars[0].json["query"], "prometheus", "{f}");
        let mut defined: BTreeSet<String> = BUILTINS.iter().map(|s| s.to_string()).collect();
        defined.insert("datasource".into());
        for v in &vars[1..] {
            assert_eq!(v.kind, "query", "{f}: {}", v.name);
            assert_eq!(v.json["datasource"], ds_var(), "{f}: {}", v.name);
            let q = v.query.as_deref().unwrap();
            promql::label_values_query(q).unwrap();
            for r in variable_refs(q) {
                assert!(
                    defined.contains(&r),
                    "{f}: {} uses ${r} before it is defined",
                    v.name
                );
            }
            defined.insert(v.name.clone());
        }

        // Panels: core types, unique ids, inside the 24-column grid, without overlaps.
        let mut ids = BTreeSet::new();
        let mut cells = BTreeSet::new();
        let mut used = BTreeSet::new();
        for p in d.json["panels"].as_array().unwrap() {
            let id = p["id"].as_i64().unwrap();
            assert!(ids.insert(id), "{f}: panel id {id} twice");
            let g = &p["gridPos"];
            let (x, y, w, h) = (
                g["x"].as_u64().unwrap(),
                g["y"].as_u64().unwrap(),
                g["w"].as_u64().unwrap(),
                g["h"].as_u64().unwrap(),
            );
            assert!(x + w <= 24 && w > 0 && h > 0, "{f}: panel {id} gridPos {g}");
            for cx in x..x + w {
                for cy in y..y + h {
                    assert!(cells.insert((cx, cy)), "{f}: panel {id} overlaps another");
                }
            }
            if let Some(repeat) = p["repeat"].as_str() {
                assert!(defined.contains(repeat), "{f}: repeats unknown ${repeat}");
                used.insert(repeat.to_string());
            }
        }
        for p in d.panels().unwrap() {
            let what = format!("{f}: panel {:?}", p.title);
            assert!(
                CORE_PANELS.contains(&p.kind.as_str()),
                "{what}: type {}",
                p.kind
            );
            assert_eq!(p.json["datasource"], ds_var(), "{what}");
            assert!(!p.title.is_empty(), "{what}: no title");
            assert!(
                p.json["description"]
                    .as_str()
                    .is_some_and(|s| !s.is_empty()),
                "{what}: no description"
            );
            assert!(!p.targets.is_empty(), "{what}: no query");
            let mut refs = BTreeSet::new();
            for t in &p.targets {
                assert!(
                    refs.insert(t.ref_id.clone()),
                    "{what}: refId {} twice",
                    t.ref_id
                );
                assert!(!t.expr.trim().is_empty(), "{what}: empty query");
                assert_eq!(t.json["datasource"], ds_var(), "{what}");
                for r in variable_refs(&t.expr) {
                    assert!(defined.contains(&r), "{what}: unknown variable ${r}");
                    used.insert(r);
                }
            }
        }
        for v in &vars[1..] {
            assert!(
                used.contains(&v.name),
                "{f}: variable {} is never used",
                v.name
            );
        }
    }
}

#[test]
fn dashboard_queries_read_only_exported_or_recorded_metrics() {
    let known = Known::load();
    let mut problems = Vec::new();
    let mut read = BTreeSet::new();
    for d in Dashboard::load_all().unwrap() {
        let mut queries: Vec<(String, String)> = Vec::new();
        for v in d.variables().unwrap() {
            if let Some(q) = &v.query
                && v.kind == "query"
            {
                let lv = promql::label_values_query(q).unwrap();
                queries.push((
                    format!("variable {}", v.name),
                    lv.selector.expect("every variable query names a metric"),
                ));
            }
        }
        for p in d.panels().unwrap() {
            for t in &p.targets {
                queries.push((format!("{} {}", p.title, t.ref_id), t.expr.clone()));
            }
        }
        for (what, q) in queries {
            let sels = promql::selectors(&q).unwrap_or_else(|e| panic!("{}: {what}: {e}", d.file));
            assert!(!sels.is_empty(), "{}: {what} reads no series", d.file);
            for s in sels {
                read.extend(s.metric_names().unwrap_or_default());
                for p in known.check(&s, &known.recorded) {
                    problems.push(format!("{}: {what}: {p}", d.file));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // The dashboards show what the rules record.
    for name in known.recorded.keys() {
        assert!(read.contains(name), "no dashboard shows {name}");
    }
}

#[test]
fn rules_read_only_exported_metrics_and_explain_themselves() {
    let known = Known::load();
    let mut recorded_so_far = BTreeMap::new();
    let mut problems = Vec::new();
    for file in prom_rules::RULE_FILES {
        for g in prom_rules::load(file).unwrap().groups {
            assert!(g.name.starts_with("stornet."), "{file}: group {}", g.name);
            for r in g.rules {
                let name = r.record.clone().or(r.alert.clone()).unwrap();
                for s in promql::selectors(&r.expr).unwrap() {
                    for p in known.check(&s, &recorded_so_far) {
                        problems.push(format!("{file}: {name}: {p}"));
                    }
                }
                if let Some(rec) = &r.record {
                    assert!(
                        rec.split(':').count() == 3 && rec.contains(":stornet_"),
                        "{file}: {rec} is not level:metric:operation"
                    );
                    assert!(
                        recorded_so_far
                            .insert(rec.clone(), r.expr.clone())
                            .is_none(),
                        "{file}: {rec} twice"
                    );
                }
                if let Some(alert) = &r.alert {
                    assert!(alert.starts_with("Stornet"), "{file}: {alert}");
                    assert!(r.for_.is_some(), "{file}: {alert} has no `for`");
                    assert!(
                        r.labels.contains_key("severity"),
                        "{file}: {alert} has no severity"
                    );
                    for a in ["summary", "description"] {
                        assert!(
                            r.annotations.get(a).is_some_and(|s| s.len() > 20),
                            "{file}: {alert} has no {a}"
                        );
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn promtool_accepts_the_rules_and_the_example_config() {
    if !require_tool(
        "promtool_accepts_the_rules_and_the_example_config",
        "promtool",
    ) {
        return;
    }
    let dir = repo::path("dashboards/prometheus");
    let out = promtool(
        &dir,
        &["check", "rules", "recording-rules.yml", "alerts.yml"],
    )
    .unwrap();
    assert!(out.contains("SUCCESS"), "{out}");
    let out = promtool(&dir, &["check", "config", "prometheus.example.yml"]).unwrap();
    assert!(out.contains("2 rule files found"), "{out}");
}

/// promtool's unit test file, as far as coverage is concerned.
#[derive(serde::Deserialize)]
struct RuleTests {
    rule_files: Vec<String>,
    tests: Vec<RuleTestGroup>,
}

#[derive(serde::Deserialize)]
struct RuleTestGroup {
    #[serde(default)]
    alert_rule_test: Vec<AlertTest>,
}

#[derive(serde::Deserialize)]
struct AlertTest {
    alertname: String,
    #[serde(default)]
    exp_alerts: Vec<serde_yaml_ng::Value>,
}

#[test]
fn promtool_rule_tests_pass_and_cover_every_alert() {
    let text =
        std::fs::read_to_string(repo::path("dashboards/prometheus/alerts.test.yml")).unwrap();
    let tests: RuleTests = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(tests.rule_files, ["recording-rules.yml", "alerts.yml"]);
    let mut fires = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for t in tests.tests.iter().flat_map(|g| &g.alert_rule_test) {
        if t.exp_alerts.is_empty() {
            silent.insert(t.alertname.clone());
        } else {
            fires.insert(t.alertname.clone());
        }
    }
    for alert in Known::load().alerts {
        assert!(fires.contains(&alert), "no test case where {alert} fires");
        assert!(
            silent.contains(&alert),
            "no test case where {alert} must not fire"
        );
    }
    if !require_tool("promtool_rule_tests_pass_and_cover_every_alert", "promtool") {
        return;
    }
    let out = promtool(
        &repo::path("dashboards/prometheus"),
        &["test", "rules", "alerts.test.yml"],
    )
    .unwrap();
    assert!(out.contains("SUCCESS"), "{out}");
}

pub(crate) fn yaml_documents(rel: &str) -> Vec<Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(repo::path(rel)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .collect()
}

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
    // The pod may do exactly what the systemd unit allows, no more and no less: one list of
    // what the agent needs, kept in the unit (Kubernetes spells the names without CAP_).
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

    // Each host path is mounted at the same path in the container.
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

    // The example scrape job finds these pods.
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
    let stale = crate::k8s::stale().unwrap();
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
    let docs = yaml_documents(crate::k8s::RULES_MANIFEST);
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
    assert_eq!(files, crate::grafana::DASHBOARDS);

    let docs = yaml_documents(crate::k8s::DASHBOARDS_MANIFEST);
    assert_eq!(docs.len(), files.len(), "one ConfigMap per dashboard");
    let mut uids = BTreeSet::new();
    for (doc, rel) in docs.iter().zip(&files) {
        let (name, key) = crate::k8s::dashboard_names(rel).unwrap();
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
