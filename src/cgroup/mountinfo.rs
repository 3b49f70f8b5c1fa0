//! The two tables the kernel states a process's cgroups in: `/proc/PID/cgroup` (which cgroup, per hierarchy)
//! and `/proc/PID/mountinfo` (where each hierarchy is mounted, and which part of it the mount shows).

/// One line of `/proc/self/cgroup`: `ID:CONTROLLERS:PATH`; cgroup v2's line is `0::PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    /// The hierarchy's number; 0 for cgroup v2.
    pub id: u32,
    /// The v1 controllers (and `name=` of a named hierarchy) bound to it; empty for v2.
    pub controllers: Vec<String>,
    /// The cgroup's path from the hierarchy's root, as this process's cgroup namespace shows it.
    pub path: String,
}

/// Parses `/proc/self/cgroup`; lines that are not `ID:CONTROLLERS:PATH` are skipped.
pub fn memberships(table: &str) -> Vec<Membership> {
    table
        .lines()
        .filter_map(|line| {
            let mut f = line.splitn(3, ':');
            let id = f.next()?.parse().ok()?;
            let controllers = f.next()?;
            let path = f.next()?;
            if !path.starts_with('/') {
                return None;
            }
            Some(Membership {
                id,
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(String::from)
                    .collect(),
                path: path.to_string(),
            })
        })
        .collect()
}

/// A cgroup filesystem mount, from one line of `/proc/PID/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMount {
    /// The cgroup the mount shows at its mount point (a container's mount shows only its own part).
    pub root: String,
    /// Where it is mounted, in the mounting process's view of the filesystem.
    pub point: String,
    /// `cgroup2`, or v1's `cgroup`.
    pub v2: bool,
    /// The superblock options: a v1 mount lists its controllers there.
    pub options: Vec<String>,
}

/// The cgroup mounts (v1 and v2) in a `mountinfo` text, in its order; other lines are skipped.
pub fn cgroup_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
            let (left, right) = line.split_once(" - ")?;
            let mut l = left.split_whitespace();
            let (root, point) = (l.nth(3)?, l.next()?);
            let mut r = right.split_whitespace();
            let fstype = r.next()?;
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let options = r.nth(1).unwrap_or("").split(',').map(String::from).collect();
            Some(CgroupMount {
                root: unescape(root),
                point: unescape(point),
                v2,
                options,
            })
        })
        .collect()
}

/// A mountinfo field with the kernel's octal escapes (`\040` for a space, ...) turned back into bytes.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` below `root`, as relative components; `None` when the path is not inside the part `root` shows
/// (a mount of another container's cgroup, or a path with `..` from outside this cgroup namespace).
pub fn below<'a>(path: &'a str, root: &str) -> Option<Vec<&'a str>> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let root_parts: Vec<&str> = root.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().chain(&root_parts).any(|p| *p == "..") || !parts.starts_with(&root_parts) {
        return None;
    }
    Some(parts[root_parts.len()..].to_vec())
}

/// The parent's pid from the text of `/proc/PID/status` (`PPid:`); 0 for a process whose parent is outside
/// its pid namespace.
pub fn parent_pid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_table_gives_v1_hierarchies_and_the_v2_line() {
        let t = "12:cpu,cpuacct:/docker/abc\n1:name=systemd:/init.scope\n0::/user.slice/a b\njunk\n3:x:rel\n";
        let m = memberships(t);
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(
            (m[0].id, &m[0].controllers[..]),
            (12, &["cpu".to_string(), "cpuacct".into()][..])
        );
        assert_eq!(m[0].path, "/docker/abc");
        assert_eq!(m[1].controllers, ["name=systemd"]);
        assert_eq!(
            (m[2].id, m[2].controllers.len(), m[2].path.as_str()),
            (0, 0, "/user.slice/a b")
        );
    }

    #[test]
    fn mountinfo_gives_cgroup_mounts_with_root_point_and_controllers() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
50 27 0:40 /docker/abc /my\\040cgroups/memory ro - cgroup cgroup rw,memory
";
        let m = cgroup_mounts(text);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[0],
            CgroupMount {
                root: "/".into(),
                point: "/sys/fs/cgroup/cpu,cpuacct".into(),
                v2: false,
                options: vec!["rw".into(), "cpu".into(), "cpuacct".into()],
            }
        );
        assert!(m[1].v2);
        assert_eq!(
            (m[2].root.as_str(), m[2].point.as_str()),
            ("/docker/abc", "/my cgroups/memory")
        );
        assert!(cgroup_mounts("garbage\n1 2 3\n").is_empty());
    }

    #[test]
    fn escapes_are_undone_and_stray_backslashes_kept() {
        assert_eq!(unescape("a\\040b\\011c\\134d"), "a b\tc\\d");
        assert_eq!(unescape("end\\04"), "end\\04");
        assert_eq!(unescape("x\\9yz"), "x\\9yz");
    }

    #[test]
    fn a_path_is_below_a_root_by_whole_components() {
        assert_eq!(below("/docker/abc/x", "/docker/abc"), Some(vec!["x"]));
        assert_eq!(below("/docker/abc", "/docker/abc"), Some(vec![]));
        assert_eq!(below("/a/b", "/"), Some(vec!["a", "b"]));
        assert_eq!(below("/docker/abcd", "/docker/abc"), None);
        assert_eq!(below("/../../x", "/"), None, "outside this cgroup namespace");
        assert_eq!(below("/a", "/.."), None);
    }

    #[test]
    fn the_parent_pid_comes_from_status() {
        assert_eq!(parent_pid("Name:\tsh\nPid:\t7\nPPid:\t1\n"), Some(1));
        assert_eq!(parent_pid("Name:\tinit\nPPid:\t0\n"), Some(0));
        assert_eq!(parent_pid("Name:\tx\n"), None);
    }
}
