//! The set-list parsers against a bitmap built item by item.
//!
//! Parses arbitrary text as an [`ExitCodeSet`] and a [`StatusSet`], and arbitrary
//! bytes as a [`Method`]. A reference reader here splits the list on commas,
//! reads each number or range into a plain bitmap and names the first bad item;
//! the parsed sets must agree with it (membership, size, order, error item and
//! kind), and a parsed set written back as a list of ranges must parse to itself.

use core::fmt;

use retry_core::{ExitCodeSet, Method, SetParseError, SetParseErrorKind, StatusSet};

use crate::shared::{ensure, Text, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "sets";

/// Reads a list such as `"1,2,5-9"` item by item into `members` (index
/// `value - min`), or returns the failing item's index and what was wrong.
fn reference_list(
    input: &str,
    min: u16,
    max: u16,
    members: &mut [bool],
) -> Result<(), (usize, SetParseErrorKind)> {
    if input.bytes().all(|b| b.is_ascii_whitespace()) {
        return Ok(());
    }
    let number = |text: &str| -> Result<u16, SetParseErrorKind> {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SetParseErrorKind::NotANumber);
        }
        let mut value: u32 = 0;
        for b in text.bytes() {
            value = value
                .saturating_mul(10)
                .saturating_add(u32::from(b.wrapping_sub(b'0')));
        }
        match u16::try_from(value) {
            Ok(v) if v >= min && v <= max => Ok(v),
            _ => Err(SetParseErrorKind::OutOfRange { min, max }),
        }
    };
    for (index, piece) in input.split(',').enumerate() {
        let item = piece.trim_ascii();
        if item.is_empty() {
            return Err((index, SetParseErrorKind::Empty));
        }
        let (lo, hi) = match item.find('-') {
            Some(dash) => (
                item.get(..dash).unwrap_or("").trim_ascii(),
                item.get(dash.saturating_add(1)..)
                    .unwrap_or("")
                    .trim_ascii(),
            ),
            None => (item, item),
        };
        let lo = number(lo).map_err(|k| (index, k))?;
        let hi = number(hi).map_err(|k| (index, k))?;
        if lo > hi {
            return Err((index, SetParseErrorKind::Reversed));
        }
        for value in lo..=hi {
            if let Some(m) = members.get_mut(usize::from(value.saturating_sub(min))) {
                *m = true;
            }
        }
    }
    Ok(())
}

/// Writes the members (index `value - min`) as a list of ranges.
fn write_ranges<const N: usize>(members: &[bool], min: u16, out: &mut Text<N>) -> fmt::Result {
    let mut run: Option<(usize, usize)> = None;
    let mut first = true;
    let mut flush = |lo: usize, hi: usize, out: &mut Text<N>| -> fmt::Result {
        let at = |i: usize| usize::from(min).saturating_add(i);
        if !first {
            out.push(b", ")?;
        }
        first = false;
        if lo == hi {
            fmt::write(out, format_args!("{}", at(lo)))
        } else {
            fmt::write(out, format_args!("{} - {}", at(lo), at(hi)))
        }
    };
    for (i, on) in members.iter().enumerate() {
        run = match (run, *on) {
            (None, true) => Some((i, i)),
            (Some((lo, _)), true) => Some((lo, i)),
            (Some((lo, hi)), false) => {
                flush(lo, hi, out)?;
                None
            }
            (None, false) => None,
        };
    }
    if let Some((lo, hi)) = run {
        flush(lo, hi, out)?;
    }
    Ok(())
}

/// Holds one parse result (as membership, count and members in order, or the
/// error's position and kind) against the reference reading of `input`.
/// A parsed set as [`check_set`] sees it: its size, its members in order, and
/// its membership test.
type ParsedSet<'a, I> = (usize, I, &'a dyn Fn(u16) -> bool);

