//! Lines read again (issue 43). NCCL prints the same messages for every communicator it makes,
//! each rank behind the same prefix (`host:pid:tid [dev] NCCL INFO `), so a big log is mostly
//! repeats: in bench/nccl-log.py's, 9 messages in 10 were read before, a few thousand lines
//! earlier. What the line parser makes of a prefix ([`info_origin`]) depends on the prefix's
//! bytes alone, and what it makes of a message ([`info_message`]) on the message's alone; both
//! are kept in two tables of fixed size and used again when the same bytes come back, compared
//! whole. A repeated line then costs a hash and a comparison, not a UTF-8 check and a parse;
//! what the collector does with the line is the same either way.
//!
//! The tables hold at most [`HEADS`] prefixes and [`MESSAGES`] messages of at most [`MAX_KEY`]
//! bytes each (about 1.4 MiB, whatever the log): a log whose lines do not repeat, or a hostile
//! one whose lines all land in one place of a table, only finds nothing there.
//!
//! [`info_origin`]: crate::parse::nccl_log::info_origin
//! [`info_message`]: crate::parse::nccl_log::info_message

use crate::parse::nccl_log::{Connection, Dir, Era, Event, GpuGdr, HcaVia, Origin};

/// Entries looked at for one key: the table is cut into sets of this many.
const WAYS: usize = 4;
/// Prefixes kept: a rank's (host, process, thread and device) per entry. bench/nccl-log.py's
/// 128 ranks print from 7 threads each: 896 prefixes, which 1,024 entries held only in part.
const HEADS: usize = 2048;
/// Messages kept: the lines of one communicator on 128 ranks come back after some 5,000
/// others; 8,192 keep 9 in 10 of bench/nccl-log.py's (4,096: 8 in 10).
const MESSAGES: usize = 8192;
/// Longest prefix or message kept; longer ones are read as they come.
const MAX_KEY: usize = 160;
/// Room for the keys' text, per entry: NCCL's messages are about 60 bytes.
const KEY_ROOM: usize = 64;

/// The prefixes and messages already read, for [`super::Collector`]'s reader.
pub(super) struct Repeats {
    pub(super) heads: Table<Head>,
    pub(super) messages: Table<Said>,
    /// The entry of the last line's prefix: a rank often prints several lines in a row.
    pub(super) last_head: Option<usize>,
}

impl Repeats {
    /// The line's first `NCCL ` and its prefix's entry, when the line starts as the last one
    /// did: that prefix came from a line whose first `NCCL ` followed it, so a line with the
    /// same bytes up to `NCCL INFO ` has its first there too. A rank often prints several lines
    /// in a row; this saves it the search.
    #[inline]
    pub(super) fn after_last_head(&self, line: &[u8]) -> Option<(usize, usize)> {
        let i = self.last_head?;
        let key = self.heads.key_bytes(i)?;
        let at = key.len();
        (same(line.get(..at)?, key) && marked_at(line, at)).then_some((at, i))
    }

    /// The line's first `NCCL ` and its prefix's entry, when its prefix is one kept: the last
    /// line's, or the bytes up to the first `] ` (NCCL's own prefix ends in its `[dev] `). Every
    /// prefix kept came from a line whose first `NCCL ` followed it, so a line with the same
    /// bytes up to `NCCL INFO ` has its first there too; the search for it is saved.
    #[inline]
    pub(super) fn known_head(&self, line: &[u8]) -> Option<(usize, usize)> {
        if let Some(found) = self.after_last_head(line) {
            return Some(found);
        }
        let at = memchr::memchr(b']', line)? + 2;
        (line.get(at - 1) == Some(&b' ') && marked_at(line, at)).then_some(())?;
        Some((at, self.heads.find(&line[..at])?))
    }

    /// Empty tables, their room taken at the first line kept.
    pub(super) fn new() -> Self {
        Repeats {
            heads: Table::new(HEADS),
            messages: Table::new(MESSAGES),
            last_head: None,
        }
    }

