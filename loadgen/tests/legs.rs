//! The engine's extension point for IOs with several legs: a leg implementation that adds
//! one no-op leg to every write, on the job's own ring, gets its own latency histogram and
//! timeline column, and every write waits for it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use io_uring::{opcode, squeue};
use loadgen::engine::legs::{ExtraLegs, IoDesc, LegsFactory, user_data};
use loadgen::results::stats::Dir;
use serde_json::Value;

struct NopLeg;

impl ExtraLegs for NopLeg {
    fn names(&self) -> Vec<String> {
        vec!["nop".into()]
    }
    fn legs_for(&self, dir: Dir) -> u8 {
        u8::from(dir == Dir::Write)
    }
    fn sqes_per_io(&self) -> u32 {
        1
    }
    fn start(
        &mut self,
        io: &IoDesc<'_>,
        push: &mut dyn FnMut(&squeue::Entry) -> Result<()>,
    ) -> Result<()> {
        assert_eq!(io.data.len(), 4096, "the leg sees the write's data");
        push(&opcode::Nop::new().build().user_data(user_data(io.slot, 1)))
    }
    fn complete(
        &mut self,
        slot: u32,
        leg: u8,
        result: i32,
        _push: &mut dyn FnMut(&squeue::Entry) -> Result<()>,
        done: &mut Vec<(u32, u8)>,
    ) -> Result<()> {
        anyhow::ensure!(result >= 0, "nop failed: {result}");
        done.push((slot, leg));
        Ok(())
    }
}

#[test]
fn extra_legs_run_on_the_job_ring_and_get_their_own_histograms() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join(format!("loadgen-legs-{}", std::process::id()));
    let report = dir.join(format!("loadgen-legs-{}.json", std::process::id()));
    let args: Vec<String> = [
        format!("--filename={}", file.display()),
        "--direct=0".into(),
        "--size=2M".into(),
        "--rw=randrw".into(),
        "--iodepth=8".into(),
        "--output-format=json".into(),
        format!("--output={}", report.display()),
        "--eta=never".into(),
    ]
    .to_vec();
    let factory: LegsFactory = Arc::new(|_| Ok(Box::new(NopLeg) as Box<dyn ExtraLegs>));
    let code = loadgen::run::run(&args, Some(&factory)).expect("run succeeds");
    assert_eq!(code, 0);
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let w = &j["jobs"][0]["write"];
    let writes = w["total_ios"].as_u64().unwrap();
    assert!(writes > 0);
    assert_eq!(w["legs"][0]["name"], "local");
    assert_eq!(w["legs"][1]["name"], "nop");
    assert_eq!(w["legs"][0]["lat_ns"]["N"].as_u64(), Some(writes));
    assert_eq!(w["legs"][1]["lat_ns"]["N"].as_u64(), Some(writes));
    let r = &j["jobs"][0]["read"];
    assert_eq!(
        r["legs"][0]["lat_ns"]["N"], r["total_ios"],
        "reads have a local leg"
    );
    assert_eq!(r["legs"][1]["lat_ns"]["N"], 0, "and no nop leg");
    let row = &j["loadgen"]["points"][0]["timeline"][0]["write"];
    assert_eq!(row["legs"][1]["name"], "nop");
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&report);
}
