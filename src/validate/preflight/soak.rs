//! `--soak DURATION`: after the plan, the pairwise test again and again for DURATION, each pass with every
//! host's evidence (carrier losses, retransmission timeouts). A fault that comes and goes (a port down a second
//! in a minute, a switch buffer that overflows now and then) falls between the plan's phases; over many passes
//! it shows as passes where one host's or one link's figures drop far below their own median while the rest
//! stay put. This module judges the passes; `rank` runs them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::cause::Cause;
use super::evidence::HostEvidence;
use super::verdict::{bare_check, Check, Verdict};
use crate::error::{Error, Result};
use crate::validate::pairwise::Link;

/// The shortest and longest soak: a pass takes a few seconds, a day is a burn-in.
pub const MIN_SOAK_S: f64 = 1.0;
/// See [`MIN_SOAK_S`].
pub const MAX_SOAK_S: f64 = 86_400.0;
/// A link is bad in a pass when its bandwidth is below this share of its median over the passes...
pub const SLOW_SHARE: f64 = 0.5;
/// ...or its median round trip this many times its median over the passes...
pub const LATE_FACTOR: f64 = 5.0;
/// ...or this many round trips stalled (one alone happens on a busy host).
pub const STALLS: u64 = 2;
/// Passes needed to tell a pass off the others.
pub const MIN_PASSES: usize = 3;

/// `--soak`'s value in seconds: `90`, `90s`, `15m`, `2h`, between [`MIN_SOAK_S`] and [`MAX_SOAK_S`].
pub fn parse_duration(text: &str) -> Result<f64> {
    let bad = |why: String| Error::usage("--soak", why);
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.trim().parse().map_err(|_| {
        bad(format!(
            "'{text}' is not a duration: give seconds, or a number with s, m or h (e.g. 10m)"
        ))
    })?;
    let scale = match unit {
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(bad(format!(
                "'{text}': unknown unit '{unit}'; use s, m or h (e.g. 10m)"
            )))
        }
    };
    let s = n * scale;
    if !(MIN_SOAK_S..=MAX_SOAK_S).contains(&s) {
        return Err(bad(format!(
            "{text} is {s} s; a soak lasts from {MIN_SOAK_S} s to 24 h"
        )));
    }
    Ok(s)
}

/// One link's figures in one pass, kept small: a soak holds every pass until it is judged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSample {
    /// The participants' indices (into the names given to [`judge`]).
    pub a: u32,
    pub b: u32,
    pub bw_gbs: f32,
    pub latency_us: f32,
    pub stalls: u32,
}

impl LinkSample {
    /// What a soak keeps of `l`.
    pub fn of(l: &Link) -> LinkSample {
        LinkSample {
            a: l.a as u32,
            b: l.b as u32,
            bw_gbs: l.bw_gbs as f32,
            latency_us: l.latency_us as f32,
            stalls: l.stalls.min(u64::from(u32::MAX)) as u32,
        }
    }
}

/// One pass of the soak: when it started (seconds into the soak), its links, and the hosts whose interface lost
/// its carrier during it (with how many times).
#[derive(Clone, Debug)]
pub struct Pass {
    pub at_s: f64,
    pub links: Vec<LinkSample>,
    pub downs: Vec<(String, u64)>,
    /// Every host's CPUs were busy with other work during the pass ([`super::cause::every_host_busy`]): a
    /// round trip late then is the cores', so a link is not bad in it for lateness alone.
    pub busy: bool,
}

/// What went wrong with one host or link over the passes.
#[derive(Debug)]
struct Trouble {
    /// Indices of the passes it was bad in, ascending.
    passes: Vec<usize>,
    /// The lowest bandwidth of a bad pass against its median.
    worst_share: f64,
    stalls: u64,
    link_downs: u64,
}

impl Default for Trouble {
    /// Nothing bad yet: bandwidth at its median.
    fn default() -> Trouble {
        Trouble {
            passes: Vec::new(),
            worst_share: 1.0,
            stalls: 0,
            link_downs: 0,
        }
    }
}

impl Trouble {
    /// Bad in pass `i` (the list stays sorted, each pass once).
    fn bad_in(&mut self, i: usize) {
        if let Err(at) = self.passes.binary_search(&i) {
            self.passes.insert(at, i);
        }
    }

    /// `other`'s passes and figures added to this one's.
    fn absorb(&mut self, other: Trouble) {
        self.passes.extend(other.passes);
        self.passes.sort_unstable();
        self.passes.dedup();
        self.worst_share = self.worst_share.min(other.worst_share);
        self.stalls += other.stalls;
        self.link_downs += other.link_downs;
    }
}