    /// Tables that keep nothing: for input that comes a line or a chunk at a time.
    pub(super) fn none() -> Self {
        Repeats {
            heads: Table::new(0),
            messages: Table::new(0),
            last_head: None,
        }
    }
}

/// Whether `line` has `NCCL INFO ` at `at`: two comparisons, no call.
#[inline]
pub(super) fn marked_at(line: &[u8], at: usize) -> bool {
    line.get(at..at + 10)
        .is_some_and(|m| word(&m[..8]) == word(b"NCCL INF") && m[8] == b'O' && m[9] == b' ')
}

/// Where a part of a kept key lies in it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    start: u8,
    end: u8,
}

impl Span {
    /// `part`'s place in `base`, if it is a slice of it (a text that is not, such as a name
    /// the parser supplies itself, cannot be kept).
    fn of(base: &str, part: &str) -> Option<Span> {
        let start = (part.as_ptr() as usize).checked_sub(base.as_ptr() as usize)?;
        let end = start.checked_add(part.len())?;
        (end <= base.len() && base.get(start..end).is_some()).then_some(Span {
            start: u8::try_from(start).ok()?,
            end: u8::try_from(end).ok()?,
        })
    }

    fn of_opt(base: &str, part: Option<&str>) -> Option<Option<Span>> {
        match part {
            Some(p) => Span::of(base, p).map(Some),
            None => Some(None),
        }
    }

    #[inline]
    fn text(self, base: &str) -> Option<&str> {
        base.get(usize::from(self.start)..usize::from(self.end))
    }

    #[inline]
    fn text_opt(span: Option<Span>, base: &str) -> Option<Option<&str>> {
        match span {
            Some(s) => s.text(base).map(Some),
            None => Some(None),
        }
    }
}

/// What [`info_origin`] read from a prefix, and the collector's node of its host once a line
/// with it was kept (a host's node never changes).
#[derive(Debug, Clone, Copy)]
pub(super) struct Head {
    host: Option<Span>,
    pid: Option<u32>,
    pub(super) dev: Option<u32>,
    pub(super) node: Option<usize>,
}

impl Head {
    pub(super) fn of(head: &str, origin: Origin<'_>) -> Option<Head> {
        Some(Head {
            host: Span::of_opt(head, origin.host)?,
            pid: origin.pid,
            dev: origin.dev,
            node: None,
        })
    }

    #[inline]
    pub(super) fn origin(self, head: &str) -> Option<Origin<'_>> {
        Some(Origin {
            host: Span::text_opt(self.host, head)?,
            pid: self.pid,
            dev: self.dev,
        })
    }
}

/// What [`info_message`] read from a message: the message without Ray's suffix, the event
/// with its texts as spans, the releases.
#[derive(Debug, Clone, Copy)]
pub(super) struct Said {
    message: Span,
    event: Kept,
    era: Era,
}

