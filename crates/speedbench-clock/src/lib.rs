//! When a connection's bytes left and arrived, for timing that does not
//! include the hops between hyper's connection task and the request's task.
//!
//! hyper writes and reads a socket in its connection task and passes the
//! request and the body frames through channels; on a busy runtime each
//! hand-over costs a task wake-up (tens of microseconds on a loaded 2-core
//! host) that has nothing to do with the server. [`TimedConnector`] wraps
//! every connection so that its I/O stamps the connection's
//! [`ConnectionClock`], which hyper puts into every response's extensions:
//!
//! - each read that returns data stamps [`ConnectionClock::last_read`] with
//!   the moment its last packet reached the socket: on Linux the kernel's
//!   receive timestamp (`SO_TIMESTAMPNS`), taken before this process is even
//!   scheduled, so a client busy with 1,000 streams still times them right;
//!   elsewhere the moment the read returned. A body frame came from a read at
//!   or before the latest stamp, so the stamp bounds the frame's arrival from
//!   above, never below;
//! - the first write after a read (or the first write at all) stamps
//!   [`ConnectionClock::request_written`]: HTTP/1.1 without pipelining
//!   writes a request only after the previous response was read, so this is
//!   when the current request's first bytes reached the socket;
//! - a write that a [`ConnectionClock::stamp_next_write`] asked for stamps
//!   the [`WriteStamp`] it returned: a server learns when the bytes of a
//!   frame it handed to hyper actually left, rather than when hyper took
//!   them (hyper may buffer several frames, or be descheduled, in between).
//!
//! A server wraps each accepted connection in [`TimedStream::new`] and
//! serves hyper on it; a client builds its connections with
//! [`TimedConnector`] (the `client` feature, which `speedbench-http` turns
//! on), so the server side builds no hyper client and no TLS.
//!
//! ```
//! use speedbench_clock::ConnectionClock;
//!
//! // A clock not attached to a connection: nothing read, nothing written,
//! // and a write stamp asked for stays empty until a write fills it.
//! let clock = ConnectionClock::default();
//! assert_eq!(clock.request_written(), None);
//! assert!(!clock.kernel_receive_stamps());
//! let stamp = clock.stamp_next_write();
//! assert_eq!(stamp.get(), None);
//! ```

#![doc(test(attr(deny(warnings))))]
// Without `client` the docs still name the connector it adds.
#![cfg_attr(not(feature = "client"), allow(rustdoc::broken_intra_doc_links))]

#[cfg(feature = "client")]
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Instant;

#[cfg(feature = "client")]
use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
#[cfg(feature = "client")]
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use tokio::io::{AsyncWrite, Interest};
use tokio::net::TcpStream;

/// The process-wide origin of the clock's nanosecond stamps.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// A moment, stored as nanoseconds after `origin()` plus one (0: never).
#[derive(Debug, Default)]
struct Stamp(AtomicU64);

impl Stamp {
    fn get(&self) -> Option<Instant> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            n => Some(origin() + std::time::Duration::from_nanos(n - 1)),
        }
    }

    fn set(&self, at: Instant) {
        let ns = u64::try_from(at.saturating_duration_since(origin()).as_nanos())
            .unwrap_or(u64::MAX - 1);
        self.0.store(ns + 1, Ordering::Release);
    }
}

#[derive(Debug, Default)]
struct Stamps {
    last_read: Stamp,
    first_read: Stamp,
    request_written: Stamp,
    kernel: AtomicBool,
    /// Whether `next_write` holds a stamp to fill (checked on every write
    /// without taking the lock).
    next_write_pending: AtomicBool,
    next_write: Mutex<Option<WriteStamp>>,
}

/// When one write asked for by [`ConnectionClock::stamp_next_write`]
/// started: empty until that write has happened.
#[derive(Debug, Clone, Default)]
pub struct WriteStamp(Arc<Stamp>);

impl WriteStamp {
    /// When the write started (just before its bytes were handed to the
    /// kernel), once it has happened.
    pub fn get(&self) -> Option<Instant> {
        self.0.get()
    }
}

/// When a connection last read data and when its current request's first
/// bytes were written.
///
/// Found in the extensions of every response a [`TimedConnector`]-backed
/// client returns: `response.extensions().get::<ConnectionClock>()`.
#[derive(Debug, Clone, Default)]
pub struct ConnectionClock(Arc<Stamps>);

