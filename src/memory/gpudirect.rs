//! Whether a host offers a route GPUDirect RDMA could take (the NIC reading and writing GPU memory itself),
//! reported next to rdma paths that run on device memory. collbench does not use it: device buffers are staged
//! through host memory on every path, and registering device memory with the NIC is not implemented. The
//! report tells a reader whether a GPUDirect-capable tool (NCCL's IB plugin, perftest's `--use_cuda`) could
//! skip the staging on this host.
//!
//! Two routes, both read from sysfs (the root is a parameter so tests use a temporary tree):
//! - the peer-memory kernel module, `nvidia_peermem` (legacy `nv_peer_mem`): loaded means `/sys/module/NAME`
//!   exists; through it `ibv_reg_mr` accepts device addresses.
//! - dma-buf (`ibv_reg_dmabuf_mr`, Linux 5.12+): taken as present when the kernel shows dma-buf in sysfs,
//!   `/sys/kernel/dmabuf` (dma-buf statistics) or `/sys/class/dma_heap` (dma-buf heaps). A kernel can have
//!   dma-buf without either, and the GPU side also needs NVIDIA's open kernel modules, which is not checked:
//!   this is a hint, said as one.

use std::path::Path;

/// Peer-memory modules, current name first.
const PEERMEM_MODULES: [&str; 2] = ["nvidia_peermem", "nv_peer_mem"];

/// sysfs entries that show a kernel with dma-buf, relative to the sysfs root.
const DMABUF_SIGNS: [&str; 2] = ["kernel/dmabuf", "class/dma_heap"];

/// What a host's sysfs shows about GPUDirect RDMA routes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routes {
    /// The loaded peer-memory module, if any.
    pub peermem: Option<&'static str>,
    /// The sysfs entry that shows dma-buf, if any (relative to the root).
    pub dmabuf: Option<&'static str>,
}

impl Routes {
    /// Reads the routes from the sysfs tree at `sysfs` (`/sys` on a real host).
    pub fn detect(sysfs: &Path) -> Routes {
        Routes {
            peermem: PEERMEM_MODULES
                .into_iter()
                .find(|m| sysfs.join("module").join(m).exists()),
            dmabuf: DMABUF_SIGNS.into_iter().find(|e| sysfs.join(e).exists()),
        }
    }

    /// One line for reports: staging is what runs; then the route GPUDirect RDMA could take, or why none.
    pub fn explain(&self) -> String {
        let dmabuf = self
            .dmabuf
            .map(|e| format!("kernel dma-buf (/sys/{e}; also needs NVIDIA's open kernel modules, not checked)"));
        match (self.peermem, dmabuf) {
            (None, None) => "staging through host memory (no GPUDirect RDMA route: nvidia_peermem not loaded, no \
                             kernel dma-buf in /sys/kernel/dmabuf or /sys/class/dma_heap)"
                .to_string(),
            (peermem, dmabuf) => {
                let routes: Vec<String> = peermem
                    .map(|m| format!("{m} loaded"))
                    .into_iter()
                    .chain(dmabuf)
                    .collect();
                format!(
                    "staging through host memory (GPUDirect RDMA route: {}; not used by this version)",
                    routes.join(", ")
                )
            }
        }
    }
}

/// [`Routes::explain`] for this host (`/sys`).
pub fn explain_host() -> String {
    Routes::detect(Path::new("/sys")).explain()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs tree holding `dirs`.
    fn tree(dirs: &[&str]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for d in dirs {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        root
    }

    #[test]
    fn nothing_loaded_says_there_is_no_route_and_why() {
        // Other modules (the NIC's, the GPU driver's) are not a route.
        let root = tree(&["module/nvidia", "module/mlx5_ib", "kernel/mm"]);
        let r = Routes::detect(root.path());
        assert_eq!(
            r,
            Routes {
                peermem: None,
                dmabuf: None
            }
        );
        let e = r.explain();
        assert!(
            e.starts_with("staging through host memory (no GPUDirect RDMA route:"),
            "{e}"
        );
        assert!(e.contains("nvidia_peermem not loaded") && e.contains("dma-buf"), "{e}");
    }

    #[test]
    fn a_peermem_module_is_a_route_not_used() {
        for m in PEERMEM_MODULES {
            let root = tree(&[&format!("module/{m}")]);
            let r = Routes::detect(root.path());
            assert_eq!((r.peermem, r.dmabuf), (Some(m), None));
            assert_eq!(
                r.explain(),
                format!("staging through host memory (GPUDirect RDMA route: {m} loaded; not used by this version)")
            );
        }
        // Both loaded: the current name is the one reported.
        let root = tree(&["module/nvidia_peermem", "module/nv_peer_mem"]);
        assert_eq!(Routes::detect(root.path()).peermem, Some("nvidia_peermem"));
    }

    #[test]
    fn kernel_dma_buf_is_a_route_with_its_caveat() {
        for sign in DMABUF_SIGNS {
            let root = tree(&[sign]);
            let r = Routes::detect(root.path());
            assert_eq!((r.peermem, r.dmabuf), (None, Some(sign)));
            let e = r.explain();
            assert!(
                e.contains("GPUDirect RDMA route: kernel dma-buf") && e.contains(sign),
                "{e}"
            );
            assert!(
                e.contains("open kernel modules") && e.ends_with("not used by this version)"),
                "{e}"
            );
        }
    }

    #[test]
    fn both_routes_are_named() {
        let root = tree(&["module/nvidia_peermem", "kernel/dmabuf"]);
        let e = Routes::detect(root.path()).explain();
        assert!(
            e.contains("route: nvidia_peermem loaded, kernel dma-buf (/sys/kernel/dmabuf;"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_root_reads_as_no_route() {
        let r = Routes::detect(Path::new("/nonexistent/collbench-sysfs"));
        assert!(r.peermem.is_none() && r.dmabuf.is_none());
    }
}
