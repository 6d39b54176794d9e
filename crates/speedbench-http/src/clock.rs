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
//! - each read that returns data stamps [`ConnectionClock::last_read`]. A
//!   body frame came from a read at or before the latest stamp, so the stamp
//!   bounds the frame's arrival from above, never below;
//! - the first write after a read (or the first write at all) stamps
//!   [`ConnectionClock::request_written`]: HTTP/1.1 without pipelining
//!   writes a request only after the previous response was read, so this is
//!   when the current request's first bytes reached the socket.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::Uri;
use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};

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
    request_written: Stamp,
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

    /// When the data of a body frame just received arrived: the latest read
    /// stamp, capped at `now` (the stamp cannot be later, but a clock that
    /// was never stamped falls back to `now`).
    pub fn arrival(&self, now: Instant) -> Instant {
        self.last_read().map_or(now, |r| r.min(now))
    }
}

/// A connection whose I/O stamps a [`ConnectionClock`].
#[derive(Debug)]
pub struct TimedStream<T> {
    inner: T,
    clock: ConnectionClock,
    /// Whether the next successful write starts a new request.
    read_since_write: bool,
}

impl<T: Read + Unpin> Read for TimedStream<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // Read through a buffer over the cursor's unfilled part, to learn how
        // many bytes arrived (a zero-byte read is end of stream, not data).
        // SAFETY: the inner reader only initialises bytes it reports as
        // filled, and exactly that many are then marked filled in `buf`.
        let filled = unsafe {
            let mut inner_buf = ReadBuf::uninit(buf.as_mut());
            match Pin::new(&mut self.inner).poll_read(cx, inner_buf.unfilled()) {
                Poll::Ready(Ok(())) => inner_buf.filled().len(),
                other => return other,
            }
        };
        if filled > 0 {
            self.clock.0.last_read.set(Instant::now());
            self.read_since_write = true;
        }
        // SAFETY: `filled` bytes were initialised by the inner read.
        unsafe { buf.advance(filled) };
        Poll::Ready(Ok(()))
    }
}

impl<T: Write + Unpin> Write for TimedStream<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // Stamped before the call, so a request is never timed as sent later
        // than its bytes could have left.
        let stamp = self.read_since_write.then(Instant::now);
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.stamp_write(stamp, &poll);
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let stamp = self.read_since_write.then(Instant::now);
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.stamp_write(stamp, &poll);
        poll
    }
}

impl<T> TimedStream<T> {
    fn stamp_write(&mut self, started: Option<Instant>, poll: &Poll<io::Result<usize>>) {
        if let (Some(at), Poll::Ready(Ok(n))) = (started, poll)
            && *n > 0
        {
            self.clock.0.request_written.set(at);
            self.read_since_write = false;
        }
    }
}

impl<T: Connection> Connection for TimedStream<T> {
    fn connected(&self) -> Connected {
        self.inner.connected().extra(self.clock.clone())
    }
}

/// Wraps a connector so that every connection it makes is a
/// [`TimedStream`].
#[derive(Debug, Clone)]
pub struct TimedConnector<C>(pub C);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<C> tower_service::Service<Uri> for TimedConnector<C>
where
    C: tower_service::Service<Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = TimedStream<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // Fix the origin before the first stamp can be taken.
        let _ = origin();
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let inner = connecting.await.map_err(Into::into)?;
            Ok(TimedStream {
                inner,
                clock: ConnectionClock::default(),
                read_since_write: true,
            })
        })
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
