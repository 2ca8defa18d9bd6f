#![allow(clippy::expect_used, clippy::unwrap_used)]
//! reqwest against a real axum server on 127.0.0.1, started here: what the server
//! saw, that hints were honoured, and the final error's fields; then the same
//! through `RetryLayer` + `BreakerLayer` around a reqwest-backed tower service.
#![cfg(all(feature = "reqwest", feature = "tower"))]

use crate::support;

use core::time::Duration;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use retry_core::{
    Backoff, BasicRule, BreakerConfig, BreakerState, Failure, FailureKind, GiveUpReason, HintMode,
    Jitter, RetryPolicy, SleepReason,
};
use retry_tokio::reqwest_call::{send, RequestError};
use retry_tokio::tower::{
    BreakerLayer, BreakerServiceError, HttpStatus, RetryCountHeader, RetryLayer,
};
use retry_tokio::{Retry, SharedBreaker};
use tower::{Service as _, ServiceBuilder, ServiceExt as _};

/// Three attempts 20 ms apart, hints overriding the curve.
fn quick() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(20)))
        .jitter(Jitter::None)
        .hints(HintMode::Override {
            min: Duration::from_millis(100),
            max: Duration::from_secs(60),
        })
        .build()
        .unwrap()
}

/// Two attempts, a curve of 30 s: a retry that comes sooner followed the hint.
fn hinted() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(2)
        .backoff(Backoff::constant(Duration::from_secs(30)))
        .jitter(Jitter::None)
        .hints(HintMode::Override {
            min: Duration::from_millis(100),
            max: Duration::from_secs(60),
        })
        .build()
        .unwrap()
}

/// A retry's delay and its reason, as the retry hook was told.
type Delay = (Duration, Option<SleepReason>);
/// The same, with the wall clock when the hook was told.
type TimedDelay = (SystemTime, Duration, Option<SleepReason>);

/// The (attempt, delay, reason, failure kind) of every retry, as the retry hook
/// was told.
type Notices = Arc<Mutex<Vec<(u32, Duration, Option<SleepReason>, Option<FailureKind>)>>>;

fn recording(retry: Retry<RequestError>) -> (Retry<RequestError>, Notices) {
    let notices: Notices = Arc::default();
    let log = Arc::clone(&notices);
    let retry = retry.on_retry(move |n| {
        let kind = n.error.map(|e| e.failure().kind());
        log.lock()
            .unwrap()
            .push((n.attempt, n.delay, n.reason, kind));
    });
    (retry, notices)
}

fn gap(a: &support::Seen, b: &support::Seen) -> Duration {
    b.at.duration_since(a.at).unwrap_or(Duration::ZERO)
}

#[tokio::test]
async fn two_503s_then_200() {
    let server = support::start().await;
    let client = support::client();
    let (retry, notices) = recording(Retry::new(quick()).classify(RequestError::failure));
    let done = retry
        .call(|_| send(client.get(server.url("/flaky"))))
        .await
        .unwrap();
    assert_eq!(done.attempts, 3);
    assert_eq!(done.value.status(), 200);
    assert_eq!(done.value.text().await.unwrap(), "ok");
    assert_eq!(
        server.books.count("/flaky"),
        3,
        "the server saw three requests"
    );
    let notices = notices.lock().unwrap();
    assert_eq!(notices.len(), 2);
    for (i, (attempt, delay, reason, kind)) in notices.iter().enumerate() {
        assert_eq!(*attempt, i as u32 + 1);
        assert_eq!(*delay, Duration::from_millis(20));
        assert_eq!(*reason, Some(SleepReason::Curve));
        assert_eq!(*kind, Some(FailureKind::Status(503)));
    }
}

