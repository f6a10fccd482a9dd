#![allow(dead_code, unreachable_pub)]
pub mod fake;
pub mod ready;
