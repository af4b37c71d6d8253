//! The two-node write test's control connection: a TCP stream that carries what each side's
//! queue pairs need (as perftest's out-of-band exchange does), in frames with a version byte and
//! a checked length, authenticated by a token both sides hold and never send.
//!
//! A frame is `GDRD`, the protocol version (one byte), its kind (one byte), the payload's length
//! (four bytes, big-endian, at most [`MAX_PAYLOAD`]), the payload, and, once the handshake is
//! done, a 32-byte HMAC-SHA256 tag. Every read and write has a deadline: a peer that is slow,
//! sends half a frame or goes away is an error that names what was awaited, never a hang.
//!
//! The handshake is a challenge-response over fresh nonces from both sides:
//! 1. connector -> listener: `hello`, its nonce Nc (32 random bytes);
//! 2. listener -> connector: `challenge`, its nonce Nl;
//! 3. connector -> listener: `proof`, HMAC(token, "connector" | Nc | Nl);
//! 4. listener -> connector: `accepted`, HMAC(token, "listener" | Nc | Nl), or `refused`.
//!
//! The connector proves itself first, so that a stranger who opens the listener's port learns
//! nothing computed from the token. A recorded session cannot be replayed: the other side's
//! nonce is new each time. After it, every message is tagged with a key derived from the token
//! and both nonces, and numbered per direction, so that nothing can be injected, replayed or
//! reordered within a session either. The token itself never crosses the wire.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Bumped when a frame or a message changes; both sides must speak the same.
pub const VERSION: u8 = 1;
const MAGIC: &[u8; 4] = b"GDRD";
/// The largest payload either side accepts: a hello with hundreds of rails is a few tens of KiB.
pub const MAX_PAYLOAD: usize = 256 << 10;
const HEADER: usize = 10;
const NONCE: usize = 32;
const TAG: usize = 32;
/// The shortest token accepted: 16 bytes cannot be guessed from a recorded handshake.
pub const MIN_TOKEN: usize = 16;

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    Hello = 1,
    Challenge = 2,
    Proof = 3,
    Accepted = 4,
    Refused = 5,
    Message = 6,
}

impl Kind {
    fn from(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::Challenge,
            3 => Kind::Proof,
            4 => Kind::Accepted,
            5 => Kind::Refused,
            6 => Kind::Message,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Hello => "hello",
            Kind::Challenge => "challenge",
            Kind::Proof => "proof",
            Kind::Accepted => "accepted",
            Kind::Refused => "refused",
            Kind::Message => "message",
        }
    }
}

/// What went wrong on the control connection. `what` says what was being awaited or sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The deadline passed: a slow or stuck peer.
    Timeout {
        what: String,
        waited: Duration,
    },
    /// The peer closed the connection (`partial`: in the middle of a frame).
    Closed {
        what: String,
        partial: bool,
    },
    Io {
        what: String,
        error: String,
    },
    /// The bytes are not a gdrdoctor frame at all (something else listens on the port).
    NotGdrdoctor {
        what: String,
    },
    /// The peer speaks another version of this protocol.
    Version {
        theirs: u8,
    },
    /// A frame longer than [`MAX_PAYLOAD`]: refused before its body is read.
    TooLarge {
        what: String,
        len: usize,
    },
    /// A frame of a kind not expected here, or a payload that does not parse.
    Malformed {
        what: String,
        detail: String,
    },
    /// The peer did not prove the token.
    Auth {
        detail: String,
    },
    /// The peer refused our proof of the token.
    Refused {
        reason: String,
    },
    /// A message whose tag does not match: altered, replayed or injected.
    Tampered {
        what: String,
    },
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Timeout { what, waited } => write!(
                f,
                "no {what} from the peer within {:.1} s (a slow or stuck peer, or a network that drops the control connection)",
                waited.as_secs_f64()
            ),
            WireError::Closed {
                what,
                partial: true,
            } => write!(
                f,
                "the peer closed the connection in the middle of a frame ({what}): truncated"
            ),
            WireError::Closed {
                what,
                partial: false,
            } => {
                write!(f, "the peer closed the connection while {what} was awaited")
            }
            WireError::Io { what, error } => write!(f, "{what}: {error}"),
            WireError::NotGdrdoctor { what } => write!(
                f,
                "the peer does not speak gdrdoctor's protocol ({what} did not start with GDRD): is something else listening on that port?"
            ),
            WireError::Version { theirs } => write!(
                f,
                "the peer speaks version {theirs} of gdrdoctor's two-node protocol, this one version {VERSION}: run the same gdrdoctor release on both nodes"
            ),
            WireError::TooLarge { what, len } => write!(
                f,
                "the peer announced a {what} of {len} bytes, more than the {MAX_PAYLOAD} allowed: refused unread"
            ),
            WireError::Malformed { what, detail } => write!(f, "malformed {what}: {detail}"),
            WireError::Auth { detail } => write!(f, "the peer did not prove the token: {detail}"),
            WireError::Refused { reason } => write!(f, "the peer refused this side: {reason}"),
            WireError::Tampered { what } => write!(
                f,
                "a {what} whose authentication tag does not match: altered, replayed or injected on the way"
            ),
        }
    }
}

