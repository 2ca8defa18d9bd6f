//! A retrier's settings that both adapters share, and the builder methods that
//! set them, written once.

use core::any::Any;
use core::fmt;
use std::sync::Arc;

use retry_core::{AbandonedRule, Failure, RetryError, RetryPolicy};

use crate::breaker::{Breaker, SharedBreaker, WithAbandonedRule};
use crate::budget::Budget;
use crate::driver::QuickOpening;
use crate::notice::RetryNotice;

/// Says, for an error, whether a retry may fix it (see [`Failure`]).
pub type Classifier<E> = dyn Fn(&E) -> Failure + Send + Sync;
/// Told before every retry.
pub type RetryHook<E> = dyn Fn(&RetryNotice<'_, E>) + Send + Sync;
/// Told once when a call gives up, with the error it is about to return.
pub type GiveUpHook<E> = dyn Fn(&RetryError<E>) + Send + Sync;

/// What a retrier for operations failing with `E` holds, whatever runs it: the
/// policy, the jitter seed, the classifier, the hooks, the shared retry budget and
/// the breaker. Cheap to clone (every part is `Copy` or behind an `Arc`), so
/// clones share their hooks, budget and breaker. Building one with the defaults
/// allocates nothing.
///
/// Each adapter's `Retry<E>` holds one in a field named `settings`, and gets the
/// common builder methods from [`retry_builder_methods!`](crate::retry_builder_methods).
pub struct Settings<E> {
    policy: RetryPolicy,
    seed: Option<u64>,
    classifier: Option<Arc<Classifier<E>>>,
    on_retry: Option<Arc<RetryHook<E>>>,
    on_give_up: Option<Arc<GiveUpHook<E>>>,
    budget: Option<Arc<dyn Budget>>,
    breaker: Option<Arc<dyn Breaker>>,
    /// How the breaker counts an attempt abandoned from outside.
    abandoned: AbandonedRule,
    measure_elapsed: bool,
    /// [`QuickOpening::of`] these settings, worked out whenever one of its
    /// inputs is set (the policy, the budget, the breaker, measuring elapsed
    /// time), so that a call does not work it out again.
    quick: Option<QuickOpening>,
    /// The breaker again, when it is a [`SharedBreaker`] of the default shape:
    /// an adapter can then call it directly instead of through `dyn Breaker`.
    shared: Option<SharedBreaker>,
    /// The breaker as it was given (and as a [`SharedBreaker`], if it is
    /// one), before the abandoned-attempt rule was applied to it.
    given: Option<(Arc<dyn Breaker>, Option<SharedBreaker>)>,
}

impl<E> Settings<E> {
    /// Settings following `policy`, with the defaults: every error retryable, a
    /// fresh jitter seed for every call, no hooks, no budget, no breaker.
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Settings<E> {
        let mut settings = Settings {
            policy,
            seed: None,
            classifier: None,
            on_retry: None,
            on_give_up: None,
            budget: None,
            breaker: None,
            abandoned: AbandonedRule::FailureIfSlow,
            measure_elapsed: false,
            quick: None,
            shared: None,
            given: None,
        };
        settings.quick = QuickOpening::of(&settings);
        settings
    }

    /// [`QuickOpening::of`] these settings: the first attempt of a call that
    /// needs nothing of a driver until that attempt ends, if calls may take one.
    /// Worked out when the settings change, not per call.
    #[inline]
    #[must_use]
    pub const fn quick_opening(&self) -> Option<QuickOpening> {
        self.quick
    }

    /// The policy every call follows.
    #[must_use]
    pub const fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The fixed jitter seed, if one was set.
    #[must_use]
    pub const fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// Fixes the jitter seed of every call.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = Some(seed);
    }

    /// Judges errors with `classifier`.
    pub fn set_classifier(&mut self, classifier: impl Fn(&E) -> Failure + Send + Sync + 'static) {
        self.classifier = Some(Arc::new(classifier));
    }

    /// Tells `hook` before every retry.
    pub fn set_on_retry(&mut self, hook: impl Fn(&RetryNotice<'_, E>) + Send + Sync + 'static) {
        self.on_retry = Some(Arc::new(hook));
    }

    /// Tells `hook` when a call gives up.
    pub fn set_on_give_up(&mut self, hook: impl Fn(&RetryError<E>) + Send + Sync + 'static) {
        self.on_give_up = Some(Arc::new(hook));
    }

    /// Feeds every call's steps to `budget`.
    pub fn set_budget(&mut self, budget: impl Budget + 'static) {
        self.budget = Some(Arc::new(budget));
        self.quick = QuickOpening::of(self);
    }

    /// Asks `breaker` before every attempt.
    pub fn set_breaker(&mut self, breaker: impl Breaker + 'static) {
        let shared = (&breaker as &dyn Any)
            .downcast_ref::<SharedBreaker>()
            .cloned();
        self.given = Some((Arc::new(breaker), shared));
        self.hand_out_breaker();
    }

    /// Counts an attempt abandoned from outside (the call's future dropped, a
    /// cancellation mid-attempt, a panic) under `rule` in the breaker (see
    /// [`AbandonedRule`]).
    pub fn set_abandoned(&mut self, rule: AbandonedRule) {
        self.abandoned = rule;
        self.hand_out_breaker();
    }

    /// How the breaker counts an abandoned attempt.
    #[must_use]
    pub const fn abandoned(&self) -> AbandonedRule {
        self.abandoned
    }

    /// The breaker calls ask: the one given, or, under another rule than the
    /// default, the one given with that rule (the default costs nothing: no
    /// wrapper, and the direct [`SharedBreaker`] path stays).
    fn hand_out_breaker(&mut self) {
        let (breaker, shared) = match &self.given {
            None => (None, None),
            Some((given, shared)) if self.abandoned == AbandonedRule::FailureIfSlow => {
                (Some(Arc::clone(given)), shared.clone())
            }
            // (The direct path would not apply the rule.)
            Some((given, _)) => {
                let ruled: Arc<dyn Breaker> =
                    Arc::new(WithAbandonedRule::new(Arc::clone(given), self.abandoned));
                (Some(ruled), None)
            }
        };
        self.breaker = breaker;
        self.shared = shared;
        self.quick = QuickOpening::of(self);
    }

    /// Makes every call read the clock at its start, so that it reports the
    /// whole time it ran in every [`Success`](retry_core::Success) and
    /// [`RetryError`] (see the [`Driver`](crate::Driver)'s rule for when the
    /// clock is read otherwise, and the time not reported).
    pub fn set_measure_elapsed(&mut self) {
        self.measure_elapsed = true;
        self.quick = None;
    }

    /// Whether every call reads the clock at its start
    /// ([`set_measure_elapsed`](Self::set_measure_elapsed)).
    #[must_use]
    pub const fn measures_elapsed(&self) -> bool {
        self.measure_elapsed
    }

    /// The classifier's verdict on `error` (every error is retryable without one).
    #[must_use]
    pub fn classify(&self, error: &E) -> Failure {
        match &self.classifier {
            Some(classify) => classify(error),
            None => Failure::retryable(),
        }
    }

    /// The retry hook, if one was set.
    #[must_use]
    pub fn on_retry(&self) -> Option<&RetryHook<E>> {
        self.on_retry.as_deref()
    }

    /// The give-up hook, if one was set.
    #[must_use]
    pub fn on_give_up(&self) -> Option<&GiveUpHook<E>> {
        self.on_give_up.as_deref()
    }

    /// The breaker, if one was set and it is a [`SharedBreaker`] of the default
    /// shape (the same one [`breaker`](Self::breaker) returns), for a direct
    /// call on an adapter's hot path.
    #[inline]
    #[must_use]
    pub const fn shared_breaker(&self) -> Option<&SharedBreaker> {
        self.shared.as_ref()
    }

    /// The retry budget, if one was set.
    #[must_use]
    pub fn budget(&self) -> Option<&Arc<dyn Budget>> {
        self.budget.as_ref()
    }

    /// The breaker, if one was set.
    #[must_use]
    pub fn breaker(&self) -> Option<&Arc<dyn Breaker>> {
        self.breaker.as_ref()
    }
}

impl<E> Clone for Settings<E> {
    fn clone(&self) -> Self {
        Settings {
            policy: self.policy,
            seed: self.seed,
            classifier: self.classifier.clone(),
            on_retry: self.on_retry.clone(),
            on_give_up: self.on_give_up.clone(),
            budget: self.budget.clone(),
            breaker: self.breaker.clone(),
            abandoned: self.abandoned,
            measure_elapsed: self.measure_elapsed,
            quick: self.quick,
            shared: self.shared.clone(),
            given: self.given.clone(),
        }
    }
}

impl<E> fmt::Debug for Settings<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("policy", &self.policy)
            .field("seed", &self.seed)
            .field("classifier", &self.classifier.is_some())
            .field("on_retry", &self.on_retry.is_some())
            .field("on_give_up", &self.on_give_up.is_some())
            .field("budget", &self.budget)
            .field("breaker", &self.breaker)
            .field("measure_elapsed", &self.measure_elapsed)
            .finish()
    }
}