/// Over the bad links of a host not yet explained: the passes they fell in, and which links they are.
type Spread = (BTreeSet<usize>, BTreeSet<(u32, u32)>);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The (upper) median of `v`; NaN when empty.
pub fn median_of(v: &[f64]) -> f64 {
    median(v.to_vec())
}

/// The checks of a soak of `duration_s` over `path`: one per host or link bad in some passes and good in
/// others (FAIL when bad in two passes or more, or with its carrier lost; WARN for one pass), or one PASS.
/// `names` are the participants the links' indices refer to, `evidence` every host's over one pass (attached
/// to a host's check). Passes where more than half the links were bad at once are the hosts' load, said and
/// not blamed. With every participant on `one_host`, a finding is a warning: the pairs share its loopback and
/// CPUs. Time and memory are linear in the links measured over all passes.
pub fn judge(
    path: &str,
    duration_s: f64,
    names: &[String],
    evidence: &[HostEvidence],
    passes: &[Pass],
    one_host: bool,
) -> Vec<Check> {
    let check = |name: String, measured: String, verdict, detail: String| {
        bare_check(
            name,
            path,
            measured,
            "no pass far below the others".into(),
            "the soak's passes against each other (built in)".into(),
            verdict,
            detail,
        )
    };
    let name = |i: u32| {
        names
            .get(i as usize)
            .cloned()
            .unwrap_or_else(|| format!("participant {i}"))
    };
    let n = passes.len();
    // Each link's median bandwidth and latency over the passes.
    let mut series: HashMap<(u32, u32), (Vec<f64>, Vec<f64>)> = HashMap::new();
    for l in passes.iter().flat_map(|p| &p.links) {
        let s = series.entry((l.a, l.b)).or_default();
        s.0.push(f64::from(l.bw_gbs));
        s.1.push(f64::from(l.latency_us));
    }
    let medians: HashMap<(u32, u32), (f64, f64)> = series
        .into_iter()
        .map(|(k, (bw, lat))| (k, (median(bw), median(lat))))
        .collect();
    // The bad links of every pass but those where more than half were bad at once: everything slowed
    // together is the hosts' load or the whole fabric, not one host or link.
    let mut events: Vec<(usize, LinkSample, f64)> = Vec::new();
    let mut busy_passes = 0;
    for (i, p) in passes.iter().enumerate() {
        let bad: Vec<(LinkSample, f64)> = if n < MIN_PASSES {
            Vec::new()
        } else {
            p.links
                .iter()
                .filter_map(|l| {
                    let (mb, ml) = medians[&(l.a, l.b)];
                    let bw = f64::from(l.bw_gbs);
                    let share = if mb > 0.0 { bw / mb } else { 1.0 };
                    let late = !p.busy && ml > 0.0 && f64::from(l.latency_us) > LATE_FACTOR * ml;
                    (share < SLOW_SHARE || late || u64::from(l.stalls) >= STALLS).then_some((*l, share))
                })
                .collect()
        };
        let measured = p.links.len().max(1);
        if bad.len() * 2 > measured && measured > 2 {
            busy_passes += 1;
        } else {
            events.extend(bad.into_iter().map(|(l, share)| (i, l, share)));
        }
    }
    let mut hosts: BTreeMap<String, Trouble> = BTreeMap::new();
    let mut explained = vec![false; events.len()];
    // The simplest account of the bad links over the whole soak, as the pairwise localisation gives one: the
    // host whose bad links (two or more of them) span the most passes takes them all, then the next over what
    // is left. A pass can catch an intermittent host on one of its links only (the round that fell in its slow
    // spell), and a busy machine slows some other link now and then: judged pass by pass, a partner that had
    // two slow links once took the blame for the links of the host that was bad in every other pass. A link
    // bad alone, however often, stays a link: its two ends share its passes and neither has a second link.
    loop {
        let mut by_host: BTreeMap<u32, Spread> = BTreeMap::new();
        for (i, l, _) in events.iter().zip(&explained).filter(|(_, &x)| !x).map(|(e, _)| e) {
            for h in [l.a, l.b] {
                let mine = by_host.entry(h).or_default();
                mine.0.insert(*i);
                mine.1.insert((l.a, l.b));
            }
        }
        let pick = by_host
            .iter()
            .filter(|(_, (_, links))| links.len() >= 2)
            .max_by_key(|(&h, (at, links))| (at.len(), links.len(), std::cmp::Reverse(h)))
            .map(|(&h, _)| h);
        let Some(h) = pick else { break };
        let t = hosts.entry(name(h)).or_default();
        for (k, (i, l, share)) in events.iter().enumerate() {
            if !explained[k] && (l.a == h || l.b == h) {
                explained[k] = true;
                t.bad_in(*i);
                t.worst_share = t.worst_share.min(*share);
                t.stalls += u64::from(l.stalls);
            }
        }
    }
    let mut links: BTreeMap<(u32, u32), Trouble> = BTreeMap::new();
    for ((i, l, share), _) in events.iter().zip(&explained).filter(|(_, &x)| !x) {
        let t = links.entry((l.a, l.b)).or_default();
        t.bad_in(*i);
        t.worst_share = t.worst_share.min(*share);
        t.stalls += u64::from(l.stalls);
    }
    for (i, p) in passes.iter().enumerate() {
        for (h, d) in p.downs.iter().filter(|(_, d)| *d > 0) {
            let t = hosts.entry(h.clone()).or_default();
            t.link_downs += d;
            t.bad_in(i);
        }
    }
    // A link of a host named (by its carrier) is that host's.
    for ((a, b), t) in std::mem::take(&mut links) {
        match [a, b].into_iter().find(|h| hosts.contains_key(&name(*h))) {
            Some(h) => hosts.entry(name(h)).or_default().absorb(t),
            None => {
                links.insert((a, b), t);
            }
        }
    }
    let when = |t: &Trouble| {
        // The first ten times: a day's soak may have thousands of bad passes.
        let mut at: Vec<String> = t
            .passes
            .iter()
            .take(10)
            .map(|&i| format!("{:.0} s", passes[i].at_s))
            .collect();
        if t.passes.len() > 10 {
            at.push("...".into());
        }
        let mut what = format!(
            "bad in {} of {n} passes over {duration_s:.0} s (at {})",
            t.passes.len(),
            at.join(", ")
        );
        if t.worst_share < 1.0 {
            what.push_str(&format!("; bandwidth down to {:.2}x its median", t.worst_share));
        }
        if t.stalls > 0 {
            what.push_str(&format!("; {} stalled round trip(s)", t.stalls));
        }
        if t.link_downs > 0 {
            what.push_str(&format!("; its interface lost its carrier {} time(s)", t.link_downs));
        }
        what
    };
    let verdict = |t: &Trouble| {
        if !one_host && (t.passes.len() >= 2 || t.link_downs > 0) {
            Verdict::Fail
        } else {
            Verdict::Warn
        }
    };
    let mut out = Vec::new();
    for (h, t) in &hosts {
        let mut c = check(
            format!("{path} soak: intermittent host {h}"),
            when(t),
            verdict(t),
            format!(
                "{h}'s links fell far below their own median in some passes and not in others: a fault that comes \
                 and goes (a port or cable going down now and then, bursts of loss or of other traffic on its \
                 way), which one short measurement misses; {}",
                if t.link_downs > 0 {
                    format!("its interface lost its carrier: check `ip -s link` and the switch port's log on {h}")
                } else {
                    "its carrier held, so look upstream (the switch port, its buffers, a rate limit)".into()
                }
            ),
        );
        c.cause = Some(Cause::Link);
        c.evidence = evidence.iter().filter(|e| &e.host == h).take(1).cloned().collect();
        out.push(c);
    }
    for ((a, b), t) in &links {
        let (a, b) = (name(*a), name(*b));
        let mut c = check(
            format!("{path} soak: intermittent link {a} <-> {b}"),
            when(t),
            verdict(t),
            format!(
                "the link between {a} and {b} fell far below its own median in some passes while their other links \
                 held: a fault on the way between them that comes and goes (a cable, a switch port or a route)"
            ),
        );
        c.cause = Some(Cause::Link);
        out.push(c);
    }
    if out.is_empty() {
        let verdict = if n < MIN_PASSES { Verdict::Warn } else { Verdict::Pass };
        out.push(check(
            format!("{path} soak"),
            format!(
                "{n} passes over {duration_s:.0} s, no host or link far below its own median{}",
                if busy_passes > 0 {
                    format!(" ({busy_passes} pass(es) where every link slowed at once: the hosts' load)")
                } else {
                    String::new()
                }
            ),
            verdict,
            if n < MIN_PASSES {
                format!("only {n} pass(es): {MIN_PASSES} or more are needed to tell one off the others; soak longer")
            } else {
                "every host and link held its figures over the soak".into()
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(a: u32, b: u32, bw: f64) -> LinkSample {
        LinkSample {
            a,
            b,
            bw_gbs: bw as f32,
            latency_us: 20.0,
            stalls: 0,
        }
    }

    /// `n` passes over 4 hosts; `bw(pass, a, b)` of each link and `downs(pass, host)`.
    fn passes(n: usize, bw: impl Fn(usize, usize, usize) -> f64, downs: impl Fn(usize, usize) -> u64) -> Vec<Pass> {
        (0..n)
            .map(|i| Pass {
                at_s: 10.0 * i as f64,
                links: (0..4u32)
                    .flat_map(|a| ((a + 1)..4).map(move |b| (a, b)))
                    .map(|(a, b)| link(a, b, bw(i, a as usize, b as usize)))
                    .collect(),
                downs: (0..4).map(|h| (format!("h{h}"), downs(i, h))).collect(),
                busy: false,
            })
            .collect()
    }

    /// [`judge`] over the 4 hosts h0..h3.
    fn judged(path: &str, duration_s: f64, p: &[Pass], one_host: bool) -> Vec<Check> {
        let names: Vec<String> = (0..4).map(|h| format!("h{h}")).collect();
        let evidence: Vec<HostEvidence> = names
            .iter()
            .map(|h| HostEvidence {
                host: h.clone(),
                ..Default::default()
            })
            .collect();
        judge(path, duration_s, &names, &evidence, p, one_host)
    }

    #[test]
    fn a_link_sample_keeps_what_the_soak_judges() {
        let l = crate::validate::pairwise::localise::tests::matrix(2, |_, _, _| 0.5, |_, _, _| 12.0).1[0].clone();
        let s = LinkSample::of(&l);
        assert_eq!((s.a, s.b, s.bw_gbs, s.latency_us, s.stalls), (0, 1, 0.5, 12.0, 0));
    }

    #[test]
    fn a_host_slow_in_some_passes_fails_by_name_and_nothing_else() {
        let p = passes(
            6,
            |i, a, b| {
                if (i == 2 || i == 4) && (a == 2 || b == 2) {
                    0.1
                } else {
                    1.0
                }
            },
            |_, _| 0,
        );
        let c = judged("tcp@eth0", 60.0, &p, false);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].name, "tcp@eth0 soak: intermittent host h2");
        assert_eq!((c[0].verdict, c[0].cause), (Verdict::Fail, Some(Cause::Link)));
        assert!(
            c[0].measured
                .starts_with("bad in 2 of 6 passes over 60 s (at 20 s, 40 s)"),
            "{}",
            c[0].measured
        );
        assert!(c[0].measured.contains("down to 0.10x"), "{}", c[0].measured);
        // Every participant on one host: the scheduler's doing, a warning.
        let c = judged("tcp@lo", 60.0, &p, true);
        assert_eq!(c[0].verdict, Verdict::Warn);
    }

    #[test]
    fn a_link_slow_in_some_passes_is_that_link_and_one_pass_only_warns() {
        let p = passes(
            5,
            |i, a, b| if i == 1 && (a, b) == (0, 3) { 0.2 } else { 1.0 },
            |_, _| 0,
        );
        let c = judged("tcp@eth0", 50.0, &p, false);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].name, "tcp@eth0 soak: intermittent link h0 <-> h3");
        assert_eq!(c[0].verdict, Verdict::Warn);
    }

    #[test]
    fn a_link_late_only_while_every_host_was_busy_is_not_bad() {
        // h1 <-> h3's median round trip 10x its own median in two passes, its bandwidth steady (as two busy
        // loops beside four namespace hosts showed it).
        let mut p = passes(11, |_, _, _| 1.0, |_, _| 0);
        for i in [2, 3] {
            let l = p[i].links.iter_mut().find(|l| (l.a, l.b) == (1, 3)).unwrap();
            l.latency_us = 200.0;
        }
        let c = judged("tcp@eth0", 30.0, &p, false);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            (c[0].name.as_str(), c[0].verdict),
            ("tcp@eth0 soak: intermittent link h1 <-> h3", Verdict::Fail)
        );
        // The same while every host's CPUs were busy: the cores', not the link's.
        for i in [2, 3] {
            p[i].busy = true;
        }
        let c = judged("tcp@eth0", 30.0, &p, false);
        assert!(c.iter().all(|x| x.verdict == Verdict::Pass), "{c:?}");
        // Bandwidth halved in a busy pass still counts.
        for i in [2, 3] {
            let l = p[i].links.iter_mut().find(|l| (l.a, l.b) == (1, 3)).unwrap();
            l.bw_gbs = 0.3;
        }
        let c = judged("tcp@eth0", 30.0, &p, false);
        assert_eq!(c[0].verdict, Verdict::Fail, "{c:?}");
    }

    #[test]
    fn a_host_caught_one_link_at_a_time_is_that_host() {
        // h1 slow in passes 1, 3 and 4, each time on a different one of its links only (the pass's round that
        // fell in its slow spell).
        let p = passes(
            6,
            |i, a, b| match (i, a, b) {
                (1, 0, 1) | (3, 1, 2) | (4, 1, 3) => 0.1,
                _ => 1.0,
            },
            |_, _| 0,
        );
        let c = judged("tcp@eth0", 60.0, &p, false);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].name, "tcp@eth0 soak: intermittent host h1");
        assert!(c[0].measured.starts_with("bad in 3 of 6 passes"), "{}", c[0].measured);
    }

    #[test]
    fn a_host_caught_in_most_passes_keeps_its_links_from_a_partner_slowed_once_by_load() {
        // As a soak beside two busy loops saw it: h2's port slow now and then, caught on its link to h0 in
        // passes 0, 1, 3 and 5 and to h1 in 6 and 8; in pass 2 the machine's load slowed two links of h0.
        // Judged pass by pass, h0 took the blame for pass 2 and then for h2's links to it.
        let p = passes(
            10,
            |i, a, b| match (i, a, b) {
                (0 | 1 | 3 | 5, 0, 2) | (6 | 8, 1, 2) | (2, 0, 1) | (2, 0, 3) => 0.1,
                _ => 1.0,
            },
            |_, _| 0,
        );
        let c = judged("tcp@eth0", 100.0, &p, false);
        let failed: Vec<&Check> = c.iter().filter(|c| c.verdict == Verdict::Fail).collect();
        assert_eq!(failed.len(), 1, "{c:?}");
        assert_eq!(failed[0].name, "tcp@eth0 soak: intermittent host h2");
        assert!(
            failed[0]
                .measured
                .starts_with("bad in 6 of 10 passes over 100 s (at 0 s, 10 s, 30 s, 50 s, 60 s, 80 s)"),
            "{}",
            failed[0].measured
        );
        // The one pass of load is said, as one pass is: a warning.
        assert!(c.iter().all(|c| c.verdict != Verdict::Pass), "{c:?}");
        assert_eq!(c.len(), 2, "{c:?}");
        let load = c.iter().find(|c| c.verdict != Verdict::Fail).unwrap();
        assert_eq!(load.name, "tcp@eth0 soak: intermittent host h0");
        assert!(load.measured.starts_with("bad in 1 of 10 passes"), "{}", load.measured);
    }

    #[test]
    fn a_carrier_lost_names_its_host_even_between_slow_passes() {
        let p = passes(4, |_, _, _| 1.0, |i, h| u64::from(i == 3 && h == 1));
        let c = judged("tcp@eth0", 40.0, &p, false);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].name, "tcp@eth0 soak: intermittent host h1");
        assert_eq!(c[0].verdict, Verdict::Fail);
        assert!(c[0].detail.contains("lost its carrier"), "{}", c[0].detail);
    }

    #[test]
    fn every_link_slow_at_once_is_load_and_steady_passes_pass() {
        let p = passes(5, |i, _, _| if i == 2 { 0.2 } else { 1.0 }, |_, _| 0);
        let c = judged("tcp@eth0", 50.0, &p, false);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!((c[0].name.as_str(), c[0].verdict), ("tcp@eth0 soak", Verdict::Pass));
        assert!(
            c[0].measured.contains("1 pass(es) where every link slowed at once"),
            "{}",
            c[0].measured
        );
        let two = passes(2, |i, a, _| if i == 1 && a == 0 { 0.1 } else { 1.0 }, |_, _| 0);
        let c = judged("tcp@eth0", 5.0, &two, false);
        assert_eq!((c.len(), c[0].verdict), (1, Verdict::Warn), "{c:?}");
    }

    #[test]
    fn durations_read_with_units_and_bounds() {
        assert_eq!(parse_duration("90").unwrap(), 90.0);
        assert_eq!(parse_duration("90s").unwrap(), 90.0);
        assert_eq!(parse_duration("15m").unwrap(), 900.0);
        assert_eq!(parse_duration("2h").unwrap(), 7200.0);
        for bad in ["", "soon", "10d", "0.5", "25h", "-1m", "nan"] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(e.contains("--soak"), "{bad}: {e}");
        }
    }
}
