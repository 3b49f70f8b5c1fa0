//! The GPU kernels' logic on the CPU: kernels/reduce.cu compiled as host C++ (tests/gpu/emulate/, g++) and run
//! block by block, against the CPU kernels bit for bit (NaN payloads and zero signs aside) on random inputs
//! for every dtype and op, and the verification kernel's counts against the CPU check. What this cannot
//! check is what only a GPU does (PTX half conversions, warps, the compiler for the device): that is
//! `collbench selftest --gpu`. Needs g++ (skipped without it, failed under CI=true).

use std::path::{Path, PathBuf};
use std::process::Command;

use collbench::reduce::cuda_kernels::{finalize_name, reduce_name, verify_name, VERIFY_PERIOD};
use collbench::reduce::kernel::{finalize, reduce_into};
use collbench::reduce::pattern::{Pattern, Source};
use collbench::reduce::{Dtype, Op};
use collbench::selftest::gpu_data::{compare, corrupt_positions, random_elements, Rng};

/// Odd, so the scalar tail runs after the vector loops.
const ELEMS: usize = 4099;

/// Grid sizes: one block (every vector on one thread), and strides that leave unrolled and plain remainders.
const GRIDS: [u32; 3] = [1, 3, 7];

/// Builds the harness, or None (with the reason printed) when g++ is missing outside CI.
fn harness(dir: &Path) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join("emulate");
    let out = Command::new("g++")
        .args(["-std=c++14", "-O1", "-Wall", "-Wno-unknown-pragmas", "-o"])
        .arg(&exe)
        .arg(root.join("tests/gpu/emulate/main.cpp"))
        .output();
    match out {
        Ok(o) if o.status.success() => Some(exe),
        Ok(o) => panic!(
            "g++ could not compile the kernels as host code:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("skipped: g++ not runnable ({e}); apt-get install g++");
            None
        }
        Err(e) => panic!("g++ not runnable ({e}); CI needs it (apt-get install g++)"),
    }
}

fn run(exe: &Path, args: &[&str]) -> String {
    let o = Command::new(exe).args(args).output().expect("harness runs");
    assert!(
        o.status.success(),
        "emulate {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn kernel_logic_matches_the_cpu_kernels_for_every_dtype_and_op() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = harness(dir.path()) else { return };
    let (fa, fb, fo) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("out"));
    let mut rng = Rng::new(0x6b65726e656c73);
    for dtype in Dtype::ALL {
        for op in Op::ALL {
            for grid in GRIDS {
                let a = random_elements(dtype, ELEMS, &mut rng);
                let b = random_elements(dtype, ELEMS, &mut rng);
                std::fs::write(&fa, &a).unwrap();
                std::fs::write(&fb, &b).unwrap();
                let g = grid.to_string();
                run(
                    &exe,
                    &["reduce", &reduce_name(dtype, op), &g, path(&fa), path(&fb), path(&fo)],
                );
                let mut want = vec![0u8; a.len()];
                reduce_into(dtype, op, &mut want, &a, &b);
                if op == Op::Avg {
                    std::fs::copy(&fo, &fa).unwrap();
                    run(
                        &exe,
                        &["finalize", &finalize_name(dtype), &g, path(&fa), "3", path(&fo)],
                    );
                    finalize(dtype, op, &mut want, 3);
                }
                let got = std::fs::read(&fo).unwrap();
                let d = compare(dtype, &got, &want);
                assert_eq!(
                    d.wrong, 0,
                    "{dtype} {op} grid {grid}: first (index, kernel, cpu) {:?}",
                    d.first
                );
            }
        }
    }
}

#[test]
fn integer_avg_divides_by_counts_beyond_the_type_range() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = harness(dir.path()) else { return };
    let (fa, fo) = (dir.path().join("a"), dir.path().join("out"));
    for dtype in [Dtype::Int8, Dtype::Uint8] {
        let a = random_elements(dtype, 64, &mut Rng::new(5));
        std::fs::write(&fa, &a).unwrap();
        run(
            &exe,
            &["finalize", &finalize_name(dtype), "2", path(&fa), "300", path(&fo)],
        );
        let mut want = a.clone();
        finalize(dtype, Op::Avg, &mut want, 300);
        assert_eq!(std::fs::read(&fo).unwrap(), want, "{dtype}");
    }
}

#[test]
fn verify_counts_what_the_cpu_check_counts() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = harness(dir.path()) else { return };
    let (fg, fw) = (dir.path().join("got"), dir.path().join("want"));
    let mut rng = Rng::new(11);
    for dtype in Dtype::ALL {
        let p = Pattern::new(dtype, Op::Sum, 4);
        let mut table = vec![0u8; VERIFY_PERIOD * dtype.size()];
        p.fill(Source::Reduced, 0, &mut table);
        std::fs::write(&fw, &table).unwrap();
        let first = 5;
        let mut buf = vec![0u8; ELEMS * dtype.size()];
        p.fill(Source::Reduced, first, &mut buf);
        for grid in GRIDS {
            std::fs::write(&fg, &buf).unwrap();
            let g = grid.to_string();
            let clean = run(&exe, &["verify", &verify_name(dtype), &g, path(&fg), "5", path(&fw)]);
            assert_eq!(clean.trim(), "0", "{dtype} grid {grid}");
            let mut bad = buf.clone();
            let mut poison = vec![0u8; dtype.size()];
            p.poison(&mut poison);
            let pos = corrupt_positions(ELEMS, 37, &mut rng);
            for &i in &pos {
                bad[i * dtype.size()..(i + 1) * dtype.size()].copy_from_slice(&poison);
            }
            std::fs::write(&fg, &bad).unwrap();
            let counted = run(&exe, &["verify", &verify_name(dtype), &g, path(&fg), "5", path(&fw)]);
            assert_eq!(counted.trim(), "37", "{dtype} grid {grid}");
            assert_eq!(p.check(Source::Reduced, first, &bad).wrong, 37);
        }
    }
}
