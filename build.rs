//! Build script: with feature `mpi`, compiles the one-line C shim that reads MPI_IN_PLACE from the MPI
//! library's own header. Without it, nothing to do.

fn main() {
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
