//! The RDMA path from the outside: what a build without hardware must say, and (feature `rdma`, with
//! `COLLBENCH_TEST_RDMA_DEVICE=DEVICE[:PORT]`) a loopback queue pair on one device and two ranks over it.
//! Without that variable the hardware tests print why they did not run and return.

use assert_cmd::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("collbench")
        .expect("binary built")
        .env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(120))
        .arg("run")
        .args(args)
        .output()
        .expect("collbench runs")
}

#[test]
fn an_rdma_path_without_its_feature_or_device_is_a_clear_usage_error() {
    let out = run(&["--np", "2", "-b", "8", "-e", "8", "--transport", "rdma@mlx5_0:1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    if cfg!(feature = "rdma") {
        // Only on a host without that device: here the message must list what was looked for.
        if std::path::Path::new("/sys/class/infiniband/mlx5_0").exists() {
            eprintln!("skipped the missing-device check: this host has mlx5_0");
            return;
        }
        assert!(
            err.contains("'mlx5_0' not found") && err.contains("/sys/class/infiniband") && err.contains("ibv_devices"),
            "{err}"
        );
    } else {
        assert!(err.contains("--transport") && err.contains("--features rdma"), "{err}");
    }
    let out = run(&["--transport", "rdma"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rdma@DEVICE[:PORT]"));
}

#[cfg(feature = "rdma")]
mod hardware {
    use std::time::Duration;

    use collbench::algorithm::{self, Algo, Args, Tuning, Workspace};
    use collbench::collective::Collective;
    use collbench::options::Options;
    use collbench::reduce::{Dtype, Op};
    use collbench::session;
    use collbench::transport::rdma::connect::{connect, default_config, Target};
    use collbench::transport::rdma::endpoint::{QpEndpoint, QpNumbers, RemoteWindow, ENDPOINT_VERSION};
    use collbench::transport::rdma::qp::{LocalPort, Qp};
    use collbench::transport::rdma::sysfs;
    use collbench::transport::rdma::verbs::{Context, Cq, Mr, Pd, QpCaps, RcQp};
    use collbench::transport::rdma::window::{Imm, WindowShape};
    use collbench::transport::Transport;

    const VAR: &str = "COLLBENCH_TEST_RDMA_DEVICE";

    /// The device under test, or `None` after saying why the test does not run.
    fn target(test: &str) -> Option<Target> {
        let Ok(v) = std::env::var(VAR) else {
            eprintln!("{test}: not run: set {VAR}=DEVICE[:PORT] (e.g. mlx5_0:1) on a host with an RDMA device");
            return None;
        };
        let (device, port) = v.split_once(':').unwrap_or((&v, "1"));
        Some(Target {
            device: device.to_string(),
            port: port.parse().expect("COLLBENCH_TEST_RDMA_DEVICE port is a number"),
            gid_index: None,
        })
    }

    #[test]
    fn loopback_queue_pair_writes_into_its_own_window() {
        let Some(t) = target("loopback_queue_pair_writes_into_its_own_window") else {
            return;
        };
        let ctx = Context::open(&t.device).unwrap();
        let port = ctx.query_port(t.port).unwrap();
        assert!(port.active, "port {} of {} is not active", t.port, t.device);
        let gid = if port.link_layer == sysfs::LinkLayer::InfiniBand {
            (0, ctx.query_gid(t.port, 0).unwrap())
        } else {
            let entries = sysfs::gids(std::path::Path::new(sysfs::SYSFS_IB), &t.device, t.port);
            let g = sysfs::select_gid(&entries, port.link_layer, None).unwrap();
            (g.index, g.gid)
        };
        let pd = Pd::new(&ctx).unwrap();
        let cq = Cq::new(&ctx, 16).unwrap();
        let caps = QpCaps {
            send_wr: 4,
            recv_wr: 4,
            inline: 64,
        };
        let mut window = vec![0u8; 4096];
        let mut src: Vec<u8> = (0..1000).map(|i| i as u8).collect();
        // SAFETY: both vectors outlive their registrations (dropped at the end of the test, regions first).
        let wmr = unsafe { Mr::register(&pd, window.as_mut_ptr(), window.len()) }.unwrap();
        // SAFETY: as above.
        let smr = unsafe { Mr::register(&pd, src.as_mut_ptr(), src.len()) }.unwrap();
        let mut qp = Qp::new(RcQp::new(&pd, &cq, caps).unwrap()).init(t.port).unwrap();
        let me = QpEndpoint {
            version: ENDPOINT_VERSION,
            from: 0,
            to: 0,
            lid: port.lid,
            gid: gid.1,
            qps: vec![QpNumbers {
                qpn: qp.receiver().qpn(),
                psn: 1,
            }],
            mtu: port.mtu,
            window: RemoteWindow {
                addr: window.as_ptr() as u64,
                rkey: wmr.rkey(),
                shape: WindowShape::new(4, 1024).unwrap(),
            },
        };
        me.validate(0, 0, 1).unwrap();
        let local = LocalPort {
            port: t.port,
            link_layer: port.link_layer,
            mtu: port.mtu,
            gid_index: gid.0,
        };
        let mut qp = qp.ready_to_receive(&me, 0, &local).unwrap();
        qp.receiver().post_recv(7).unwrap();
        let mut qp = qp.ready_to_send(1).unwrap();
        let imm = Imm::Data { slot: 1, len: 1000 }.encode();
        // SAFETY: src stays registered and untouched until the completion is polled below.
        unsafe {
            qp.sender()
                .post_write(
                    3,
                    src.as_ptr(),
                    1000,
                    Some(smr.lkey()),
                    (me.window.addr + 1024, wmr.rkey()),
                    Some(imm),
                )
                .unwrap()
        };
        // SAFETY: zeroed is a valid work completion (plain integers).
        let mut wc: Vec<rdma_sys::ibv_wc> = (0..4).map(|_| unsafe { std::mem::zeroed() }).collect();
        let (mut sent, mut got) = (false, None);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !(sent && got.is_some()) {
            assert!(std::time::Instant::now() < deadline, "no completion within 10 s");
            let n = cq.poll(&mut wc).unwrap();
            for w in &wc[..n] {
                assert_eq!(w.status, 0, "completion failed with status {}", w.status);
                if w.wr_id == 3 {
                    sent = true;
                } else {
                    assert_eq!(w.wr_id, 7);
                    // SAFETY: a receive completion with immediate data carries it in this union member.
                    got = Some(u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data }));
                }
            }
        }
        assert_eq!(got.map(Imm::decode), Some(Imm::Data { slot: 1, len: 1000 }));
        assert_eq!(&window[1024..2024], &src[..]);
        assert!(
            window[..1024].iter().all(|&b| b == 0),
            "nothing outside the slot was written"
        );
    }

    #[test]
    fn two_ranks_all_reduce_over_one_device() {
        all_reduce_over_one_device("two_ranks_all_reduce_over_one_device", 1);
    }

    #[test]
    fn two_ranks_all_reduce_over_one_device_with_two_queue_pairs_per_peer() {
        all_reduce_over_one_device("two_ranks_all_reduce_over_one_device_with_two_queue_pairs_per_peer", 2);
    }

    fn all_reduce_over_one_device(test: &str, qps: usize) {
        let Some(t) = target(test) else {
            return;
        };
        let mut opts = Options::default();
        opts.deadlines.timeout = Duration::from_secs(30);
        let results = session::run_threads(2, &opts, |sess| {
            let host = sess.world.host.clone();
            let cfg = default_config(opts.deadlines.timeout, qps);
            let mut rd = connect(&mut sess.transports[0], &host, &t, cfg).unwrap();
            let (n, r) = (rd.size(), rd.rank());
            for count in [0usize, 1, 1000, 3 << 20] {
                let input: Vec<i32> = (0..count).map(|i| (i % 1000) as i32 * (r as i32 + 1)).collect();
                let mut out = vec![0i32; count];
                for algo in [Algo::Ring, Algo::RecDoubling] {
                    algorithm::run(
                        &mut rd,
                        algo,
                        Args {
                            coll: Collective::AllReduce,
                            dtype: Dtype::Int32,
                            op: Op::Sum,
                            root: 0,
                            count,
                            send: Some(bytemuck::cast_slice(&input)),
                            recv: bytemuck::cast_slice_mut(&mut out),
                        },
                        &mut Workspace::default(),
                        &Tuning::default(),
                    )
                    .unwrap();
                    let want = (n * (n + 1) / 2) as i32;
                    assert!(
                        out.iter().enumerate().all(|(i, &v)| v == (i % 1000) as i32 * want),
                        "rank {r} {algo} count {count}: wrong sum"
                    );
                }
            }
            rd.path()
        });
        for r in results {
            assert!(r.unwrap().starts_with("rdma@"));
        }
    }
}