impl ConnectionClock {
    /// The latest read that returned data, if any.
    pub fn last_read(&self) -> Option<Instant> {
        self.0.last_read.get()
    }

    /// When the current request's first bytes were written to the socket
    /// (the first write since the connection last read data), if any.
    pub fn request_written(&self) -> Option<Instant> {
        self.0.request_written.get()
    }

    /// The first read that returned data since the connection last wrote:
    /// on a server, when the current request's first bytes arrived; on a
    /// client, when the current response's first bytes did.
    pub fn first_read(&self) -> Option<Instant> {
        self.0.first_read.get()
    }

    /// Whether reads carry the kernel's receive timestamps (Linux), rather
    /// than the moment the read returned.
    pub fn kernel_receive_stamps(&self) -> bool {
        self.0.kernel.load(Ordering::Relaxed)
    }

    /// Asks the connection to stamp the start of its next successful write:
    /// a server calls this as it hands hyper a frame, and reads the stamp
    /// once the frame has gone. A later call replaces an unfilled request;
    /// a write already under way on another thread may fill it, so call it
    /// from the task that drives the connection (as a body's `poll_frame`).
    pub fn stamp_next_write(&self) -> WriteStamp {
        let stamp = WriteStamp::default();
        *self.0.next_write.lock().unwrap_or_else(|e| e.into_inner()) = Some(stamp.clone());
        self.0.next_write_pending.store(true, Ordering::Release);
        stamp
    }

    /// When the data of a body frame just received arrived: the latest read
    /// stamp, capped at `now` (the stamp cannot be later, but a clock that
    /// was never stamped falls back to `now`).
    pub fn arrival(&self, now: Instant) -> Instant {
        self.last_read().map_or(now, |r| r.min(now))
    }
}

/// A TCP connection whose I/O stamps a [`ConnectionClock`]. TLS, when used,
/// runs on top of it, so the stamps are those of the encrypted bytes.
#[derive(Debug)]
pub struct TimedStream {
    inner: TcpStream,
    clock: ConnectionClock,
    /// Whether the next successful write starts a new request.
    read_since_write: bool,
    /// Whether the next read returning data starts a new request (server)
    /// or response (client).
    wrote_since_read: bool,
    /// Whether the kernel stamps this socket's received packets.
    kernel_stamps: bool,
    /// A client's wait for a reset behind an end of stream (see
    /// [`TimedStream::awaiting_resets`]); `None` on a server.
    reset_wait: Option<ResetWait>,
}

/// How long an end of stream before any byte of an answer is held back, in
/// case the reset that tells an unread request from a read one follows it.
#[derive(Debug)]
struct ResetWait {
    /// How long to wait after the end of stream is seen.
    settle: std::time::Duration,
    /// When the wait under way ends, and its next look at the socket: a
    /// reset arriving on a socket already readable (at its end of stream)
    /// wakes nobody, so the wait looks every millisecond.
    timer: Option<(Instant, Pin<Box<tokio::time::Sleep>>)>,
}

/// How often a wait for a reset looks at the socket.
const RESET_LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

impl TimedStream {
    /// Wraps a TCP connection (a client's, or one a server accepted).
    pub fn new(inner: TcpStream) -> TimedStream {
        let kernel_stamps = kernel_rx::enable(&inner);
        let clock = ConnectionClock::default();
        clock.0.kernel.store(kernel_stamps, Ordering::Relaxed);
        TimedStream {
            inner,
            clock,
            read_since_write: true,
            wrote_since_read: true,
            kernel_stamps,
            reset_wait: None,
        }
    }

    /// A client's connection: an end of stream that comes after a request
    /// was written and before any byte of its answer is reported only once
    /// `settle` has passed without a reset (then the reset is reported
    /// instead).
    ///
    /// Why: a server that closes a kept-alive connection just as the
    /// client writes the next request sends its end of stream first; the
    /// request then reaches a closed socket, whose kernel answers with a
    /// reset one round trip after the write. A read may see the end of
    /// stream before that reset arrives, and an end of stream alone means
    /// the server may have read the request (it must not be sent again),
    /// while the reset proves it never did (it may be). Give `settle` a
    /// few round trips (twice the connect time, at least a millisecond);
    /// only this rare path waits.
    pub fn awaiting_resets(mut self, settle: std::time::Duration) -> TimedStream {
        self.reset_wait = Some(ResetWait {
            settle,
            timer: None,
        });
        self
    }

