//! What this process was started with that a handler must respect: a signal its parent set to be
//! ignored (`nohup` ignores SIGHUP, so that a run goes on after its terminal closes) stays ignored.

/// Whether `signal` (its number: SIGHUP is 1) was ignored when the process started, as the kernel
/// says in `/proc/self/status` (`SigIgn`, a mask of one bit per signal). `false` where that cannot
/// be read.
pub fn ignored(signal: u32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| ignored_in(&status, signal))
        .unwrap_or(false)
}

fn ignored_in(status: &str, signal: u32) -> Option<bool> {
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?.trim();
    let mask = u64::from_str_radix(mask, 16).ok()?;
    Some((1..=64).contains(&signal) && mask & (1 << (signal - 1)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ignored_mask_is_read_bit_by_signal() {
        let status = "Name:\tincharacter\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000001001\n";
        assert_eq!(ignored_in(status, 1), Some(true), "SIGHUP");
        assert_eq!(ignored_in(status, 13), Some(true), "SIGPIPE");
        assert_eq!(ignored_in(status, 15), Some(false), "SIGTERM");
        assert_eq!(ignored_in("Name:\tx\n", 1), None);
    }

    /// A child started with SIGHUP ignored (as `nohup` starts it) reads it so.
    #[test]
    fn a_signal_ignored_by_the_parent_is_seen() {
        if !std::path::Path::new("/proc/self/status").exists() {
            return;
        }
        let out = std::process::Command::new("sh")
            .args(["-c", "trap '' HUP; grep SigIgn /proc/self/status"])
            .output()
            .unwrap();
        assert_eq!(ignored_in(&String::from_utf8(out.stdout).unwrap(), 1), Some(true));
    }
}
