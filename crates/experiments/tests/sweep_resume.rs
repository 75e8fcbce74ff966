//! A sweep against a fake bench: unknown engines are recorded once and not run again, a killed
//! sweep resumes with exactly the missing runs, shards partition and merge back, a hung run is
//! killed at its time limit, and the report turns it all into verdicts.

use experiments::report::{self, ReportOptions};
use experiments::results::{self, read_rows, RESULTS_FILE};
use experiments::sweep::{self, CheckReps, Quiet, SweepOptions};
use experiments::{BenchCommand, ExpandOptions, Shard, Spec, Status};
use std::path::{Path, PathBuf};

/// Answers like `nvmdb bench --json`: `wal` is unknown (exit 2), throughput falls with the
/// persist latency, `--persist-latency hang` sleeps, `--image F` creates F if missing. Each
/// call appends a line to `$1.calls`.
const FAKE_BENCH: &str = r#"
log="$0.calls"
engine=""; lat="0"; image=""
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) engine="$2"; shift ;;
    --image) image="$2"; shift ;;
    --persist-latency) lat="$2"; shift ;;
  esac
  shift
done
if [ -n "$image" ]; then
  if [ -e "$image" ]; then echo "$engine $lat reuses $image" >> "$log"
  else : > "$image"; echo "$engine $lat builds $image" >> "$log"; fi
else
  echo "$engine $lat" >> "$log"
fi
if [ "$engine" = "wal" ]; then
  echo "error: invalid --engine: unknown engine \`wal\` (known: inplace)" >&2
  exit 2
fi
case "$lat" in
  0) tps=1000 ;;
  1us) tps=700 ;;
  2us) tps=400 ;;
  hang) sleep 30; tps=1 ;;
  *) tps=100 ;;
esac
echo "some human text"
echo "{\"engine\":\"$engine\",\"tps\":$tps,\"checker\":\"pass\",\"latency_us\":{\"p95\":5.0}}"
"#;

/// The claims are `role = "check"`: a reproduction needs 3 repetitions, and these tests count
/// the runs of 2.
const SPEC: &str = r#"
[spec]
name = "fake"
title = "fake"
source = "Pelley et al., VLDB 2014, Fig. 5"
reps = 2
[base]
workload = "tpcb"
[grid]
engine = ["inplace", "wal"]
persist_latency = ["0", "1us", "2us"]
[[plot]]
x = "persist_latency"
x_scale = 0.001
y = "tps"
series = "engine"
[[claim]]
id = "falls"
text = "In-Place Updates loses throughput"
source = "Pelley §6.1"
kind = "ratio"
where = { engine = "inplace" }
numerator = { persist_latency = "2us" }
denominator = { persist_latency = "0" }
range = [0.0, 0.9]
role = "check"
[[claim]]
id = "vs-wal"
text = "In-Place ÷ WAL at 0 µs"
source = "Pelley §6.1"
kind = "ratio"
where = { persist_latency = "0" }
numerator = { engine = "inplace" }
denominator = { engine = "wal" }
expected = 1.5
role = "check"
"#;

struct Fixture {
    dir: tempfile::TempDir,
    script: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake-bench.sh");
        std::fs::write(&script, FAKE_BENCH).unwrap();
        Fixture { dir, script }
    }

    fn out(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn calls(&self) -> Vec<String> {
        let log = PathBuf::from(format!("{}.calls", self.script.display()));
        std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
    }

    fn options(&self, out: &Path, shard: Option<Shard>) -> SweepOptions {
        SweepOptions {
            out: out.to_path_buf(),
            expand: ExpandOptions::default(),
            shard,
            retry_failed: false,
            bench: BenchCommand {
                program: "/bin/sh".into(),
                prefix: vec![self.script.display().to_string()],
            },
            scratch: None,
            images: None,
            check: CheckReps::Every,
        }
    }

    fn sweep(&self, spec: &str, out: &Path, shard: Option<Shard>) -> sweep::Summary {
        self.sweep_with(spec, self.options(out, shard))
    }

    fn sweep_with(&self, spec: &str, options: SweepOptions) -> sweep::Summary {
        let spec = Spec::parse(spec, Path::new("fake.toml")).unwrap();
        let plan = sweep::plan(vec![spec], &options).unwrap();
        sweep::run(&plan, &options, &Quiet).unwrap()
    }
}

