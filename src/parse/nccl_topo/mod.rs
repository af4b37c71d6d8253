//! NCCL's topology XML (`NCCL_TOPO_FILE`, what `NCCL_TOPO_DUMP_FILE` writes, the files cloud
//! images ship): text in, a typed tree with line numbers out, read by NCCL's own rules.
//!
//! NCCL does not use an XML library: src/graph/xml.cc reads the file a byte at a time with a
//! small grammar of its own (the same from 2.6 to 2.30). This reader follows it, so that a file
//! it accepts is one NCCL accepts, and what NCCL refuses is refused here with the line and the
//! reason NCCL would give:
//!
//! - between elements only spaces, newlines and carriage returns (a tab is an error);
//! - a tag on one line: attributes separated by spaces, every value quoted (`"` or `'`), at
//!   most 254 bytes per name and value; a newline inside a tag (outside a value) is an error;
//! - `<!-- -->` comments anywhere between elements; no XML declaration (`<?xml ...?>` makes
//!   NCCL fail with "expected >"), no DOCTYPE, no entities (NCCL never expands `&amp;`: the text
//!   stays as written), no text between elements;
//! - elements NCCL has no handler for at a place (a `gpu` under `cpu`, anything under `net`)
//!   are read and dropped with their subtree; the top element must be `system version="1"`
//!   (`"2"` for AMD's RCCL, which reads the same grammar: [`Library`]).
//!
//! And bounded, since the file is untrusted: at most [`MAX_BYTES`] (the read limit of every
//! node file), [`MAX_DEPTH`] levels and [`MAX_ELEMENTS`] elements, no recursion, no entity
//! expansion. Names and values must be UTF-8 (NCCL itself does not care; gdrdoctor cannot
//! compare what it cannot read).
//!
//! `gdrdoctor nccl` and the checks use [`parse`] and [`Topology::from_document`]; the typed view
//! keeps every element's line so that findings can point into the file.

#[cfg(test)]
mod tests;
mod topology;

pub use topology::{BusidMatch, Cpu, Library, Net, Parent, Pci, PciKind, Topology, busid_matches};

/// The largest file read: the read limit of every node file (`root::DEFAULT_READ_LIMIT`). NCCL
/// holds at most 256 elements (1024 before 2.21) of at most 17 attributes of 255 bytes: a file
/// it can load is far smaller.
pub const MAX_BYTES: usize = 1 << 20;
/// Deeper nesting is refused. A real tree is system, cpu, a few levels of switches, the device,
/// `gpu`/`nic`, `nvlink`/`net`: under 16.
pub const MAX_DEPTH: usize = 64;
/// Elements read at most (NCCL loads 256; a file with more is refused by NCCL anyway, and
/// reported as such).
pub const MAX_ELEMENTS: usize = 65_536;
/// NCCL's `MAX_STR_LEN - 1`: the longest name or value it reads.
pub const MAX_STR: usize = 254;
/// NCCL_TOPO_XML_MAX_NODES (src/graph/topo.h) from 2.21; `MAX_NODES` 1024 before.
pub const NCCL_MAX_NODES: usize = 256;
/// NCCL's `MAX_SUBS` children per element: 32 before 2.21, 128 from 2.21, 640 from 2.30.
pub const NCCL_MAX_SUBS: usize = 128;
/// NCCL's `MAX_ATTR_COUNT`: attributes past it are read and ignored.
pub const NCCL_MAX_ATTRS: usize = 16;

/// One element, with the line its tag starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub line: usize,
    pub children: Vec<Element>,
}

impl Element {
    /// An attribute's value, as NCCL finds it: the first of that name.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed file: its top-level elements (NCCL uses the first `system`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub top: Vec<Element>,
    /// Every element read, at any depth.
    pub elements: usize,
}

/// Why a file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// NCCL's own reader fails on this too (communicator initialisation fails: every job on the
    /// node). `false`: gdrdoctor's bounds refused what NCCL might read (too large, too deep, not
    /// UTF-8).
    pub nccl_refuses: bool,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

/// A token, the byte that ended it, and the value when it ended with `=`.
type Token = (Vec<u8>, u8, Option<Vec<u8>>);

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: usize,
    column: usize,
}

fn shown_byte(c: u8) -> String {
    match c {
        b'\t' => "a tab".into(),
        b'\n' => "a newline".into(),
        b'\r' => "a carriage return".into(),
        c if c.is_ascii_graphic() => format!("'{}'", c as char),
        c => format!("byte 0x{c:02x}"),
    }
}

impl<'a> Reader<'a> {
    fn error(&self, message: impl Into<String>, nccl_refuses: bool) -> ParseError {
        ParseError {
            line: self.line,
            column: self.column,
            message: message.into(),
            nccl_refuses,
        }
    }