#[tokio::test]
async fn a_429_with_retry_after_one_second_is_honoured() {
    let server = support::start().await;
    let client = support::client();
    let (retry, notices) = recording(Retry::new(hinted()).classify(RequestError::failure));
    let done = retry
        .call(|_| send(client.get(server.url("/limited"))))
        .await
        .unwrap();
    assert_eq!((done.attempts, done.value.status().as_u16()), (2, 200));
    assert_eq!(
        *notices.lock().unwrap(),
        [(
            1,
            Duration::from_secs(1),
            Some(SleepReason::Hint),
            Some(FailureKind::Status(429))
        )]
    );
    let seen = server.books.seen("/limited");
    assert_eq!(seen.len(), 2);
    assert!(
        gap(&seen[0], &seen[1]) >= Duration::from_secs(1),
        "the retry came {:?} after the 429",
        gap(&seen[0], &seen[1])
    );
}

/// Waits until the wall clock is at least 400 ms into a second, so a date read in
/// whole seconds would come out at least 400 ms long.
async fn late_in_a_second() {
    loop {
        let frac = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_millis();
        if (400..800).contains(&frac) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_http_date_retry_after_is_read_to_the_millisecond() {
    let server = support::start().await;
    let client = support::client();
    let told_at = Arc::new(Mutex::new(None));
    let told = Arc::clone(&told_at);
    let retry = Retry::new(hinted())
        .classify(RequestError::failure)
        .on_retry(move |n| {
            *told.lock().unwrap() = Some((SystemTime::now(), n.delay, n.reason));
        });
    late_in_a_second().await;
    let done = retry
        .call(|_| send(client.get(server.url("/dated"))))
        .await
        .unwrap();
    assert_eq!((done.attempts, done.value.status().as_u16()), (2, 200));

    let date = UNIX_EPOCH + Duration::from_secs(server.books.dated.lock().unwrap().unwrap());
    let (when, delay, reason) = told_at.lock().unwrap().unwrap();
    assert_eq!(reason, Some(SleepReason::Hint));
    // The delay ends at the date: with the clock read in whole seconds it would
    // end at least 400 ms after it.
    let ends = when + delay;
    let late = ends.duration_since(date).unwrap_or(Duration::ZERO);
    let early = date.duration_since(ends).unwrap_or(Duration::ZERO);
    assert!(
        late < Duration::from_millis(200),
        "the delay ends {late:?} after the date"
    );
    assert!(
        early < Duration::from_millis(50),
        "the delay ends {early:?} before the date"
    );
    let seen = server.books.seen("/dated");
    assert_eq!(seen.len(), 2);
    assert!(
        seen[1].at + Duration::from_millis(5) >= date,
        "the retry arrived before the date"
    );
}

#[tokio::test]
async fn retry_after_ms_wins_over_retry_after() {
    let server = support::start().await;
    let client = support::client();
    let (retry, notices) = recording(Retry::new(hinted()).classify(RequestError::failure));
    let done = retry
        .call(|_| send(client.get(server.url("/ms"))))
        .await
        .unwrap();
    assert_eq!((done.attempts, done.value.status().as_u16()), (2, 200));
    assert_eq!(
        *notices.lock().unwrap(),
        [(
            1,
            Duration::from_millis(250),
            Some(SleepReason::Hint),
            Some(FailureKind::Status(503))
        )]
    );
    let seen = server.books.seen("/ms");
    assert!(gap(&seen[0], &seen[1]) >= Duration::from_millis(250));
}

#[tokio::test]
async fn a_400_is_not_retried_and_its_response_is_kept() {
    let server = support::start().await;
    let client = support::client();
    let err = Retry::new(quick())
        .classify(RequestError::failure)
        .call(|_| send(client.get(server.url("/bad"))))
        .await
        .unwrap_err();
    assert_eq!(server.books.count("/bad"), 1);
    assert_eq!(err.code(), "retry.permanent");
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.last_failure(), Some(FailureKind::Status(400)));
    assert_eq!(err.last_error_attempt(), Some(1));
    let last = err.into_last_error().unwrap();
    assert_eq!(last.status().map(|s| s.as_u16()), Some(400));
    assert!(!last.failure().is_retryable());
    let response = last.into_response().unwrap();
    assert_eq!(response.text().await.unwrap(), "no such thing");
}

#[tokio::test]
async fn a_hang_past_the_attempt_timeout_times_out_every_attempt() {
    let server = support::start().await;
    let client = support::client();
    let policy = quick()
        .to_builder()
        .attempt_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = Retry::new(policy)
        .classify(RequestError::failure)
        .call(|_| send(client.get(server.url("/hang"))))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.timeout");
    assert_eq!(
        err.reason(),
        GiveUpReason::TimedOut {
            timeout: Duration::from_millis(200)
        }
    );
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.last_failure(), Some(FailureKind::Timeout));
    assert!(err.last_error().is_none(), "no attempt returned an error");
    assert_eq!(err.last_error_attempt(), None);
    // An attempt timeout reads the clock from the call's start.
    assert!(err.elapsed().unwrap() >= Duration::from_millis(3 * 200 + 2 * 20));
    assert_eq!(server.books.count("/hang"), 3);
}