#[test]
fn unknown_engine_is_run_once_and_marked() {
    let f = Fixture::new();
    let out = f.out("a");
    let s = f.sweep(SPEC, &out, None);
    assert_eq!(s.runs, 12);
    assert_eq!(s.count(Status::Ok), 6);
    assert_eq!(s.count(Status::Unsupported), 6);
    assert!(s.unsupported.contains("engine wal missing"), "{:?}", s.unsupported);
    assert!(!s.has_failures());
    // 6 inplace runs and a single wal attempt.
    let calls = f.calls();
    assert_eq!(calls.iter().filter(|c| c.starts_with("wal")).count(), 1, "{calls:?}");
    assert_eq!(calls.len(), 7);
    let rows = read_rows(&out.join(RESULTS_FILE)).unwrap().rows;
    assert_eq!(rows.len(), 12);
    let ok = rows.iter().find(|r| r.status() == Status::Ok).unwrap();
    assert_eq!(ok.spec(), "fake");
    assert!(ok.number("tps").is_some() && ok.number("wall_s").is_some());
    assert_eq!(ok.value("persist_latency").as_deref(), Some("0"));
    assert!(out.join("specs/fake.toml").exists());
}

#[test]
fn resume_runs_only_what_is_missing() {
    let f = Fixture::new();
    let out = f.out("r");
    f.sweep(SPEC, &out, None);
    let first = f.calls().len();
    // Done runs are skipped; the not-runnable engine is tried once more.
    let again = f.sweep(SPEC, &out, None);
    assert_eq!(again.count(Status::Ok), 0);
    assert_eq!(f.calls().len(), first + 1);
    // A sweep killed while writing its last row: that row is torn, the run is repeated.
    let path = out.join(RESULTS_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let ok_lines: Vec<&str> = text.lines().filter(|l| l.contains("\"status\":\"ok\"")).collect();
    let last_ok = ok_lines.last().unwrap();
    let cut = text.replace(last_ok, &last_ok[..last_ok.len() / 2]);
    std::fs::write(&path, cut).unwrap();
    let before = f.calls().len();
    let resumed = f.sweep(SPEC, &out, None);
    assert_eq!(resumed.count(Status::Ok), 1);
    assert_eq!(f.calls().len(), before + 2, "one repeated run and one wal attempt");
    let loaded = read_rows(&path).unwrap();
    assert_eq!(loaded.skipped_lines, 1);
    assert_eq!(loaded.rows.iter().filter(|r| r.status() == Status::Ok).count(), 6);
}

#[test]
fn shards_merge_back_to_the_whole() {
    let f = Fixture::new();
    let dirs: Vec<PathBuf> = (1..=3).map(|i| f.out(&format!("shard{i}"))).collect();
    for (i, d) in dirs.iter().enumerate() {
        f.sweep(SPEC, d, Some(Shard { index: i + 1, count: 3 }));
    }
    let merged = f.out("merged");
    let stats = results::merge(&dirs, &merged).unwrap();
    assert_eq!(stats.rows_written, 12);
    let rows = read_rows(&merged.join(RESULTS_FILE)).unwrap().rows;
    let keys: std::collections::HashSet<_> = rows.iter().map(|r| r.key()).collect();
    assert_eq!(keys.len(), 12);
    // Every point ran in exactly one shard.
    let mut points = std::collections::HashMap::new();
    for d in &dirs {
        for r in read_rows(&d.join(RESULTS_FILE)).unwrap().rows {
            points
                .entry(r.point().to_string())
                .or_insert_with(std::collections::HashSet::new)
                .insert(d.clone());
        }
    }
    assert_eq!(points.len(), 6);
    assert!(points.values().all(|shards| shards.len() == 1));
}

#[test]
fn a_hung_run_times_out() {
    let f = Fixture::new();
    let spec = SPEC
        .replace("reps = 2", "reps = 1\ntimeout = \"1s\"")
        .replace("[\"0\", \"1us\", \"2us\"]", "[\"hang\"]")
        .replace("[\"inplace\", \"wal\"]", "[\"inplace\"]");
    let started = std::time::Instant::now();
    let s = f.sweep(&spec, &f.out("t"), None);
    assert!(started.elapsed().as_secs() < 20);
    assert_eq!(s.count(Status::Timeout), 1);
    assert!(s.has_failures());
}

#[test]
fn report_shows_verdicts_and_blocked_claims() {
    let f = Fixture::new();
    let out = f.out("rep");
    f.sweep(SPEC, &out, None);
    let built = report::build(&ReportOptions { dir: out.clone(), ..Default::default() }).unwrap();
    let spec = &built.specs[0];
    assert_eq!(spec.points.measured, 3);
    assert_eq!(spec.points.unsupported, 3);
    assert!(spec.status.starts_with("partly runnable: engine wal missing"), "{}", spec.status);
    let falls = &spec.claims[0];
    assert_eq!(falls.verdict, experiments::analysis::Verdict::Reproduced);
    assert_eq!(falls.measured, "0.4");
    let vs_wal = &spec.claims[1];
    assert_eq!(vs_wal.verdict.label(), "not yet runnable: engine wal missing");
    let written = report::write(&built).unwrap();
    assert_eq!(written.len(), 3);
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("not yet runnable: engine wal missing"));
    assert!(html.contains("figures/fake.png"));
    assert!(out.join("figures/fake.svg").exists() && out.join("figures/fake.png").exists());
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| fake | In-Place Updates loses throughput |"), "{md}");
}

