//! Interface choice as a user sees it on one host: `tcp@SPEC` with globs and `|` lists, the default rule's
//! stderr line, and an unmatched SPEC naming the host.

use std::process::Output;

use assert_cmd::Command;

fn run(args: &[&str]) -> Output {
    Command::cargo_bin("collbench")
        .expect("binary built")
        .env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(300))
        .args(["run", "--np", "2", "-b", "8", "-e", "8", "-n", "2", "-w", "1"])
        .args(args)
        .output()
        .expect("collbench runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_glob_picks_loopback_and_labels_the_path_with_the_spec() {
    let out = run(&["--transport", "tcp@l*"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stdout.contains("# all_reduce on tcp@l*, 2 ranks"), "{stdout}");
    assert_eq!(stdout.matches(" iface lo addr 127.0.0.1:").count(), 2, "{stdout}");
    assert!(
        stderr.contains("collbench: tcp@l* path: interface lo on every host (chosen by tcp@l*)"),
        "{stderr}"
    );
}

#[test]
fn a_list_is_tried_in_order() {
    let out = run(&["--transport", "tcp@nosuch|lo"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stdout.contains("# all_reduce on tcp@nosuch|lo, 2 ranks"), "{stdout}");
    assert!(stdout.contains(" iface lo addr 127.0.0.1:"), "{stdout}");
    assert!(
        stderr.contains("interface lo on every host (chosen by tcp@nosuch|lo)"),
        "{stderr}"
    );
}

#[test]
fn plain_tcp_on_one_host_says_it_uses_loopback() {
    let out = run(&[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(
        stderr.contains("collbench: tcp path: interface lo on every host (single host: loopback)"),
        "{stderr}"
    );
}

#[test]
fn an_unmatched_spec_fails_naming_the_host_and_what_exists() {
    let out = run(&["--transport", "tcp@nosuch*"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    let host = collbench::world::hostname();
    assert!(
        stderr.contains(&format!(
            "no interface matching 'nosuch*' has a usable address on host {host}"
        )) && stderr.contains("--transport")
            && stderr.contains("lo"),
        "{stderr}"
    );
    assert!(text(&out.stdout)
        .lines()
        .all(|l| l.starts_with('#') || l.trim().is_empty()));
}