impl WireError {
    /// A stable word for the kind of failure, for reports and the check's codes.
    pub fn class(&self) -> &'static str {
        match self {
            WireError::Timeout { .. } | WireError::Closed { .. } | WireError::Io { .. } => "lost",
            WireError::Auth { .. } | WireError::Refused { .. } => "auth",
            WireError::NotGdrdoctor { .. }
            | WireError::Version { .. }
            | WireError::TooLarge { .. }
            | WireError::Malformed { .. }
            | WireError::Tampered { .. } => "protocol",
        }
    }
}

fn io_error(what: &str, e: &std::io::Error) -> WireError {
    match e.kind() {
        std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::BrokenPipe
        | std::io::ErrorKind::UnexpectedEof => WireError::Closed {
            what: what.to_owned(),
            partial: false,
        },
        _ => WireError::Io {
            what: what.to_owned(),
            error: e.to_string(),
        },
    }
}

/// Reads exactly `buf.len()` bytes before `until`. `started`: bytes of this frame were read
/// already (an end of stream is then a truncated frame).
fn read_by(
    s: &mut TcpStream,
    buf: &mut [u8],
    until: Instant,
    what: &str,
    waited_from: Instant,
    started: bool,
) -> Result<(), WireError> {
    let len = buf.len();
    let timeout = || what.to_owned();
    let closed = |off: usize| started || off > 0;
    timed(
        len,
        until,
        waited_from,
        what,
        timeout,
        closed,
        |off, left| {
            s.set_read_timeout(Some(left))?;
            s.read(&mut buf[off..])
        },
    )
}

fn write_by(s: &mut TcpStream, data: &[u8], until: Instant, what: &str) -> Result<(), WireError> {
    let timeout = || format!("room to send the {what} (the peer does not read)");
    timed(
        data.len(),
        until,
        Instant::now(),
        what,
        timeout,
        |_| false,
        |off, left| {
            s.set_write_timeout(Some(left))?;
            s.write(&data[off..])
        },
    )
}

/// Moves `len` bytes by `step(offset, time left)` before `until`, going on after a timeout or
/// an interrupted call while time is left. `timeout` names what was waited for when time runs
/// out; `partial(offset)` says whether an end of stream cut a frame.
fn timed(
    len: usize,
    until: Instant,
    waited_from: Instant,
    what: &str,
    timeout: impl Fn() -> String,
    partial: impl Fn(usize) -> bool,
    mut step: impl FnMut(usize, Duration) -> std::io::Result<usize>,
) -> Result<(), WireError> {
    let mut off = 0;
    while off < len {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WireError::Timeout {
                what: timeout(),
                waited: waited_from.elapsed(),
            });
        }
        // A zero timeout means "block forever" to the socket: at least a millisecond.
        match step(off, left.max(Duration::from_millis(1))) {
            Ok(0) => {
                return Err(WireError::Closed {
                    what: what.to_owned(),
                    partial: partial(off),
                });
            }
            Ok(n) => off += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(io_error(what, &e)),
        }
    }
    Ok(())
}

