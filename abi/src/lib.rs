//! Shared types between `iwarpd` and its clients. Ring layouts arrive with the verbs issue.
#![deny(unsafe_code)]

/// Version of the client/daemon ABI; a client with another version is refused at attach.
pub const ABI_VERSION: u32 = 1;
