//! libnccl loaded with dlopen: just the calls collbench uses. Hand-written rather than cudarc's `nccl`
//! module because cudarc 0.19 looks for `libnccl.so` and `libnccl.so.<CUDA major>`, never the soname NCCL
//! installs (`libnccl.so.2`), and panics when none is found.

use std::ffi::{c_char, c_int, c_void, CStr};

use libloading::Library;

use crate::reduce::{Dtype, Op};

/// Names the library is looked for under, in order (after [`LIB_ENV`]).
pub const LIB_NAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];
/// A path to libnccl tried first (a pip wheel's copy, a build of one's own).
pub const LIB_ENV: &str = "COLLBENCH_NCCL_LIB";

/// ncclUniqueId: the bytes rank 0 makes and every rank joins with.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    pub internal: [c_char; 128],
}

/// An opaque ncclComm_t.
pub type Comm = *mut c_void;
/// An opaque cudaStream_t (the driver's CUstream is the same object).
pub type Stream = *mut c_void;

type Coll = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> c_int;
type Rooted = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, c_int, Comm, Stream) -> c_int;
type P2p = unsafe extern "C" fn(*const c_void, usize, c_int, c_int, Comm, Stream) -> c_int;

/// The loaded library and its entry points.
pub struct Nccl {
    pub get_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> c_int,
    pub comm_init_rank: unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> c_int,
    pub comm_destroy: unsafe extern "C" fn(Comm) -> c_int,
    pub error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    /// ncclAllReduce(send, recv, count, dtype, op, comm, stream).
    pub all_reduce: Coll,
    /// ncclReduceScatter(send, recv, recvcount, dtype, op, comm, stream).
    pub reduce_scatter: Coll,
    /// ncclAllGather(send, recv, sendcount, dtype, comm, stream).
    pub all_gather: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, Stream) -> c_int,
    /// ncclBroadcast(send, recv, count, dtype, root, comm, stream).
    pub broadcast: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> c_int,
    /// ncclReduce(send, recv, count, dtype, op, root, comm, stream).
    pub reduce: Rooted,
    /// ncclSend(buf, count, dtype, peer, comm, stream).
    pub send: P2p,
    /// ncclRecv(buf, count, dtype, peer, comm, stream) (buf is written).
    pub recv: P2p,
    pub group_start: unsafe extern "C" fn() -> c_int,
    pub group_end: unsafe extern "C" fn() -> c_int,
    // Keeps the entry points above valid.
    _lib: Library,
}

impl Nccl {
    /// Loads libnccl ([`LIB_ENV`], then [`LIB_NAMES`]), or says what was tried and what to install.
    pub fn load() -> Result<Nccl, String> {
        let env = std::env::var(LIB_ENV).ok().filter(|p| !p.is_empty());
        let names: Vec<String> = env
            .iter()
            .cloned()
            .chain(LIB_NAMES.iter().map(|s| s.to_string()))
            .collect();
        let mut last = String::new();
        for name in &names {
            // SAFETY: loading NCCL runs its initialisers, which only set up the library.
            match unsafe { Library::new(name) } {
                Ok(lib) => return Nccl::bind(lib, name),
                Err(e) => last = e.to_string(),
            }
        }
        Err(missing_message(&names, &last))
    }

    fn bind(lib: Library, name: &str) -> Result<Nccl, String> {
        // SAFETY: each symbol is cast to the signature nccl.h declares for it (NCCL 2.10 and later).
        unsafe {
            macro_rules! sym {
                ($s:literal) => {
                    *lib.get(concat!($s, "\0").as_bytes()).map_err(|e| {
                        format!(
                            "{name} has no {} ({e}); collbench needs NCCL 2.10 or later (bfloat16, ncclAvg)",
                            $s
                        )
                    })?
                };
            }
            Ok(Nccl {
                get_version: sym!("ncclGetVersion"),
                get_unique_id: sym!("ncclGetUniqueId"),
                comm_init_rank: sym!("ncclCommInitRank"),
                comm_destroy: sym!("ncclCommDestroy"),
                error_string: sym!("ncclGetErrorString"),
                all_reduce: sym!("ncclAllReduce"),
                reduce_scatter: sym!("ncclReduceScatter"),
                all_gather: sym!("ncclAllGather"),
                broadcast: sym!("ncclBroadcast"),
                reduce: sym!("ncclReduce"),
                send: sym!("ncclSend"),
                recv: sym!("ncclRecv"),
                group_start: sym!("ncclGroupStart"),
                group_end: sym!("ncclGroupEnd"),
                _lib: lib,
            })
        }
    }