fn header(kind: Kind, len: usize) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(MAGIC);
    h[4] = VERSION;
    h[5] = kind as u8;
    h[6..].copy_from_slice(&(len as u32).to_be_bytes());
    h
}

/// Reads one frame's header and payload (not its tag). Checks the magic, the version and the
/// length before reading the body.
fn read_frame(
    s: &mut TcpStream,
    until: Instant,
    what: &str,
) -> Result<([u8; HEADER], Kind, Vec<u8>), WireError> {
    let t0 = Instant::now();
    let mut h = [0u8; HEADER];
    read_by(s, &mut h, until, what, t0, false)?;
    if &h[..4] != MAGIC {
        return Err(WireError::NotGdrdoctor {
            what: what.to_owned(),
        });
    }
    if h[4] != VERSION {
        return Err(WireError::Version { theirs: h[4] });
    }
    let Some(kind) = Kind::from(h[5]) else {
        return Err(WireError::Malformed {
            what: what.to_owned(),
            detail: format!("unknown frame kind {}", h[5]),
        });
    };
    let len = u32::from_be_bytes([h[6], h[7], h[8], h[9]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(WireError::TooLarge {
            what: what.to_owned(),
            len,
        });
    }
    let mut body = vec![0u8; len];
    read_by(s, &mut body, until, what, t0, true)?;
    Ok((h, kind, body))
}

fn expect(kind: Kind, want: Kind, body: &[u8], what: &str) -> Result<(), WireError> {
    if kind == Kind::Refused && want != Kind::Refused {
        return Err(WireError::Refused {
            reason: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
        });
    }
    if kind != want {
        return Err(WireError::Malformed {
            what: what.to_owned(),
            detail: format!("a {} frame where a {} was due", kind.name(), want.name()),
        });
    }
    Ok(())
}

fn mac(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // HMAC takes keys of any length, so the error branch is never taken; were it taken, the
    // all-zero key would make every proof fail to verify, never pass.
    let mut m = <HmacSha256 as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| <HmacSha256 as Mac>::new(&Default::default()));
    for p in parts {
        m.update(p);
    }
    m
}

fn tag(key: &[u8], parts: &[&[u8]]) -> [u8; TAG] {
    mac(key, parts).finalize().into_bytes().into()
}

/// Compares in constant time (through the hmac crate).
fn verify(key: &[u8], parts: &[&[u8]], got: &[u8]) -> bool {
    mac(key, parts).verify_slice(got).is_ok()
}

/// 32 bytes from the kernel's random source.
pub fn nonce() -> Result<[u8; NONCE], WireError> {
    let mut n = [0u8; NONCE];
    crate::sys::random::fill(&mut n).map_err(|e| WireError::Io {
        what: "getrandom".into(),
        error: e.to_string(),
    })?;
    Ok(n)
}

const LABEL_CONNECTOR: &[u8] = b"gdrdoctor-v1 connector proof";
const LABEL_LISTENER: &[u8] = b"gdrdoctor-v1 listener proof";
const LABEL_SESSION: &[u8] = b"gdrdoctor-v1 session key";
const TO_LISTENER: &[u8] = b"gdrdoctor-v1 connector->listener";
const TO_CONNECTOR: &[u8] = b"gdrdoctor-v1 listener->connector";

/// An authenticated control connection.
pub struct Channel {
    stream: TcpStream,
    key: [u8; 32],
    sent: u64,
    received: u64,
    send_label: &'static [u8],
    recv_label: &'static [u8],
}

