//! The CNI-change gate of k8s/overlays/preflight-gate, run end to end here: the workflow docs/kubernetes.md
//! shows (its `gate-workflow` block: the token, `gate.sh --record-baseline`, the change, `gate.sh`) runs as
//! written against a stand-in kubectl whose cluster is this machine (tests/k8s/fake_kubectl.py: the overlays
//! rendered by the real `kubectl kustomize`, each Indexed Job's pods run as local `collbench preflight`
//! processes over lo). It asserts that rank 0's results become the ConfigMap the gate mounts, byte for byte,
//! that the gate then judges against it and says so in two lines, and that the gate fails on a baseline
//! the network cannot meet and passes one it beats, whatever the machine's load.
//!
//! Needs kubectl (for `kubectl kustomize` and `create --dry-run=client`) and python3 with PyYAML; where they
//! are missing it says so and passes, except under `CI=true`, where that fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::netns::cannot_run;
use serde_json::Value;

/// A stand-in cluster: its state folder and the PATH on which `kubectl` is the stand-in.
struct Fake {
    state: tempfile::TempDir,
    path: std::ffi::OsString,
    kubectl: PathBuf,
    _bin: tempfile::TempDir,
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The stand-in, or `None` (said why) where kubectl or PyYAML is missing.
fn fake() -> Option<Fake> {
    let real = Command::new("bash").args(["-c", "command -v kubectl"]).output().ok()?;
    if !real.status.success() {
        cannot_run("no kubectl (Debian: apt-get install kubectl)");
        return None;
    }
    let yaml = Command::new("python3").args(["-c", "import yaml"]).output();
    if !yaml.is_ok_and(|o| o.status.success()) {
        cannot_run("python3 cannot import yaml (Debian: apt-get install python3-yaml)");
        return None;
    }
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo().join("tests/k8s/fake_kubectl.py"), bin.path().join("kubectl")).unwrap();
    let collbench = Path::new(env!("CARGO_BIN_EXE_collbench"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = std::env::join_paths(
        [bin.path().to_path_buf(), collbench]
            .into_iter()
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    Some(Fake {
        state: tempfile::tempdir().unwrap(),
        path,
        kubectl: PathBuf::from(String::from_utf8(real.stdout).unwrap().trim()),
        _bin: bin,
    })
}

impl Fake {
    /// `script` run by bash in the repository's root, as a user runs the docs' commands.
    fn sh(&self, script: &str) -> Output {
        Command::new("bash")
            .args(["-eu", "-o", "pipefail", "-c", script])
            .current_dir(repo())
            .env("PATH", &self.path)
            .env("FAKE_K8S_STATE", self.state.path())
            .env("FAKE_K8S_KUBECTL", &self.kubectl)
            .env_remove("NAMESPACE")
            .env_remove("KUBECTL")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    /// The baseline the gate's pods mount: what the ConfigMap holds.
    fn baseline(&self) -> Option<Vec<u8>> {
        std::fs::read(self.state.path().join("configmap/collbench-baseline/baseline.json")).ok()
    }

    fn store_baseline(&self, doc: &Value) {
        let file = self.state.path().join("edited.json");
        std::fs::write(&file, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
        let out = self.sh(&format!(
            "kubectl create configmap collbench-baseline --from-file=baseline.json={} --dry-run=client -o yaml \
             | kubectl apply -f -",
            file.display()
        ));
        assert!(out.status.success(), "{}", show(&out));
    }

    /// Rank 0's log of the `n`th Job run and deleted (0: the first).
    fn deleted_log(&self, n: usize) -> String {
        std::fs::read_to_string(self.state.path().join(format!("deleted/{n}-collbench-preflight/0.log"))).unwrap()
    }

    /// Rank 0's results file of the Job that ran last.
    fn results(&self) -> Value {
        let f = self
            .state
            .path()
            .join("job/collbench-preflight/pod0-results/preflight.json");
        serde_json::from_slice(&std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()))).unwrap()
    }
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The block of docs/kubernetes.md marked `gate-workflow`.
fn documented_workflow() -> String {
    let text = std::fs::read_to_string(repo().join("docs/kubernetes.md")).unwrap();
    let mut lines = text
        .lines()
        .skip_while(|l| !(l.starts_with("```sh") && l.contains("gate-workflow")));
    assert!(
        lines.next().is_some(),
        "docs/kubernetes.md has no `gate-workflow` block"
    );
    let block: Vec<&str> = lines.take_while(|l| !l.starts_with("```")).collect();
    block.join("\n") + "\n"
}

/// The JSON between rank 0's `----- BEGIN` and `----- END` lines.
fn printed_results(log: &str) -> String {
    let mut inside = false;
    let mut out = String::new();
    for l in log.lines() {
        if l.starts_with("----- BEGIN ") {
            inside = true;
        } else if l.starts_with("----- END ") {
            return out;
        } else if inside {
            out.push_str(l);
            out.push('\n');
        }
    }
    panic!("no complete results in rank 0's log:\n{log}");
}

/// The checks of a preflight document compared with the baseline.
fn baseline_checks(doc: &Value) -> Vec<&Value> {
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"].as_str().unwrap().ends_with("vs baseline"))
        .collect()
}

/// Every record's out-of-place time and its confidence interval times `factor`.
fn scaled(doc: &Value, factor: f64) -> Value {
    fn walk(v: &mut Value, factor: f64) {
        match v {
            Value::Object(m) => {
                if let Some(oop) = m.get_mut("out_of_place").and_then(Value::as_object_mut) {
                    for k in ["time", "ci95_us"] {
                        if let Some(t) = oop.get(k).and_then(Value::as_f64) {
                            oop.insert(k.into(), (t * factor).into());
                        }
                    }
                }
                m.values_mut().for_each(|x| walk(x, factor));
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, factor)),
            _ => {}
        }
    }
    let mut d = doc.clone();
    walk(&mut d, factor);
    d
}

#[test]
fn the_documented_baseline_and_gate_workflow_runs_against_local_pods() {
    let Some(k) = fake() else { return };

    // Without the token nothing starts, and the gate says what is missing.
    let out = k.sh("k8s/overlays/preflight-gate/gate.sh --record-baseline 60");
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("secret/collbench-job-token is missing"),
        "{}",
        show(&out)
    );

    // The workflow as docs/kubernetes.md gives it; `rollback` is the pipeline's, here a marker.
    let script = format!("rollback() {{ echo ROLLED-BACK; }}\n{}", documented_workflow());
    let out = k.sh(&script);
    let so = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", show(&out));
    let lines: Vec<&str> = so
        .lines()
        .filter(|l| !l.contains(" created") && !l.contains(" configured"))
        .collect();
    // Recording: the verdict, then what was stored; the gate: the verdict, the Job's state (and a rollback
    // when it failed).
    assert!(lines.len() >= 4, "{so}");
    assert!(lines[0].starts_with("Preflight verdict: "), "{so}");
    assert!(
        lines[1]
            .starts_with("gate.sh: job/collbench-preflight Complete; baseline recorded: configmap/collbench-baseline"),
        "{so}"
    );
    assert!(lines[2].starts_with("Preflight verdict: "), "{so}");
    let failed = lines[2].starts_with("Preflight verdict: FAIL");
    assert_eq!(
        lines[3].starts_with("gate.sh: job/collbench-preflight Failed"),
        failed,
        "the Job's state is the verdict's:\n{so}"
    );
    assert_eq!(so.contains("ROLLED-BACK"), failed, "{so}");
    assert!(
        !so.contains("BEGIN") && !so.contains("\"checks\""),
        "the gate's log stays short:\n{so}"
    );

    // The ConfigMap holds rank 0's results of the recording run, byte for byte.
    let stored = k.baseline().expect("the baseline ConfigMap was stored");
    assert_eq!(
        String::from_utf8(stored.clone()).unwrap(),
        printed_results(&k.deleted_log(0)),
        "the ConfigMap is not what rank 0 printed"
    );
    let recorded: Value = serde_json::from_slice(&stored).unwrap();
    assert!(
        baseline_checks(&recorded).is_empty(),
        "the recording run compared with something"
    );
    // The gate compared with it: one check per path and collective, against the mounted file.
    let judged = k.results();
    let against = baseline_checks(&judged);
    assert!(!against.is_empty(), "no check against the baseline:\n{judged}");
    for c in &against {
        let src = c["source"].as_str().unwrap();
        assert!(
            src.starts_with("--baseline ") && src.ends_with("configmap/collbench-baseline/baseline.json"),
            "{c}"
        );
    }
    assert_eq!(
        failed,
        judged["verdict"].as_str() == Some("fail"),
        "{so}\n{}",
        judged["verdict"]
    );

    // A baseline a hundred times faster than this network: a regression, by name, and exit 1.
    k.store_baseline(&scaled(&recorded, 0.01));
    let out = k.sh("k8s/overlays/preflight-gate/gate.sh 600");
    let so = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let verdict = so.lines().find(|l| l.starts_with("Preflight verdict: ")).unwrap_or("");
    assert!(
        verdict.starts_with("Preflight verdict: FAIL") && verdict.contains("vs baseline"),
        "{so}"
    );
    let judged = k.results();
    assert!(
        baseline_checks(&judged).iter().all(|c| c["verdict"] == "fail"),
        "{judged}"
    );

    // A hundred times slower: nothing regressed. The gate's exit is its verdict's; the verdict's other checks
    // (a sweep against the others) follow the machine's load, and a busy one may fail them, never these.
    k.store_baseline(&scaled(&recorded, 100.0));
    let out = k.sh("k8s/overlays/preflight-gate/gate.sh 600");
    let judged = k.results();
    let failed = judged["verdict"].as_str() == Some("fail");
    assert_eq!(out.status.code(), Some(i32::from(failed)), "{}", show(&out));
    let against = baseline_checks(&judged);
    assert!(
        !against.is_empty() && against.iter().all(|c| c["verdict"] == "pass"),
        "{judged}"
    );
}
