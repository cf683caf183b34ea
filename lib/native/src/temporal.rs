//! xsd:dateTime and xsd:date values for native conditions, as
//! `quanta.sparql.expr_dates` reads and orders them: a position on the time
//! line (UTC with a timezone, local time without) and XSD's partial order
//! between values with and without one. What this reads differently from the
//! reference it does not read at all (None): years past nine digits,
//! fractions past nanoseconds, and every ill-formed value, which the reference
//! decides.

use std::cmp::Ordering;

/// A value's place on the time line, in nanoseconds, and its timezone's
/// offset in minutes, if it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instant {
    nanos: i128,
    offset: Option<i64>,
}

/// A value's fields as written (24:00:00 read as the next day's 00:00:00).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fields {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    pub hour: i64,
    pub minute: i64,
}

impl Instant {
    pub fn fields(self) -> Fields {
        let nanos_per_second = 1_000_000_000i128;
        let local = self.nanos.div_euclid(nanos_per_second) as i64 + self.offset.unwrap_or(0) * 60;
        let (days, seconds) = (local.div_euclid(86_400), local.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        Fields {
            year,
            month,
            day,
            hour: seconds / 3_600,
            minute: seconds % 3_600 / 60,
        }
    }

    /// SECONDS(): the seconds and their fraction as an xsd:decimal's
    /// canonical form (`expr_values.format_decimal`): `0`, `5`, `30.25`.
    pub fn seconds(self) -> String {
        let within = self.nanos.rem_euclid(60_000_000_000); // offsets are whole minutes
        let (whole, fraction) = (within / 1_000_000_000, within % 1_000_000_000);
        if fraction == 0 {
            return whole.to_string();
        }
        let digits = format!("{fraction:09}");
        format!("{whole}.{}", digits.trim_end_matches('0'))
    }

    /// TIMEZONE(): the offset as an xsd:dayTimeDuration (`PT0S`, `-PT5H30M`),
    /// or None without a timezone.
    pub fn timezone(self) -> Option<String> {
        let m = self.offset?;
        if m == 0 {
            return Some("PT0S".into());
        }
        let (h, min) = (m.abs() / 60, m.abs() % 60);
        let mut text = String::from(if m < 0 { "-PT" } else { "PT" });
        if h != 0 {
            text += &format!("{h}H");
        }
        if min != 0 {
            text += &format!("{min}M");
        }
        Some(text)
    }

    /// The canonical form of the value as an xsd:dateTime (`with_time`, at
    /// midnight for a date) or an xsd:date (`expr_dates.format_datetime`).
    pub fn canonical(self, with_time: bool) -> String {
        let f = self.fields();
        let year = if f.year < 0 {
            format!("-{:04}", -f.year)
        } else {
            format!("{:04}", f.year)
        };
        if !with_time {
            return format!("{year}-{:02}-{:02}{}", f.month, f.day, self.tz());
        }
        let seconds = self.seconds();
        let pad = if seconds.split('.').next().is_some_and(|s| s.len() < 2) {
            "0"
        } else {
            ""
        };
        format!(
            "{year}-{:02}-{:02}T{:02}:{:02}:{pad}{seconds}{}",
            f.month,
            f.day,
            f.hour,
            f.minute,
            self.tz()
        )
    }

    /// Its place on the time line in nanoseconds (UTC when it has a timezone, its
    /// local time read as UTC otherwise): the client's `DateTime.stamp`, ORDER BY's key.
    pub fn nanos(self) -> i128 {
        self.nanos
    }

    /// TZ(): `Z`, `+hh:mm` or `-hh:mm`, or empty without a timezone.
    pub fn tz(self) -> String {
        match self.offset {
            None => String::new(),
            Some(0) => "Z".into(),
            Some(m) => format!(
                "{}{:02}:{:02}",
                if m < 0 { '-' } else { '+' },
                m.abs() / 60,
                m.abs() % 60
            ),
        }
    }
}

/// An xsd:dateTime (`with_time`) or xsd:date lexical form, or None.
pub fn parse(lex: &str, with_time: bool) -> Option<Instant> {
    let mut rest = lex;
    let negative = rest.starts_with('-');
    if negative {
        rest = &rest[1..];
    }
    let year_len = rest.find('-')?;
    let year_text = &rest[..year_len];
    if !(4..=9).contains(&year_len)
        || !year_text.bytes().all(|b| b.is_ascii_digit())
        || (year_len > 4 && year_text.starts_with('0'))
    {
        return None;
    }
    let year: i64 = year_text.parse().ok()?;
    let year = if negative { -year } else { year };
    rest = &rest[year_len..];
    let month = field(&mut rest, '-', 1, 12)?;
    let day = field(&mut rest, '-', 1, 31)?;
    let (mut hour, mut minute, mut second, mut nanos) = (0, 0, 0, 0);
    if with_time {
        hour = field(&mut rest, 'T', 0, 24)?;
        minute = field(&mut rest, ':', 0, 59)?;
        second = field(&mut rest, ':', 0, 59)?;
        if let Some(fraction) = rest.strip_prefix('.') {
            let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || digits > 9 {
                return None;
            }
            nanos = fraction[..digits].parse::<i64>().ok()? * 10i64.pow(9 - digits as u32);
            rest = &fraction[digits..];
        }
        if hour == 24 && (minute != 0 || second != 0 || nanos != 0) {
            return None;
        }
    }
    let offset = match rest {
        "" => None,
        "Z" => Some(0),
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let mut tz = &rest[1..];
            let hours = number(&mut tz, 2, 0, 14)?;
            let minutes = field(&mut tz, ':', 0, 59)?;
            if !tz.is_empty() || hours * 60 + minutes > 14 * 60 {
                return None;
            }
            Some(sign * (hours * 60 + minutes))
        }
    };
    if day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset.unwrap_or(0) * 60;
    Some(Instant {
        nanos: seconds as i128 * 1_000_000_000 + nanos as i128,
        offset,
    })
}

