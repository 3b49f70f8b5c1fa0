//! GPU topology as text (`collbench info`): one line per GPU, then the pair matrix.

use crate::net::gpu_topo::{nvlink_generation, pair_of, Pair, Topology};

/// The topology as text: one line per GPU, then the connection matrix (`nvidia-smi topo -m` style).
pub fn render(t: &Topology, host: &str) -> String {
    if let Some(why) = &t.unavailable {
        return format!("{host}: GPU topology unavailable: {why}\n");
    }
    let mut out = String::new();
    if t.gpus.is_empty() {
        return out;
    }
    let mut rows = vec![vec![
        "gpu".to_string(),
        "name".into(),
        "bus".into(),
        "numa".into(),
        "pcie".into(),
        "nvlinks".into(),
    ]];
    for g in &t.gpus {
        let active = g.links.iter().filter(|l| l.active).count();
        rows.push(vec![
            g.index.to_string(),
            g.name.clone(),
            g.bus_id.clone(),
            g.numa_node.map_or("-".into(), |n| n.to_string()),
            match (g.pcie_gen, g.pcie_width) {
                (Some(gen), Some(w)) => format!("gen{gen} x{w}"),
                _ => "-".into(),
            },
            if g.links.is_empty() {
                "-".into()
            } else {
                let v = g.nvlink_version.map_or(String::new(), |v| {
                    format!(" (NVLink {})", nvlink_generation(v).unwrap_or("?"))
                });
                format!("{active}/{} active{v}", g.links.len())
            },
        ]);
    }
    out.push_str(&format!(
        "{host}: GPU topology (NVML {})\n",
        t.nvml_version.as_deref().unwrap_or("?")
    ));
    out.push_str(&super::columns(&rows, &[]));
    if t.gpus.len() > 1 {
        let mut m = vec![std::iter::once(String::new())
            .chain(t.gpus.iter().map(|g| format!("gpu{}", g.index)))
            .collect::<Vec<_>>()];
        for a in &t.gpus {
            let mut r = vec![format!("gpu{}", a.index)];
            for b in &t.gpus {
                r.push(if a.index == b.index {
                    "X".into()
                } else {
                    pair_of(&t.pairs, a.index, b.index).map_or("?".into(), Pair::label)
                });
            }
            m.push(r);
        }
        out.push_str(&super::columns(&m, &[]));
        out.push_str(
            "NV#: # NVLinks (through NVSwitches where the GPUs link to switches); PIX/PXB: PCIe switches; PHB: \
             host bridge; NODE: within a NUMA node; SYS: across NUMA nodes\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::gpu_topo::pairs;
    use crate::net::gpu_topo::tests::{four, level};

    #[test]
    fn renders_gpus_and_the_pair_matrix() {
        let gpus = four();
        let t = Topology {
            unavailable: None,
            nvml_version: Some("12.580.65".into()),
            pairs: pairs(&gpus, level),
            gpus,
        };
        let text = render(&t, "h0");
        let want = "\
h0: GPU topology (NVML 12.580.65)
gpu  name         bus           numa  pcie      nvlinks
0    NVIDIA A100  0000:19:00.0  0     gen4 x16  4/4 active (NVLink 3.0)
1    NVIDIA A100  0000:1a:00.0  0     gen4 x16  4/5 active (NVLink 3.0)
2    NVIDIA A100  0000:5e:00.0  1     gen4 x16  -
3    NVIDIA A100  0000:5f:00.0  1     gen4 x16  -
      gpu0  gpu1  gpu2  gpu3
gpu0  X     NV4   SYS   SYS
gpu1  NV4   X     SYS   SYS
gpu2  SYS   SYS   X     PIX
gpu3  SYS   SYS   PIX   X
";
        assert!(text.starts_with(want), "{text}");
        let none = Topology {
            unavailable: Some("NVML (libnvidia-ml.so.1) not found".into()),
            ..Topology::default()
        };
        assert_eq!(
            render(&none, "h1"),
            "h1: GPU topology unavailable: NVML (libnvidia-ml.so.1) not found\n"
        );
    }
}
