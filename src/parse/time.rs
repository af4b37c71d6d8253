//! Times as people write them: Unix seconds as RFC 3339 (UTC), and `--since`/`--until`'s forms
//! back to Unix seconds. Pure: the current time is the caller's.

/// `2026-11-22T10:00:00Z` for Unix seconds (UTC): NFD's `# +expiry-time=`, the job journal's times.
pub fn rfc3339(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// A time as `--since`/`--until` take it: seconds since the epoch, `YYYY-MM-DD` or
/// `YYYY-MM-DDTHH:MM[:SS]` (UTC), or an age before `now` (`90m`, `24h`, `7d`).
pub fn parse_time(s: &str, now: u64) -> Result<u64, String> {
    let bad = || {
        format!(
            "{s:?}: a time is seconds since the epoch, YYYY-MM-DD[THH:MM[:SS]] (UTC), or an age (90m, 24h, 7d)"
        )
    };
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| bad());
    }
    if let Some(unit) = s.chars().last().filter(|c| "smhd".contains(*c)) {
        let n: u64 = s[..s.len() - 1].parse().map_err(|_| bad())?;
        let secs = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => 86_400,
        };
        return Ok(now.saturating_sub(n.saturating_mul(secs)));
    }
    let (date, time) = s.split_once('T').unwrap_or((s, "00:00:00"));
    let d: Vec<&str> = date.split('-').collect();
    let t: Vec<&str> = time.trim_end_matches('Z').split(':').collect();
    if d.len() != 3 || !(2..=3).contains(&t.len()) {
        return Err(bad());
    }
    let num = |x: &str, max: i64| -> Result<i64, String> {
        match x.parse::<i64>() {
            Ok(v) if (0..=max).contains(&v) && !x.is_empty() && x.len() <= 4 => Ok(v),
            _ => Err(bad()),
        }
    };
    let (y, m, day) = (num(d[0], 9999)?, num(d[1], 12)?, num(d[2], 31)?);
    let (hh, mm) = (num(t[0], 23)?, num(t[1], 59)?);
    let ss = t.get(2).map(|x| num(x, 60)).transpose()?.unwrap_or(0);
    if m == 0 || day == 0 || y < 1970 {
        return Err(bad());
    }
    // Howard Hinnant's days-from-civil.
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok((days * 86_400 + hh * 3600 + mm * 60 + ss) as u64)
}

#[cfg(test)]
mod tests {
    use super::{parse_time, rfc3339};

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_350_896), "2026-11-22T12:34:56Z");
    }

    #[test]
    fn times() {
        let now = 1_795_350_896;
        assert_eq!(parse_time("1795350896", now), Ok(now));
        assert_eq!(parse_time("2026-11-22T12:34:56Z", now), Ok(now));
        assert_eq!(parse_time("2000-02-29", now), Ok(951_782_400));
        assert_eq!(parse_time("24h", now), Ok(now - 86_400));
        assert_eq!(parse_time("7d", now), Ok(now - 7 * 86_400));
        for bad in ["", "yesterday", "2026-13-01", "2026-11-22T25:00", "h", "-5"] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }
}
