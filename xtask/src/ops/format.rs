//! What the operator commands share to print: UTC times, ages ("3m ago"),
//! durations read from flags (`90s`, `15m`, `2h`, `7d`, `1h30m`) and
//! written back, cut-down JSON, and plain tables with aligned columns.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use flowstate_core::Timestamp;

use crate::migrate::civil_from_days;

/// Now on this host's clock (for ages only: nothing here decides by it).
pub fn now() -> Timestamp {
    Timestamp::from_system_time(SystemTime::now())
}

/// `2026-12-05 21:24:36Z`.
pub fn utc(at: Timestamp) -> String {
    let micros = at.as_micros();
    let secs = micros.div_euclid(1_000_000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// `3m ago`, or `in 25s` for a time still ahead of `now`.
pub fn ago(at: Timestamp, now: Timestamp) -> String {
    if at > now {
        format!("in {}", duration(at.since(now)))
    } else {
        format!("{} ago", duration(now.since(at)))
    }
}

/// `2026-12-05 21:24:36Z (3m ago)`.
pub fn when(at: Timestamp, now: Timestamp) -> String {
    format!("{} ({})", utc(at), ago(at, now))
}

/// A duration in its two largest units: `350ms`, `42s`, `5m 3s`, `2h 10m`,
/// `3d 4h`.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.as_millis()),
        1..60 => format!("{secs}s"),
        60..3600 => two(secs / 60, "m", secs % 60, "s"),
        3600..86_400 => two(secs / 3600, "h", secs % 3600 / 60, "m"),
        _ => two(secs / 86_400, "d", secs % 86_400 / 3600, "h"),
    }
}

fn two(big: u64, big_unit: &str, small: u64, small_unit: &str) -> String {
    if small == 0 {
        format!("{big}{big_unit}")
    } else {
        format!("{big}{big_unit} {small}{small_unit}")
    }
}

/// Reads an age flag: whole numbers each followed by `s`, `m`, `h` or `d`
/// (`90s`, `15m`, `1h30m`, `7d`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?}: write a duration such as 90s, 15m, 1h30m or 7d");
    let mut total = 0u64;
    let mut digits = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(bad)?;
        digits.clear();
    }
    if !digits.is_empty() || total == 0 {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// `text` on one line, cut to `max` characters with `…` when longer.
pub fn cut(text: &str, max: usize) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.chars().count() <= max {
        line
    } else {
        let mut short: String = line.chars().take(max.saturating_sub(1)).collect();
        short.push('…');
        short
    }
}

/// A JSON value on one line, cut to `max` characters.
pub fn json_cut(value: &serde_json::Value, max: usize) -> String {
    cut(&value.to_string(), max)
}

/// A table: a header row and rows of cells, columns aligned on the widest
/// cell, two spaces apart, each line indented by two.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Self {
            rows: vec![headers.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// Adds a row (one cell per header).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table's text, a newline after each line.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|row| row.get(c))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::from("  ");
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_print() {
        for (text, secs) in [("90s", 90), ("15m", 900), ("1h30m", 5400), ("7d", 604_800)] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        for bad in ["", "0s", "10", "5x", "m", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        for (secs, text) in [(0, "0ms"), (42, "42s"), (303, "5m 3s"), (7800, "2h 10m")] {
            assert_eq!(duration(Duration::from_secs(secs)), text);
        }
        assert_eq!(duration(Duration::from_secs(3 * 86_400)), "3d");
    }

    #[test]
    fn times_print_in_utc() {
        assert_eq!(utc(Timestamp::EPOCH), "1970-01-01 00:00:00Z");
        let at = Timestamp::from_micros(1_796_505_876_000_000);
        assert_eq!(utc(at), "2026-12-05 21:24:36Z");
        assert_eq!(ago(at, at.plus(Duration::from_secs(180))), "3m ago");
        assert_eq!(ago(at.plus(Duration::from_secs(25)), at), "in 25s");
    }

    #[test]
    fn tables_align_and_cells_cut() {
        let mut table = Table::new(&["ID", "STATUS"]);
        table.row(vec!["a".into(), "running".into()]);
        table.row(vec!["longer".into(), "ok".into()]);
        assert_eq!(
            table.render(),
            "  ID      STATUS\n  a       running\n  longer  ok\n"
        );
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("a\nb", 4), "a b");
    }
}
