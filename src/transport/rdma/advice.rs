//! Messages for verbs failures: the failing verb, the OS error, and what to check.

/// Symbolic name of an errno value, for messages people search for.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::EAGAIN => "EAGAIN",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENETUNREACH => "ENETUNREACH",
        _ => "errno",
    }
}

/// `VERB failed: Text (ENAME)` plus advice for the usual causes.
pub fn verb_error(verb: &str, errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno);
    // io::Error's Display adds " (os error N)"; keep the text only.
    let text = text.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut msg = format!("{verb} failed: {text} ({})", errno_name(errno));
    let advice = match (verb, errno) {
        ("ibv_reg_mr", libc::ENOMEM)
        | ("ibv_reg_mr", libc::EPERM)
        | ("ibv_create_cq", libc::ENOMEM)
        | ("ibv_create_qp", libc::ENOMEM) => Some(
            "the locked-memory limit is probably too low: check `ulimit -l` (it should be unlimited; raise \
             memlock in /etc/security/limits.conf, or run containers with --ulimit memlock=-1)",
        ),
        (v, libc::EINVAL) if v.starts_with("ibv_modify_qp") => Some(
            "the connection parameters were refused: check the port is up (`ibstat`), the GID index exists and \
             has the right type (`show_gids`; RoCE needs a v2 GID with an IP address), and the MTU",
        ),
        (v, libc::ETIMEDOUT) | (v, libc::ENETUNREACH) if v.starts_with("ibv_modify_qp") => {
            Some("the peer's address is not reachable: check the GID index (`show_gids`) and the routing")
        }
        ("ibv_open_device", _) | ("ibv_get_device_list", _) => Some(
            "check the device with `ibv_devices`, that /dev/infiniband exists (pass it through to containers), \
             and that this user may open it",
        ),
        ("ibv_query_port", _) => Some("check the port number with `ibstat`"),
        _ => None,
    };
    if let Some(a) = advice {
        msg.push_str("; ");
        msg.push_str(a);
    }
    msg
}

/// Name and advice for a failed work completion's status (the `ibv_wc_status` values).
pub fn completion_error(status: u32, vendor_err: u32) -> String {
    let (name, advice) = match status {
        1 => (
            "local length error",
            "a message exceeded a receive or the window: the ranks disagree on sizes",
        ),
        2 => (
            "local QP operation error",
            "an internal queue pair error; check `dmesg`",
        ),
        4 => (
            "local protection error",
            "a buffer was not registered, or was freed while in flight",
        ),
        5 => (
            "work request flushed",
            "an earlier error moved the queue pair to the error state; see the first error",
        ),
        9 => (
            "remote invalid request",
            "the peer refused the operation: mixed collbench versions?",
        ),
        10 => (
            "remote access error",
            "the peer's window key or address is wrong, or it closed its window (exited?)",
        ),
        11 => ("remote operation error", "the peer's queue pair failed"),
        12 => (
            "transport retry counter exceeded",
            "the peer did not acknowledge: it may have died, or the link is broken; check cabling and link state \
             (`ibstat`), the subnet manager (InfiniBand) or PFC/ECN and the GID (RoCE)",
        ),
        13 => (
            "receiver-not-ready retry counter exceeded",
            "the peer had no receive posted: it may have stopped or died",
        ),
        _ => ("completion error", "check `dmesg` and `ibstat`"),
    };
    format!("work completion failed: {name} (status {status}, vendor error {vendor_err:#x}); {advice}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verb_errors_name_the_verb_the_os_error_and_the_fix() {
        let m = verb_error("ibv_reg_mr", libc::ENOMEM);
        assert!(
            m.starts_with("ibv_reg_mr failed: Cannot allocate memory (ENOMEM)"),
            "{m}"
        );
        assert!(m.contains("ulimit -l"), "{m}");
        let m = verb_error("ibv_modify_qp(RTR)", libc::EINVAL);
        assert!(
            m.contains("(EINVAL)") && m.contains("show_gids") && m.contains("ibstat"),
            "{m}"
        );
        let m = verb_error("ibv_get_device_list", libc::ENOSYS);
        assert!(m.contains("ENOSYS") && m.contains("ibv_devices"), "{m}");
        assert!(!verb_error("ibv_post_send", libc::ENOMEM).contains("ulimit"));
    }

    #[test]
    fn completion_errors_say_what_to_check() {
        let m = completion_error(12, 0x81);
        assert!(
            m.contains("retry counter exceeded") && m.contains("cabling") && m.contains("0x81"),
            "{m}"
        );
        assert!(completion_error(10, 0).contains("remote access"));
        assert!(completion_error(200, 0).contains("status 200"));
    }
}