impl Said {
    /// `None`: an event not kept (rare ones, and those that carry a list or a communicator's
    /// own address, which never come back).
    pub(super) fn of(raw: &str, (message, event, era): &(&str, Event<'_>, Era)) -> Option<Said> {
        Some(Said {
            message: Span::of(raw, message)?,
            event: Kept::of(raw, event)?,
            era: *era,
        })
    }

    #[inline]
    pub(super) fn read(self, raw: &str) -> Option<(&str, Event<'_>, Era)> {
        Some((self.message.text(raw)?, self.event.event(raw)?, self.era))
    }

    /// [`Said::read`] without the message, which only an unrecognised one is kept with.
    #[inline(always)]
    pub(super) fn event(self, raw: &str) -> Option<(Event<'_>, Era)> {
        Some((self.event.event(raw)?, self.era))
    }

    pub(super) fn unrecognised(self) -> bool {
        matches!(self.event, Kept::Unrecognised)
    }
}

/// The [`Event`]s of the lines that repeat, their texts as spans of the message.
#[derive(Debug, Clone, Copy)]
enum Kept {
    Other,
    Unrecognised,
    IntraNode,
    Network {
        name: Span,
    },
    Plugin {
        name: Span,
    },
    Env {
        name: Span,
        value: Span,
    },
    DmaBufAvailable {
        cuda_dev: u32,
    },
    RingsGdr {
        pxn: i64,
        gdr: i64,
    },
    HcaGdr {
        net: Span,
        enabled: bool,
        index: u32,
        name: Span,
        via: HcaVia,
        gpu: Option<Span>,
    },
    GpuGdr {
        enabled: bool,
        gpu: Span,
        hca: Span,
        distance: u32,
        level: u32,
        inclusive: bool,
        read: Option<bool>,
        mode: Option<Span>,
        pxn_via: Option<Span>,
    },
    Connection {
        channel: Option<u32>,
        from: u32,
        to: u32,
        from_dev: Option<Span>,
        to_dev: Option<Span>,
        dir: Dir,
        net: Span,
        dev: u32,
        proxy: Option<u32>,
        gdr: bool,
        pci: bool,
        shared: bool,
    },
}

impl Kept {
    fn of(m: &str, e: &Event<'_>) -> Option<Kept> {
        let span = |s| Span::of(m, s);
        let opt = |s| Span::of_opt(m, s);
        Some(match e {
            Event::Other => Kept::Other,
            Event::Unrecognised => Kept::Unrecognised,
            Event::IntraNode => Kept::IntraNode,
            Event::Network { name } => Kept::Network { name: span(name)? },
            Event::Plugin { name } => Kept::Plugin { name: span(name)? },
            Event::Env { name, value } => Kept::Env {
                name: span(name)?,
                value: span(value)?,
            },
            Event::DmaBufAvailable { cuda_dev } => Kept::DmaBufAvailable {
                cuda_dev: *cuda_dev,
            },
            Event::RingsGdr { pxn, gdr } => Kept::RingsGdr {
                pxn: *pxn,
                gdr: *gdr,
            },
            Event::HcaGdr {
                net,
                enabled,
                index,
                name,
                via,
                gpu,
            } => Kept::HcaGdr {
                net: span(net)?,
                enabled: *enabled,
                index: *index,
                name: span(name)?,
                via: *via,
                gpu: opt(*gpu)?,
            },
            Event::GpuGdr(g) => Kept::GpuGdr {
                enabled: g.enabled,
                gpu: span(g.gpu)?,
                hca: span(g.hca)?,
                distance: g.distance,
                level: g.level,
                inclusive: g.inclusive,
                read: g.read,
                mode: opt(g.mode)?,
                pxn_via: opt(g.pxn_via)?,
            },
            Event::Connection(c) => Kept::Connection {
                channel: c.channel,
                from: c.from,
                to: c.to,
                from_dev: opt(c.from_dev)?,
                to_dev: opt(c.to_dev)?,
                dir: c.dir,
                net: span(c.net)?,
                dev: c.dev,
                proxy: c.proxy,
                gdr: c.gdr,
                pci: c.pci,
                shared: c.shared,
            },
            _ => return None,
        })
    }