impl Channel {
    /// Sends one message (JSON), tagged and numbered, before `until`.
    pub fn send<T: serde::Serialize>(&mut self, msg: &T, until: Instant) -> Result<(), WireError> {
        let body = serde_json::to_vec(msg).map_err(|e| WireError::Malformed {
            what: "message".into(),
            detail: e.to_string(),
        })?;
        if body.len() > MAX_PAYLOAD {
            return Err(WireError::TooLarge {
                what: "message of ours".into(),
                len: body.len(),
            });
        }
        let h = header(Kind::Message, body.len());
        let t = tag(
            &self.key,
            &[self.send_label, &self.sent.to_be_bytes(), &h, &body],
        );
        let mut frame = Vec::with_capacity(HEADER + body.len() + TAG);
        frame.extend_from_slice(&h);
        frame.extend_from_slice(&body);
        frame.extend_from_slice(&t);
        write_by(&mut self.stream, &frame, until, "message")?;
        self.sent += 1;
        Ok(())
    }

    /// Receives the next message before `until`; its tag must match and it must parse.
    pub fn recv<T: serde::de::DeserializeOwned>(
        &mut self,
        until: Instant,
        what: &str,
    ) -> Result<T, WireError> {
        let t0 = Instant::now();
        let (h, kind, body) = read_frame(&mut self.stream, until, what)?;
        expect(kind, Kind::Message, &body, what)?;
        let mut t = [0u8; TAG];
        read_by(&mut self.stream, &mut t, until, what, t0, true)?;
        if !verify(
            &self.key,
            &[self.recv_label, &self.received.to_be_bytes(), &h, &body],
            &t,
        ) {
            return Err(WireError::Tampered {
                what: what.to_owned(),
            });
        }
        self.received += 1;
        serde_json::from_slice(&body).map_err(|e| WireError::Malformed {
            what: what.to_owned(),
            detail: e.to_string(),
        })
    }

    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.stream.peer_addr().ok()
    }
}

fn send_raw(s: &mut TcpStream, kind: Kind, body: &[u8], until: Instant) -> Result<(), WireError> {
    let mut frame = header(kind, body.len()).to_vec();
    frame.extend_from_slice(body);
    write_by(s, &frame, until, kind.name())
}

fn recv_raw(
    s: &mut TcpStream,
    want: Kind,
    until: Instant,
    len: usize,
) -> Result<Vec<u8>, WireError> {
    let what = want.name();
    let (_, kind, body) = read_frame(s, until, what)?;
    expect(kind, want, &body, what)?;
    if body.len() != len {
        return Err(WireError::Malformed {
            what: what.to_owned(),
            detail: format!("{} bytes where {len} were due", body.len()),
        });
    }
    Ok(body)
}

fn session_key(token: &[u8], nc: &[u8], nl: &[u8]) -> [u8; 32] {
    tag(token, &[LABEL_SESSION, nc, nl])
}

/// The connector's side of the handshake, on a connected stream.
pub fn connect(mut s: TcpStream, token: &[u8], until: Instant) -> Result<Channel, WireError> {
    let _ = s.set_nodelay(true);
    let nc = nonce()?;
    send_raw(&mut s, Kind::Hello, &nc, until)?;
    let nl = recv_raw(&mut s, Kind::Challenge, until, NONCE)?;
    let proof = tag(token, &[LABEL_CONNECTOR, &nc, &nl]);
    send_raw(&mut s, Kind::Proof, &proof, until)?;
    let theirs = recv_raw(&mut s, Kind::Accepted, until, TAG)?;
    if !verify(token, &[LABEL_LISTENER, &nc, &nl], &theirs) {
        return Err(WireError::Auth {
            detail: "the listener's answer does not match this token: it holds another token, or is not the gdrdoctor meant".into(),
        });
    }
    Ok(Channel {
        stream: s,
        key: session_key(token, &nc, &nl),
        sent: 0,
        received: 0,
        send_label: TO_LISTENER,
        recv_label: TO_CONNECTOR,
    })
}

