//! `eventfd(2)`: the completion channel of a CQ (the dataplane writes, the client reads).

use crate::cvt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// An eventfd counter.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new counter at 0 (close-on-exec; non-blocking if asked).
    pub fn new(nonblocking: bool) -> std::io::Result<EventFd> {
        let mut flags = libc::EFD_CLOEXEC;
        if nonblocking {
            flags |= libc::EFD_NONBLOCK;
        }
        // SAFETY: eventfd has no pointer arguments.
        let raw = cvt(unsafe { libc::eventfd(0, flags) })?;
        // SAFETY: a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(EventFd { fd })
    }

    /// Wrap a received fd, checking through `/proc/self/fd` that it is an eventfd (an
    /// `anon_inode:[eventfd]`), so a client cannot make the dataplane write into a pipe or a
    /// file.
    pub fn from_fd(fd: OwnedFd) -> std::io::Result<EventFd> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !link.contains("eventfd") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("fd is not an eventfd ({link})"),
            ));
        }
        Ok(EventFd { fd })
    }

    /// Add `n` to the counter (wakes a reader). A full counter (`EAGAIN`) is not an error:
    /// the reader has a wake-up pending anyway.
    pub fn signal(&self, n: u64) -> std::io::Result<()> {
        let b = n.to_ne_bytes();
        // SAFETY: b is 8 readable bytes, as eventfd requires.
        let r = unsafe { libc::write(self.fd.as_raw_fd(), b.as_ptr().cast(), 8) };
        if r == 8 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            Ok(())
        } else {
            Err(e)
        }
    }

    /// Read and reset the counter (blocks unless non-blocking; `WouldBlock` if zero then).
    pub fn read(&self) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        // SAFETY: b is 8 writable bytes.
        let r = unsafe { libc::read(self.fd.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
        if r == 8 {
            Ok(u64::from_ne_bytes(b))
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Wait until the counter is non-zero, at most `timeout`; `Ok(false)` on timeout.
    pub fn wait_readable(&self, timeout: std::time::Duration) -> std::io::Result<bool> {
        crate::wait_readable(self.fd.as_fd(), timeout)
    }

    /// Duplicate (e.g. to pass one end to another process while keeping this one).
    pub fn try_clone(&self) -> std::io::Result<EventFd> {
        Ok(EventFd {
            fd: self.fd.try_clone()?,
        })
    }
}

impl From<EventFd> for OwnedFd {
    fn from(e: EventFd) -> OwnedFd {
        e.fd
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
