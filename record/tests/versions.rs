//! Every earlier version of the run record still reads: `fixtures/` keeps records each
//! version's load generator wrote (`v1-*`: loadgen before the options were kept as given),
//! and each reads into this version's layout, its options taken from what it kept, and
//! round-trips as this version.

use std::path::{Path, PathBuf};

use record::{Record, VERSION};

fn fixtures(version: u32) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("v{version}-"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_earlier_version_has_kept_records() {
    for version in 1..VERSION {
        assert!(
            fixtures(version).len() >= 5,
            "records of version {version} are kept in tests/fixtures"
        );
    }
}

#[test]
fn records_of_version_1_read_with_their_options() {
    for path in fixtures(1) {
        let r = Record::read(&path).unwrap_or_else(|e| panic!("{e}"));
        let raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(raw["version"], 1);
        assert_eq!(r.version, VERSION, "{}", path.display());
        let plan = &raw["result"]["plan"];
        let o = &r.result.options;
        assert_eq!(
            o.interval_ns,
            plan["settings"]["interval_ns"].as_u64().unwrap()
        );
        assert_eq!(
            o.group_reporting,
            plan["settings"]["group_reporting"].as_bool().unwrap()
        );
        assert!(o.args.is_empty(), "version 1 kept no command line");
        let jobs = plan["jobs"].as_array().unwrap();
        assert_eq!(o.jobs.len(), jobs.len());
        for (j, p) in o.jobs.iter().zip(jobs) {
            assert_eq!(j.name, p["name"].as_str().unwrap());
            assert_eq!(j.ramp_time_ns, p["ramp_time_ns"].as_u64().unwrap());
            assert_eq!(
                serde_json::to_value(&j.given).unwrap(),
                p["given"],
                "{}",
                path.display()
            );
        }
        assert_eq!(
            serde_json::to_value(&o.global).unwrap(),
            plan["global_options"]
        );
        for (c, raw) in r
            .clients
            .iter()
            .zip(raw["clients"].as_array().into_iter().flatten())
        {
            let result = c.result.as_ref().expect("each host's results");
            assert_eq!(
                result.options.jobs.len(),
                raw["result"]["plan"]["jobs"].as_array().unwrap().len()
            );
        }
        // Written again, it is a record of this version that reads back the same.
        let mut out = Vec::new();
        r.write_json(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("\"plan\""));
        assert_eq!(Record::parse(&text).unwrap(), r);
    }
}

#[test]
fn a_kept_record_with_real_options_has_them_per_job() {
    let path = fixtures(1)
        .into_iter()
        .find(|p| p.ends_with("v1-real.json"))
        .expect("a real run's record is kept");
    let r = Record::read(&path).unwrap();
    let o = &r.result.options;
    assert_eq!(o.interval_ns, 100_000_000);
    assert_eq!(o.jobs[0].given["rw"], "randrw");
    assert_eq!(o.jobs[0].given["iodepth"], "4");
    assert_eq!(r.result.points[0].jobs[0].rw, record::workload::Rw::RandRw);
}

#[test]
fn a_record_without_options_or_plan_is_refused() {
    let path = fixtures(1).into_iter().next().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let without = text.replacen("\"plan\":", "\"plans\":", 1);
    let e = Record::parse(&without).unwrap_err();
    assert!(e.contains("missing field `options`"), "{e}");
}
