//! `next_run` over a simulated year in several zones, checked against expectations computed
//! without it: every minute of the year is mapped forward (instant → local time, which is
//! never ambiguous) to find each local time's first instant, and a local time that no
//! instant shows (a gap) is read with the offset in force just before the gap. The change
//! days are pinned once more by a hand-written table. Zones come from jiff's bundled
//! database, so the results do not depend on the machine's zoneinfo.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use jiff::civil::{Date, DateTime, date};
use jiff::tz::{TimeZone, TimeZoneDatabase};
use jiff::{SignedDuration, Timestamp, ToSpan};

const MINUTE: SignedDuration = SignedDuration::from_mins(1);

use super::cron::Cron;
use super::rule::{Repeat, Rule, next_run};

fn zone(name: &str) -> TimeZone {
    TimeZoneDatabase::bundled().get(name).unwrap()
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A zone's year, mapped forward minute by minute.
struct Year {
    tz: TimeZone,
    start: Timestamp,
    end: Timestamp,
    /// The first instant of each local minute shown.
    first: HashMap<DateTime, Timestamp>,
}

impl Year {
    fn new(tz: &TimeZone, y: i16) -> Year {
        // A day of margin on both sides, in UTC.
        let start = date(y, 1, 1)
            .at(0, 0, 0, 0)
            .to_zoned(TimeZone::UTC)
            .unwrap()
            .timestamp();
        let end = date(y + 1, 1, 1)
            .at(0, 0, 0, 0)
            .to_zoned(TimeZone::UTC)
            .unwrap()
            .timestamp();
        let mut first = HashMap::new();
        let mut t = start - 48.hours();
        while t < end + 48.hours() {
            let civil = t.to_zoned(tz.clone()).datetime();
            first.entry(civil).or_insert(t);
            t += MINUTE;
        }
        Year {
            tz: tz.clone(),
            start,
            end,
            first,
        }
    }

    /// The instant a local time runs at, computed without `next_run`.
    fn expected(&self, civil: DateTime) -> Timestamp {
        if let Some(t) = self.first.get(&civil) {
            return *t;
        }
        // A gap: the offset in force at the last shown minute before it.
        let mut before = civil;
        let t_before = loop {
            before = before.checked_sub(1.minute()).unwrap();
            if let Some(t) = self.first.get(&before) {
                break *t;
            }
        };
        let offset = self.tz.to_offset(t_before);
        offset.to_timestamp(civil).unwrap()
    }

    /// The runs of a rule in this year, expected: each named local time's instant, once.
    fn expected_runs(&self, times_on: &dyn Fn(Date) -> Vec<(i8, i8)>) -> Vec<Timestamp> {
        let mut runs = Vec::new();
        let mut day = self
            .start
            .to_zoned(self.tz.clone())
            .date()
            .yesterday()
            .unwrap();
        let last = self
            .end
            .to_zoned(self.tz.clone())
            .date()
            .tomorrow()
            .unwrap();
        while day <= last {
            for (h, m) in times_on(day) {
                runs.push(self.expected(day.at(h, m, 0, 0)));
            }
            day = day.tomorrow().unwrap();
        }
        runs.retain(|t| *t > self.start && *t <= self.end);
        runs.sort();
        runs.dedup();
        runs
    }

    /// The scheduler's rule applied minute by minute over the year: fires when due, then
    /// moves on to the next time after now. Returns the instants it fired at.
    fn simulate(&self, rule: &Rule) -> Vec<Timestamp> {
        let mut fired = Vec::new();
        let mut next = next_run(rule, None, self.start, &self.tz);
        let mut t = self.start;
        while t <= self.end {
            if let Some(n) = next
                && n <= t
            {
                assert_eq!(n, t, "a run came due between two minutes");
                fired.push(t);
                next = next_run(rule, Some(t), t, &self.tz);
            }
            t += MINUTE;
        }
        fired
    }
}

fn rule(repeat: Repeat, hour: i8, minute: i8) -> Rule {
    Rule {
        repeat,
        hour,
        minute,
    }
}

fn weekday(d: Date) -> i8 {
    d.weekday().to_sunday_zero_offset()
}

/// Every repeat kind at the times a zone's changes touch; each fires exactly at its expected
/// instants over 2026.
fn check_zone(name: &str, (h, m): (i8, i8), fold: (i8, i8), once: Date) {
    let tz = zone(name);
    let year = Year::new(&tz, 2026);
    let at = move |hm: (i8, i8)| move |_: Date| vec![hm];
    type Oracle = Box<dyn Fn(Date) -> Vec<(i8, i8)>>;
    let cases: Vec<(&str, Rule, Oracle)> = vec![
        (
            "once",
            rule(Repeat::Once(once), h, m),
            Box::new(move |d| if d == once { vec![(h, m)] } else { vec![] }),
        ),
        (
            "hourly",
            rule(Repeat::Hourly, 0, m),
            Box::new(move |_| (0..24).map(|hh| (hh, m)).collect()),
        ),
        (
            "hourly in the fold",
            rule(Repeat::Hourly, 0, fold.1),
            Box::new(move |_| (0..24).map(|hh| (hh, fold.1)).collect()),
        ),
        (
            "daily in the gap",
            rule(Repeat::Daily, h, m),
            Box::new(at((h, m))),
        ),
        (
            "daily in the fold",
            rule(Repeat::Daily, fold.0, fold.1),
            Box::new(at(fold)),
        ),
        (
            "weekdays",
            rule(Repeat::Weekdays, h, m),
            Box::new(move |d| {
                if (1..=5).contains(&weekday(d)) {
                    vec![(h, m)]
                } else {
                    vec![]
                }
            }),
        ),
        (
            "weekly on Sunday and Wednesday",
            rule(Repeat::Weekly(0b1001), fold.0, fold.1),
            Box::new(move |d| {
                if [0, 3].contains(&weekday(d)) {
                    vec![fold]
                } else {
                    vec![]
                }
            }),
        ),
        (
            "cron every 15 minutes of 1-3 on Sundays",
            rule(
                Repeat::Cron(Box::new(Cron::parse("*/15 1-3 * * 0").unwrap())),
                0,
                0,
            ),
            Box::new(move |d| {
                if weekday(d) != 0 {
                    return vec![];
                }
                (1..=3)
                    .flat_map(|hh| [0, 15, 30, 45].map(|mm| (hh, mm)))
                    .collect()
            }),
        ),
    ];
    for (what, rule, oracle) in cases {
        let want = year.expected_runs(&oracle);
        assert!(!want.is_empty(), "{name} {what}: no runs expected");
        let got = year.simulate(&rule);
        assert_eq!(got.len(), want.len(), "{name} {what}: run count");
        assert_eq!(got, want, "{name} {what}");
    }
}

#[test]
fn new_york_every_kind_over_a_year() {
    check_zone("America/New_York", (2, 30), (1, 30), date(2026, 3, 8));
}

#[test]
fn berlin_every_kind_over_a_year() {
    check_zone("Europe/Berlin", (2, 30), (2, 30), date(2026, 3, 29));
}

#[test]
fn lord_howe_every_kind_over_a_year() {
    check_zone("Australia/Lord_Howe", (2, 15), (1, 45), date(2026, 10, 4));
}

#[test]
fn kathmandu_every_kind_over_a_year() {
    check_zone("Asia/Kathmandu", (2, 30), (1, 30), date(2026, 3, 8));
}

#[test]
fn cairo_midnight_gap_runs_the_day_not_skips_it() {
    check_zone("Africa/Cairo", (0, 30), (23, 30), date(2026, 4, 24));
}

/// The change days, by hand: (zone, rule, the instant just before, the run expected).
#[test]
fn the_change_days_by_hand() {
    let daily = |h, m| rule(Repeat::Daily, h, m);
    let table = [
        // Skipped 02:30 runs at 03:30 EDT.
        (
            "America/New_York",
            daily(2, 30),
            "2026-03-08T05:00:00Z",
            "2026-03-08T07:30:00Z",
        ),
        // Repeated 01:30 runs at its first occurrence, EDT.
        (
            "America/New_York",
            daily(1, 30),
            "2026-11-01T04:00:00Z",
            "2026-11-01T05:30:00Z",
        ),
        // ... and not again an hour later, but the next day (EST).
        (
            "America/New_York",
            daily(1, 30),
            "2026-11-01T05:30:00Z",
            "2026-11-02T06:30:00Z",
        ),
        (
            "Europe/Berlin",
            daily(2, 30),
            "2026-03-28T23:00:00Z",
            "2026-03-29T01:30:00Z",
        ),
        (
            "Europe/Berlin",
            daily(2, 30),
            "2026-10-24T23:00:00Z",
            "2026-10-25T00:30:00Z",
        ),
        // Lord Howe's gap is 30 minutes: skipped 02:15 runs 30 minutes later, 02:45 LHDT.
        (
            "Australia/Lord_Howe",
            daily(2, 15),
            "2026-10-03T14:00:00Z",
            "2026-10-03T15:45:00Z",
        ),
        // Its fold: 01:45 runs at the first occurrence (+11:00).
        (
            "Australia/Lord_Howe",
            daily(1, 45),
            "2026-04-04T13:00:00Z",
            "2026-04-04T14:45:00Z",
        ),
        (
            "Asia/Kathmandu",
            daily(9, 0),
            "2026-06-30T12:00:00Z",
            "2026-07-01T03:15:00Z",
        ),
        // Cairo springs from 00:00 to 01:00: 00:30 runs at 01:30 that day.
        (
            "Africa/Cairo",
            daily(0, 30),
            "2026-04-23T20:00:00Z",
            "2026-04-23T22:30:00Z",
        ),
        // hourly in the repeated hour: once, at the first 01:30; then 02:30 EST.
        (
            "America/New_York",
            rule(Repeat::Hourly, 0, 30),
            "2026-11-01T05:30:00Z",
            "2026-11-01T07:30:00Z",
        ),
        // Feb 29: a once task on the leap day of 2028; a cron for Feb 29 skips to it.
        (
            "Europe/Berlin",
            rule(Repeat::Once(date(2028, 2, 29)), 9, 0),
            "2027-03-01T00:00:00Z",
            "2028-02-29T08:00:00Z",
        ),
        (
            "Europe/Berlin",
            rule(
                Repeat::Cron(Box::new(Cron::parse("0 9 29 2 *").unwrap())),
                0,
                0,
            ),
            "2026-03-01T00:00:00Z",
            "2028-02-29T08:00:00Z",
        ),
    ];
    for (name, rule, now, want) in table {
        let got = next_run(&rule, None, ts(now), &zone(name));
        assert_eq!(got, Some(ts(want)), "{name} {rule:?} after {now}");
    }
}

#[test]
fn a_fired_instant_is_never_fired_again_and_a_passed_once_is_none() {
    let tz = zone("America/New_York");
    let once = rule(Repeat::Once(date(2026, 3, 8)), 2, 30);
    let run = ts("2026-03-08T07:30:00Z");
    assert_eq!(
        next_run(&once, None, ts("2026-03-01T00:00:00Z"), &tz),
        Some(run)
    );
    assert_eq!(next_run(&once, Some(run), run, &tz), None);
    // A clock set back before the last run does not repeat it.
    assert_eq!(
        next_run(&once, Some(run), ts("2026-03-01T00:00:00Z"), &tz),
        None
    );
    let daily = rule(Repeat::Daily, 2, 30);
    assert_eq!(
        next_run(&daily, Some(run), ts("2026-03-01T00:00:00Z"), &tz),
        Some(ts("2026-03-09T06:30:00Z"))
    );
    // An expression that never matches has no next run.
    let never = rule(
        Repeat::Cron(Box::new(Cron::parse("0 0 31 2 *").unwrap())),
        0,
        0,
    );
    assert_eq!(next_run(&never, None, run, &tz), None);
}
