//! The async adapter for `retry-core`: drives the retry machine with tokio time. (Filled by the retry-tokio issue.)
