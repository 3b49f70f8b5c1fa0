//! The names of the kinds of path, as `--transport` and records spell them: the one list that
//! `transport::path` parses and prints a `PathKind` with and that `cli` offers as completions. It sits low
//! in the layers so that both reach it; what each kind is (its variant, its traits) stays in
//! `transport::path`, whose tests check that every variant has one name here and every name one variant.

/// What may follow a kind's name after `@`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Nothing: the name alone (`mpi`).
    None,
    /// A target or none (`tcp`, `tcp@IFACE`); the text is the target's placeholder in messages.
    Optional(&'static str),
    /// A target always (`rdma@DEVICE[:PORT]`); the text is the target's placeholder in messages.
    Required(&'static str),
}

/// A kind of path as flags name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    /// Its name, before any `@`.
    pub name: &'static str,
    /// What may follow `@`.
    pub target: Target,
}

/// collbench's own TCP transport.
pub const TCP: &str = "tcp";
/// collbench's own ibverbs transport.
pub const RDMA: &str = "rdma";
/// The MPI library's collectives.
pub const MPI: &str = "mpi";
/// NCCL's collectives.
pub const NCCL: &str = "nccl";

/// Every kind of path, in the order messages list them.
pub const KINDS: &[Named] = &[
    Named {
        name: TCP,
        target: Target::Optional("IFACE"),
    },
    Named {
        name: RDMA,
        target: Target::Required("DEVICE[:PORT]"),
    },
    Named {
        name: MPI,
        target: Target::None,
    },
    Named {
        name: NCCL,
        target: Target::None,
    },
];

/// How many kinds can be named without a target.
const ALONE_COUNT: usize = {
    let (mut n, mut i) = (0, 0);
    while i < KINDS.len() {
        if !matches!(KINDS[i].target, Target::Required(_)) {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The names that are a path on their own (every kind but those that need a target), in [`KINDS`]' order:
/// what `--transport`'s completions offer.
pub const ALONE: [&str; ALONE_COUNT] = {
    let mut out = [""; ALONE_COUNT];
    let (mut i, mut j) = (0, 0);
    while i < KINDS.len() {
        if !matches!(KINDS[i].target, Target::Required(_)) {
            out[j] = KINDS[i].name;
            j += 1;
        }
        i += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_lowercase_and_alone_leaves_out_those_needing_a_target() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(
                !k.name.is_empty() && k.name.chars().all(|c| c.is_ascii_lowercase()),
                "{k:?}"
            );
            assert!(KINDS[..i].iter().all(|o| o.name != k.name), "{} twice", k.name);
        }
        assert_eq!(ALONE, [TCP, MPI, NCCL]);
    }
}
