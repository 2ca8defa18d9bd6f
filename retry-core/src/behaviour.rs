//! The behaviour every machine in this crate keeps, in one place.
//!
//! This page has no items. It states the rules that the types elsewhere in the
//! crate follow, with the exact numbers, so that a doc comment can point here
//! instead of repeating them. Each rule is checked by the crate's tests (timeline
//! snapshots, properties and the fuzz corpus replay).
//!
//! # Terms
//!
//! An *attempt* is one call of the caller's operation; the first call is
//! attempt 1. A *retry* is any attempt after the first, so retry `r` is attempt
//! `r + 1`. A *delay* is the sleep before a retry. No delay ever comes before
//! attempt 1, after a success or after the last failure.
//!
//! # Counting attempts
//!
//! A policy limits either attempts (`max_attempts`, the first call included) or
//! retries (`max_retries`, the calls after the first: `N` retries allow `N + 1`
//! attempts). A configuration may name one of the two, never both. One attempt
//! (zero retries) turns retrying off. A policy may also allow unlimited attempts,
//! in which case only a time budget, a retry budget, a permanent failure or
//! cancellation ends the call. When the attempts run out, the error says how many
//! ran and carries the last failure.
//!
//! # Backoff curves
//!
//! The delay before retry `r` (`r` = 1, 2, …):
//!
//! | curve | delay before retry `r` |
//! |---|---|
//! | none | zero |
//! | constant | `d` |
//! | linear | `initial + (r - 1) × increment` (the increment is `initial` unless set) |
//! | exponential | `initial × factor^(r - 1)` (factor 2 unless set; any finite factor ≥ 1) |
//! | fibonacci | the sum of the two delays before it, starting from `initial` |
//!
//! `max_delay` caps every curve and `min_delay` may floor it. A cap below the
//! curve's first delay (a constant curve's delay, the initial delay of the
//! others, which decorrelated jitter also draws from) would flatten every
//! delay to the cap, so it is refused, naming both values; a cap equal to it
//! is a constant curve. All arithmetic
//! saturates: any `r` up to `u32::MAX` and any delay up to the largest
//! `Duration` give an answer without overflow, wrap-around or panic (see the
//! next section for where it saturates).
//!
//! # Delays in 64-bit nanoseconds
//!
//! Every delay the curves, the cap and floor, jitter and rounding work out is
//! computed in whole nanoseconds held in 64 bits, the same way on every
//! platform; `Duration` appears only where a value enters or leaves. The
//! largest such value, `u64::MAX` nanoseconds, is about 584.5 years, and it
//! is where the arithmetic stops:
//!
//! - a duration that enters the computation longer than that (an initial
//!   delay or increment, `max_delay`, `min_delay`, the previous delay that
//!   decorrelated jitter reads, an honoured server hint under at-least, the
//!   cap an at-least hint raises) counts as exactly `u64::MAX` ns;
//! - every step that would pass it stays there: a curve that grows past it
//!   (exponential, fibonacci, linear, whatever the factor or the retry), the
//!   top of a jitter interval (add's `d + f × d`, spread's `d + f × d`,
//!   decorrelated's `3 × previous`), the width of spread's and decorrelated's
//!   interval, and the jittered delay itself;
//! - under millisecond resolution, a delay that would round up past it gets
//!   the last whole millisecond below it instead.
//!
//! So no delay is ever longer than `u64::MAX` ns. For every policy whose
//! durations and intermediate values stay below that bound (every delay, cap
//! and previous delay shorter than about 146 years is inside it) the
//! delays are exactly those of exact arithmetic, to the nanosecond, including
//! the products with an exponential factor or a jitter fraction, which are
//! made as a double-precision float product rounded to the nearest value and
//! then truncated. A cap of `Duration::MAX` therefore caps nothing, and a
//! `min_delay` or an honoured hint longer than 584 years floors a delay at
//! `u64::MAX` ns rather than at itself. The jitter draw for a base delay
//! reads its saturated nanoseconds.
//!
//! Worked examples, without jitter, that the tests hold exactly:
//!
//! - initial 1 s, factor 2, cap 60 s, 8 attempts: 1, 2, 4, 8, 16, 32 and 60 s,
//!   123 s of sleep in all;
//! - initial 5 ms, cap 12 ms, 4 attempts: 5, 10 and 12 ms;
//! - initial 500 ms, cap 5 s, 3 attempts: 500 ms and 1 s.
//!
//! # Jitter
//!
//! Randomness comes only from a seed given by the caller (the adapters draw one
//! from the operating system unless the caller fixes it). The same policy, seed
//! and events give the same timeline to the nanosecond on every platform. The
//! jitter of retry `r` depends only on the seed, `r` and the base delay, so any
//! retry's delay can be recomputed on its own and a restored machine draws the
//! same delays; decorrelated jitter is the one kind that depends on the previous
//! delay.
//!
//! | kind | delay for a base delay `d` |
//! |---|---|
//! | none | `d` |
//! | full | uniform in `[0, d]` |
//! | equal | `d / 2` plus uniform in `[0, d / 2]` |
//! | decorrelated | the smaller of the cap and uniform in `[initial, 3 × previous]` |
//! | subtract(`f`) | `d` minus uniform in `[0, f × d]`, so within `[d × (1 − f), d]` |
//! | add(`f`) | `d` plus uniform in `[0, f × d)`, never below `d` |
//! | spread(`f`) | `d × (1 + u)` with `u` uniform in `[−f, +f]` |
//!
//! The fraction `f` must lie in `[0, 1]`; a negative, NaN or larger value is a
//! configuration error. Full, equal, subtract and spread apply after the cap, so
//! they never exceed it; add may exceed it by at most `f` of it. Delays are
//! rounded to whole milliseconds unless the policy asks for nanoseconds, and the
//! rounded delay stays inside the jitter's interval.
//!
//! # Server hints
//!
//! A server may say how long to wait. Sources, strongest first:
//! `retry-after-ms` (milliseconds, fractions allowed), then `Retry-After` as
//! seconds or as an HTTP date (the IMF-fixdate form and the two obsolete forms,
//! with fractional seconds accepted). A date becomes a delay against a wall-clock
//! "now" the caller passes in; a date already past is a zero delay. A value that
//! does not parse, is negative or is empty is no hint, and the curve applies; a
//! huge value saturates instead of overflowing.
//!
//! The policy chooses how a hint combines with the curve:
//!
//! - **override** (the HTTP presets' default): the hint replaces the curve, gets
//!   no jitter and is clamped to `[retry_after_min, retry_after_max]`, 100 ms and
//!   60 s unless set. The floor keeps a "0" or a past date from turning into a
//!   tight loop against a server that is already struggling.
//! - **at-least**: sleep the larger of the curve's delay and the hint (the hint
//!   capped at `hint_cap`, 5 minutes unless set), plus any additive jitter; never
//!   less than the honoured hint (counted at most `u64::MAX` nanoseconds, see
//!   [delays in 64-bit nanoseconds](#delays-in-64-bit-nanoseconds)).
//!
//! A policy may also ignore hints altogether.
//!
//! # Time budget and attempt timeout
//!
//! A time budget (none unless set; 30 s in the HTTP presets) bounds the whole
//! call: attempts and delays together. A retry is not started when the time spent
//! so far plus its delay would reach or pass the budget; the call then ends with
//! the reason "budget" and the last failure. The budget decides whether a retry
//! starts, not how long a started attempt may run, so a call may overrun it by up
//! to one attempt timeout, unless the policy caps each attempt's deadline at the
//! budget's end.
//!
//! Only a time budget ends a call on time. Instants count nanoseconds in 64
//! bits, about 584 years from their origin; a sleep that would end past the
//! last of them ([`Instant::MAX`](crate::Instant::MAX)) ends there instead.
//! Without a time budget the retry then goes ahead after that sleep (a driver
//! sleeps its whole delay, as good as forever); with one it does not fit, as
//! no budget ends later, and the call ends with "budget". So whether a retry
//! goes ahead does not depend on where the instants' origin lies (when the
//! driver first read its clock), except for a budget that itself reaches past
//! the last instant. An attempt deadline past it is no deadline.
//!
//! An attempt timeout gives every attempt a fresh deadline. An attempt that
//! reaches its deadline is a failure of kind "timeout" and is retried only when
//! the policy retries timeouts; an answer that arrives on the very tick of the
//! deadline is a timeout too. When the last permitted attempt timed out, the
//! error says "timed out" with the attempt number and the timeout; when the
//! attempts ran out on other failures it says "exhausted".
//!
//! # Classifying failures
//!
//! For each failure the caller's classifier answers: retryable, permanent, or
//! retryable with a server hint. A permanent failure ends the call at once with
//! the original error and never takes from the retry budget. Ready classifiers,
//! none of which allocates:
//!
//! - process exit codes: 0 is success; a set of codes is never retried, by
//!   default {78} (`EX_CONFIG`, a configuration error a retry cannot fix);
//!   everything else is retried. A set of retryable codes may be given instead.
//! - HTTP statuses: 408, 429 and 500–599 are retried unless set otherwise.
//! - named error codes, such as `TRANSIENT`, `TIMEOUT`, `RATE_LIMIT`.
//! - any predicate on the error, or a list of sentinel errors compared by value.
//!
//! Connection errors and timeouts follow the operation's idempotency (and the
//! HTTP layers apply [`replay_verdict`](crate::replay_verdict) to every failure
//! of a request that may not be replayed). "Auto"
//! retries them for methods safe to replay (GET, HEAD, OPTIONS) and not for the
//! others, POST included, since a replayed POST may charge twice; PUT and DELETE
//! may be added as replayable. A failure in which nothing reached the server
//! (no connection could be taken from the pool, say) is always retryable. When
//! an operation marked non-idempotent is retried anyway, a warning event comes
//! before the repeated attempt, whatever its outcome.
//!
//! # Cancellation
//!
//! Cancellation is checked before every attempt and before every delay. Cancelled
//! during a delay, the waiter wakes at once, its timer is released and the call
//! ends as "cancelled", which is never confused with "exhausted" and never
//! retried. No attempt starts after cancellation.
//!
//! # Results
//!
//! A success carries the value, the number of attempts and the time the whole
//! call took, when it was measured. Reading a clock costs more than a retrier's
//! whole success path, so a driver reads one at a call's start only when
//! something needs the time: a time budget, an attempt timeout, a retry
//! budget, a breaker that times calls, or a caller (or an enabled trace) that
//! asked for the elapsed time. A call whose first attempt succeeds with none
//! of these reads no clock, and its success says the time was not measured
//! (this supersedes the older rule that every success carries its elapsed
//! time). A time that leaves out part of the call is never reported as the
//! call's time: a call that read no clock at its start and reads one later
//! (when its first attempt fails, to time its sleeps) reports its time as not
//! measured, in its success and its error alike, and the error's message then
//! names no time. Asking for the elapsed time (the adapters'
//! `measure_elapsed`) makes every call read the clock at its start and report
//! the whole time. A failure is one error type whose variants carry: exhausted (attempts and
//! last error), permanent (the original error), budget (attempts and last error),
//! timed out (attempt number and timeout), cancelled (attempts), refused by the
//! retry budget, and circuit open (how long until the breaker admits again). Each
//! variant has a stable dotted code for logs and metrics: `retry.exhausted`,
//! `retry.permanent`, `retry.budget`, `retry.timeout`, `retry.cancelled`,
//! `retry.retry_budget`, `retry.circuit_open`.
//!
//! # Configuration
//!
//! Policies and breaker settings read from and write to any serde format (TOML,
//! JSON, YAML). Durations are written as text ("500ms", "1m30s"); in a
//! configuration a bare number means milliseconds (the `retry` program refuses a
//! bare number on its command line and shows both spellings). Unknown fields are
//! errors. Every invalid value is refused when read, with a typed error naming the
//! field and what is wrong with it (a negative or NaN number, jitter outside
//! `[0, 1]`, a zero timeout, a minimum above its maximum, an unknown curve, both
//! `max_attempts` and `max_retries`).
//!
//! Layering: a complete policy replaces another as a whole; a partial override
//! (every field optional) changes only the fields it names, a list replaces the
//! whole list, and an absent field leaves the base as it was (an explicit zero is
//! a value: `max_retries = 0` turns retries off). An empty override changes
//! nothing, and merging never changes the base.
//!
//! Named presets give the defaults of five well-known retry setups:
//!
//! - a pipeline engine: 8 attempts, exponential from 1 s doubling to a 60 s cap,
//!   exit code 78 never retried, hints at-least with a 5 minute cap, add(0.1)
//!   jitter keyed by a seed that names the step;
//! - an HTTP SDK: 3 attempts (2 retries), 500 ms doubling to 5 s, subtract(0.25)
//!   jitter, statuses 408/429/5xx, hints override used exactly as given (no floor
//!   and no ceiling), a 30 s budget, connection errors and timeouts retried;
//! - an HTTP client with a method guard: as the SDK, with hints clamped to
//!   `[100 ms, 60 s]` and connection errors and timeouts retried by method;
//! - a TypeScript-style builder set: constant, linear and exponential curves with
//!   full, equal, decorrelated or no jitter and a min/max clamp;
//! - a streaming pipeline: one attempt unless set, base 100 ms, cap 10 s,
//!   spread(0.1) jitter, codes `TRANSIENT`, `TIMEOUT`, `RATE_LIMIT` retried,
//!   idempotent.
//!
//! # Circuit breaker
//!
//! States: closed, open and half-open, plus forced open and disabled under an
//! operator's control. Closed turns open when the failure rule trips: a number
//! of failures in a row, or a failure rate and/or slow-call rate at or above a
//! threshold over a sliding window (the last N calls, or the last T seconds in
//! buckets), judged only once a minimum number of calls has been seen. Open turns
//! half-open after the open duration, counted in the caller's time; the duration
//! may grow on each re-open along a backoff curve. Half-open admits at most
//! `half_open_permits` probes at a time and rejects the rest; by default
//! `success_threshold` good probes in a row close the breaker and any failed
//! probe re-opens it (a rate verdict over N probes may be chosen instead), and a
//! maximum wait in half-open keeps a breaker whose probes never report from
//! staying there. A rejected call never runs the operation, and the rejection
//! says when the breaker will admit again. Every transition is reported with its
//! source state, target state and instant. Windows live in fixed-size storage
//! chosen at compile time.
//!
//! An attempt abandoned by its caller (dropped, cancelled, panicked) counts as a
//! failure when it was abandoned after the slow-call duration or its deadline,
//! and is released without an outcome when abandoned earlier. How long it ran is
//! measured from its start when the breaker times calls; otherwise the adapters
//! take its start at its first wait (an async attempt's first pending poll), so
//! the measured time misses at most that first poll. An abandoned attempt whose
//! start was never taken (a blocking attempt that panics under a breaker that
//! does not time calls) is judged by its deadline if it has one, and otherwise
//! released without an outcome. That is the default
//! [`AbandonedRule`](crate::AbandonedRule); a caller whose only timeout sits
//! outside the breaker may count every abandoned attempt as a failure instead,
//! or none. A timeout inside the breaker is not an abandonment but a failure
//! the breaker records. A permanent failure counts as a success for the
//! breaker (the dependency answered) unless the dependency did not answer: a
//! permanent timeout, lost connection or failed connect is a failure.
//!
//! # Retry budget
//!
//! A budget shared by many calls keeps retries from multiplying load during an
//! outage, as gRPC's retry throttling, the AWS SDK's retry quota and Finagle's
//! percentage budget do: retries withdraw tokens, successes give some back, and
//! below a threshold retries are refused while first attempts still run.
//!
//! # Streams and metrics
//!
//! A stream mapped through a fallible operation with per-item retry holds one
//! concurrency slot per retrying item, never more; one item's exhaustion fails
//! that item alone and later items go on. Behind feature flags the adapters
//! report these metrics, each with the labels named (without an exporter they
//! cost nothing):
//!
//! - `retry.attempt.total` (labels `outcome`): one count per attempt, every
//!   attempt counted once, by how it ended: success, failure, permanent,
//!   timeout, aborted (a cancelled or abandoned one) or rejected (one a
//!   breaker turned away); see [`attempt_outcome`](crate::attempt_outcome);
//! - `retry.attempt.delay_ms` (labels `curve`, `reason`): a histogram of the
//!   delays slept before retries, by backoff curve and by where the delay came
//!   from (`curve`, `hint`, `circuit_open`);
//! - `circuit_breaker.state_change.total` (labels `from`, `to`): state changes;
//! - `circuit_breaker.call.duration_ms` (no labels): a histogram of how long
//!   the calls a breaker admitted ran;
//! - `circuit_breaker.call.rejected.total` (labels `reason`): calls a breaker
//!   did not permit, because it was open, its probes were busy or it was
//!   forced open;
//! - `hedge.copy.launched.total` (no labels): copies a hedged call sent, the
//!   first included;
//! - `hedge.copy.total` (labels `outcome`): one count per copy of a hedged
//!   call by how it ended: won, failure, permanent, cancelled or rejected.
//!
//! # Determinism and time
//!
//! Nothing in this crate reads a clock, sleeps, draws randomness from the
//! operating system or allocates. Time enters only as a value passed with each
//! event, so the same inputs give the same outputs, and timelines can be
//! snapshot-tested and fuzzed.
//!
//! # Snapshots
//!
//! [`RetryMachine`](crate::RetryMachine), [`CircuitBreaker`](crate::CircuitBreaker)
//! and [`RetryBudget`](crate::RetryBudget) save to a versioned snapshot (serde,
//! still without `std`). A snapshot taken at any point and restored on any
//! platform answers every later event exactly as the original would have, and
//! compares equal to it. A corrupt or inconsistent snapshot is refused with a
//! typed error naming the field; it never panics and never yields a machine
//! that breaks its own rules.
//!
//! A restored machine keeps what its policy states: an attempt in flight has
//! the deadline its attempt timeout (and budget cap) gives; a pending sleep or
//! withdrawal lies within the bounds of its reason (a curve delay within
//! `min_delay` and the top of the jitter's interval at `max_delay`, a hint
//! within the override clamp or under the at-least cap, an exact pushback as
//! given, a circuit-open wait of at least a millisecond under a policy that
//! waits) and ends no later than its delay after the latest time the machine
//! saw; a half-open breaker whose config has a maximum wait has its deadline;
//! a budget's tokens lie within its capacity, in amounts its arithmetic
//! gives.
//!
//! ## Restoring under another policy
//!
//! A snapshot carries the policy (or breaker or budget config) it was taken
//! under, and restoring judges the whole record against the one it carries.
//! Nothing else in the record says where its state came from, so a record
//! whose policy was replaced (an operator editing the stored JSON, a service
//! restoring yesterday's state under today's settings) is judged as a record
//! of the new one:
//!
//! - it is accepted when everything it holds is a state a machine under the
//!   new policy could have been in. The pending action keeps its recorded
//!   values (an attempt its deadline, a sleep its length and end, a
//!   withdrawal its delay, a breaker its open period, probes and window, a
//!   budget its tokens) and every later decision follows the new policy. So
//!   what has not happened yet may change: more attempts, another curve,
//!   jitter or hint mode, another retry budget or breaker threshold, as long
//!   as the pending action and the counts fit;
//! - it is refused, naming the field, when it could not have come from the
//!   new policy: attempts above its maximum, or a sleep after its last
//!   attempt; an attempt whose deadline is not the one the new timeout gives;
//!   a sleep or withdrawal outside what its reason allows under the new cap,
//!   jitter or hint clamp, or past the new time budget; a withdrawal under a
//!   policy without a retry budget; a breaker window of another kind, or with
//!   more calls than the new window holds; a half-open period without the
//!   deadline a new maximum wait calls for, or with one the config no longer
//!   has; budget tokens above the new maximum, an amount the new arithmetic
//!   never gives (a fraction of a token under an AWS config, which counts
//!   whole tokens: a gRPC bucket's tokens pass under an AWS config only when
//!   whole), or a state of another kind (tokens under a Finagle config).
//!
//! To move a call to a new policy with nothing carried over, start a new
//! machine; restoring under a changed policy carries the pending action over
//! as it was.
//!
//! # Hedging
//!
//! [`HedgeMachine`](crate::HedgeMachine) sends extra copies of a slow idempotent
//! call and keeps the first good answer. Its policy bounds the copies in flight
//! and in total; the delay before the next copy is fixed or a percentile of
//! recent latencies (a fixed-size histogram, used only after a minimum number of
//! samples); the modes are latency, fallback and parallel. A non-fatal failure
//! launches the next copy at once, a permanent one ends the call and cancels the
//! rest, and a pushback hint delays the next copy by exactly the hint. Each copy
//! beyond the first withdraws from the retry budget when one is used; a refusal
//! stops further copies without failing those in flight. A call not marked
//! idempotent is never hedged unless the caller says so; an HTTP layer decides
//! per request with [`HedgePolicy::for_request`](crate::HedgePolicy::for_request)
//! (GET, HEAD and OPTIONS are hedged, anything else only when marked), and
//! judges responses as it judges errors, so a retryable 503 is a failed copy,
//! never the answer while another copy may still succeed.
//!
//! # Sharing across a fleet
//!
//! Many processes may share one retry budget and one view of a breaker through
//! a store (the `retry-redis` crate uses Redis). Budget operations run
//! atomically in the store with exactly this crate's budget arithmetic (the
//! integers [`BudgetConfig::parameters`](crate::BudgetConfig::parameters)
//! gives), each bounded by a timeout, after which the process falls back to its
//! own budget or refuses, as configured. Each process keeps admitting calls with
//! its own breaker and publishes its window counts every sync interval (250 ms
//! unless set). The fleet opens by quorum (at least Q processes, or a fraction of
//! them, have opened on their own, so one bad process cannot open the others) or
//! by the aggregate rule (the summed windows cross the thresholds). An open
//! decision is published with its expiry and reaches every process within one
//! interval; half-open probes are claimed fleet-wide, with an expiry so that a
//! crashed prober frees its claim, and their verdict closes or re-opens the
//! fleet. What a member does with the fleet's view is decided here, by
//! [`FleetMember`](crate::FleetMember); the store's crate only carries the data.
//! A member whose store is unreachable decides alone, also while it follows an
//! open decision: after [`FleetConfig::missed_syncs`](crate::FleetConfig::missed_syncs)
//! syncs missed in a row (2 unless set: failed, or that many intervals without
//! one completing), the fleet's probe gate no longer holds it back, so it admits
//! calls again within that many intervals plus the fleet's open period. A
//! request the store runs after its timeout is not applied. A sync costs the
//! store the same whatever the number of members (it reads sums, not every
//! member's report). Keys are namespaced, expire and stay bounded, one
//! breaker's keys share one Redis Cluster hash slot, and bad data in the store
//! is a typed error with the local fallback.
