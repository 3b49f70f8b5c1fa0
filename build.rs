//! Build script: with feature `mpi`, compiles the one-line C shim that reads MPI_IN_PLACE from the MPI
//! library's own header. Always: passes the list of enabled features to the crate as `COLLBENCH_BUILT_FEATURES`,
//! for `collbench -V`.

fn main() {
    // Cargo sets CARGO_FEATURE_<NAME> for each enabled feature; a changed set reruns this script.
    let (with, without): (Vec<&str>, Vec<&str>) = ["mpi", "rdma", "cuda"]
        .into_iter()
        .partition(|f| std::env::var_os(format!("CARGO_FEATURE_{}", f.to_uppercase())).is_some());
    let mut line = format!(
        "features: {}",
        if with.is_empty() {
            "none".into()
        } else {
            with.join(", ")
        }
    );
    if !without.is_empty() {
        line.push_str(&format!("; without: {}", without.join(", ")));
    }
    println!("cargo:rustc-env=COLLBENCH_BUILT_FEATURES={line}");
    #[cfg(feature = "mpi")]
    {
        let lib = build_probe_mpi::probe().unwrap_or_else(|e| {
            panic!(
                "feature \"mpi\" needs an MPI library with its compiler wrapper (mpicc) or pkg-config file: {e:?}. \
                 On Debian: apt-get install libopenmpi-dev"
            )
        });
        let mut build = cc::Build::new();
        build.file("src/mpi/in_place.c");
        for p in &lib.include_paths {
            build.include(p);
        }
        build.compile("collbench_mpi_shim");
        println!("cargo:rerun-if-changed=src/mpi/in_place.c");
    }
}
