#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Classifying HTTP responses.
#![cfg(feature = "http")]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;

use http::{HeaderMap, Response, StatusCode};
use retry_core::{FailureKind, Hint, Jitter, RetryPolicy};
use retry_tokio::http::{
    classify_response, classify_status, method, response_failure, retry_headers,
};
use retry_tokio::Retry;

#[test]
fn statuses_and_headers_are_classified_by_the_core() {
    assert_eq!(classify_status(StatusCode::OK, &HeaderMap::new()), None);
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", "7".parse().unwrap());
    let busy = classify_status(StatusCode::SERVICE_UNAVAILABLE, &headers).unwrap();
    assert!(busy.is_retryable());
    assert_eq!(busy.kind(), FailureKind::Status(503));
    assert_eq!(busy.hint(), Some(Hint::RetryAfter(Duration::from_secs(7))));
    assert!(!classify_status(StatusCode::BAD_REQUEST, &headers)
        .unwrap()
        .is_retryable());
    headers.insert("retry-after-ms", "250".parse().unwrap());
    assert_eq!(retry_headers(&headers).retry_after_ms, Some(&b"250"[..]));
    assert_eq!(method(&http::Method::POST), retry_core::Method::Post);
}

#[test]
fn an_http_date_is_read_against_the_wall_clock() {
    let later = std::time::SystemTime::now() + Duration::from_secs(120);
    let mut date = [0u8; 29];
    retry_core::format_http_date(
        later
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
        &mut date,
    );
    let response = Response::builder()
        .status(429)
        .header("retry-after", core::str::from_utf8(&date).unwrap())
        .body(())
        .unwrap();
    let Some(Hint::RetryAfter(delay)) = classify_response(&response).unwrap().hint() else {
        panic!("no hint");
    };
    assert!(delay > Duration::from_secs(100) && delay <= Duration::from_secs(120));
}

#[tokio::test(start_paused = true)]
async fn one_line_classifier_honours_retry_after() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let done = Retry::new(policy)
        .classify(response_failure)
        .measure_elapsed()
        .call(|_ctx| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    Err(Response::builder()
                        .status(503)
                        .header("retry-after", "3")
                        .body(())
                        .unwrap())
                } else {
                    Ok("ok")
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(done.attempts, 2);
    assert_eq!(done.elapsed, Some(Duration::from_secs(3)));

    let err = Retry::new(policy)
        .classify(response_failure)
        .call(|_ctx| async { Err::<(), _>(Response::builder().status(404).body(()).unwrap()) })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.permanent");
}
