//! `--deadline SECONDS`: the whole run ends within it. Active work (the GPU probe, the GDR
//! write test) gets what is left minus what the report needs after it, is cut short when that
//! runs out, and says so (an unknown, never a pass or a fail); a watchdog ends the process if
//! even reading sysfs overruns (a dead device can make a read block).

use std::time::{Duration, Instant};

/// What is kept back for everything after the active work (judging, rendering, writing): a
/// tenth of the deadline, at least [`RESERVE_MIN`] and at most [`RESERVE`]. Judging and writing
/// take milliseconds; a fixed 300 ms took half of a 0.6 s deadline from GPUs that answer in
/// 460 ms (issue 40). The messages of work cut short say it ([`reserve_for`]).
pub const RESERVE: Duration = Duration::from_millis(300);
pub const RESERVE_MIN: Duration = Duration::from_millis(100);

/// Now, as seconds since the epoch (0 on a clock before it): the time a record is stamped with.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The reserve a deadline of `seconds` keeps back.
pub fn reserve_for(seconds: f64) -> Duration {
    Duration::try_from_secs_f64((seconds / 10.0).max(0.0))
        .unwrap_or(RESERVE)
        .clamp(RESERVE_MIN, RESERVE)
}

/// The point in time the run must end by, or none.
#[derive(Debug, Clone, Copy, Default)]
pub struct Deadline {
    end: Option<Instant>,
    seconds: f64,
}

/// A time limit after the deadline had its say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub limit: Duration,
    /// The deadline made the limit shorter than asked for (or zero: do not start).
    pub cut: bool,
}

impl Deadline {
    pub fn none() -> Deadline {
        Deadline::default()
    }

    pub fn after(seconds: f64) -> Deadline {
        // The CLI takes 0 to 86400 s; whatever comes, no panic (infinity is far off, NaN now).
        let wait = Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::MAX);
        Deadline {
            end: Some(later(Instant::now(), wait)),
            seconds,
        }
    }

    pub fn is_set(&self) -> bool {
        self.end.is_some()
    }

    pub fn seconds(&self) -> f64 {
        self.seconds
    }

    pub fn end(&self) -> Option<Instant> {
        self.end
    }

    /// Time left for active work that wants `wanted`: the smaller of the two, keeping the
    /// reserve ([`reserve_for`]).
    pub fn budget(&self, wanted: Duration) -> Budget {
        match self.end {
            None => Budget {
                limit: wanted,
                cut: false,
            },
            Some(end) => {
                let left = end
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(reserve_for(self.seconds));
                if left < wanted {
                    Budget {
                        limit: left,
                        cut: true,
                    }
                } else {
                    Budget {
                        limit: wanted,
                        cut: false,
                    }
                }
            }
        }
    }
}

/// `start + wait`, or as far after `start` as an Instant goes: `Instant + Duration` panics on
/// overflow, and a wait can come from the command line (`gdr-test --wait`), a peer (its
/// `rail_timeout_ms`) or a child's spec. Every wait added to an Instant goes through here.
pub fn later(start: Instant, wait: Duration) -> Instant {
    let mut wait = wait;
    loop {
        if let Some(t) = start.checked_add(wait) {
            return t;
        }
        wait /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reserve is a tenth of the deadline between 100 and 300 ms: 0.6 s keeps 100 ms (not
    /// 300), 2 s keeps 200 ms, a minute 300 ms; nonsense keeps the most.
    #[test]
    fn the_reserve_follows_the_deadline() {
        assert_eq!(reserve_for(0.6), Duration::from_millis(100));
        assert_eq!(reserve_for(2.0), Duration::from_millis(200));
        assert_eq!(reserve_for(60.0), RESERVE);
        assert_eq!(reserve_for(0.0), RESERVE_MIN);
        assert_eq!(reserve_for(f64::NAN), RESERVE_MIN);
        assert_eq!(reserve_for(f64::INFINITY), RESERVE);
    }

    /// 2^64-1 seconds or milliseconds from now: no panic, and far off (issue 25: `gdr-test
    /// --wait 18446744073709551615` panicked on `Instant + Duration`).
    #[test]
    fn waits_past_what_an_instant_holds_are_far_off() {
        let now = Instant::now();
        for wait in [
            Duration::MAX,
            Duration::from_secs(u64::MAX),
            Duration::from_millis(u64::MAX),
        ] {
            assert!(later(now, wait) > now + Duration::from_secs(100 * 365 * 86_400));
        }
        assert_eq!(
            later(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        for s in [f64::INFINITY, 1e300] {
            assert!(Deadline::after(s).end().unwrap() > now + Duration::from_secs(86_400));
        }
        assert!(Deadline::after(f64::NAN).is_set());
    }

    #[test]
    fn budgets() {
        let d = Deadline::none();
        assert_eq!(
            d.budget(Duration::from_secs(5)),
            Budget {
                limit: Duration::from_secs(5),
                cut: false
            }
        );
        let d = Deadline::after(100.0);
        assert!(!d.budget(Duration::from_secs(5)).cut);
        let d = Deadline::after(1.0);
        let b = d.budget(Duration::from_secs(5));
        assert!(b.cut && b.limit <= Duration::from_millis(900), "{b:?}");
        let d = Deadline::after(0.0);
        let b = d.budget(Duration::from_secs(5));
        assert!(b.cut && b.limit.is_zero());
    }
}
