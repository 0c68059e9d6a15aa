use std::path::Path;
use std::process::Command;

use serde_json::Value;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::fs::TempDir;
use stornet_lab::loadgen::{at, run};
use stornet_lab::privilege::{require_root, require_tool};

/// The JSON kind of a value; integers and floats differ, as they do to a Python reader.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every key of fio's document is in loadgen's, with the same kind, recursively. Keys whose
/// values are data rather than layout (`bins`, the options) are compared by kind only.
fn same_layout(fio: &Value, lg: &Value, path: &str, problems: &mut Vec<String>, keys: &mut usize) {
    if kind(fio) != kind(lg) {
        problems.push(format!(
            "{path}: fio {} ({fio}), loadgen {} ({lg})",
            kind(fio),
            kind(lg)
        ));
        return;
    }
    match (fio, lg) {
        (Value::Object(f), Value::Object(l)) => {
            let data = path.ends_with("/bins") || path.ends_with(" options");
            for (k, v) in f {
                *keys += usize::from(!data);
                let p = format!("{path}/{k}");
                match l.get(k) {
                    Some(w) => same_layout(v, w, &p, problems, keys),
                    None if data => {}
                    None => problems.push(format!("{p}: missing in loadgen's")),
                }
            }
            if data {
                for (k, w) in l {
                    if kind(w) != f.values().next().map_or(kind(w), kind) {
                        problems.push(format!("{path}/{k}: loadgen {}", kind(w)));
                    }
                }
            }
        }
        (Value::Array(f), Value::Array(l)) => {
            if f.len() != l.len() {
                problems.push(format!(
                    "{path}: fio {} entries, loadgen {}",
                    f.len(),
                    l.len()
                ));
            }
            for (i, (v, w)) in f.iter().zip(l).enumerate() {
                same_layout(v, w, &format!("{path}/{i}"), problems, keys);
            }
        }
        _ => {}
    }
}

