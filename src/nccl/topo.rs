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
//!   are read and dropped with their subtree; the top element must be `system version="1"`.
//!
//! And bounded, since the file is untrusted: at most [`MAX_BYTES`] (the read limit of every
//! node file), [`MAX_DEPTH`] levels and [`MAX_ELEMENTS`] elements, no recursion, no entity
//! expansion. Names and values must be UTF-8 (NCCL itself does not care; gdrdoctor cannot
//! compare what it cannot read).
//!
//! `gdrdoctor nccl` and the checks use [`parse`] and [`Topology::from_document`]; the typed view
//! keeps every element's line so that findings can point into the file.

use crate::parse::pci::Bdf;

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
    // Open elements, innermost last; the document's top level is collected apart.
    let mut stack: Vec<Element> = Vec::new();
    let mut top: Vec<Element> = Vec::new();
    let mut elements = 0usize;
    loop {
        // Between elements: NCCL's xmlGetNode skips only these three.
        let c = loop {
            match r.next() {
                None => {
                    if let Some(open) = stack.last() {
                        return Err(r.error(
                            format!(
                                "end of file with <{}> (line {}) still open",
                                open.name, open.line
                            ),
                            true,
                        ));
                    }
                    return Ok(Document { top, elements });
                }
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
        let (name, mut last, value) = r.token(false)?;
        debug_assert!(value.is_none());
        if let Some(rest) = name.strip_prefix(b"!--") {
            r.comment(rest, last)?;
            continue;
        }
        if name.starts_with(b"?") {
            return Err(r.error(
                "an XML declaration (<?xml ...?>): NCCL's reader does not accept one (\"expected >, got '?'\"); remove the line",
                true,
            ));
        }
        if name.starts_with(b"!") {
            let what = String::from_utf8_lossy(&name).into_owned();
            return Err(r.error(
                format!(
                    "<{what}: a DOCTYPE, entity or CDATA section, which NCCL's reader cannot parse and gdrdoctor does not expand"
                ),
                true,
            ));
        }
        if name.is_empty() && last == b'/' {
            let (close, last, _) = r.token(false)?;
            let close = text(close, &r, "a closing tag")?;
            if last != b'>' {
                return Err(r.error(
                    format!("</{close} ends with {}, not '>'", shown_byte(last)),
                    true,
                ));
            }
            let Some(open) = stack.pop() else {
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
            match stack.last_mut() {
                Some(parent) => parent.children.push(open),
                None => top.push(open),
            }
            continue;
        }
        let name = text(name, &r, "an element name")?;
        if name.is_empty() {
            return Err(r.error("an element without a name", true));
        }
        let mut attrs = Vec::new();
        while last == b' ' {
            let (key, l, value) = r.token(true)?;
            last = l;
            // Two spaces in a row make NCCL read an empty attribute; it has no effect.
            if key.is_empty() && value.is_none() {
                continue;
            }
            let key = text(key, &r, "an attribute name")?;
            let value = match value {
                Some(v) => text(v, &r, &format!("the value of {key}"))?,
                None => String::new(),
            };
            attrs.push((key, value));
        }
        let single = last == b'/';
        if single {
            let (_, l, _) = r.token(false)?;
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
            let mut e = r.error(why, true);
            if e.line != line {
                (e.line, e.column) = (line, 1);
            }
            return Err(e);
        }
        elements += 1;
        if elements > MAX_ELEMENTS {
            return Err(r.error(
                format!("more than {MAX_ELEMENTS} elements (NCCL loads at most {NCCL_MAX_NODES})"),
                true,
            ));
        }
        let element = Element {
            name,
            attrs,
            line,
            children: Vec::new(),
        };
        if single {
            match stack.last_mut() {
                Some(parent) => parent.children.push(element),
                None => top.push(element),
            }
        } else {
            if stack.len() == MAX_DEPTH {
                return Err(r.error(format!("nested deeper than {MAX_DEPTH} levels"), false));
            }
            stack.push(element);
        }
    }
}

/// How a bus ID in the file compares with one of the node's functions. NCCL compares the
/// strings exactly (`strcmp`, src/graph/xml.h `xmlFindTagKv`) with the address it prints
/// itself: lower case, `%04x:%02x:%02x.%x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusidMatch {
    Exact,
    /// The same address in other case or padding: NCCL does not match it.
    Differently,
    No,
}

pub fn busid_matches(file: &str, bdf: Bdf) -> BusidMatch {
    if file == bdf.to_string() {
        BusidMatch::Exact
    } else if Bdf::parse(file) == Some(bdf) {
        BusidMatch::Differently
    } else {
        BusidMatch::No
    }
}

/// What NCCL makes of a `pci` element (src/graph/topo.cc `ncclTopoAddPci`, `kvDictPciClass`,
/// compared as prefixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PciKind {
    /// A switch (class 0x060400, or a class NCCL does not know).
    Switch,
    Gpu,
    /// Holds a `nic`, or is of class 0x02 (NCCL attaches the NIC it finds at that address).
    Nic,
    /// NVSwitch (0x068000) or CPU (0x068001): not on a GPU-NIC path.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    Cpu(usize),
    Pci(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpu {
    pub numaid: Option<String>,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Net {
    pub name: Option<String>,
    pub dev: Option<String>,
    pub port: Option<String>,
    /// What the file says of GPUDirect RDMA for it; NCCL keeps a value the file sets.
    pub gdr: Option<String>,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pci {
    pub busid: Option<String>,
    pub class: Option<String>,
    pub kind: PciKind,
    pub parent: Parent,
    pub line: usize,
    /// vendor, device, subsystem vendor and device as NCCL packs them (`ncclTopoGetIntDevice`).
    pub id: u64,
    /// The `gpu` element's line and `gdr` attribute, when there is one.
    pub gpu: Option<(usize, Option<String>)>,
    /// The `net` elements of its `nic`.
    pub nets: Vec<Net>,
}

/// The elements NCCL uses, as a typed tree (src/graph/xml.cc's handler tables: `system` >
/// `cpu` > `pci`|`nic`; `pci` > `pci`|`gpu`|`nic`|`pcilink`; `nic` > `net`; `gpu` >
/// `nvlink`|`c2c`). Everything else is listed in `ignored`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    /// The `system` element's line and `version` attribute; `None` without a `system`.
    pub system: Option<(usize, Option<String>)>,
    pub cpus: Vec<Cpu>,
    pub pcis: Vec<Pci>,
    /// `nic` elements directly under a `cpu` (virtual NICs): the cpu and the nets.
    pub cpu_nics: Vec<(usize, Vec<Net>)>,
    /// Elements NCCL drops, with their lines: `(name, parent, line)`.
    pub ignored: Vec<(String, String, usize)>,
    /// Elements NCCL keeps (its node count).
    pub kept: usize,
    /// The most children any kept element has, and its line.
    pub widest: (usize, usize),
}

/// `strtol(str, NULL, 0)` for the id fields.
fn num(s: Option<&str>) -> u64 {
    let (v, _) = super::params::nccl_int(s.unwrap_or(""));
    v.max(0) as u64
}

impl Topology {
    /// The typed view of a document: the first `system` and what NCCL keeps under it.
    pub fn from_document(doc: &Document) -> Topology {
        let mut t = Topology::default();
        for e in &doc.top {
            if e.name == "system" && t.system.is_none() {
                t.system = Some((e.line, e.attr("version").map(str::to_owned)));
                t.kept += 1;
                t.note_width(e);
                for c in &e.children {
                    if c.name == "cpu" {
                        t.cpu(c);
                    } else {
                        t.ignored.push((c.name.clone(), "system".into(), c.line));
                    }
                }
            } else {
                t.ignored
                    .push((e.name.clone(), "the top level".into(), e.line));
            }
        }
        t
    }

    fn note_width(&mut self, e: &Element) {
        if e.children.len() > self.widest.0 {
            self.widest = (e.children.len(), e.line);
        }
    }

    fn cpu(&mut self, e: &Element) {
        self.kept += 1;
        self.note_width(e);
        let index = self.cpus.len();
        self.cpus.push(Cpu {
            numaid: e.attr("numaid").map(str::to_owned),
            line: e.line,
        });
        for c in &e.children {
            match c.name.as_str() {
                "pci" => self.pci(c, Parent::Cpu(index)),
                "nic" => {
                    let nets = self.nic(c);
                    self.cpu_nics.push((index, nets));
                }
                _ => self.ignored.push((c.name.clone(), "cpu".into(), c.line)),
            }
        }
    }

    fn nic(&mut self, e: &Element) -> Vec<Net> {
        self.kept += 1;
        self.note_width(e);
        let mut nets = Vec::new();
        for c in &e.children {
            if c.name == "net" {
                self.kept += 1;
                self.ignored.extend(
                    c.children
                        .iter()
                        .map(|x| (x.name.clone(), "net".into(), x.line)),
                );
                nets.push(Net {
                    name: c.attr("name").map(str::to_owned),
                    dev: c.attr("dev").map(str::to_owned),
                    port: c.attr("port").map(str::to_owned),
                    gdr: c.attr("gdr").map(str::to_owned),
                    line: c.line,
                });
            } else {
                self.ignored.push((c.name.clone(), "nic".into(), c.line));
            }
        }
        nets
    }

    fn pci(&mut self, e: &Element, parent: Parent) {
        self.kept += 1;
        self.note_width(e);
        let index = self.pcis.len();
        let class = e.attr("class").map(str::to_owned);
        let id = (num(e.attr("vendor")) << 48)
            .wrapping_add(num(e.attr("device")) << 32)
            .wrapping_add(num(e.attr("subsystem_vendor")) << 16)
            .wrapping_add(num(e.attr("subsystem_device")));
        self.pcis.push(Pci {
            busid: e.attr("busid").map(str::to_owned),
            class: class.clone(),
            kind: PciKind::Switch,
            parent,
            line: e.line,
            id,
            gpu: None,
            nets: Vec::new(),
        });
        let mut has_nic = false;
        for c in &e.children {
            match c.name.as_str() {
                "pci" => self.pci(c, Parent::Pci(index)),
                "gpu" => {
                    self.kept += 1;
                    self.kept += c
                        .children
                        .iter()
                        .filter(|x| x.name == "nvlink" || x.name == "c2c")
                        .count();
                    self.pcis[index].gpu = Some((c.line, c.attr("gdr").map(str::to_owned)));
                }
                "nic" => {
                    has_nic = true;
                    let nets = self.nic(c);
                    self.pcis[index].nets.extend(nets);
                }
                "pcilink" => self.kept += 1,
                _ => self.ignored.push((c.name.clone(), "pci".into(), c.line)),
            }
        }
        let class = class.as_deref().unwrap_or("");
        self.pcis[index].kind = if has_nic {
            PciKind::Nic
        } else if class.starts_with("0x060400") || class.starts_with("0x080100") {
            PciKind::Switch
        } else if class.starts_with("0x068000") || class.starts_with("0x068001") {
            PciKind::Other
        } else if class.starts_with("0x03") || self.pcis[index].gpu.is_some() {
            PciKind::Gpu
        } else if class.starts_with("0x02") {
            PciKind::Nic
        } else {
            PciKind::Switch
        };
    }

    /// The `pci` element with this bus ID, as NCCL finds it (the first, compared exactly).
    pub fn pci_by_busid(&self, busid: &str) -> Option<usize> {
        self.pcis
            .iter()
            .position(|p| p.busid.as_deref() == Some(busid))
    }

    /// The `pci` element holding the `net` of this name (NCCL looks NICs up by name first,
    /// src/graph/xml.cc `ncclTopoFillNet`), or the cpu index for a `nic` directly under a cpu.
    pub fn net_by_name(&self, name: &str) -> Option<(Parent, &Net)> {
        for (i, p) in self.pcis.iter().enumerate() {
            if let Some(n) = p.nets.iter().find(|n| n.name.as_deref() == Some(name)) {
                return Some((Parent::Pci(i), n));
            }
        }
        for (cpu, nets) in &self.cpu_nics {
            if let Some(n) = nets.iter().find(|n| n.name.as_deref() == Some(name)) {
                return Some((Parent::Cpu(*cpu), n));
            }
        }
        None
    }

    /// What in the file NCCL refuses outright (its communicator initialisation then fails): a
    /// missing or wrong version, more elements or children than it holds. `(line, message)`.
    pub fn refusals(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        match &self.system {
            None => {}
            Some((line, None)) => out.push((
                *line,
                "<system> has no version attribute (NCCL: \"Attribute version of node system not found\")".into(),
            )),
            Some((line, Some(v))) => {
                let (n, _) = super::params::nccl_int(v);
                if n != 1 {
                    out.push((
                        *line,
                        format!("<system version=\"{v}\">: NCCL reads only version 1 (\"XML Topology has wrong version\"; RCCL writes 2)"),
                    ));
                }
            }
        }
        if self.kept > NCCL_MAX_NODES {
            out.push((
                1,
                format!(
                    "{} elements: NCCL 2.21 and later hold at most {NCCL_MAX_NODES} (\"XML parser is limited to {NCCL_MAX_NODES} nodes\")",
                    self.kept
                ),
            ));
        }
        if self.widest.0 > NCCL_MAX_SUBS {
            out.push((
                self.widest.1,
                format!(
                    "an element with {} children: NCCL 2.21 to 2.29 hold at most {NCCL_MAX_SUBS} (32 before 2.21)",
                    self.widest.0
                ),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Azure's ND A100 v4 file, as azhpc-images ships it (fixtures/nccl-topo/ndv4-topo.xml).
    const NDV4: &str = include_str!("../../fixtures/nccl-topo/ndv4-topo.xml");
    /// A dump NCCL 2.22 wrote on an IBM Cloud H100 VSI (fixtures/nccl-topo/ibm-gx3d-h100-topo.xml).
    const IBM: &str = include_str!("../../fixtures/nccl-topo/ibm-gx3d-h100-topo.xml");
    /// RCCL's dump from ROCm/rccl#1185 (version 2, two-level Broadcom switches).
    const RCCL: &str = include_str!("../../fixtures/nccl-topo/rccl-1185-topo.xml");

    fn topo(text: &str) -> Topology {
        Topology::from_document(&parse(text.as_bytes()).unwrap())
    }

    #[test]
    fn azure_ndv4() {
        let t = topo(NDV4);
        assert_eq!(t.system, Some((1, Some("1".into()))));
        assert_eq!(t.cpus.len(), 4);
        assert_eq!(t.cpus[1].numaid.as_deref(), Some("1"));
        let gpus: Vec<&str> = t
            .pcis
            .iter()
            .filter(|p| p.kind == PciKind::Gpu)
            .filter_map(|p| p.busid.as_deref())
            .collect();
        assert_eq!(gpus.len(), 8);
        assert!(gpus.contains(&"0001:00:00.0"));
        let nic = t.pci_by_busid("0101:00:00.0").unwrap();
        assert_eq!(t.pcis[nic].kind, PciKind::Nic);
        assert_eq!(t.pcis[nic].line, 13);
        let Parent::Pci(switch) = t.pcis[nic].parent else {
            panic!()
        };
        assert_eq!(t.pcis[switch].busid.as_deref(), Some("ffff:ff:02.0"));
        assert!(t.refusals().is_empty());
        assert!(t.ignored.is_empty());
    }

    #[test]
    fn nccl_dump() {
        let t = topo(IBM);
        assert_eq!(t.cpus.len(), 2);
        let (parent, net) = t.net_by_name("mlx5_7").unwrap();
        assert_eq!(net.gdr.as_deref(), Some("1"));
        let Parent::Pci(i) = parent else { panic!() };
        assert_eq!(t.pcis[i].busid.as_deref(), Some("0000:a3:00.0"));
        assert!(t.pcis.iter().any(|p| p.gpu.is_some()));
        assert!(t.refusals().is_empty(), "{:?}", t.refusals());
        // nvlink elements are kept (NCCL counts them), and nothing is dropped.
        assert!(t.ignored.is_empty());
    }

    #[test]
    fn rccl_dump_is_read_and_its_version_refused() {
        let t = topo(RCCL);
        assert_eq!(t.pcis.iter().filter(|p| p.kind == PciKind::Gpu).count(), 8);
        let r = t.refusals();
        assert_eq!(r.len(), 1);
        assert!(r[0].1.contains("version"), "{r:?}");
    }

    #[test]
    fn what_nccl_refuses() {
        let cases: &[(&str, (usize, &str))] = &[
            (
                "<?xml version=\"1.0\"?>\n<system version=\"1\"/>\n",
                (1, "XML declaration"),
            ),
            (
                "<system version=\"1\">\n\t<cpu numaid=\"0\"/>\n</system>\n",
                (2, "tab"),
            ),
            (
                "<system version=\"1\">\n  <cpu numaid=\"0\"\n   arch=\"x86_64\"/>\n</system>\n",
                (2, "next line"),
            ),
            ("<system version=1/>\n", (1, "quotes")),
            (
                "<system version=\"1\">\n  <cpu>\n</system>\n",
                (3, "Mismatch"),
            ),
            ("<system version=\"1\">\n  <cpu/>\n", (3, "still open")),
            ("<system version=\"1\">\nhello\n</system>\n", (2, "'h'")),
            (
                "<!DOCTYPE x [<!ENTITY a \"b\">]>\n<system version=\"1\"/>\n",
                (1, "DOCTYPE"),
            ),
            (
                "<system version=\"1\"><!-- never closed\n",
                (2, "unterminated comment"),
            ),
            ("</system>\n", (1, "closes nothing")),
        ];
        for (text, (line, words)) in cases {
            let e = parse(text.as_bytes()).unwrap_err();
            assert!(e.nccl_refuses, "{text}: {e}");
            assert_eq!(e.line, *line, "{text}: {e}");
            assert!(e.message.contains(words), "{text}: {e}");
        }
        let long = format!("<system version=\"{}\"/>", "1".repeat(300));
        assert!(parse(long.as_bytes()).unwrap_err().message.contains("254"));
    }

    #[test]
    fn tolerated_as_nccl_tolerates() {
        // Comments, two spaces, single quotes, CRLF, unknown elements and attributes of any
        // release: all read; the unknown element is dropped, as NCCL drops it.
        let text = "<!-- made by hand -->\r\n<system version='1'>\r\n  <cpu  numaid=\"0\" future_attr=\"x\">\r\n    <gpu dev=\"0\"/>\r\n    <pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"90\" gdr=\"0\"/></pci>\r\n  </cpu>\r\n</system>\r\n";
        let t = topo(text);
        assert_eq!(t.cpus[0].numaid.as_deref(), Some("0"));
        assert_eq!(t.ignored, [("gpu".to_owned(), "cpu".to_owned(), 4)]);
        assert_eq!(t.pcis[0].gpu, Some((5, Some("0".into()))));
        assert_eq!(
            busid_matches("0000:01:00.0", Bdf::parse("0000:01:00.0").unwrap()),
            BusidMatch::Exact
        );
        assert_eq!(
            busid_matches("0000:0A:00.0", Bdf::parse("0000:0a:00.0").unwrap()),
            BusidMatch::Differently
        );
    }

    #[test]
    fn hostile_input_is_bounded() {
        // Deep nesting: refused at the limit, in linear time, without recursion.
        let deep = "<pci>".repeat(100_000);
        let e = parse(deep.as_bytes()).unwrap_err();
        assert!(e.message.contains("deeper"), "{e}");
        assert!(!e.nccl_refuses);
        // Huge.
        let huge = vec![b' '; MAX_BYTES + 1];
        assert!(parse(&huge).unwrap_err().message.contains("bytes"));
        // Many elements.
        let many = "<pci/>".repeat(MAX_ELEMENTS + 1);
        assert!(
            parse(many.as_bytes())
                .unwrap_err()
                .message
                .contains("elements")
        );
        // Not UTF-8.
        let e = parse(b"<system version=\"\xff\xfe\"/>").unwrap_err();
        assert!(e.message.contains("UTF-8"), "{e}");
        assert!(!e.nccl_refuses);
        // Entities are never expanded: the billion laughs is a DOCTYPE, refused at once.
        let laughs = "<!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;\">]><system version=\"1\">&lol2;</system>";
        assert!(
            parse(laughs.as_bytes())
                .unwrap_err()
                .message
                .contains("DOCTYPE")
        );
        // An entity reference in a value stays text.
        let t = topo("<system version=\"1\"><cpu numaid=\"&amp;\"/></system>");
        assert_eq!(t.cpus[0].numaid.as_deref(), Some("&amp;"));
        // Every prefix of a real file: an error or a document, never a panic.
        for n in 0..NDV4.len() {
            let _ = parse(&NDV4.as_bytes()[..n]);
        }
    }
}