/// The builder methods both adapters' `Retry<E>` share, with their docs: expanded
/// inside each adapter's `impl<E> Retry<E>`, whose `settings` field is a
/// [`Settings<E>`](crate::Settings), so users call them as inherent methods.
#[doc(hidden)]
#[macro_export]
macro_rules! retry_builder_methods {
    () => {
        /// The policy every call follows.
        #[must_use]
        pub const fn policy(&self) -> &$crate::retry_core::RetryPolicy {
            self.settings.policy()
        }

        /// Uses `seed` for the jitter of every call, making the delays
        /// reproducible. By default each call draws a fresh seed from OS-seeded
        /// randomness, so that many clients do not retry in lockstep.
        #[must_use]
        pub fn seed(mut self, seed: u64) -> Self {
            self.settings.set_seed(seed);
            self
        }

        /// Says, for each error, whether a retry may fix it, of what kind it is
        /// and whether the server asked for a delay (see
        /// [`Failure`](retry_core::Failure) and the ready sets in `retry_core`).
        /// By default every error is retryable.
        #[must_use]
        pub fn classify(
            mut self,
            classifier: impl Fn(&E) -> $crate::retry_core::Failure + Send + Sync + 'static,
        ) -> Self {
            self.settings.set_classifier(classifier);
            self
        }

        /// Calls `hook` after a failed attempt, when a retry has been decided and
        /// before its delay starts, with the failed attempt, its error (if it
        /// returned one), the classifier's verdict and the delay.
        #[must_use]
        pub fn on_retry(
            mut self,
            hook: impl Fn(&$crate::RetryNotice<'_, E>) + Send + Sync + 'static,
        ) -> Self {
            self.settings.set_on_retry(hook);
            self
        }

        /// Calls `hook` once when a call gives up, with the error it is about to
        /// return.
        #[must_use]
        pub fn on_give_up(
            mut self,
            hook: impl Fn(&$crate::retry_core::RetryError<E>) + Send + Sync + 'static,
        ) -> Self {
            self.settings.set_on_give_up(hook);
            self
        }

        /// Shares a retry budget (a `SharedBudget`, or any other
        /// [`Budget`](retry_shared::Budget)) with every other call using it: each
        /// step of a call is reported to it, and each retry is withdrawn from it
        /// when the policy has `use_retry_budget(true)`. Without a budget,
        /// withdrawals are granted.
        #[must_use]
        pub fn budget(mut self, budget: impl $crate::Budget + 'static) -> Self {
            self.settings.set_budget(budget);
            self
        }

        /// Asks a circuit breaker (a `SharedBreaker`, or any other
        /// [`Breaker`](retry_shared::Breaker)) before every attempt and tells it
        /// every outcome. A rejected attempt never runs: the policy's
        /// [`on_circuit_open`](retry_core::RetryPolicyBuilder::on_circuit_open)
        /// says whether the call gives up with `retry.circuit_open` or waits for
        /// the breaker. An attempt abandoned mid-flight never leaks its permit (see
        /// `SharedBreaker`'s docs).
        #[must_use]
        pub fn breaker(mut self, breaker: impl $crate::Breaker + 'static) -> Self {
            self.settings.set_breaker(breaker);
            self
        }

        /// How the breaker counts an attempt abandoned from outside: the
        /// call's future dropped (an outer timeout, a `select!`, a task abort),
        /// a cancellation mid-attempt, a panicking operation. By default
        /// ([`AbandonedRule::FailureIfSlow`](retry_core::AbandonedRule::FailureIfSlow))
        /// it is a failure only past the breaker's slow-call duration or the
        /// attempt's own deadline; [`AbandonedRule::Failure`](retry_core::AbandonedRule::Failure)
        /// counts every one, for a stack whose only timeout is outside the
        /// call. The policy's own attempt timeout is not an abandonment: a
        /// timed-out attempt is a failure the breaker records.
        #[must_use]
        pub fn abandoned(mut self, rule: $crate::retry_core::AbandonedRule) -> Self {
            self.settings.set_abandoned(rule);
            self
        }

        /// Makes every call read the clock at its start and report the whole
        /// time it ran. By default a call reads the clock at its start only
        /// when something needs the time (a time budget, an attempt timeout, a
        /// retry budget, a breaker that times calls, an enabled trace); any
        /// other call reports its time as not measured
        /// ([`Success::elapsed`](retry_core::Success::elapsed) and
        /// [`RetryError::elapsed`](retry_core::RetryError::elapsed) are `None`,
        /// and the error's message names no time), even when it reads the
        /// clock later to time its sleeps, as that time would leave out the
        /// first attempt. Reading the clock costs more than the rest of a
        /// first-attempt success.
        #[must_use]
        pub fn measure_elapsed(mut self) -> Self {
            self.settings.set_measure_elapsed();
            self
        }
    };
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use retry_core::{BreakerConfig, BudgetConfig, RetryPolicy};

    use super::Settings;
    use crate::{QuickOpening, SharedBreaker, SharedBudget};

    fn breaker() -> SharedBreaker {
        SharedBreaker::new(BreakerConfig::default()).unwrap()
    }

    /// The cached opening is what [`QuickOpening::of`] says after every change.
    #[test]
    fn the_kept_quick_opening_follows_every_change() {
        let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
        let mut s = Settings::<()>::new(policy);
        assert_eq!(s.quick_opening(), QuickOpening::of(&s));
        assert_eq!(s.quick_opening().is_some(), !crate::observe::ENABLED);
        s.set_breaker(breaker());
        assert_eq!(s.quick_opening(), QuickOpening::of(&s));
        s.set_budget(SharedBudget::new(BudgetConfig::aws_standard()));
        assert_eq!(s.quick_opening(), None);
        assert_eq!(s.quick_opening(), QuickOpening::of(&s));

        let mut s = Settings::<()>::new(policy);
        s.set_measure_elapsed();
        assert_eq!(s.quick_opening(), None);
        assert_eq!(s.quick_opening(), QuickOpening::of(&s));

        let timed = RetryPolicy::builder()
            .attempt_timeout(core::time::Duration::from_secs(1))
            .build()
            .unwrap();
        let s = Settings::<()>::new(timed);
        assert_eq!(s.quick_opening(), None);
        assert_eq!(s.clone().quick_opening(), None);
    }

    /// A `SharedBreaker` of the default shape is kept for a direct call; any
    /// other breaker (an `Arc` around one included) only as `dyn Breaker`.
    #[test]
    fn only_a_default_shared_breaker_is_kept_for_direct_calls() {
        let policy = RetryPolicy::builder().build().unwrap();
        let mut s = Settings::<()>::new(policy);
        assert!(s.shared_breaker().is_none());
        let b = breaker();
        s.set_breaker(b.clone());
        let kept = s.shared_breaker().expect("kept");
        // The same breaker: a trip through one handle shows through the other.
        kept.force_at(
            retry_core::ManualState::ForcedOpen,
            std::time::Instant::now(),
        )
        .unwrap();
        assert_eq!(b.state(), retry_core::BreakerState::ForcedOpen);
        assert!(s.clone().shared_breaker().is_some());

        s.set_breaker(Arc::new(breaker()));
        assert!(s.shared_breaker().is_none());
        assert!(s.breaker().is_some());
        let small = SharedBreaker::<2, 0>::with_capacity(BreakerConfig::default()).unwrap();
        s.set_breaker(small);
        assert!(s.shared_breaker().is_none());
    }

    /// The abandoned-attempt rule reaches the breaker, set before or after
    /// it; the default leaves the breaker as it was (and its direct path).
    #[test]
    fn the_abandoned_rule_reaches_the_breaker_in_either_order() {
        use crate::Breaker as _;
        use retry_core::AbandonedRule;
        let policy = RetryPolicy::builder().build().unwrap();
        let mut before = Settings::<()>::new(policy);
        before.set_abandoned(AbandonedRule::Failure);
        before.set_breaker(breaker());
        let mut after = Settings::<()>::new(policy);
        after.set_breaker(breaker());
        assert!(after.shared_breaker().is_some());
        after.set_abandoned(AbandonedRule::Release);
        for (s, rule) in [
            (&before, AbandonedRule::Failure),
            (&after, AbandonedRule::Release),
        ] {
            assert_eq!(s.breaker().map(|b| b.abandoned_rule()), Some(rule));
            assert!(
                s.shared_breaker().is_none(),
                "the direct path skips the rule"
            );
            assert_eq!(s.quick_opening(), QuickOpening::of(s));
        }
        // Back to the default: the breaker as given, its direct path kept.
        let mut default = after.clone();
        default.set_abandoned(AbandonedRule::FailureIfSlow);
        assert!(default.shared_breaker().is_some());
        assert_eq!(
            default.breaker().map(|b| b.abandoned_rule()),
            Some(AbandonedRule::FailureIfSlow)
        );
    }
}