    fn next(&mut self) -> Option<u8> {
        let c = *self.bytes.get(self.pos)?;
        self.pos += 1;
        if c == b'\n' {
            self.line += 1;
            self.column = 0;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn need(&mut self) -> Result<u8, ParseError> {
        self.next()
            .ok_or_else(|| self.error("unexpected end of file", true))
    }

    /// NCCL's `xmlGetToken`: bytes up to `=` (when a value may follow) or one of space, `>`,
    /// `/`, newline, carriage return. Returns the token, the byte that ended it, and the value
    /// when it ended with `=`.
    fn token(&mut self, value_allowed: bool) -> Result<Token, ParseError> {
        let mut name = Vec::new();
        loop {
            let c = self.need()?;
            if c == b'=' {
                if !value_allowed {
                    return Err(self.error(
                        format!(
                            "'=' after {:?} where no attribute can be",
                            String::from_utf8_lossy(&name)
                        ),
                        true,
                    ));
                }
                let (value, last) = self.value()?;
                return Ok((name, last, Some(value)));
            }
            if matches!(c, b' ' | b'>' | b'/' | b'\n' | b'\r') {
                return Ok((name, c, None));
            }
            if name.len() == MAX_STR {
                return Err(self.error(
                    format!("a name longer than {MAX_STR} bytes (NCCL's limit)"),
                    true,
                ));
            }
            name.push(c);
        }
    }

    /// NCCL's `xmlGetValue`: a quoted value, and the byte after its closing quote.
    fn value(&mut self) -> Result<(Vec<u8>, u8), ParseError> {
        let quote = self.need()?;
        if quote != b'"' && quote != b'\'' {
            return Err(self.error(
                format!(
                    "a value must be in quotes, found {} (NCCL: \"Expected (double) quote\")",
                    shown_byte(quote)
                ),
                true,
            ));
        }
        let mut value = Vec::new();
        loop {
            let c = self
                .next()
                .ok_or_else(|| self.error("end of file inside a quoted value", true))?;
            if c == quote {
                break;
            }
            if value.len() == MAX_STR {
                return Err(self.error(
                    format!("a value longer than {MAX_STR} bytes (NCCL's limit)"),
                    true,
                ));
            }
            value.push(c);
        }
        Ok((value, self.need()?))
    }

    /// Skips to the end of a comment whose opening token was `<!--rest` and ended with `next`.
    fn comment(&mut self, rest: &[u8], next: u8) -> Result<(), ParseError> {
        let mut end = [b'.', b'.', b'.'];
        let shift = |c: u8, end: &mut [u8; 3]| {
            end[0] = end[1];
            end[1] = end[2];
            end[2] = c;
        };
        for &c in rest {
            shift(c, &mut end);
        }
        shift(next, &mut end);
        while &end != b"-->" {
            let c = self
                .next()
                .ok_or_else(|| self.error("unterminated comment", true))?;
            shift(c, &mut end);
        }
        Ok(())
    }
}

fn text(bytes: Vec<u8>, r: &Reader, what: &str) -> Result<String, ParseError> {
    if bytes.contains(&0) {
        return Err(r.error(format!("a NUL byte in {what}"), false));
    }
    String::from_utf8(bytes).map_err(|_| {
        r.error(
            format!("{what} holds bytes that are not UTF-8 (NCCL compares bytes; gdrdoctor cannot judge them)"),
            false,
        )
    })
}

/// Reads a topology file by NCCL's rules, within gdrdoctor's bounds.
pub fn parse(bytes: &[u8]) -> Result<Document, ParseError> {
    let mut r = Reader {
        bytes,
        pos: 0,
        line: 1,
        column: 0,
    };
    if bytes.len() > MAX_BYTES {
        return Err(r.error(
            format!(
                "{} bytes, over the {MAX_BYTES}-byte limit (a topology NCCL can load is far smaller)",
                bytes.len()
            ),
            false,
        ));
    }
    let mut tree = Tree::default();
    loop {
        // Between elements: NCCL's xmlGetNode skips only these three.
        let c = loop {
            match r.next() {
                None => return tree.end(&r),
                Some(b' ' | b'\n' | b'\r') => {}
                Some(c) => break c,
            }
        };
        if c != b'<' {
            let why = if c == b'\t' {
                "a tab between elements: NCCL accepts only spaces and newlines there (\"expecting '<'\")".to_owned()
            } else {
                format!(
                    "expected '<', found {} (NCCL allows no text between elements)",
                    shown_byte(c)
                )
            };
            return Err(r.error(why, true));
        }
        let line = r.line;
        let (name, last, value) = r.token(false)?;
        debug_assert!(value.is_none());
        if let Some(rest) = name.strip_prefix(b"!--") {
            r.comment(rest, last)?;
            continue;
        }
        refuse_markup(&r, &name)?;
        if name.is_empty() && last == b'/' {
            tree.close(&mut r)?;
            continue;
        }
        let (element, single) = r.open_tag(name, last, line)?;
        tree.add(&r, element, single)?;
    }
}

/// `<?xml ...?>`, `<!DOCTYPE`, `<![CDATA[`: markup NCCL's reader cannot take.
fn refuse_markup(r: &Reader, name: &[u8]) -> Result<(), ParseError> {
    if name.starts_with(b"?") {
        return Err(r.error(
            "an XML declaration (<?xml ...?>): NCCL's reader does not accept one (\"expected >, got '?'\"); remove the line",
            true,
        ));
    }
    if name.starts_with(b"!") {
        let what = String::from_utf8_lossy(name).into_owned();
        return Err(r.error(
            format!(
                "<{what}: a DOCTYPE, entity or CDATA section, which NCCL's reader cannot parse and gdrdoctor does not expand"
            ),
            true,
        ));
    }
    Ok(())
}

impl Reader<'_> {
    /// The rest of an opening tag whose name was read (`last`: the byte that ended it; `line`:
    /// the tag's own): its attributes, and whether it closes itself (`<gpu ... />`).
    fn open_tag(
        &mut self,
        name: Vec<u8>,
        mut last: u8,
        line: usize,
    ) -> Result<(Element, bool), ParseError> {
        let name = text(name, self, "an element name")?;
        if name.is_empty() {
            return Err(self.error("an element without a name", true));
        }
        let mut attrs = Vec::new();
        while last == b' ' {
            let (key, l, value) = self.token(true)?;
            last = l;
            // Two spaces in a row make NCCL read an empty attribute; it has no effect.
            if key.is_empty() && value.is_none() {
                continue;
            }
            let key = text(key, self, "an attribute name")?;
            let value = match value {
                Some(v) => text(v, self, &format!("the value of {key}"))?,
                None => String::new(),
            };
            attrs.push((key, value));
        }
        let single = last == b'/';
        if single {
            let (_, l, _) = self.token(false)?;
            last = l;
        }
        if last != b'>' {
            let why = match last {
                b'\n' | b'\r' => format!(
                    "<{name}> continues on the next line: NCCL reads a tag on one line only (\"expected >\")"
                ),
                c => format!("<{name}> ends with {}, not '>'", shown_byte(c)),
            };
            // Named at the tag's own line: a newline may have moved the reader past it.
            let mut e = self.error(why, true);
            if e.line != line {
                (e.line, e.column) = (line, 1);
            }
            return Err(e);
        }
        let element = Element {
            name,
            attrs,
            line,
            children: Vec::new(),
        };
        Ok((element, single))
    }
}

/// The elements read so far: the open ones, innermost last, and the document's top level.
#[derive(Default)]
struct Tree {
    stack: Vec<Element>,
    top: Vec<Element>,
    elements: usize,
}

impl Tree {
    /// The end of the file: every element must be closed.
    fn end(self, r: &Reader) -> Result<Document, ParseError> {
        if let Some(open) = self.stack.last() {
            return Err(r.error(
                format!(
                    "end of file with <{}> (line {}) still open",
                    open.name, open.line
                ),
                true,
            ));
        }
        Ok(Document {
            top: self.top,
            elements: self.elements,
        })
    }