/// Whether a form `parse` refuses may yet be valid for the reference: only
/// a year or a fraction of ten digits or more is past its reach (every other
/// rule of the lexical space it applies as `expr_dates` does).
pub fn beyond_reach(lex: &str) -> bool {
    lex.as_bytes()
        .windows(10)
        .any(|w| w.iter().all(u8::is_ascii_digit))
}

/// `sep` then two digits in `low..=high`.
fn field(rest: &mut &str, sep: char, low: i64, high: i64) -> Option<i64> {
    *rest = rest.strip_prefix(sep)?;
    number(rest, 2, low, high)
}

fn number(rest: &mut &str, len: usize, low: i64, high: i64) -> Option<i64> {
    let digits = rest.get(..len)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    *rest = &rest[len..];
    Some(digits.parse().ok()?).filter(|v| (low..=high).contains(v))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01, proleptic Gregorian (year 0 is 1 BCE).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Year, month and day of a day count since 1970-01-01 (`days_from_civil`'s inverse).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// XSD's partial order (3.2.7.4): a value without a timezone may lie anywhere
/// within 14 hours either way; None when that decides nothing.
pub fn order(a: Instant, b: Instant) -> Option<Ordering> {
    let (x, y) = (a.nanos, b.nanos);
    let (a_zoned, b_zoned) = (a.offset.is_some(), b.offset.is_some());
    if a_zoned == b_zoned {
        return Some(x.cmp(&y));
    }
    let window = 14 * 3_600 * 1_000_000_000i128;
    let (low, high) = if a_zoned {
        (x, x)
    } else {
        (x - window, x + window)
    };
    let (other_low, other_high) = if b_zoned {
        (y, y)
    } else {
        (y - window, y + window)
    };
    if high < other_low {
        Some(Ordering::Less)
    } else if low > other_high {
        Some(Ordering::Greater)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(lex: &str) -> Instant {
        parse(lex, true).unwrap_or_else(|| panic!("{lex}"))
    }

    #[test]
    fn reads_the_lexical_space() {
        let same = |a: &str, b: &str| order(at(a), at(b)) == Some(Ordering::Equal);
        assert!(same("2020-01-01T00:00:00Z", "2019-12-31T23:00:00-01:00"));
        assert!(same("2020-01-01T24:00:00", "2020-01-02T00:00:00"));
        assert_eq!(at("1970-01-01T00:00:00.5Z").nanos, 500_000_000);
        assert_eq!(parse("2020-02-30T00:00:00", true), None);
        assert_eq!(parse("2020-01-01T24:00:01", true), None);
        assert_eq!(parse("2020-01-01T00:00:00+14:30", true), None);
        assert_eq!(parse("02020-01-01T00:00:00", true), None);
        assert_eq!(parse("2020-01-01", false).map(|i| i.offset), Some(None));
        assert_eq!(parse("2020-01-01T00:00:00", false), None);
        assert!(parse("-0044-03-15T12:00:00Z", true).is_some());
        assert!(beyond_reach("2020-01-01T00:00:00.1234567891"));
        assert!(!beyond_reach("2020-13-01T00:00:00.123456789"));
    }

    #[test]
    fn gives_the_fields_as_written() {
        let f = at("2019-12-31T23:30:00-01:00").fields();
        assert_eq!(
            (f.year, f.month, f.day, f.hour, f.minute),
            (2019, 12, 31, 23, 30)
        );
        let f = at("2020-02-28T24:00:00Z").fields();
        assert_eq!((f.year, f.month, f.day, f.hour), (2020, 2, 29, 0));
        let f = at("-0044-03-15T12:05:00").fields();
        assert_eq!(
            (f.year, f.month, f.day, f.hour, f.minute),
            (-44, 3, 15, 12, 5)
        );
        assert_eq!(at("2020-01-01T00:00:00-05:30").tz(), "-05:30");
        assert_eq!(at("2020-01-01T00:00:00").tz(), "");
        assert_eq!(at("2020-01-01T00:00:00").timezone(), None);
        assert_eq!(at("2020-01-01T00:00:00Z").timezone().unwrap(), "PT0S");
        assert_eq!(
            at("2020-01-01T00:00:00-05:30").timezone().unwrap(),
            "-PT5H30M"
        );
        assert_eq!(at("2020-01-01T00:00:00+01:00").timezone().unwrap(), "PT1H");
        assert_eq!(at("2020-01-01T00:00:07.250-05:30").seconds(), "7.25");
        assert_eq!(at("2020-01-01T00:00:00.000Z").seconds(), "0");
        assert_eq!(
            at("2020-02-28T24:00:00-05:30").canonical(true),
            "2020-02-29T00:00:00-05:30"
        );
        assert_eq!(
            parse("-0044-03-15", false).unwrap().canonical(true),
            "-0044-03-15T00:00:00"
        );
    }

    #[test]
    fn orders_partially_across_timezones() {
        let zoned = at("2020-01-01T12:00:00Z");
        assert_eq!(order(zoned, at("2020-01-01T12:00:00")), None);
        assert_eq!(
            order(at("2020-01-02T03:00:00"), zoned),
            Some(Ordering::Greater)
        );
        assert_eq!(
            order(at("2019-12-31T21:59:59"), zoned),
            Some(Ordering::Less)
        );
        assert_eq!(order(at("2019-12-31T22:00:00"), zoned), None);
    }
}