/// The listener's side of the handshake, on an accepted stream. A wrong proof is answered
/// with `refused` (so that the connector can say why) and nothing else.
pub fn accept(mut s: TcpStream, token: &[u8], until: Instant) -> Result<Channel, WireError> {
    let _ = s.set_nodelay(true);
    let nc = recv_raw(&mut s, Kind::Hello, until, NONCE)?;
    let nl = nonce()?;
    send_raw(&mut s, Kind::Challenge, &nl, until)?;
    let proof = recv_raw(&mut s, Kind::Proof, until, TAG)?;
    if !verify(token, &[LABEL_CONNECTOR, &nc, &nl], &proof) {
        let _ = send_raw(
            &mut s,
            Kind::Refused,
            b"the proof does not match the listener's token (the two nodes hold different tokens)",
            until,
        );
        return Err(WireError::Auth {
            detail: "its proof does not match this token (the two nodes hold different tokens, or a stranger connected)".into(),
        });
    }
    let answer = tag(token, &[LABEL_LISTENER, &nc, &nl]);
    send_raw(&mut s, Kind::Accepted, &answer, until)?;
    Ok(Channel {
        stream: s,
        key: session_key(token, &nc, &nl),
        sent: 0,
        received: 0,
        send_label: TO_CONNECTOR,
        recv_label: TO_LISTENER,
    })
}

/// The longest token file read: a token is a few dozen bytes (`head -c 32 /dev/urandom | base64`
/// writes 45), and a file that is not one must not cost memory (a 1 GiB file once took 2.1 GB).
pub const MAX_TOKEN_FILE: u64 = 4096;

/// Reads `--token-file`: a regular file (a FIFO, a device or a directory is refused unread and
/// never waited on) of at most [`MAX_TOKEN_FILE`] bytes that neither group nor others may read
/// or write. A secret others can read is none, and a token decides who may write into this
/// node's memory over RDMA: refused as ssh refuses such a private key ("UNPROTECTED PRIVATE
/// KEY FILE"), with the chmod that fixes it. The error names what it refused; the caller adds
/// the path.
pub fn token_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use crate::input::InputError;
    let input = crate::input::open(path).map_err(|e| match e {
        InputError::Open(e) | InputError::Read(e) => format!("cannot read token file: {e}"),
        other => format!("cannot read token file: {other}"),
    })?;
    let mode = input.mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "mode {mode:04o} lets group or others at it: a token others can read is no secret (refused, as ssh refuses such a private key); make it the owner's alone: chmod 600 FILE"
        ));
    }
    let raw = input.read_all(MAX_TOKEN_FILE).map_err(|e| match e {
        InputError::TooLarge { len, .. } => format!(
            "cannot read token file: {len} bytes; a token never needs more than {}",
            crate::parse::bytes(MAX_TOKEN_FILE)
        ),
        other => format!("cannot read token file: {other}"),
    })?;
    token(&raw)
}