#[tokio::test]
async fn a_timeout_after_an_error_says_which_attempt_the_error_came_from() {
    let server = support::start().await;
    let client = support::client();
    let policy = quick()
        .to_builder()
        .attempt_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = Retry::new(policy)
        .classify(RequestError::failure)
        .call(|_| send(client.get(server.url("/then-hang"))))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.timeout");
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.last_failure(), Some(FailureKind::Timeout));
    assert_eq!(
        err.last_error()
            .and_then(RequestError::status)
            .map(|s| s.as_u16()),
        Some(503)
    );
    assert_eq!(err.last_error_attempt(), Some(1));
    let text = err.to_string();
    assert!(
        text.starts_with("retry.timeout: gave up after 3 attempts"),
        "{text}"
    );
    assert!(
        text.contains(": attempt 1 failed: HTTP status 503"),
        "{text}"
    );
    assert_eq!(server.books.count("/then-hang"), 3);
}

#[tokio::test]
async fn a_dropped_connection_is_retried_for_a_get_and_not_for_a_post() {
    let server = support::start().await;
    let client = support::client();
    let retry = Retry::new(quick()).classify(RequestError::failure);

    let err = retry
        .call(|_| send(client.get(server.dropping_url())))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.last_failure(), Some(FailureKind::Connection));
    assert!(matches!(
        err.last_error(),
        Some(RequestError::Transport { .. })
    ));
    assert_eq!(
        server
            .books
            .dropped
            .load(core::sync::atomic::Ordering::SeqCst),
        3
    );

    // A POST that may have reached the server is never replayed.
    let err = retry
        .call(|_| send(client.post(server.dropping_url()).body("charge")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.permanent");
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.last_failure(), Some(FailureKind::Connection));
    assert_eq!(
        server
            .books
            .dropped
            .load(core::sync::atomic::Ordering::SeqCst),
        4
    );
}

#[tokio::test]
async fn a_refused_connection_sent_nothing_and_is_retried_even_for_a_post() {
    // A port nobody listens on: bind one, then close it.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let client = support::client();
    let err = Retry::new(quick())
        .classify(RequestError::failure)
        .call(|_| {
            send(
                client
                    .post(format!("http://127.0.0.1:{port}/x"))
                    .body("charge"),
            )
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.last_failure(), Some(FailureKind::NotSent));
}

// ----- the same through tower -----

/// A tower service backed by reqwest: an `http::Request` in, reqwest's response
/// out, reqwest's error as the error.
fn reqwest_service(
    client: reqwest::Client,
) -> impl tower::Service<
    http::Request<String>,
    Response = reqwest::Response,
    Error = reqwest::Error,
    Future = impl Send,
> + Clone
       + Send
       + 'static {
    tower::service_fn(move |request: http::Request<String>| {
        let client = client.clone();
        async move { client.execute(reqwest::Request::try_from(request)?).await }
    })
}

type LayeredError = BreakerServiceError<reqwest::Error>;