    // Always inlined: called out of line, its event came back through memory and the reader
    // waited on it (a tenth of the reader's time, issue 43).
    #[inline(always)]
    fn event(self, m: &str) -> Option<Event<'_>> {
        let text = |s: Span| s.text(m);
        let opt = |s| Span::text_opt(s, m);
        Some(match self {
            Kept::Other => Event::Other,
            Kept::Unrecognised => Event::Unrecognised,
            Kept::IntraNode => Event::IntraNode,
            Kept::Network { name } => Event::Network { name: text(name)? },
            Kept::Plugin { name } => Event::Plugin { name: text(name)? },
            Kept::Env { name, value } => Event::Env {
                name: text(name)?,
                value: text(value)?,
            },
            Kept::DmaBufAvailable { cuda_dev } => Event::DmaBufAvailable { cuda_dev },
            Kept::RingsGdr { pxn, gdr } => Event::RingsGdr { pxn, gdr },
            Kept::HcaGdr {
                net,
                enabled,
                index,
                name,
                via,
                gpu,
            } => Event::HcaGdr {
                net: text(net)?,
                enabled,
                index,
                name: text(name)?,
                via,
                gpu: opt(gpu)?,
            },
            Kept::GpuGdr {
                enabled,
                gpu,
                hca,
                distance,
                level,
                inclusive,
                read,
                mode,
                pxn_via,
            } => Event::GpuGdr(GpuGdr {
                enabled,
                gpu: text(gpu)?,
                hca: text(hca)?,
                distance,
                level,
                inclusive,
                read,
                mode: opt(mode)?,
                pxn_via: opt(pxn_via)?,
            }),
            Kept::Connection {
                channel,
                from,
                to,
                from_dev,
                to_dev,
                dir,
                net,
                dev,
                proxy,
                gdr,
                pci,
                shared,
            } => Event::Connection(Connection {
                channel,
                from,
                to,
                from_dev: opt(from_dev)?,
                to_dev: opt(to_dev)?,
                dir,
                net: text(net)?,
                dev,
                proxy,
                gdr,
                pci,
                shared,
            }),
        })
    }
}

/// Keys (a prefix or a message, as text) and what was read from each, in sets of [`WAYS`]
/// entries picked by the key's hash, each set's oldest entry put out first. The keys and what
/// was read from them are written one after the other, the keys into one text, the values into
/// one vector, both emptied with the whole table once full: a key costs its length, not
/// [`MAX_KEY`], and what was read together lies together in memory, as it is read again
/// together (values placed by their hash made one cache miss a line).
pub(super) struct Table<V> {
    /// Per entry: its key's hash with the key's length in the low byte (0: empty), where the
    /// key starts in `keys` and its value's index in `values`. A set's side by side.
    tags: Vec<(u64, u32, u32)>,
    values: Vec<V>,
    keys: String,
    /// Per set: the entry to put out next.
    next: Vec<u8>,
    /// Entries: [`WAYS`] times a power of two (0: a table that keeps nothing).
    size: usize,
}

/// A key's hash, its length in the low byte (`MAX_KEY` < 256).
fn tag(key: &[u8]) -> u64 {
    (hash(key) & !0xff) | key.len() as u64
}

impl<V: Copy> Table<V> {
    fn new(size: usize) -> Self {
        debug_assert!(size == 0 || (size % WAYS == 0 && (size / WAYS).is_power_of_two()));
        Table {
            tags: Vec::new(),
            values: Vec::new(),
            keys: String::new(),
            next: Vec::new(),
            size,
        }
    }

    /// The first entry of the set of a key with this tag.
    #[inline]
    fn set(&self, tag: u64) -> usize {
        // A power of two sets: the hash's high bits (its best mixed) pick one.
        let sets = self.size / WAYS;
        ((tag >> 32) as usize & (sets - 1)) * WAYS
    }

    /// Entry `i`'s key; `None` for an empty entry.
    #[inline]
    fn key(&self, i: usize) -> Option<&str> {
        let (tag, start, _) = *self.tags.get(i)?;
        let start = start as usize;
        (tag != 0).then_some(())?;
        self.keys.get(start..start + (tag & 0xff) as usize)
    }

    /// The bytes of entry `i`'s key, to compare; `None` for an empty entry.
    #[inline]
    fn key_bytes(&self, i: usize) -> Option<&[u8]> {
        let (tag, start, _) = *self.tags.get(i)?;
        let start = start as usize;
        (tag != 0).then_some(())?;
        self.keys
            .as_bytes()
            .get(start..start + (tag & 0xff) as usize)
    }

