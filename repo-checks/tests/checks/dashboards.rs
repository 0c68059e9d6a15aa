//! The Grafana dashboards import cleanly and read only metrics the agent exports
//! (`docs/metrics.md`) or the recording rules define; the rules pass promtool and its unit
//! tests cover every alert; the example Prometheus configuration is well formed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use stornet_lab::privilege::require_tool;
use stornet_repo_checks::grafana::{Dashboard, Variable, variable_refs};
use stornet_repo_checks::metric_docs::{self, MetricDoc};
use stornet_repo_checks::prom_rules::{self, promtool};
use stornet_repo_checks::promql::{self, Selector};
use stornet_repo_checks::repo;

/// Labels Prometheus adds to every scraped series, and `host`, the label the agents' scrape
/// job gives each target on a Ceph cluster so that its series join Ceph's `hostname`
/// (docs/operations.md, section Ceph).
const TARGET_LABELS: [&str; 3] = ["instance", "job", "host"];
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
        let mut exported = metric_docs::series_names(&metric_docs::load().unwrap());
        // Ceph's mgr, for the Ceph dashboard: the series its table says Ceph 16.2 exports.
        for m in metric_names::ceph::ALL.iter().filter(|m| m.exported) {
            for suffix in m.suffixes() {
                let name = format!("{}{suffix}", m.name);
                let labels = m.labels.iter().map(|l| l.to_string()).collect();
                let kind = format!("{:?}", m.kind);
                exported.insert(name.clone(), MetricDoc { name, kind, labels });
            }
        }
        Known {
            exported,
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
        "stornet / Ceph" => &["datasource", "host"],
        "stornet / Host storage" => &["datasource", "instance", "device"],
        "stornet / Network congestion" => &["datasource", "instance", "peer"],
        "stornet / Storage vs network" => &["datasource", "instance", "device", "peer"],
        other => panic!("unexpected dashboard {other:?}"),
    }
}

/// The fixed uid of each dashboard: the file name with a `stornet-` prefix (Grafana allows
/// up to 40 characters of letters, digits, `-` and `_`).
pub fn expected_uid(title: &str) -> &'static str {
    match title {
        "stornet / Ceph" => "stornet-ceph",
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
            "stornet / Ceph",
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

        let vars = d.variables().unwrap();
        let defined = check_variables(d, &vars);
        let used = check_panels(d, &defined);
        for v in &vars[1..] {
            assert!(
                used.contains(&v.name),
                "{f}: variable {} is never used",
                v.name
            );
        }
    }
}

/// Variables: the data source first, then label_values queries through it, each using only
/// variables defined before it. Returns every name a query may use.
fn check_variables(d: &Dashboard, vars: &[Variable]) -> BTreeSet<String> {
    let f = &d.file;
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
    defined
}

/// Panels: core types, unique ids, inside the 24-column grid, without overlaps, each with a
/// title, a description and queries through the data source variable. Returns the
/// variables they use.
fn check_panels(d: &Dashboard, defined: &BTreeSet<String>) -> BTreeSet<String> {
    let f = &d.file;
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
    used
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
