//! Delays the other side asks for: parsing the header values that carry them
//! (`Retry-After` in seconds or as an HTTP date, `retry-after-ms`, gRPC's
//! `grpc-retry-pushback-ms`), straight from raw bytes.

mod retry_after;

pub use retry_after::{
    format_http_date, parse_grpc_pushback, parse_http_date, parse_retry_after,
    parse_retry_after_ms, retry_after_from_headers, Pushback,
};
