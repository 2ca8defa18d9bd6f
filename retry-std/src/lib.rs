//! The blocking adapter for `retry-core`: drives the retry machine with `std::time` and threads. (Filled by the retry-std issue.)
