//! Reading: an input (plain text or gzip, told by its first bytes) cut into lines of at most
//! [`MAX_LINE`] bytes, and NCCL's lines among them parsed and handed to the collector, the
//! prefixes and messages of INFO lines read once and found again ([`Repeats`]). Only the
//! reading happens here; what a line means is the line parser's (`parse::nccl_log`).

use super::repeats::{Head, Repeats, Said, marked_at};
use super::{Collector, Input, MAX_LINE, clean};
use crate::parse::nccl_log::{self as log, Level};
use std::io::{self, BufRead, Read};

/// An input's summary before anything of it was read.
fn empty_input(name: &str, gzip: bool) -> Input {
    Input {
        name: clean(name),
        gzip,
        bytes: 0,
        lines: 0,
        nccl_lines: 0,
        unprefixed: 0,
        commented: 0,
        long_lines_skipped: 0,
        error: None,
    }
}

impl Collector {
    /// Reads one input to its end: plain text or gzip (told by its first bytes), line by line,
    /// never holding more than one line of [`MAX_LINE`] bytes. A read error ends this input and
    /// is reported with it; what was read before still counts.
    pub fn read<R: Read>(&mut self, name: &str, input: R) {
        let mut input = io::BufReader::with_capacity(256 * 1024, input);
        let gzip = matches!(input.fill_buf(), Ok(b) if b.starts_with(&[0x1f, 0x8b]));
        let mut summary = empty_input(name, gzip);
        let mut repeats = Repeats::new();
        let result = if gzip {
            let decoder = flate2::bufread::MultiGzDecoder::new(input);
            self.read_lines(
                io::BufReader::with_capacity(256 * 1024, decoder),
                &mut summary,
                &mut repeats,
            )
        } else {
            self.read_lines(input, &mut summary, &mut repeats)
        };
        if let Err(e) = result {
            summary.error = Some(e.to_string());
        }
        self.inputs.push(summary);
    }

    /// Reads complete lines that arrived at the end of `name` (`explain --follow`): counted
    /// into that input's summary, which the first chunk makes. Plain text only (a growing gzip
    /// file has no end to read up to).
    pub fn read_chunk(&mut self, name: &str, chunk: &[u8]) {
        let key = clean(name);
        let at = match self.inputs.iter().position(|i| i.name == key) {
            Some(at) => at,
            None => {
                self.inputs.push(empty_input(name, false));
                self.inputs.len() - 1
            }
        };
        let mut summary = self.inputs[at].clone();
        if let Err(e) = self.read_lines(chunk, &mut summary, &mut Repeats::none()) {
            summary.error = Some(e.to_string());
        }
        self.inputs[at] = summary;
    }