    /// A closing tag (`</` read): it must close the innermost open element.
    fn close(&mut self, r: &mut Reader) -> Result<(), ParseError> {
        let (close, last, _) = r.token(false)?;
        let close = text(close, r, "a closing tag")?;
        if last != b'>' {
            return Err(r.error(
                format!("</{close} ends with {}, not '>'", shown_byte(last)),
                true,
            ));
        }
        let Some(open) = self.stack.pop() else {
            return Err(r.error(format!("</{close}> closes nothing"), true));
        };
        if open.name != close {
            return Err(r.error(
                format!(
                    "</{close}> closes <{}> opened at line {} (NCCL: \"XML Mismatch\")",
                    open.name, open.line
                ),
                true,
            ));
        }
        self.attach(open);
        Ok(())
    }

    /// An element whose opening tag was read: kept open, or (`single`) placed at once.
    fn add(&mut self, r: &Reader, element: Element, single: bool) -> Result<(), ParseError> {
        self.elements += 1;
        if self.elements > MAX_ELEMENTS {
            return Err(r.error(
                format!("more than {MAX_ELEMENTS} elements (NCCL loads at most {NCCL_MAX_NODES})"),
                true,
            ));
        }
        if single {
            self.attach(element);
        } else {
            if self.stack.len() == MAX_DEPTH {
                return Err(r.error(format!("nested deeper than {MAX_DEPTH} levels"), false));
            }
            self.stack.push(element);
        }
        Ok(())
    }

    /// A finished element goes under the open one, or to the top level.
    fn attach(&mut self, element: Element) {
        match self.stack.last_mut() {
            Some(parent) => parent.children.push(element),
            None => self.top.push(element),
        }
    }
}
