//! What goes wrong below the RDMA transport, typed: a verb that failed with its OS error, where it failed,
//! a device that is not there, and what a record, a peer or the protocol broke. Each renders as the message
//! users read; the transport turns them into [`crate::error::Error`] with its rank and peer.

use super::advice::verb_error;

/// A failure of the verbs layer or of the protocol over it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RdmaError {
    /// `verb` failed with OS error `errno`; the message adds what to check ([`verb_error`]).
    #[error("{}", verb_error(.verb, *.errno))]
    Verb {
        /// The verb, as `ibv_modify_qp(RTR)`.
        verb: &'static str,
        /// The OS error it returned or set.
        errno: i32,
    },
    /// `source` happened at `at` (a device and port).
    #[error("{at}: {source}")]
    At {
        /// Where: `mlx5_0 port 1`.
        at: String,
        /// What.
        source: Box<RdmaError>,
    },
    /// The device asked for is not there; says what was looked for and what there is.
    #[error("{0}")]
    NoDevice(String),
    /// A record, a port's table, a peer or the protocol broke a rule: which, in words.
    #[error("{0}")]
    Refused(String),
}

impl RdmaError {
    /// `verb` failed with `errno`.
    pub fn verb(verb: &'static str, errno: i32) -> Self {
        RdmaError::Verb { verb, errno }
    }

    /// A rule broken, in words.
    pub fn refused(message: impl Into<String>) -> Self {
        RdmaError::Refused(message.into())
    }

    /// The same failure, placed `at` a device and port.
    pub fn at(self, at: impl Into<String>) -> Self {
        RdmaError::At {
            at: at.into(),
            source: Box::new(self),
        }
    }

    /// The OS error of the verb that failed, if a verb did.
    pub fn errno(&self) -> Option<i32> {
        match self {
            RdmaError::Verb { errno, .. } => Some(*errno),
            RdmaError::At { source, .. } => source.errno(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verb_reads_as_its_advice_and_a_place_opens_it() {
        let e = RdmaError::verb("ibv_query_port", libc::EINVAL).at("mlx5_0 port 3");
        assert_eq!(
            e.to_string(),
            format!("mlx5_0 port 3: {}", verb_error("ibv_query_port", libc::EINVAL))
        );
        assert_eq!(e.errno(), Some(libc::EINVAL));
        assert_eq!(
            RdmaError::refused("no queue pair to that rank").to_string(),
            "no queue pair to that rank"
        );
    }
}
