//! What every model shares: the [`Violation`] a check reports, a helper that
//! turns a failed condition into one, a few input-decoding helpers built on
//! `arbitrary::Unstructured`, and a fixed text buffer for writing values back
//! out without allocating.

use core::fmt;
use core::time::Duration;

use arbitrary::Unstructured;

/// A broken invariant: which target, which step of the input (0 for checks made
/// before or outside the step loop), and a short statement of the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The fuzz target that found it.
    pub target: &'static str,
    /// The step (event, operation or sub-check) at which it was seen.
    pub step: usize,
    /// The rule that was broken.
    pub invariant: &'static str,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: step {}: invariant broken: {}",
            self.target, self.step, self.invariant
        )
    }
}

impl core::error::Error for Violation {}

/// Fails with `invariant` unless `ok`.
pub(crate) fn ensure(
    ok: bool,
    target: &'static str,
    step: usize,
    invariant: &'static str,
) -> Result<(), Violation> {
    if ok {
        Ok(())
    } else {
        Err(Violation {
            target,
            step,
            invariant,
        })
    }
}

/// True about once in `n` draws; false when the input has run out, so that
/// zero bytes take the common path.
pub(crate) fn rarely(u: &mut Unstructured<'_>, n: u8) -> arbitrary::Result<bool> {
    Ok(u.int_in_range(1..=n.max(1))? == n)
}

/// `d × f` for a fraction `f`, saturating instead of panicking.
pub(crate) fn scaled(d: Duration, f: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * f).unwrap_or(Duration::MAX)
}

/// A fixed buffer written through `fmt::Write`.
pub(crate) struct Text<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Text<N> {
    pub(crate) const fn new() -> Self {
        Text {
            bytes: [0; N],
            len: 0,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }

    pub(crate) fn as_str(&self) -> &str {
        core::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) -> fmt::Result {
        let end = self.len.checked_add(bytes.len()).ok_or(fmt::Error)?;
        self.bytes
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }
}

impl<const N: usize> fmt::Write for Text<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes())
    }
}