    /// The library's version as NCCL writes it (`2.27.3`), or `unknown`.
    pub fn version(&self) -> String {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        if unsafe { (self.get_version)(&mut v) } != 0 {
            return "unknown".into();
        }
        version_string(v)
    }

    /// `Ok` for ncclSuccess, else a message with NCCL's own words for `rc`.
    pub fn check(&self, call: &str, rc: c_int) -> Result<(), String> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: NCCL returns a static string for any code.
        let why = unsafe {
            let p = (self.error_string)(rc);
            if p.is_null() {
                String::from("no description")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Err(format!(
            "{call} failed: NCCL error {rc} ({why}); NCCL_DEBUG=WARN says more"
        ))
    }
}

/// The message for a libnccl that could not be loaded.
pub fn missing_message(tried: &[String], last_error: &str) -> String {
    format!(
        "nccl: libnccl.so.2 could not be loaded (tried {}; last error: {last_error}). Install NCCL 2.10 or later \
         (NVIDIA's libnccl2 package, or `pip install nvidia-nccl-cu13` and add its nvidia/nccl/lib directory to \
         LD_LIBRARY_PATH), or set {LIB_ENV} to the library's path",
        tried.join(", ")
    )
}

/// NCCL's version code (`NCCL_VERSION_CODE`: major*10000 + minor*100 + patch since 2.9) as text.
pub fn version_string(code: c_int) -> String {
    // Before 2.9 the code was major*1000 + minor*100 + patch.
    let (major, rest) = if code >= 10000 {
        (code / 10000, code % 10000)
    } else {
        (code / 1000, code % 1000)
    };
    format!("{major}.{}.{}", rest / 100, rest % 100)
}

/// ncclDataType_t of a dtype (nccl.h's numbering; every collbench dtype has one).
pub fn datatype(d: Dtype) -> c_int {
    match d {
        Dtype::Int8 => 0,
        Dtype::Uint8 => 1,
        Dtype::Int32 => 2,
        Dtype::Uint32 => 3,
        Dtype::Int64 => 4,
        Dtype::Uint64 => 5,
        Dtype::Half => 6,
        Dtype::Float => 7,
        Dtype::Double => 8,
        Dtype::Bfloat16 => 9,
    }
}

/// ncclRedOp_t of an op (avg is NCCL's own ncclAvg).
pub fn red_op(op: Op) -> c_int {
    match op {
        Op::Sum => 0,
        Op::Prod => 1,
        Op::Max => 2,
        Op::Min => 3,
        Op::Avg => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtypes_and_ops_follow_nccl_h() {
        assert_eq!(datatype(Dtype::Half), 6);
        assert_eq!(datatype(Dtype::Float), 7);
        assert_eq!(datatype(Dtype::Bfloat16), 9);
        assert_eq!(red_op(Op::Avg), 4);
        let all: std::collections::BTreeSet<_> = Dtype::ALL.iter().map(|&d| datatype(d)).collect();
        assert_eq!(all.len(), Dtype::ALL.len(), "distinct codes");
    }

    #[test]
    fn versions_read_as_nccl_writes_them() {
        assert_eq!(version_string(22703), "2.27.3");
        assert_eq!(version_string(21003), "2.10.3");
    }

    #[test]
    fn a_missing_library_names_the_soname_and_the_remedy() {
        let m = missing_message(&["libnccl.so.2".into(), "libnccl.so".into()], "not found");
        assert!(
            m.contains("libnccl.so.2") && m.contains("LD_LIBRARY_PATH") && m.contains(LIB_ENV),
            "{m}"
        );
    }

    #[test]
    fn loading_reports_a_message_not_a_panic() {
        // Where NCCL is installed this loads; where it is not, the message names the library.
        if let Err(m) = Nccl::load() {
            assert!(m.contains("libnccl.so.2"), "{m}");
        }
    }
}