    fn read_lines<R: BufRead>(
        &mut self,
        mut r: R,
        s: &mut Input,
        repeats: &mut Repeats,
    ) -> io::Result<()> {
        let mut carry: Vec<u8> = Vec::new();
        // Inside a line already found too long: its rest is skipped up to the newline.
        let mut overlong = false;
        loop {
            let buf = match r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                break;
            }
            let len = buf.len();
            s.bytes += len as u64;
            let mut pos = 0;
            while pos < len {
                match memchr::memchr(b'\n', &buf[pos..]) {
                    Some(i) => {
                        let piece = &buf[pos..pos + i];
                        if overlong {
                            overlong = false;
                        } else if carry.len() + piece.len() > MAX_LINE {
                            s.lines += 1;
                            s.long_lines_skipped += 1;
                            carry.clear();
                        } else if carry.is_empty() {
                            self.line(piece, s, repeats);
                        } else {
                            carry.extend_from_slice(piece);
                            self.line(&carry, s, repeats);
                            carry.clear();
                        }
                        pos += i + 1;
                    }
                    None => {
                        let rest = &buf[pos..];
                        if !overlong {
                            if carry.len() + rest.len() > MAX_LINE {
                                overlong = true;
                                s.lines += 1;
                                s.long_lines_skipped += 1;
                                carry = Vec::new();
                            } else {
                                carry.extend_from_slice(rest);
                            }
                        }
                        pos = len;
                    }
                }
            }
            r.consume(len);
        }
        // The last line, without a newline.
        if !carry.is_empty() {
            self.line(&carry, s, repeats);
        }
        Ok(())
    }

    /// One line of log (without its newline).
    pub fn feed_line(&mut self, line: &[u8]) {
        let mut s = Input {
            name: String::new(),
            gzip: false,
            bytes: 0,
            lines: 0,
            nccl_lines: 0,
            unprefixed: 0,
            commented: 0,
            long_lines_skipped: 0,
            error: None,
        };
        self.line(line, &mut s, &mut Repeats::none());
        match self.inputs.last_mut() {
            Some(i) if i.name.is_empty() => {
                i.lines += s.lines;
                i.nccl_lines += s.nccl_lines;
                i.unprefixed += s.unprefixed;
                i.commented += s.commented;
                i.bytes += line.len() as u64 + 1;
            }
            _ => {
                s.bytes = line.len() as u64 + 1;
                self.inputs.push(s);
            }
        }
    }

    /// nccl-tests' list of ranks and their hosts (`#  Rank  0 Group  0 Pid 1 on node7 device 0
    /// ...`): the job's nodes, even where NCCL's own lines do not say.
    fn tests_header(&mut self, bytes: &[u8]) {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return;
        };
        if let Some(host) = log::tests_rank_host(text) {
            if self.tests_hosts.len() < 64 && !self.tests_hosts.contains(host) {
                self.tests_hosts.insert(clean(host));
            }
        }
    }

    fn line(&mut self, bytes: &[u8], s: &mut Input, repeats: &mut Repeats) {
        s.lines += 1;
        // The fast test: most lines of a big log are NCCL's, but anything without `NCCL `
        // needs no decoding at all, unless it may be a message body quoted without NCCL's
        // prefix (a few searches, only on the lines that are not NCCL's). A line whose prefix
        // was read before has its `NCCL ` where that prefix ends: no search.
        let known = repeats.known_head(bytes);
        let at = known.map(|(at, _)| at).or_else(|| log::find_nccl(bytes));
        if let Some(at) = at {
            let head = known.map(|(_, i)| i);
            if self.info_line(bytes, at, head, s, repeats).is_some() {
                return;
            }
        }
        if at.is_none() && !log::may_be_bare(bytes) {
            if bytes.first() == Some(&b'#') {
                self.tests_header(bytes);
            }
            return;
        }
        // Valid UTF-8 (nearly every line) is checked at full speed; only a line that is not
        // goes through the slower lossy decoding. The offset stays right: lossy decoding only
        // grows the text after the first invalid byte, so it is searched again then.
        let text = match std::str::from_utf8(bytes) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(bytes),
        };
        if log::is_comment(&text) {
            // A `#` comment of a pasted configuration quotes a log line; NCCL printed none.
            s.commented += 1;
            return;
        }
        let line = match (&text, at) {
            (std::borrow::Cow::Borrowed(t), Some(at)) => log::parse_from(t, at),
            (t, Some(_)) => log::parse(t),
            (t, None) => log::parse_bare(t),
        };
        let Some(line) = line else {
            return;
        };
        if line.bare {
            s.unprefixed += 1;
        }
        if line.level != Level::Version {
            s.nccl_lines += 1;
        }
        self.apply(line);
    }

    /// An INFO line (`prefix NCCL INFO message`, its first `NCCL ` at `at`; `head` its
    /// prefix's entry when the caller found it), its prefix and its message each read once and
    /// then found again ([`Repeats`]). It gives what the general
    /// path of [`Collector::line`] gives (there [`log::parse_from`] is [`log::info_line`] of the
    /// same two reads); `None` leaves the line to that path: not an INFO line, not UTF-8 (that
    /// path decodes it whole, lossily), or a comment.
    fn info_line(
        &mut self,
        bytes: &[u8],
        at: usize,
        head_entry: Option<usize>,
        s: &mut Input,
        repeats: &mut Repeats,
    ) -> Option<()> {
        // `NCCL ` is at `at`: an INFO line has `INFO ` after it.
        marked_at(bytes, at).then_some(())?;
        let raw = &bytes[at + 10..];
        let head = &bytes[..at];
        // Who printed it. The prefix alone tells a comment: the line starts as it does.
        let mut origin = None;
        let h = match head_entry.or_else(|| repeats.heads.find(head)) {
            Some(i) => Some(i),
            None => {
                let text = std::str::from_utf8(head).ok()?;
                if log::is_comment(text) {
                    return None;
                }
                let o = log::info_origin(text);
                origin = Some(o);
                Head::of(text, o).and_then(|v| repeats.heads.put(text, v))
            }
        };
        repeats.last_head = h;
        // What it says.
        let m = repeats.messages.find(raw);
        // A prefix and a message both read before, the prefix's node known: the line goes
        // straight to the node, as `apply_known` does for an INFO line once it found the node
        // (it does nothing else before but count an unrecognised message).
        if let (Some(hi), Some(mi)) = (h, m) {
            let head = repeats.heads.value(hi)?;
            if let (Some(n), Some((key, said))) = (head.node, repeats.messages.entry(mi)) {
                if !said.unrecognised() {
                    let (event, era) = said.event(key)?;
                    s.nccl_lines += 1;
                    self.apply_at(n, head.dev, era, event);
                    return Some(());
                }
            }
        }
        let mut said = None;
        let m = match m {
            Some(i) => Some(i),
            None => {
                let text = std::str::from_utf8(raw).ok()?;
                let read = log::info_message(text);
                let i = Said::of(text, &read).and_then(|v| repeats.messages.put(text, v));
                said = Some(read);
                i
            }
        };
        let Repeats {
            heads, messages, ..
        } = repeats;
        let said = match said {
            Some(x) => x,
            None => {
                let (key, v) = messages.entry(m?)?;
                v.read(key)?
            }
        };
        let origin = match origin {
            Some(o) => o,
            None => {
                let (key, v) = heads.entry(h?)?;
                v.origin(key)?
            }
        };
        let known = h.and_then(|i| heads.value(i)).and_then(|v| v.node);
        s.nccl_lines += 1;
        let used = self.apply_known(log::info_line(origin, said), known);
        if let (Some(i), None, Some(n)) = (h, known, used) {
            if let Some(v) = heads.entry_mut(i) {
                v.node = Some(n);
            }
        }
        Some(())
    }
}