/// The classification of the layered service's errors: a refusal of the
/// breaker is final here; reqwest's errors as the core reads them for a GET.
fn layered_failure(error: &LayeredError) -> Failure {
    match error {
        BreakerServiceError::CircuitOpen { .. } => Failure::permanent(),
        BreakerServiceError::Inner(e) => {
            retry_tokio::reqwest_call::classify_error(e, &http::Method::GET)
        }
    }
}

fn get(url: String) -> http::Request<String> {
    http::Request::get(url).body(String::new()).unwrap()
}

fn breaker() -> SharedBreaker {
    SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 3,
            open_duration: Duration::from_secs(30),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn through_tower_503s_are_retried_with_the_retry_count_stamped() {
    let server = support::start().await;
    let breaker = breaker();
    let mut service = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(quick()).classify(layered_failure))
                .recreate_with(RetryCountHeader::new())
                .classify_responses(HttpStatus),
        )
        .layer(
            BreakerLayer::new(breaker.clone())
                .classify_responses(HttpStatus)
                .classify_errors(|e: &reqwest::Error| {
                    retry_tokio::reqwest_call::classify_error(e, &http::Method::GET)
                }),
        )
        .service(reqwest_service(support::client()));
    let response = service
        .ready()
        .await
        .unwrap()
        .call(get(server.url("/flaky")))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = server.books.seen("/flaky");
    assert_eq!(seen.len(), 3);
    let counts: Vec<_> = seen.iter().map(|s| s.retry_count.as_deref()).collect();
    assert_eq!(counts, [Some("0"), Some("1"), Some("2")]);
    // Two failures then a success: the breaker (3 in a row to open) is closed.
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(breaker.snapshot().consecutive_failures(), 0);
}

#[tokio::test]
async fn through_tower_a_429_hint_is_honoured() {
    let server = support::start().await;
    let notices: Arc<Mutex<Vec<Delay>>> = Arc::default();
    let log = Arc::clone(&notices);
    let service = ServiceBuilder::new()
        .layer(
            RetryLayer::new(
                Retry::new(hinted())
                    .classify(layered_failure)
                    .on_retry(move |n| log.lock().unwrap().push((n.delay, n.reason))),
            )
            .classify_responses(HttpStatus),
        )
        .layer(BreakerLayer::new(breaker()).classify_responses(HttpStatus))
        .service(reqwest_service(support::client()));
    let response = service.oneshot(get(server.url("/limited"))).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        *notices.lock().unwrap(),
        [(Duration::from_secs(1), Some(SleepReason::Hint))]
    );
    let seen = server.books.seen("/limited");
    assert_eq!(seen.len(), 2);
    assert!(gap(&seen[0], &seen[1]) >= Duration::from_secs(1));
}

#[tokio::test]
async fn through_tower_400s_come_back_as_responses_and_leave_the_breaker_closed() {
    let server = support::start().await;
    let breaker = breaker();
    let service = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(quick()).classify(layered_failure))
                .classify_responses(HttpStatus),
        )
        .layer(BreakerLayer::new(breaker.clone()).classify_responses(HttpStatus))
        .service(reqwest_service(support::client()));
    for _ in 0..3 {
        let response = service
            .clone()
            .oneshot(get(server.url("/bad")))
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        assert_eq!(response.text().await.unwrap(), "no such thing");
    }
    assert_eq!(server.books.count("/bad"), 3, "a 400 is never retried");
    // Three 400s in a row: the dependency answered each time.
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(breaker.snapshot().consecutive_failures(), 0);

    // The same through `Retry::breaker`: the two paths agree.
    let direct = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 3,
            open_duration: Duration::from_secs(30),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let client = support::client();
    let retry = Retry::new(quick())
        .classify(RequestError::failure)
        .breaker(direct.clone());
    for _ in 0..3 {
        let err = retry
            .call(|_| send(client.get(server.url("/bad"))))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "retry.permanent");
    }
    assert_eq!(direct.state(), BreakerState::Closed);
}

