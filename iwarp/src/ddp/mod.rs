//! ddp (placeholder)
