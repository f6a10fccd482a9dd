//! `SOCK_SEQPACKET` Unix sockets with file descriptors passed by `SCM_RIGHTS` (unix(7)).
//!
//! One control message per datagram: message boundaries are kept, a datagram longer than the
//! receive buffer is reported ([`RecvMsg::truncated`]) instead of being split, and the file
//! descriptors travel with the message they belong to.

use crate::{cvt, last_err};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most file descriptors accepted with one message (more are closed and reported).
pub const MAX_FDS: usize = 4;

/// A received datagram.
#[derive(Debug)]
pub struct RecvMsg {
    /// Bytes received (0: the peer closed the connection).
    pub len: usize,
    /// File descriptors that came with it (owned: closed when dropped).
    pub fds: Vec<OwnedFd>,
    /// The datagram was longer than the buffer (`MSG_TRUNC`): the tail is lost.
    pub truncated: bool,
    /// More descriptors were sent than [`MAX_FDS`] (`MSG_CTRUNC`); the extra ones are closed.
    pub fds_truncated: bool,
}

/// The peer's process credentials (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

fn socket() -> std::io::Result<OwnedFd> {
    // SAFETY: no pointer arguments.
    let raw =
        cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn sockaddr(path: &Path) -> std::io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "socket path {} must be 1..{} bytes without NUL",
                path.display(),
                addr.sun_path.len()
            ),
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

/// Wait until `fd` is readable (or hung up) for at most `timeout`; `Ok(false)` on timeout (or
/// when a signal interrupted the wait).
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> std::io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: p is one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    match r {
        -1 if last_err().kind() == std::io::ErrorKind::Interrupted => Ok(false),
        -1 => Err(last_err()),
        0 => Ok(false),
        _ => Ok(true),
    }
}

/// A connected `SOCK_SEQPACKET` socket.
#[derive(Debug)]
pub struct SeqPacket {
    fd: OwnedFd,
}