#[tokio::test]
async fn through_tower_503s_open_the_breaker_and_then_fail_fast() {
    let server = support::start().await;
    let breaker = breaker();
    let service = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(quick()).classify(layered_failure))
                .classify_responses(HttpStatus),
        )
        .layer(BreakerLayer::new(breaker.clone()).classify_responses(HttpStatus))
        .service(reqwest_service(support::client()));
    // Three attempts, three 503s: exhausted, the last response handed back.
    let response = service
        .clone()
        .oneshot(get(server.url("/always-503")))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(server.books.count("/always-503"), 3);
    assert_eq!(breaker.state(), BreakerState::Open);

    // Open: the next call never reaches the server.
    let err = service
        .clone()
        .oneshot(get(server.url("/always-503")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.permanent");
    assert_eq!(err.attempts(), 1);
    assert!(err.last_error().unwrap().is_circuit_open());
    assert_eq!(server.books.count("/always-503"), 3);
}

#[tokio::test]
async fn through_tower_a_hang_times_out_and_a_dropped_connection_is_retried() {
    let server = support::start().await;
    let policy = quick()
        .to_builder()
        .attempt_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    // Calls slower than 100 ms are slow: an attempt abandoned at its 200 ms
    // deadline (the retry layer stops waiting) is recorded as a slow failure.
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 10,
        open_duration: Duration::from_secs(30),
        success_threshold: 1,
    })
    .unwrap()
    .to_builder()
    .slow_call_duration(Duration::from_millis(100))
    .build()
    .unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let service = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(policy).classify(layered_failure))
                .classify_responses(HttpStatus),
        )
        .layer(BreakerLayer::new(breaker.clone()).classify_responses(HttpStatus))
        .service(reqwest_service(support::client()));

    let err = service
        .clone()
        .oneshot(get(server.url("/hang")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.timeout");
    assert_eq!(err.attempts(), 3);
    assert!(err.last_error().is_none());
    assert_eq!(server.books.count("/hang"), 3);
    // Each timed-out attempt was abandoned past the slow-call duration: three
    // failures recorded.
    assert_eq!(breaker.snapshot().consecutive_failures(), 3);

    let err = service
        .clone()
        .oneshot(get(server.dropping_url()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.last_failure(), Some(FailureKind::Connection));
    assert_eq!(
        server
            .books
            .dropped
            .load(core::sync::atomic::Ordering::SeqCst),
        3
    );
}

#[tokio::test]
async fn through_tower_retry_after_ms_and_an_http_date_are_honoured() {
    let server = support::start().await;
    let notices: Arc<Mutex<Vec<TimedDelay>>> = Arc::default();
    let log = Arc::clone(&notices);
    let service =
        ServiceBuilder::new()
            .layer(
                RetryLayer::new(Retry::new(hinted()).classify(layered_failure).on_retry(
                    move |n| {
                        log.lock()
                            .unwrap()
                            .push((SystemTime::now(), n.delay, n.reason));
                    },
                ))
                .classify_responses(HttpStatus),
            )
            .layer(BreakerLayer::new(breaker()).classify_responses(HttpStatus))
            .service(reqwest_service(support::client()));

    let response = service
        .clone()
        .oneshot(get(server.url("/ms")))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.books.count("/ms"), 2);

    late_in_a_second().await;
    let response = service.oneshot(get(server.url("/dated"))).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.books.count("/dated"), 2);

    let notices = notices.lock().unwrap();
    assert_eq!(notices.len(), 2);
    assert_eq!(
        (notices[0].1, notices[0].2),
        (Duration::from_millis(250), Some(SleepReason::Hint))
    );
    let (when, delay, reason) = notices[1];
    assert_eq!(reason, Some(SleepReason::Hint));
    let date = UNIX_EPOCH + Duration::from_secs(server.books.dated.lock().unwrap().unwrap());
    let late = (when + delay)
        .duration_since(date)
        .unwrap_or(Duration::ZERO);
    assert!(
        late < Duration::from_millis(200),
        "the delay ends {late:?} after the date"
    );
    let seen = server.books.seen("/dated");
    assert!(seen[1].at + Duration::from_millis(5) >= date);
}