    /// At an end of stream: `Ready(Some(reset))` when the socket holds a
    /// reset, `Pending` while a client still waits for one, `Ready(None)`
    /// when the end of stream stands.
    fn poll_reset_behind_eof(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Error>> {
        let unanswered = self.wrote_since_read;
        let Some(wait) = self.reset_wait.as_mut().filter(|_| unanswered) else {
            return Poll::Ready(None);
        };
        if let Ok(Some(e)) = self.inner.take_error() {
            // The connection is over: no later read waits again.
            self.reset_wait = None;
            return Poll::Ready(Some(e));
        }
        let settle = wait.settle;
        let (until, look) = wait.timer.get_or_insert_with(|| {
            let until = Instant::now() + settle;
            (
                until,
                Box::pin(tokio::time::sleep(RESET_LOOK_EVERY.min(settle))),
            )
        });
        loop {
            ready!(look.as_mut().poll(cx));
            let now = Instant::now();
            if now >= *until {
                break;
            }
            if let Ok(Some(e)) = self.inner.take_error() {
                self.reset_wait = None;
                return Poll::Ready(Some(e));
            }
            let next = (now + RESET_LOOK_EVERY).min(*until);
            look.as_mut().reset(tokio::time::Instant::from_std(next));
        }
        self.reset_wait = None;
        Poll::Ready(self.inner.take_error().ok().flatten())
    }

    /// The socket's pending error (`SO_ERROR`), taken: after a read saw
    /// the end of stream, a reset that came in since (the peer's kernel
    /// refusing bytes written to a socket it had closed) shows here.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.take_error()
    }

    /// The connection's clock.
    pub fn clock(&self) -> &ConnectionClock {
        &self.clock
    }

    /// Reads into `buf`, returning the byte count and, where the kernel
    /// stamped the packets, when the last of them arrived.
    fn read_stamped(
        &self,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> io::Result<(usize, Option<Instant>)> {
        if self.kernel_stamps {
            kernel_rx::recv(&self.inner, buf)
        } else {
            // SAFETY: `try_read` only writes initialised bytes into the
            // slice and reports how many; the rest stays untouched.
            let init = unsafe { &mut *(buf as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) };
            self.inner.try_read(init).map(|n| (n, None))
        }
    }
}

impl Read for TimedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(self.inner.poll_read_ready(cx))?;
            // SAFETY: the reader initialises only the bytes it reports, and
            // exactly that many are then marked filled in `buf`.
            let unfilled = unsafe { buf.as_mut() };
            match self
                .inner
                .try_io(Interest::READABLE, || self.read_stamped(unfilled))
            {
                Ok((n, kernel_at)) => {
                    if n > 0 {
                        // The kernel's stamp is when the packet arrived; the
                        // fallback is now, before any parsing.
                        let now = Instant::now();
                        let mut at = kernel_at.map_or(now, |k| k.min(now));
                        if self.wrote_since_read {
                            self.clock.0.first_read.set(at);
                            self.wrote_since_read = false;
                        } else if let Some(last) = self.clock.0.last_read.get() {
                            // Each read converts the kernel's wall-clock
                            // stamp anew: one packet read twice can come
                            // out nanoseconds earlier the second time.
                            at = at.max(last);
                        }
                        self.clock.0.last_read.set(at);
                        self.read_since_write = true;
                    } else if let Some(reset) = ready!(self.poll_reset_behind_eof(cx)) {
                        return Poll::Ready(Err(reset));
                    }
                    // SAFETY: `n` bytes were initialised by the read.
                    unsafe { buf.advance(n) };
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl Write for TimedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // Stamped before the call, so a request is never timed as sent later
        // than its bytes could have left.
        let (stamp, marked) = self.write_start();
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.stamp_write(stamp, marked, &poll);
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let (stamp, marked) = self.write_start();
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.stamp_write(stamp, marked, &poll);
        poll
    }
}

impl TimedStream {
    /// The moment a write starts, where a stamp wants it, and whether a
    /// [`WriteStamp`] waits for this write (one asked for later waits for
    /// the next).
    fn write_start(&self) -> (Option<Instant>, bool) {
        let marked = self.clock.0.next_write_pending.load(Ordering::Acquire);
        ((self.read_since_write || marked).then(Instant::now), marked)
    }

