//! Five-field cron expressions (`minute hour day-of-month month day-of-week`), read into sets
//! of values. Only the matching is here: which civil times an expression names. Turning them
//! into instants, with the daylight-saving rules, is [`super::rule`]'s, as for every repeat.
//!
//! Each field is `*`, a number, a range `a-b`, a step (`*/n`, `a-b/n`, `a/n`) or a list of
//! those; months and weekdays also take English three-letter names, and weekday 7 is Sunday
//! as 0 is. As in Vixie cron, a day matches when both day fields are restricted and either
//! matches.

/// A parsed expression: one bit per allowed value of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cron {
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    days: u32,
    /// Bits 1..=12.
    months: u16,
    /// Bits 0..=6, Sunday = 0.
    weekdays: u8,
    days_any: bool,
    weekdays_any: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Cron {
    /// Reads an expression, or says what is wrong with it.
    pub(crate) fn parse(text: &str) -> Result<Cron, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(format!(
                "{text:?} needs five fields (minute hour day-of-month month day-of-week), not {}",
                fields.len()
            ));
        };
        let weekdays = field(weekday, "day-of-week", 0, 7, &WEEKDAYS, 0)?;
        // 7 is Sunday too.
        let weekdays = (weekdays & 0x7f) | u64::from(weekdays & (1 << 7) != 0);
        Ok(Cron {
            minutes: field(minute, "minute", 0, 59, &[], 0)?,
            hours: bits(field(hour, "hour", 0, 23, &[], 0)?),
            days: bits(field(day, "day-of-month", 1, 31, &[], 0)?),
            months: bits(field(month, "month", 1, 12, &MONTHS, 1)?),
            weekdays: bits(weekdays),
            days_any: day.starts_with('*'),
            weekdays_any: weekday.starts_with('*'),
        })
    }

    /// Whether the expression names a day: `month` 1–12, `day` 1–31, `weekday` 0 = Sunday.
    pub(crate) fn matches_day(&self, month: i8, day: i8, weekday: i8) -> bool {
        if self.months & (1 << month) == 0 {
            return false;
        }
        let by_day = self.days & (1 << day) != 0;
        let by_weekday = self.weekdays & (1 << weekday) != 0;
        match (self.days_any, self.weekdays_any) {
            (true, true) => true,
            (true, false) => by_weekday,
            (false, true) => by_day,
            (false, false) => by_day || by_weekday,
        }
    }

    /// The times of a matching day, earliest first.
    pub(crate) fn times(&self) -> impl Iterator<Item = (i8, i8)> + '_ {
        (0..24i8)
            .filter(|h| self.hours & (1 << h) != 0)
            .flat_map(move |h| {
                (0..60i8)
                    .filter(|m| self.minutes & (1 << m) != 0)
                    .map(move |m| (h, m))
            })
    }
}

fn bits<T: TryFrom<u64> + Default>(value: u64) -> T {
    T::try_from(value).unwrap_or_default()
}

/// One field's allowed values as bits. `names[i]` stands for `i + name_base`.
fn field(
    text: &str,
    what: &str,
    min: u64,
    max: u64,
    names: &[&str],
    name_base: u64,
) -> Result<u64, String> {
    let mut set = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u64 = step
                    .parse()
                    .ok()
                    .filter(|s| (1..=max.max(1)).contains(s))
                    .ok_or_else(|| format!("{what}: {item:?} has a bad step"))?;
                (range, step)
            }
            None => (item, 1),
        };
        let value = |v: &str| -> Result<u64, String> {
            let lower = v.to_ascii_lowercase();
            if let Some(i) = names.iter().position(|n| *n == lower) {
                return Ok(i as u64 + name_base);
            }
            v.parse::<u64>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| format!("{what}: {v:?} is not a value from {min} to {max}"))
        };
        let (lo, hi) = match range {
            "*" => (min, max),
            _ => match range.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `a/n` runs from a to the end.
                None if step > 1 || item.contains('/') => (value(range)?, max),
                None => {
                    let v = value(range)?;
                    (v, v)
                }
            },
        };
        if lo > hi {
            return Err(format!("{what}: the range {range:?} runs backwards"));
        }
        let mut v = lo;
        while v <= hi {
            set |= 1 << v;
            v += step;
        }
    }
    Ok(set)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_as_sets() {
        let c = Cron::parse("30 9 * * 1-5").unwrap();
        assert_eq!(c.times().collect::<Vec<_>>(), vec![(9, 30)]);
        // 2026-12-01 is a Tuesday (2); Sunday (0) does not match.
        assert!(c.matches_day(12, 1, 2));
        assert!(!c.matches_day(12, 6, 0));
        let c = Cron::parse("*/20 8-10/2 * * *").unwrap();
        assert_eq!(
            c.times().collect::<Vec<_>>(),
            vec![(8, 0), (8, 20), (8, 40), (10, 0), (10, 20), (10, 40)]
        );
        let c = Cron::parse("0 0 1,15 feb-mar sun").unwrap();
        // Either day field matches when both are restricted.
        assert!(c.matches_day(2, 1, 3));
        assert!(c.matches_day(3, 8, 0));
        assert!(!c.matches_day(3, 9, 1));
        assert!(!c.matches_day(4, 1, 0));
        // 7 is Sunday.
        assert!(Cron::parse("0 0 * * 7").unwrap().matches_day(5, 3, 0));
        assert_eq!(
            Cron::parse("5/15 * * * *")
                .unwrap()
                .times()
                .take(4)
                .collect::<Vec<_>>(),
            vec![(0, 5), (0, 20), (0, 35), (0, 50)]
        );
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (text, message) in [
            ("* * * *", "needs five fields"),
            ("60 * * * *", "minute: \"60\" is not a value from 0 to 59"),
            ("* 24 * * *", "hour: \"24\" is not a value from 0 to 23"),
            ("* * 0 * *", "day-of-month: \"0\""),
            ("* * * 13 *", "month: \"13\""),
            ("* * * * 8", "day-of-week: \"8\""),
            ("*/0 * * * *", "minute: \"*/0\" has a bad step"),
            ("5-1 * * * *", "runs backwards"),
            ("a * * * *", "minute: \"a\""),
            ("1,,2 * * * *", "minute: \"\""),
        ] {
            let err = Cron::parse(text).unwrap_err();
            assert!(err.contains(message), "{text}: {err}");
        }
    }
}
