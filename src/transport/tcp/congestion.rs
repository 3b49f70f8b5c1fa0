//! TCP congestion control of the data sockets (`--tcp-congestion`, like iperf3's `-C`): set per socket with
//! TCP_CONGESTION, read back for the report. The host's default applies otherwise, and it matters: on links
//! shaped to 1 Gbit/s, bbr's periodic probes cost collbench's ring 2-5% of the line rate in some iterations
//! where reno held 95% (README, "The MPI baseline").

use std::io;
use std::os::fd::AsFd;

/// Longest name the kernel takes (TCP_CA_NAME_MAX less its terminating zero).
const NAME_MAX: usize = 15;

/// Where the kernel lists the algorithms it has, and those any user may pick.
const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// Checks the spelling of an algorithm name (lower-case letters, digits, `_`, at most 15 bytes).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a congestion control name (lower-case letters, digits and _, at most {NAME_MAX} \
             characters, e.g. cubic, reno, bbr)"
        ))
    }
}

/// Sets the congestion control of `sock` to `name`.
pub fn set(sock: &impl AsFd, name: &str) -> io::Result<()> {
    socket2::SockRef::from(sock).set_tcp_congestion(name.as_bytes())
}

/// The congestion control `sock` uses (the kernel pads the name with zeros).
pub fn get(sock: &impl AsFd) -> io::Result<String> {
    let name = socket2::SockRef::from(sock).tcp_congestion()?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Whether this host lets this process give its TCP sockets `name`: tried on a fresh socket, so a bad name
/// fails before any connection is made. The error says why and what the host offers.
pub fn probe(name: &str) -> Result<(), String> {
    check_name(name)?;
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .map_err(|e| format!("could not open a TCP socket to try it: {e}"))?;
    set(&sock, name).map_err(|e| refusal(name, &e, &read_list(AVAILABLE), &read_list(ALLOWED)))
}

/// The message for a refused `name`, with the host's lists (`None` where unreadable).
fn refusal(name: &str, e: &io::Error, available: &Option<String>, allowed: &Option<String>) -> String {
    let list = |l: &Option<String>| l.clone().unwrap_or_else(|| "unknown".to_string());
    match e.raw_os_error() {
        Some(libc::ENOENT) => format!(
            "this host has no congestion control '{name}' (available: {}; a module such as tcp_{name} may need \
             loading: modprobe tcp_{name})",
            list(available)
        ),
        Some(libc::EPERM) => format!(
            "'{name}' is available but not allowed for this user (allowed: {}); run as root (CAP_NET_ADMIN) or \
             add it to net.ipv4.tcp_allowed_congestion_control",
            list(allowed)
        ),
        _ => format!("setting TCP_CONGESTION to '{name}' failed: {e}"),
    }
}

/// A /proc list, trimmed; `None` where it cannot be read.
fn read_list(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn names_are_checked_before_the_kernel_sees_them() {
        for good in ["cubic", "reno", "bbr", "dctcp", "bbr2", "h_tcp"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "Cubic", "re no", "a-b", "sixteen_chars_xx", "bbr\0"] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains("not a congestion control name"), "{bad:?}: {e}");
        }
    }

    /// reno is built into every Linux kernel and allowed for every user, so this holds on any test host.
    #[test]
    fn a_socket_takes_reno_and_reports_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let before = get(&s).unwrap();
        assert!(
            check_name(&before).is_ok(),
            "the host default reads back as a name: {before:?}"
        );
        set(&s, "reno").unwrap();
        assert_eq!(get(&s).unwrap(), "reno");
        assert_eq!(probe("reno"), Ok(()));
    }

    #[test]
    fn an_unknown_algorithm_is_refused_with_what_the_host_has() {
        let e = probe("nosuchcc").unwrap_err();
        assert!(e.contains("this host has no congestion control 'nosuchcc'"), "{e}");
        assert!(
            e.contains("available: ") && e.contains("reno"),
            "lists the host's algorithms: {e}"
        );
        let e = probe("No Such").unwrap_err();
        assert!(e.contains("not a congestion control name"), "{e}");
    }

    #[test]
    fn a_refusal_for_permission_names_the_allowed_list_and_the_fix() {
        let e = refusal(
            "bbr",
            &io::Error::from_raw_os_error(libc::EPERM),
            &Some("reno cubic bbr".into()),
            &Some("reno cubic".into()),
        );
        assert!(e.contains("not allowed for this user (allowed: reno cubic)"), "{e}");
        assert!(e.contains("tcp_allowed_congestion_control"), "{e}");
        let e = refusal("x", &io::Error::from_raw_os_error(libc::EINVAL), &None, &None);
        assert!(e.contains("failed"), "{e}");
    }
}