    /// The entry of `key` (its index), if kept.
    #[inline]
    pub(super) fn find(&self, key: &[u8]) -> Option<usize> {
        if self.tags.is_empty() || key.is_empty() || key.len() > MAX_KEY {
            return None;
        }
        let tag = tag(key);
        let start = self.set(tag);
        (start..start + WAYS)
            .find(|&i| self.tags[i].0 == tag && self.key_bytes(i).is_some_and(|k| same(k, key)))
    }

    /// Keeps `value` for `key` (its index), unless the key is empty or too long to keep.
    pub(super) fn put(&mut self, key: &str, value: V) -> Option<usize> {
        if self.size == 0 || key.is_empty() || key.len() > MAX_KEY {
            return None;
        }
        let room = self.size * KEY_ROOM;
        let full = self.keys.len() + key.len() > room || self.values.len() >= self.size;
        if self.tags.is_empty() || full {
            // First use, or the keys' text or the values are full: everything is put out.
            self.tags = vec![(0, 0, 0); self.size];
            self.values = Vec::with_capacity(self.size);
            self.next = vec![0; self.size / WAYS];
            self.keys = String::with_capacity(room);
        }
        let tag = tag(key.as_bytes());
        let start = self.set(tag);
        let set = start / WAYS;
        let i = start + usize::from(self.next[set]);
        self.next[set] = ((usize::from(self.next[set]) + 1) % WAYS) as u8;
        let start = u32::try_from(self.keys.len()).ok()?;
        let value_at = u32::try_from(self.values.len()).ok()?;
        self.tags[i] = (tag, start, value_at);
        self.keys.push_str(key);
        self.values.push(value);
        Some(i)
    }

    /// The key of entry `i` and what was read from it.
    #[inline]
    pub(super) fn entry(&self, i: usize) -> Option<(&str, V)> {
        let (_, _, at) = *self.tags.get(i)?;
        Some((self.key(i)?, *self.values.get(at as usize)?))
    }

    /// What was read from entry `i`'s key.
    #[inline]
    pub(super) fn value(&self, i: usize) -> Option<&V> {
        let (tag, _, at) = *self.tags.get(i)?;
        (tag != 0).then_some(())?;
        self.values.get(at as usize)
    }

    pub(super) fn entry_mut(&mut self, i: usize) -> Option<&mut V> {
        let (tag, _, at) = *self.tags.get(i)?;
        (tag != 0).then_some(())?;
        self.values.get_mut(at as usize)
    }
}

/// Eight bytes as one number (`b` has eight: a fixed-size load, no copy).
#[inline]
fn word(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap_or_default())
}

/// The last word of a key of at least 8 bytes (it overlaps the one before when the length is
/// not a multiple of 8), or the bytes of a shorter one.
#[inline]
fn last_word(b: &[u8]) -> u64 {
    match b.len().checked_sub(8) {
        Some(at) => word(&b[at..]),
        None => b.iter().fold(0, |w, &x| (w << 8) | u64::from(x)),
    }
}

/// A fast hash of a key, 8 bytes at a time in two independent lanes (FxHash's step): only to
/// pick a set, as every key found is compared whole.
#[inline]
fn hash(b: &[u8]) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let step = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let (mut h, mut g) = (step(0, b.len() as u64), K);
    let mut pairs = b.chunks_exact(16);
    for p in &mut pairs {
        h = step(h, word(&p[..8]));
        g = step(g, word(&p[8..]));
    }
    let rest = pairs.remainder();
    if rest.len() >= 8 {
        h = step(h, word(&rest[..8]));
    }
    if !rest.is_empty() {
        g = step(g, last_word(b));
    }
    step(h, g)
}