fn fio_json(args: &[&str]) -> Value {
    let out = Command::new("fio").args(args).output().expect("fio runs");
    assert!(
        out.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("fio JSON")
}

fn clat2csv(json: &Value, dir: &Path, stub: &str) -> Vec<String> {
    let src = dir.join(format!("{stub}.json"));
    std::fs::write(&src, json.to_string()).unwrap();
    let dest = dir.join(format!("{stub}.csv"));
    for extra in [&[][..], &["--validate"][..]] {
        let out = Command::new("fio_jsonplus_clat2csv")
            .arg(&src)
            .arg(&dest)
            .args(extra)
            .output()
            .expect("fio_jsonplus_clat2csv runs");
        assert!(
            out.status.success(),
            "fio_jsonplus_clat2csv {extra:?} on {stub}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let csv = std::fs::read_to_string(dir.join(format!("{stub}_job0.csv"))).unwrap();
    csv.lines().map(str::to_string).collect()
}

/// fio 3.33 and loadgen run the same job on the same loop device with `json` and `json+`:
/// every key fio writes is in loadgen's document with the same JSON kind; json+ bins add up
/// to each direction's IO count; `disk_util` counts what loadgen did; and fio's own
/// `fio_jsonplus_clat2csv` reads loadgen's json+ into a CSV of the same columns, one row per
/// latency bin, which its `--validate` checks against the JSON.
#[test]
fn loadgen_json_has_every_fio_key() {
    let test = "loadgen_json_has_every_fio_key";
    if !require_root(test)
        || !require_tool(test, "fio")
        || !require_tool(test, "fio_jsonplus_clat2csv")
    {
        return;
    }
    let disk = LoopDevice::new("lgfiojson", 64 << 20).expect("loop device");
    disk.set_queue_attr("nomerges", "2").expect("nomerges");
    let dev = format!("--filename={}", disk.dev.display());
    let tmp = TempDir::new("lgfiojson").expect("temp dir");
    for format in ["json", "json+"] {
        let of = format!("--output-format={format}");
        // Options before --name are global options in both tools.
        let args = [
            "--ioengine=io_uring",
            "--direct=1",
            "--name=cmp",
            &dev,
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=8",
            "--size=16M",
            &of,
        ];
        let fio = fio_json(&args);
        let lg = run(&[&args[..], &["--force-destroy-data"]].concat()).unwrap();
        assert_eq!(lg.code, Some(0), "{}", lg.stderr);
        let lg = lg.json().unwrap();
        let (mut problems, mut keys) = (Vec::new(), 0);
        same_layout(&fio, &lg, "", &mut problems, &mut keys);
        assert!(problems.is_empty(), "{format}: {}", problems.join("; "));
        eprintln!("{format}: all {keys} keys of fio's JSON are in loadgen's, of the same kind");
        assert!(at(&lg, "global options/direct").is_some());
        let job = &lg["jobs"][0];
        let total: u64 = ["read", "write"]
            .iter()
            .map(|d| job[d]["total_ios"].as_u64().unwrap())
            .sum();
        assert_eq!(total, 4096, "16 MiB in 4 KiB IOs");
        for d in ["read", "write"] {
            let ios = job[d]["total_ios"].as_u64().unwrap();
            let disk_ios = lg["disk_util"][0][format!("{d}_ios")].as_u64().unwrap();
            assert_eq!(disk_ios, ios, "{d}: disk_util vs loadgen");
            assert_eq!(lg["disk_util"][0]["name"], disk.name.as_str());
            if format == "json+" {
                let bins = job[d]["clat_ns"]["bins"].as_object().expect("bins");
                let sum: u64 = bins.values().map(|v| v.as_u64().unwrap()).sum();
                assert_eq!(sum, ios, "{d}: json+ bins add up to the IO count");
            }
        }
        if format == "json+" {
            let fio_rows = clat2csv(&fio, &tmp.path, "fio");
            let lg_rows = clat2csv(&lg, &tmp.path, "loadgen");
            assert_eq!(fio_rows[0], lg_rows[0], "the same columns");
            let mut keys: Vec<u64> = ["read", "write"]
                .iter()
                .flat_map(|d| job[d]["clat_ns"]["bins"].as_object().unwrap().keys())
                .map(|k| k.parse().unwrap())
                .collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(lg_rows.len() - 1, keys.len(), "one CSV row per latency bin");
            eprintln!(
                "fio_jsonplus_clat2csv: {} rows from fio's json+, {} from loadgen's ({} bins)",
                fio_rows.len() - 1,
                lg_rows.len() - 1,
                keys.len()
            );
        }
    }
}

/// `--minimal` (fio's terse format, version 3) gives the same fields as fio's for the same
/// job: the same count (including the loop device's utilization), numbers where fio has
/// numbers, and the job's IO counts in the KiB fields.
#[test]
fn loadgen_terse_matches_fio_fields() {
    let test = "loadgen_terse_matches_fio_fields";
    if !require_root(test) || !require_tool(test, "fio") {
        return;
    }
    let disk = LoopDevice::new("lgterse", 32 << 20).expect("loop device");
    let dev = format!("--filename={}", disk.dev.display());
    let args = [
        "--name=terse",
        &dev,
        "--ioengine=io_uring",
        "--direct=1",
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=4",
        "--size=8M",
        "--minimal",
    ];
    let out = Command::new("fio").args(args).output().expect("fio runs");
    assert!(out.status.success());
    let fio = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let lg = run(&[&args[..], &["--force-destroy-data"]].concat()).unwrap();
    assert_eq!(lg.code, Some(0), "{}", lg.stderr);
    let lg = lg.stdout.trim().to_string();
    let (f, l): (Vec<&str>, Vec<&str>) = (fio.split(';').collect(), lg.split(';').collect());
    assert_eq!(f.len(), l.len(), "fio: {fio}\nloadgen: {lg}");
    let numeric = |s: &str| s.trim_end_matches('%').parse::<f64>().is_ok();
    for (i, (a, b)) in f.iter().zip(&l).enumerate() {
        if i == 1 || (a.contains('=') && b.contains('=')) {
            continue; // the version, and percentile fields (`99.000000%=12`)
        }
        assert_eq!(
            numeric(a),
            numeric(b),
            "field {}: fio {a}, loadgen {b}",
            i + 1
        );
    }
    assert_eq!((l[0], l[2]), ("3", "terse"));
    assert_eq!(l[46], "8192", "write KiB (field 47)");
    assert_eq!(l[5], "0", "read KiB (field 6)");
    assert_eq!(l[l.len() - 9], disk.name.as_str(), "disk name");
    eprintln!("terse: {} fields in fio's line and in loadgen's", f.len());
}

/// fio and loadgen write their interval logs for the same job: the same files, lines of the
/// same fields, and fio's fio2gnuplot reads loadgen's bandwidth and IOPS logs as it reads
/// fio's. The histogram log's bins add up to the job's completions.
#[test]
fn loadgen_logs_read_like_fios() {
    let test = "loadgen_logs_read_like_fios";
    if !require_root(test) || !require_tool(test, "fio") || !require_tool(test, "fio2gnuplot") {
        return;
    }
    let disk = LoopDevice::new("lglogs", 32 << 20).expect("loop device");
    let dev = format!("--filename={}", disk.dev.display());
    let mut counts = Vec::new();
    for tool in ["fio", "loadgen"] {
        let dir = TempDir::new(&format!("lglogs-{tool}")).expect("temp dir");
        let stem = dir.path.join("cmp").display().to_string();
        let logs = [
            format!("--write_lat_log={stem}"),
            format!("--write_bw_log={stem}"),
            format!("--write_iops_log={stem}"),
            format!("--write_hist_log={stem}"),
        ];
        let mut args = vec![
            "--name=cmp",
            &dev,
            "--ioengine=io_uring",
            "--direct=1",
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=4",
            "--size=16M",
            "--time_based",
            "--runtime=1",
            "--log_avg_msec=100",
            "--log_hist_msec=100",
            "--output-format=json",
        ];
        args.extend(logs.iter().map(String::as_str));
        let json = if tool == "fio" {
            fio_json(&args)
        } else {
            let r = run(&[&args[..], &["--force-destroy-data"]].concat()).unwrap();
            assert_eq!(r.code, Some(0), "{}", r.stderr);
            r.json().unwrap()
        };
        let mut names: Vec<String> = std::fs::read_dir(&dir.path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut fields = Vec::new();
        for name in &names {
            let text = std::fs::read_to_string(dir.path.join(name)).unwrap();
            let first = text.lines().next().unwrap_or_default();
            fields.push((
                name.clone(),
                first.split(", ").count(),
                text.lines().count(),
            ));
            if name.ends_with("_clat_hist.1.log") && tool == "loadgen" {
                let sum: u64 = text
                    .lines()
                    .flat_map(|l| l.split(", ").skip(3).map(|v| v.parse::<u64>().unwrap()))
                    .sum();
                let n = json["jobs"][0]["read"]["clat_ns"]["N"].as_u64().unwrap()
                    + json["jobs"][0]["write"]["clat_ns"]["N"].as_u64().unwrap();
                assert_eq!(sum, n, "histogram log bins vs completions");
            }
        }
        let out = Command::new("fio2gnuplot")
            .args(["-b", "-d", "plot"])
            .current_dir(&dir.path)
            .output()
            .expect("fio2gnuplot runs");
        assert!(
            out.status.success(),
            "fio2gnuplot on {tool}'s logs: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let global = std::fs::read_to_string(dir.path.join("plot/result.global")).unwrap();
        let keys: Vec<String> = global
            .lines()
            .map(|l| l.split('=').next().unwrap().to_string())
            .collect();
        let values = global
            .lines()
            .find_map(|l| l.strip_prefix("values_count="))
            .unwrap()
            .parse::<u64>()
            .unwrap();
        assert!(values > 0, "{tool}: fio2gnuplot read no values");
        counts.push((fields, keys, values));
    }
    let (fio, lg) = (&counts[0], &counts[1]);
    let shape = |f: &Vec<(String, usize, usize)>| -> Vec<(String, usize)> {
        f.iter().map(|(n, k, _)| (n.clone(), *k)).collect()
    };
    assert_eq!(shape(&fio.0), shape(&lg.0), "log files and fields per line");
    assert_eq!(fio.1, lg.1, "fio2gnuplot's summary keys");
    eprintln!(
        "logs: {:?}; fio2gnuplot values: fio {}, loadgen {}",
        lg.0, fio.2, lg.2
    );
}