fn check_set<I: Iterator<Item = u16>>(
    input: &str,
    result: Result<ParsedSet<'_, I>, SetParseError<'_>>,
    min: u16,
    max: u16,
    members: &mut [bool],
    step: usize,
) -> Result<(), Violation> {
    let check = |ok, invariant| ensure(ok, TARGET, step, invariant);
    let reference = reference_list(input, min, max, members);
    match (result, reference) {
        (Ok((len, iter, contains)), Ok(())) => {
            let expected_len = members.iter().filter(|m| **m).count();
            check(len == expected_len, "set size differs from the reference")?;
            let mut expected = members
                .iter()
                .enumerate()
                .filter(|(_, m)| **m)
                .map(|(i, _)| u16::try_from(i).unwrap_or(u16::MAX).saturating_add(min));
            for got in iter {
                check(
                    Some(got) == expected.next(),
                    "members differ from the reference or are out of order",
                )?;
            }
            check(expected.next().is_none(), "a reference member is missing")?;
            for value in 0..=max.saturating_add(1) {
                let inside = value >= min
                    && members
                        .get(usize::from(value.saturating_sub(min)))
                        .copied()
                        .unwrap_or(false);
                check(
                    contains(value) == inside,
                    "contains differs from the reference",
                )?;
            }
        }
        (Err(e), Err((index, kind))) => {
            check(
                e.index() == index && e.kind() == kind,
                "the error names another item or kind",
            )?;
            let offset = e.offset();
            check(
                input.get(offset..offset.saturating_add(e.item().len())) == Some(e.item()),
                "the error's offset does not point at its item",
            )?;
            check(
                e.item() == e.item().trim_ascii(),
                "the error's item is not trimmed",
            )?;
        }
        _ => {
            return Err(Violation {
                target: TARGET,
                step,
                invariant: "parse and the reference disagree on whether the list is valid",
            })
        }
    }
    Ok(())
}

/// Parses arbitrary text as an [`ExitCodeSet`] and a [`StatusSet`] list, and
/// arbitrary bytes as a [`Method`]. Checks: no panic; the sets agree with a
/// bitmap built item by item (membership, size, order), errors name the same
/// item and kind as the reference and point at it; a parsed set written back as
/// a list of ranges parses to itself; a known method's name reads back as it.
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    let text = match core::str::from_utf8(data) {
        Ok(text) => text,
        Err(e) => core::str::from_utf8(data.get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or(""),
    };

    let mut codes = [false; 256];
    let exit = ExitCodeSet::parse(text);
    let contains_exit = |v: u16| exit.is_ok_and(|s| u8::try_from(v).is_ok_and(|b| s.contains(b)));
    check_set(
        text,
        exit.map(|s| {
            (
                s.len(),
                s.iter().map(u16::from),
                &contains_exit as &dyn Fn(u16) -> bool,
            )
        }),
        0,
        255,
        &mut codes,
        1,
    )?;
    if let Ok(set) = exit {
        let mut list = Text::<2048>::new();
        let _ = write_ranges(&codes, 0, &mut list);
        ensure(
            ExitCodeSet::parse(list.as_str()) == Ok(set),
            TARGET,
            2,
            "an exit-code set written back does not parse to itself",
        )?;
        ensure(
            set.iter().collect::<ExitCodeSet>() == set,
            TARGET,
            2,
            "an exit-code set rebuilt from its members differs",
        )?;
        ensure(
            set.iter()
                .rev()
                .zip(set.iter().rev().skip(1))
                .all(|(a, b)| a > b),
            TARGET,
            2,
            "reverse iteration is not descending",
        )?;
    }

    let mut statuses = [false; 500];
    let status = StatusSet::parse(text);
    let contains_status = |v: u16| status.is_ok_and(|s| s.contains(v));
    check_set(
        text,
        status.map(|s| (s.len(), s.iter(), &contains_status as &dyn Fn(u16) -> bool)),
        100,
        599,
        &mut statuses,
        3,
    )?;
    if let Ok(set) = status {
        let mut list = Text::<4096>::new();
        let _ = write_ranges(&statuses, 100, &mut list);
        ensure(
            StatusSet::parse(list.as_str()) == Ok(set),
            TARGET,
            4,
            "a status set written back does not parse to itself",
        )?;
    }

    let method = Method::parse(data);
    match method.as_str() {
        Some(name) => ensure(
            name.as_bytes() == data,
            TARGET,
            5,
            "a method's name differs from the bytes it was read from",
        )?,
        None => ensure(
            method == Method::Other,
            TARGET,
            5,
            "a named method has no name",
        )?,
    }
    Ok(())
}