/// Whether two keys are the same, 8 bytes at a time: keys are short, and most that differ
/// differ early (the prefixes of one node's ranks).
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let mut at = 0;
    while at + 8 < n {
        if word(&a[at..at + 8]) != word(&b[at..at + 8]) {
            return false;
        }
        at += 8;
    }
    word(&a[n - 8..]) == word(&b[n - 8..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::nccl_log as log;

    /// Every message of the fixtures' logs, kept and read back, is what the parser read.
    #[test]
    #[allow(clippy::disallowed_methods)] // the repository's fixtures, not a node's files
    fn kept_messages_read_back_as_parsed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/nccl-logs");
        let mut kept = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "log") {
                continue;
            }
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            for line in text.lines() {
                let Some(at) = line.find("NCCL INFO ") else {
                    continue;
                };
                let (head, raw) = (&line[..at], &line[at + "NCCL INFO ".len()..]);
                let origin = log::info_origin(head);
                let h = Head::of(head, origin).expect("a prefix's host is in it");
                assert_eq!(h.origin(head), Some(origin), "{line}");
                let said = log::info_message(raw);
                if let Some(k) = Said::of(raw, &said) {
                    kept += 1;
                    assert_eq!(k.read(raw), Some(said.clone()), "{line}");
                }
            }
        }
        assert!(kept > 400, "{kept}");
    }

    #[test]
    fn tables_find_what_they_kept_and_put_the_oldest_out() {
        fn found<'t>(t: &'t Table<u32>, k: &str) -> Option<(&'t str, u32)> {
            t.find(k.as_bytes()).and_then(|i| t.entry(i))
        }
        // Two sets of four: five keys of the first, the fifth puts the first out.
        let mut t: Table<u32> = Table::new(2 * WAYS);
        assert_eq!(t.find(b"k0"), None);
        let keys: Vec<String> = (0..)
            .map(|i| format!("k{i}"))
            .filter(|k| t.set(tag(k.as_bytes())) == 0)
            .take(WAYS + 1)
            .collect();
        for (i, k) in keys.iter().enumerate().take(WAYS) {
            t.put(k, i as u32);
        }
        assert!(
            keys[..WAYS]
                .iter()
                .zip(0..)
                .all(|(k, i)| found(&t, k) == Some((k, i)))
        );
        t.put(&keys[WAYS], 9);
        assert_eq!(found(&t, &keys[0]), None);
        assert_eq!(found(&t, &keys[1]), Some((keys[1].as_str(), 1)));
        assert_eq!(found(&t, &keys[WAYS]), Some((keys[WAYS].as_str(), 9)));
        let long = "x".repeat(MAX_KEY + 1);
        assert_eq!(t.put(&long, 5), None);
        assert_eq!(t.find(long.as_bytes()), None);
        // Its keys' text full (8 entries, 512 bytes): everything is put out at once.
        let texts: Vec<String> = "xyzw"
            .chars()
            .map(|c| c.to_string().repeat(MAX_KEY))
            .collect();
        for (i, k) in texts.iter().enumerate() {
            t.put(k, 10 + i as u32);
        }
        assert_eq!(found(&t, &texts[3]), Some((texts[3].as_str(), 13)));
        assert!(texts[..3].iter().all(|k| found(&t, k).is_none()));
        assert!(keys.iter().all(|k| found(&t, k).is_none()));
        assert!(
            (0..2 * WAYS)
                .filter_map(|i| t.entry(i))
                .eq([(texts[3].as_str(), 13)])
        );
        // As many values as entries: the same.
        for (i, k) in keys.iter().chain(&keys[..3]).enumerate() {
            t.put(k, i as u32);
        }
        assert_eq!((0..2 * WAYS).filter_map(|i| t.entry(i)).count(), 1);
        let mut none: Table<u32> = Table::new(0);
        assert_eq!(none.put("a", 1), None);
        assert_eq!(none.find(b"a"), None);
    }

    #[test]
    fn a_text_not_in_the_key_is_not_kept() {
        let m = String::from("P2P plugin IBext_v8");
        assert_eq!(
            Span::of(&m, &m[11..]).and_then(|s| s.text(&m)),
            Some("IBext_v8")
        );
        let other = String::from("IBext_v8");
        assert!(Span::of(&m, &other).is_none());
        assert!(Kept::of(&m, &Event::Plugin { name: &other }).is_none());
    }
}
