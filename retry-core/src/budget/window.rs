//! Finagle's sliding window: the slices that a Finagle-style budget's deposits
//! and withdrawals are kept in until they age out.

/// How many slices Finagle's window is cut into.
pub(super) const SLICES: usize = 10;
/// [`SLICES`] as the type slot numbers use.
pub(super) const SLICES_U64: u64 = 10;
/// The most a single Finagle slice can hold: deposits of 2^32 - 1 requests.
pub(super) const SLICE_CAP: i64 = 4_294_967_295 * 1_000;

/// Finagle's sliding window: ten slices, each tagged with the absolute slot
/// number it holds. Slot `s` covers `[s, s + 1) × slice`; a slice counts while
/// the current slot is less than ten past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Window {
    slot: [u64; SLICES],
    net: [i64; SLICES],
}

impl Window {
    pub(super) const EMPTY: Window = Window {
        slot: [0; SLICES],
        net: [0; SLICES],
    };

    /// Adds `amount` (a deposit or, negative, a withdrawal) to slot `at`.
    pub(super) fn add(&mut self, at: u64, amount: i64) {
        let index = usize::try_from(at.checked_rem(SLICES_U64).unwrap_or(0)).unwrap_or(0);
        if let (Some(slot), Some(net)) = (self.slot.get_mut(index), self.net.get_mut(index)) {
            if *slot != at {
                *slot = at;
                *net = 0;
            }
            *net = net.saturating_add(amount).min(SLICE_CAP);
        }
    }

    /// Each slice as (the slot it holds, its net amount), in ring order.
    pub(super) fn slices(&self) -> impl Iterator<Item = (u64, i64)> + '_ {
        self.slot.iter().copied().zip(self.net.iter().copied())
    }

    /// A window from its slices in ring order: slice `i` must hold a slot `s`
    /// with `s % 10 == i` (or be empty), and at most [`SLICE_CAP`]. `None` if not.
    pub(super) fn from_slices(slices: &[(u64, i64); SLICES]) -> Option<Window> {
        let mut window = Window::EMPTY;
        for (i, &(slot, net)) in slices.iter().enumerate() {
            let home = u64::try_from(i).ok()? == slot.checked_rem(SLICES_U64)?;
            if (net != 0 && !home) || net > SLICE_CAP || (!home && slot != 0) {
                return None;
            }
            *window.slot.get_mut(i)? = slot;
            *window.net.get_mut(i)? = net;
        }
        Some(window)
    }

    /// The net amount of the slices still in the window at slot `now`.
    pub(super) fn sum(&self, now: u64) -> i64 {
        self.slot
            .iter()
            .zip(self.net.iter())
            .filter(|(slot, _)| **slot <= now && now.saturating_sub(**slot) < SLICES_U64)
            .fold(0_i64, |acc, (_, net)| acc.saturating_add(*net))
    }
}
