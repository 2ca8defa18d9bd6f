//! The breaker's sync script, run directly against a real Redis: the view it
//! returns from its per-interval sums (members, open members and the summed
//! window under the published decision's epoch) is exactly what reading every
//! member's newest report of the current and the previous interval gives, as
//! the core's `FleetView::of` counts them, for random members, reports,
//! decisions and timings across many intervals.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common::Redis;

use core::time::Duration;
use std::collections::BTreeMap;

use retry_core::{FleetDecision, FleetView, Instant, MemberReport, WindowStats};

const INTERVAL_MS: u64 = 40;
const PREFIX: &str = "sums:breaker:{dep}:";
const DECISION: &str = "sums:breaker:{dep}:decision";

/// A small deterministic generator (xorshift), so that a failure replays.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn encode(r: &MemberReport) -> String {
    let w = &r.window;
    format!(
        "1|{}|{}|{}|{}|{}|{}",
        u8::from(r.open),
        r.epoch,
        w.calls,
        w.failures,
        w.slow,
        w.slow_failures
    )
}

/// `{0, now_ms, decision, the seven sums}`: the clock and the sums (digits,
/// as the hash holds them; a missing one is '').
fn view_reply(reply: &[redis::Value]) -> (u64, [i64; 7]) {
    let int = |v: &redis::Value| match v {
        redis::Value::Int(n) => *n,
        redis::Value::BulkString(b) if b.is_empty() => 0,
        redis::Value::BulkString(b) => core::str::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("not a number: {other:?} in {reply:?}"),
    };
    assert_eq!(reply.len(), 10, "{reply:?}");
    assert_eq!(int(&reply[0]), 0, "{reply:?}");
    let mut sums = [0; 7];
    for (sum, v) in sums.iter_mut().zip(&reply[3..]) {
        *sum = int(v);
    }
    (u64::try_from(int(&reply[1])).unwrap(), sums)
}

fn the_sums_are_the_newest_reports_of_two_intervals(redis: &Redis) {
    let script = redis::Script::new(include_str!("../../src/lua/sync.lua"));
    let mut conn = redis.conn();
    let mut draw = Draw(0x2545_f491_4f6c_dd1d);
    // bucket -> member -> newest report
    let mut model: BTreeMap<u64, BTreeMap<String, MemberReport>> = BTreeMap::new();
    let decisions = [
        (None, FleetDecision::CLOSED),
        (Some("1|closed|5"), FleetDecision::Closed { epoch: 5 }),
        (
            Some("1|open|99999999999999|7"),
            FleetDecision::Open {
                until: Instant::ORIGIN,
                epoch: 7,
            },
        ),
    ];
    let mut checked_across = 0;
    for call in 0..600 {
        if call % 50 == 0 {
            let (raw, _) = decisions[usize::try_from(draw.below(3)).unwrap()];
            let _: () = match raw {
                Some(raw) => redis::cmd("SET").arg(DECISION).arg(raw).query(&mut *conn),
                None => redis::cmd("DEL").arg(DECISION).query(&mut *conn),
            }
            .unwrap();
        }
        let decision: Option<String> = redis::cmd("GET").arg(DECISION).query(&mut *conn).unwrap();
        let decision = decisions
            .iter()
            .find(|(raw, _)| raw.map(str::to_owned) == decision)
            .unwrap()
            .1;
        let member = format!("m{}", draw.below(8));
        let calls = u32::try_from(draw.below(50)).unwrap();
        let failures = u32::try_from(draw.below(u64::from(calls) + 1)).unwrap();
        let slow = u32::try_from(draw.below(u64::from(calls) + 1)).unwrap();
        let slow_failures = u32::try_from(draw.below(u64::from(slow.min(failures)) + 1)).unwrap();
        let report = MemberReport {
            open: draw.below(3) == 0,
            window: WindowStats {
                calls,
                failures,
                slow,
                slow_failures,
            },
            epoch: [0, 5, 7][usize::try_from(draw.below(3)).unwrap()],
        };
        let reply: Vec<redis::Value> = script
            .key(DECISION)
            .arg(&member)
            .arg(encode(&report))
            .arg(INTERVAL_MS)
            .arg(PREFIX)
            .arg("")
            .invoke(&mut *conn)
            .unwrap();
        let (now_ms, got) = view_reply(&reply);
        let bucket = now_ms / INTERVAL_MS;
        model.entry(bucket).or_default().insert(member, report);
        // Every member's newest report of this interval and the previous one.
        let mut newest: BTreeMap<&String, MemberReport> = BTreeMap::new();
        for b in [bucket.saturating_sub(1), bucket] {
            if let Some(reports) = model.get(&b) {
                for (m, r) in reports {
                    newest.insert(m, *r);
                }
            }
        }
        let both = model
            .get(&bucket.saturating_sub(1))
            .is_some_and(|p| !p.is_empty())
            && model[&bucket].len() < newest.len();
        checked_across += usize::from(both);
        let want = FleetView::of(newest.values().copied(), decision);
        let want = [
            want.members,
            want.open_members,
            want.window.calls,
            want.window.failures,
            want.window.slow,
            want.window.slow_failures,
            0,
        ]
        .map(i64::from);
        assert_eq!(got, want, "call {call} in bucket {bucket}");
        std::thread::sleep(Duration::from_millis(draw.below(12)));
    }
    assert!(
        checked_across > 100,
        "views that carried members from the previous interval: {checked_across}"
    );
    // At most two intervals' hashes (and the decision).
    let keys = redis.keys("sums:breaker:*");
    assert!(keys.len() <= 5, "{keys:?}");
}

crate::on_single_and_cluster!(the_sums_are_the_newest_reports_of_two_intervals);