impl SeqPacket {
    /// Connect to the listener at `path`.
    pub fn connect(path: &Path) -> std::io::Result<SeqPacket> {
        let fd = socket()?;
        let (addr, len) = sockaddr(path)?;
        // SAFETY: addr is a valid sockaddr_un of `len` bytes.
        cvt(unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                len,
            )
        })?;
        Ok(SeqPacket { fd })
    }

    /// A connected pair (embedded mode, tests).
    pub fn pair() -> std::io::Result<(SeqPacket, SeqPacket)> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: fds has room for the two descriptors socketpair writes.
        cvt(unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        })?;
        // SAFETY: both are fresh fds that nothing else owns.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok((SeqPacket { fd: a }, SeqPacket { fd: b }))
    }

    /// Send one datagram with `fds` attached (`MSG_NOSIGNAL`: a closed peer is an error,
    /// not a `SIGPIPE`).
    pub fn send(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
        self.send_flags(bytes, fds, libc::MSG_NOSIGNAL)
    }

    /// Like [`SeqPacket::send`] but never blocks: a full socket buffer (a peer that does not
    /// read) is `WouldBlock`.
    pub fn try_send(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
        self.send_flags(bytes, fds, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
    }

    fn send_flags(
        &self,
        bytes: &[u8],
        fds: &[BorrowedFd<'_>],
        flags: libc::c_int,
    ) -> std::io::Result<()> {
        if fds.len() > MAX_FDS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "too many file descriptors",
            ));
        }
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr().cast_mut().cast(),
            iov_len: bytes.len(),
        };
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let fd_bytes = std::mem::size_of_val(raw.as_slice()) as u32;
        // u64 storage keeps the control buffer aligned for cmsghdr.
        let mut cbuf = [0u64; 8];
        // SAFETY: `msghdr` is plain old data; zeroes are valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !raw.is_empty() {
            // SAFETY: CMSG_SPACE is a pure computation.
            let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = space;
            // SAFETY: msg_control points to `space` <= 64 writable, aligned bytes (MAX_FDS
            // descriptors need 16 + 16), so the first header and its data fit.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(fd_bytes) as usize;
                std::ptr::copy_nonoverlapping(
                    raw.as_ptr().cast::<u8>(),
                    libc::CMSG_DATA(c),
                    fd_bytes as usize,
                );
            }
        }
        // SAFETY: msg points to a valid iovec over `bytes` and a valid control buffer, all
        // alive for the call.
        let n = unsafe { libc::sendmsg(self.fd.as_raw_fd(), &msg, flags) };
        if n < 0 {
            return Err(last_err());
        }
        if n as usize != bytes.len() {
            return Err(std::io::Error::other("short datagram send"));
        }
        Ok(())
    }

    /// Receive one datagram into `buf`, with its descriptors (close-on-exec).
    pub fn recv(&self, buf: &mut [u8]) -> std::io::Result<RecvMsg> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut cbuf = [0u64; 8];
        // SAFETY: `msghdr` is plain old data; zeroes are valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf);
        // SAFETY: msg points to a valid iovec over `buf` and a valid control buffer.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(last_err());
        }
        let mut fds = Vec::new();
        // SAFETY: the kernel filled msg_control with msg_controllen bytes of well-formed
        // control messages; CMSG_FIRSTHDR/NXTHDR stay inside them, and each SCM_RIGHTS
        // payload holds (cmsg_len - CMSG_LEN(0)) / 4 descriptors that are now ours.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c);
                    let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..bytes / std::mem::size_of::<RawFd>() {
                        let fd = data
                            .add(i * std::mem::size_of::<RawFd>())
                            .cast::<RawFd>()
                            .read_unaligned();
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok(RecvMsg {
            len: n as usize,
            fds,
            truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
            fds_truncated: msg.msg_flags & libc::MSG_CTRUNC != 0,
        })
    }

    /// Wait until a datagram (or the peer's close) is ready, at most `timeout`.
    pub fn wait_readable(&self, timeout: Duration) -> std::io::Result<bool> {
        wait_readable(self.fd.as_fd(), timeout)
    }

    /// The peer process's credentials.
    pub fn peer_credentials(&self) -> std::io::Result<Credentials> {
        // SAFETY: ucred is plain old data.
        let mut c: libc::ucred = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: c and len are valid for writing a ucred.
        cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut c as *mut libc::ucred).cast(),
                &mut len,
            )
        })?;
        Ok(Credentials {
            pid: c.pid,
            uid: c.uid,
            gid: c.gid,
        })
    }

    /// Shut both directions down (wakes a thread blocked in `recv` on this socket).
    pub fn shutdown(&self) {
        // SAFETY: no pointer arguments; errors (already closed) are irrelevant.
        unsafe {
            libc::shutdown(self.fd.as_raw_fd(), libc::SHUT_RDWR);
        }
    }

    /// Another handle on the same socket.
    pub fn try_clone(&self) -> std::io::Result<SeqPacket> {
        Ok(SeqPacket {
            fd: self.fd.try_clone()?,
        })
    }
}

impl AsFd for SeqPacket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A listening `SOCK_SEQPACKET` socket at a path; the path is removed on drop.
#[derive(Debug)]
pub struct SeqPacketListener {
    fd: OwnedFd,
    path: PathBuf,
}

impl SeqPacketListener {
    /// Listen at `path`. A stale socket file nobody listens on is replaced; a live one is
    /// `AddrInUse`.
    pub fn bind(path: &Path) -> std::io::Result<SeqPacketListener> {
        if path.exists() {
            if SeqPacket::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("{} is in use by another daemon", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let fd = socket()?;
        let (addr, len) = sockaddr(path)?;
        // SAFETY: addr is a valid sockaddr_un of `len` bytes.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                len,
            )
        })?;
        // SAFETY: no pointer arguments.
        cvt(unsafe { libc::listen(fd.as_raw_fd(), 64) })?;
        Ok(SeqPacketListener {
            fd,
            path: path.to_owned(),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accept a connection (blocks; use [`SeqPacketListener::wait_readable`] to bound it).
    pub fn accept(&self) -> std::io::Result<SeqPacket> {
        // SAFETY: null address pointers are allowed (we do not want the peer address).
        let raw = cvt(unsafe {
            libc::accept4(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        })?;
        // SAFETY: a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(SeqPacket { fd })
    }

    /// Wait until a connection is pending, at most `timeout`.
    pub fn wait_readable(&self, timeout: Duration) -> std::io::Result<bool> {
        wait_readable(self.fd.as_fd(), timeout)
    }
}

impl Drop for SeqPacketListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
