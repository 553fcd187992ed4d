//! When a task runs: its fields read into a [`Rule`], and [`next_run`], a pure function of the
//! rule, the last fired instant, now and the time zone.
//!
//! The recipe (notes "DST rules for schedules"): enumerate the civil (wall-clock) times the
//! rule names, day by day from just before now; turn each into an instant with the zone's
//! `compatible` reading (a time skipped by a clock change is read with the offset before the
//! gap, so it runs later by the gap's length; a time that occurs twice is its first
//! occurrence); take the first instant later than both now and the last fired instant. That
//! last condition keeps a gap-shifted 02:30 (read as 03:30) and a real 03:30 to one run, and
//! an `hourly` task to one run in a repeated hour.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use super::cron::Cron;

/// How a task repeats, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Repeat {
    Once(Date),
    Hourly,
    Daily,
    /// Monday to Friday.
    Weekdays,
    /// Bits 0 (Sunday) to 6 (Saturday).
    Weekly(u8),
    Cron(Box<Cron>),
}

/// A task's timing: its repeat and local time of day (the minute alone for hourly, unused
/// for cron).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) repeat: Repeat,
    pub(crate) hour: i8,
    pub(crate) minute: i8,
}

/// How far ahead a search looks: a cron expression for Feb 29 on a Monday matches once in
/// 28 years; past that a task is taken to never run again.
const HORIZON_DAYS: i32 = 366 * 29;

impl Rule {
    /// The civil times the rule names on `day`, earliest first.
    fn times_on(&self, day: Date) -> Vec<(i8, i8)> {
        let weekday = day.weekday().to_sunday_zero_offset();
        let at = vec![(self.hour, self.minute)];
        match &self.repeat {
            Repeat::Once(date) if *date == day => at,
            Repeat::Once(_) => vec![],
            Repeat::Hourly => (0..24).map(|h| (h, self.minute)).collect(),
            Repeat::Daily => at,
            Repeat::Weekdays if (1..=5).contains(&weekday) => at,
            Repeat::Weekdays => vec![],
            Repeat::Weekly(days) if days & (1 << weekday) != 0 => at,
            Repeat::Weekly(_) => vec![],
            Repeat::Cron(cron) if cron.matches_day(day.month(), day.day(), weekday) => {
                cron.times().collect()
            }
            Repeat::Cron(_) => vec![],
        }
    }

    /// The last day a search for this rule needs to look at, from `first`.
    fn last_day(&self, first: Date) -> Date {
        let days = match &self.repeat {
            // The day before `first` was looked at too.
            Repeat::Once(date) => return *date,
            Repeat::Hourly => 3,
            Repeat::Daily | Repeat::Weekdays | Repeat::Weekly(_) => 9,
            Repeat::Cron(_) => HORIZON_DAYS,
        };
        first.checked_add(days.days()).unwrap_or(Date::MAX)
    }
}

/// The instant a civil time names in `tz`: its first occurrence, or for a time a clock change
/// skipped, the time read with the offset before the change.
pub(crate) fn instant(tz: &TimeZone, civil: DateTime) -> Option<Timestamp> {
    tz.to_ambiguous_zoned(civil)
        .compatible()
        .ok()
        .map(|z| z.timestamp())
}

/// When the task runs next: the first instant the rule names that is later than `now` and
/// than `last_fired`. `None` when there is none (a `once` whose time has passed).
pub(crate) fn next_run(
    rule: &Rule,
    last_fired: Option<Timestamp>,
    now: Timestamp,
    tz: &TimeZone,
) -> Option<Timestamp> {
    let bound = last_fired.map_or(now, |l| l.max(now));
    // A skipped time moves later, never earlier, so the day before the bound's local day is
    // the earliest whose times can land after it.
    let mut day = bound.to_zoned(tz.clone()).date().yesterday().ok()?;
    let last = rule.last_day(day);
    while day <= last {
        for (hour, minute) in rule.times_on(day) {
            let civil = day.at(hour, minute, 0, 0);
            if let Some(at) = instant(tz, civil)
                && at > bound
            {
                return Some(at);
            }
        }
        day = day.tomorrow().ok()?;
    }
    None
}

/// Reads `HH:MM` (24-hour).
pub(crate) fn parse_time(text: &str) -> Option<(i8, i8)> {
    let (h, m) = text.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let hour: i8 = h.parse().ok().filter(|h| (0..24).contains(h))?;
    let minute: i8 = m.parse().ok().filter(|m| (0..60).contains(m))?;
    h.bytes()
        .chain(m.bytes())
        .all(|b| b.is_ascii_digit())
        .then_some((hour, minute))
}

/// Reads a real day as `YYYY-MM-DD`.
pub(crate) fn parse_date(text: &str) -> Option<Date> {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i16> {
        let part = text.get(r)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    Date::new(y, i8::try_from(m).ok()?, i8::try_from(d).ok()?).ok()
}