/// A token from a file's bytes (a trailing newline dropped) or the command line; refused when
/// shorter than [`MIN_TOKEN`].
pub fn token(raw: &[u8]) -> Result<Vec<u8>, String> {
    let t = raw.strip_suffix(b"\n").unwrap_or(raw);
    let t = t.strip_suffix(b"\r").unwrap_or(t);
    if t.len() < MIN_TOKEN {
        return Err(format!(
            "the token has {} bytes; at least {MIN_TOKEN} are needed (e.g. `(umask 077; head -c 32 /dev/urandom | base64 > FILE)`)",
            t.len()
        ));
    }
    Ok(t.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    const TOKEN: &[u8] = b"0123456789abcdef-shared";

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    fn soon(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Ping {
        n: u32,
    }

    #[test]
    fn both_sides_prove_the_token_and_talk() {
        let (c, s) = pair();
        let listener = std::thread::spawn(move || {
            let mut ch = accept(s, TOKEN, soon(5000)).unwrap();
            let p: Ping = ch.recv(soon(5000), "ping").unwrap();
            ch.send(&Ping { n: p.n + 1 }, soon(5000)).unwrap();
        });
        let mut ch = connect(c, TOKEN, soon(5000)).unwrap();
        ch.send(&Ping { n: 41 }, soon(5000)).unwrap();
        assert_eq!(ch.recv::<Ping>(soon(5000), "pong").unwrap(), Ping { n: 42 });
        listener.join().unwrap();
    }

    #[test]
    fn a_wrong_token_is_refused_on_both_sides() {
        let (c, s) = pair();
        let listener = std::thread::spawn(move || accept(s, TOKEN, soon(5000)).err());
        let e = connect(c, b"another-token-of-16+", soon(5000))
            .err()
            .unwrap();
        assert!(matches!(e, WireError::Refused { .. }), "{e}");
        assert!(e.to_string().contains("different tokens"), "{e}");
        let l = listener.join().unwrap().unwrap();
        assert!(matches!(l, WireError::Auth { .. }), "{l}");
        assert_eq!(l.class(), "auth");
    }

    /// A listener that answers with another token's proof (or a recorded one): the connector
    /// does not accept it.
    #[test]
    fn a_listener_without_the_token_is_not_believed() {
        let (c, mut s) = pair();
        let fake = std::thread::spawn(move || {
            let _ = recv_raw(&mut s, Kind::Hello, soon(5000), NONCE).unwrap();
            send_raw(&mut s, Kind::Challenge, &[7u8; NONCE], soon(5000)).unwrap();
            let _ = recv_raw(&mut s, Kind::Proof, soon(5000), TAG).unwrap();
            send_raw(&mut s, Kind::Accepted, &[0u8; TAG], soon(5000)).unwrap();
        });
        let e = connect(c, TOKEN, soon(5000)).err().unwrap();
        assert!(matches!(e, WireError::Auth { .. }), "{e}");
        fake.join().unwrap();
    }

    /// A proof recorded from one session is worthless in the next: the listener's nonce is new.
    #[test]
    fn a_recorded_proof_cannot_be_replayed() {
        // Session 1, recorded: what the connector sent.
        let (mut c, s) = pair();
        let l = std::thread::spawn(move || accept(s, TOKEN, soon(5000)).is_ok());
        let nc = [1u8; NONCE];
        send_raw(&mut c, Kind::Hello, &nc, soon(5000)).unwrap();
        let nl = recv_raw(&mut c, Kind::Challenge, soon(5000), NONCE).unwrap();
        let proof = tag(TOKEN, &[LABEL_CONNECTOR, &nc, &nl]);
        send_raw(&mut c, Kind::Proof, &proof, soon(5000)).unwrap();
        assert!(l.join().unwrap());
        // Session 2: the stranger replays Hello and Proof without the token.
        let (mut c, s) = pair();
        let l = std::thread::spawn(move || accept(s, TOKEN, soon(5000)).err());
        send_raw(&mut c, Kind::Hello, &nc, soon(5000)).unwrap();
        let nl2 = recv_raw(&mut c, Kind::Challenge, soon(5000), NONCE).unwrap();
        assert_ne!(nl, nl2, "the listener's nonce is fresh");
        send_raw(&mut c, Kind::Proof, &proof, soon(5000)).unwrap();
        assert!(matches!(l.join().unwrap(), Some(WireError::Auth { .. })));
    }

    #[test]
    fn wrong_version_oversized_and_foreign_frames_are_refused_unread() {
        for (bytes, want) in [
            (
                {
                    let mut h = header(Kind::Hello, NONCE).to_vec();
                    h[4] = 9;
                    h
                },
                "version 9",
            ),
            (
                header(Kind::Hello, MAX_PAYLOAD + 1).to_vec(),
                "more than the 262144 allowed",
            ),
            (
                b"SSH-2.0-OpenSSH_9.2\r\n".to_vec(),
                "does not speak gdrdoctor's protocol",
            ),
            (
                {
                    let mut h = header(Kind::Hello, NONCE).to_vec();
                    h[5] = 77;
                    h
                },
                "unknown frame kind 77",
            ),
        ] {
            let (mut c, s) = pair();
            c.write_all(&bytes).unwrap();
            let e = accept(s, TOKEN, soon(2000)).err().unwrap();
            assert!(e.to_string().contains(want), "{e}");
            assert_eq!(e.class(), "protocol", "{e}");
        }
    }

    #[test]
    fn a_truncated_frame_and_a_peer_that_leaves_are_named() {
        let (mut c, s) = pair();
        let mut h = header(Kind::Hello, NONCE).to_vec();
        h.extend_from_slice(&[0u8; 5]);
        c.write_all(&h).unwrap();
        drop(c);
        let e = accept(s, TOKEN, soon(2000)).err().unwrap();
        assert!(
            matches!(e, WireError::Closed { partial: true, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("truncated"), "{e}");
        // A peer that goes away mid-session, between messages.
        let (c, s) = pair();
        let l = std::thread::spawn(move || {
            let mut ch = accept(s, TOKEN, soon(5000)).unwrap();
            ch.recv::<Ping>(soon(5000), "rail step").err().unwrap()
        });
        let ch = connect(c, TOKEN, soon(5000)).unwrap();
        drop(ch);
        let e = l.join().unwrap();
        assert!(
            matches!(e, WireError::Closed { partial: false, .. }),
            "{e:?}"
        );
        assert_eq!(e.class(), "lost");
        assert!(e.to_string().contains("rail step"), "{e}");
    }

    /// A peer that says nothing, or trickles a frame byte by byte, costs the deadline, not more.
    #[test]
    fn a_slow_peer_costs_the_deadline_and_no_more() {
        let (c, s) = pair();
        let t0 = Instant::now();
        let e = accept(s, TOKEN, soon(300)).err().unwrap();
        assert!(matches!(e, WireError::Timeout { .. }), "{e:?}");
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert!(e.to_string().contains("no hello from the peer"), "{e}");
        drop(c);
        let (mut c, s) = pair();
        let trickle = std::thread::spawn(move || {
            for b in header(Kind::Hello, NONCE) {
                if c.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let t0 = Instant::now();
        let e = accept(s, TOKEN, soon(400)).err().unwrap();
        assert!(matches!(e, WireError::Timeout { .. }), "{e:?}");
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        trickle.join().unwrap();
    }

    /// Within a session, a message replayed or altered on the way is refused.
    #[test]
    fn session_messages_cannot_be_replayed_or_altered() {
        let (c, s) = pair();
        let l = std::thread::spawn(move || {
            let mut ch = accept(s, TOKEN, soon(5000)).unwrap();
            let first: Ping = ch.recv(soon(5000), "first").unwrap();
            (first, ch.recv::<Ping>(soon(5000), "second").err())
        });
        let mut ch = connect(c, TOKEN, soon(5000)).unwrap();
        ch.send(&Ping { n: 1 }, soon(5000)).unwrap();
        // Send the same message again with the first message's number: a replay.
        ch.sent -= 1;
        ch.send(&Ping { n: 1 }, soon(5000)).unwrap();
        let (first, second) = l.join().unwrap();
        assert_eq!(first, Ping { n: 1 });
        assert!(
            matches!(second, Some(WireError::Tampered { .. })),
            "{second:?}"
        );
    }

    #[test]
    fn tokens_are_long_enough() {
        assert!(token(b"short\n").is_err());
        assert_eq!(token(b"0123456789abcdef\n").unwrap(), b"0123456789abcdef");
    }
}