const DRAM_SPEC: &str = r#"
[spec]
name = "dram"
title = "dram"
source = "Pelley et al., VLDB 2014, Fig. 5"
reps = 2
[base]
engine = "inplace"
medium = "dram"
duration = "1s"
[grid]
workload = ["tpcb", "tatp"]
persist_latency = ["0", "1us", "2us"]
cache_pages = ["10", "20"]
[[plot]]
x = "persist_latency"
y = "tps"
series = "workload"
"#;

#[test]
fn runs_that_differ_only_in_the_measured_run_share_one_loaded_image() {
    let f = Fixture::new();
    let out = f.out("images");
    let images = f.out("image-cache");
    let options = SweepOptions { images: Some(images.clone()), ..f.options(&out, None) };
    let s = f.sweep_with(DRAM_SPEC, options);
    assert_eq!(s.runs, 24);
    assert_eq!(s.count(Status::Ok), 24);
    let calls = f.calls();
    let builds: Vec<_> = calls.iter().filter(|c| c.contains(" builds ")).collect();
    let reuses = calls.iter().filter(|c| c.contains(" reuses ")).count();
    // One image per workload: persist latency and cache size are the measured run's.
    assert_eq!(builds.len(), 2, "{calls:?}");
    assert_eq!(reuses, 22, "{calls:?}");
    let image_of = |c: &String| c.rsplit(' ').next().unwrap().to_string();
    assert_ne!(image_of(builds[0]), image_of(builds[1]));
    assert!(calls.iter().all(|c| image_of(c).starts_with(&images.display().to_string())));
    // Each image is removed after its last run.
    let left: Vec<_> = std::fs::read_dir(&images).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    // A row says which image it started from.
    let rows = read_rows(&out.join(RESULTS_FILE)).unwrap().rows;
    assert!(rows.iter().all(|r| r.0["args"].to_string().contains("--image")));
}

#[test]
fn images_are_off_when_not_asked_for_and_never_for_file_media() {
    let f = Fixture::new();
    let s = f.sweep(DRAM_SPEC, &f.out("plain"), None);
    assert_eq!(s.count(Status::Ok), 24);
    assert!(f.calls().iter().all(|c| !c.contains("--image") && !c.contains(" builds ")));
    let shm = DRAM_SPEC
        .replace("medium = \"dram\"", "medium = \"shm\"")
        .replace("name = \"dram\"", "name = \"shm\"");
    let options = SweepOptions { images: Some(f.out("cache")), ..f.options(&f.out("shm"), None) };
    let before = f.calls().len();
    f.sweep_with(&shm, options);
    let calls = f.calls();
    assert_eq!(calls.len(), before + 24);
    assert!(calls[before..].iter().all(|c| !c.contains(" builds ") && !c.contains(" reuses ")));
}

#[test]
fn check_first_runs_the_checker_on_repetition_0_only_and_resumes_the_same_points() {
    let f = Fixture::new();
    let out = f.out("check-first");
    let options = SweepOptions { check: CheckReps::First, ..f.options(&out, None) };
    let s = f.sweep_with(SPEC, options.clone());
    assert_eq!(s.count(Status::Ok), 6);
    let rows = read_rows(&out.join(RESULTS_FILE)).unwrap().rows;
    let ok: Vec<_> = rows.iter().filter(|r| r.0["status"] == "ok").collect();
    assert_eq!(ok.len(), 6);
    for r in &ok {
        let unchecked = r.0["args"].to_string().contains("--no-check");
        assert_eq!(unchecked, r.0["rep"] != 0, "{:?}", r.0);
    }
    // The rows keep the point's flags and hash: a sweep with the default resumes, not reruns.
    let again = f.sweep_with(SPEC, f.options(&out, None));
    assert_eq!(again.count(Status::Ok), 0, "{again:?}");
    // The default checks every repetition.
    let every = f.out("check-every");
    f.sweep(SPEC, &every, None);
    let rows = read_rows(&every.join(RESULTS_FILE)).unwrap().rows;
    assert!(rows.iter().all(|r| !r.0["args"].to_string().contains("--no-check")));
}

#[test]
fn runs_go_repetition_major_so_compared_configurations_alternate() {
    let f = Fixture::new();
    let out = f.out("order");
    f.sweep(SPEC, &out, None);
    let rows = read_rows(&out.join(RESULTS_FILE)).unwrap().rows;
    let reps: Vec<u64> = rows.iter().map(|r| r.0["rep"].as_u64().unwrap()).collect();
    assert_eq!(reps, [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
    // Within a pass, the points keep the grid's order.
    let first: Vec<String> = rows[..6].iter().map(|r| r.point().to_string()).collect();
    let second: Vec<String> = rows[6..].iter().map(|r| r.point().to_string()).collect();
    assert_eq!(first, second);
}