    fn stamp_write(
        &mut self,
        started: Option<Instant>,
        marked: bool,
        poll: &Poll<io::Result<usize>>,
    ) {
        let Poll::Ready(Ok(n)) = poll else { return };
        if *n == 0 {
            return;
        }
        self.wrote_since_read = true;
        let Some(at) = started else { return };
        if self.read_since_write {
            self.clock.0.request_written.set(at);
            self.read_since_write = false;
        }
        if marked {
            let clock = &self.clock.0;
            let mut next = clock.next_write.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(stamp) = next.take() {
                stamp.0.set(at);
            }
            clock.next_write_pending.store(false, Ordering::Release);
        }
    }
}

#[cfg(feature = "client")]
impl Connection for TimedStream {
    fn connected(&self) -> Connected {
        Connected::new().extra(self.clock.clone())
    }
}

/// Wraps hyper-util's TCP connector so that every connection it makes is a
/// [`TimedStream`] (TLS is layered above it).
#[cfg(feature = "client")]
#[derive(Debug, Clone)]
pub struct TimedConnector(pub HttpConnector);

#[cfg(feature = "client")]
type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[cfg(feature = "client")]
impl tower_service::Service<Uri> for TimedConnector {
    type Response = TimedStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<TimedStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // Fix the origin before the first stamp can be taken.
        let _ = origin();
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(TimedStream::new(io.into_inner()))
        })
    }
}

/// Kernel receive timestamps (`SO_TIMESTAMPNS`): the moment each packet
/// reached the socket, before this process was even scheduled to read it.
#[cfg(target_os = "linux")]
mod kernel_rx {
    use std::io;
    use std::mem::{MaybeUninit, size_of};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use tokio::net::TcpStream;

    /// Asks the kernel to stamp received packets; false if it refuses.
    pub(super) fn enable(sock: &TcpStream) -> bool {
        let on: libc::c_int = 1;
        // SAFETY: a valid socket, option and a c_int-sized value.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        rc == 0
    }

    /// One `recvmsg`: the byte count and the arrival of the last packet
    /// read, converted from the kernel's wall clock to an [`Instant`].
    pub(super) fn recv(
        sock: &TcpStream,
        buf: &mut [MaybeUninit<u8>],
    ) -> io::Result<(usize, Option<Instant>)> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // Room for one timespec control message, aligned for cmsghdr.
        let mut control = [0u64; 8];
        // SAFETY: zero is a valid msghdr; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: a valid socket and a msghdr whose buffers are live.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let (wall_now, now) = (SystemTime::now(), Instant::now());
        let mut stamp = None;
        // SAFETY: the cmsg macros walk the control buffer the kernel filled,
        // bounded by `msg_controllen`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    stamp = Some(
                        UNIX_EPOCH
                            + Duration::new(
                                ts.tv_sec.max(0) as u64,
                                ts.tv_nsec.clamp(0, 999_999_999) as u32,
                            ),
                    );
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        // The stamp is wall-clock time; how long ago it was is the same on
        // the monotonic clock (unless the wall clock stepped in between, in
        // which case a stamp "in the future" is dropped).
        let at = stamp
            .and_then(|s| wall_now.duration_since(s).ok())
            .map(|ago| now - ago);
        Ok((n as usize, at))
    }
}

/// Elsewhere the kernel does not stamp; reads are stamped when they return.
#[cfg(not(target_os = "linux"))]
mod kernel_rx {
    use std::io;
    use std::mem::MaybeUninit;
    use std::time::Instant;

    use tokio::net::TcpStream;

    pub(super) fn enable(_: &TcpStream) -> bool {
        false
    }

    pub(super) fn recv(
        _: &TcpStream,
        _: &mut [MaybeUninit<u8>],
    ) -> io::Result<(usize, Option<Instant>)> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_unstamped_clock_falls_back_to_now() {
        let clock = ConnectionClock::default();
        let now = Instant::now();
        assert_eq!(clock.last_read(), None);
        assert_eq!(clock.arrival(now), now);
    }

    #[test]
    fn a_stamp_is_never_later_than_now() {
        let clock = ConnectionClock::default();
        let before = Instant::now();
        clock.0.last_read.set(Instant::now());
        let stamped = clock.last_read().unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let now = Instant::now();
        // Nanosecond storage may round the stamp down by less than 1 ns.
        assert!(stamped + Duration::from_nanos(1) >= before);
        assert!(clock.arrival(now) == stamped);
        assert!(now - stamped >= Duration::from_millis(2));
        // A stamp "after" an earlier `now` is capped at it.
        assert_eq!(clock.arrival(before), stamped.min(before));
    }
}
