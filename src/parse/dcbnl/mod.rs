//! The kernel's DCB configuration as dcbnl answers it over rtnetlink: the request
//! (`RTM_GETDCB` with a `struct dcbmsg` and `DCB_ATTR_IFNAME`) and the replies to
//! `DCB_CMD_IEEE_GET` (PFC, ETS, the APP table, the buffers, the DCBX mode) and `DCB_CMD_GDCBX`.
//!
//! Layouts and numbers: include/uapi/linux/dcbnl.h (`struct ieee_pfc`, `ieee_ets`, `dcb_app`,
//! `dcbnl_buffer`, `enum dcbnl_attrs`, `ieee_attrs`, `ieee_attrs_app`), include/uapi/linux/
//! netlink.h (`nlmsghdr`, `nlmsgerr`, `nlattr`) and rtnetlink.h (`RTM_GETDCB` = 78). What the
//! kernel puts in a reply and in which order: net/dcb/dcbnl.c (`dcbnl_ieee_fill`,
//! `dcbnl_getdcbx`, `dcb_doit`). Integers are in the host's byte order, as the kernel writes
//! them.
//!
//! A reply is read as bytes from a socket: every length in it is checked before it is used, a
//! short or inconsistent reply is a [`ReplyError::Malformed`] naming the byte where it broke,
//! and the kernel's own refusal (`NLMSG_ERROR`: `-EOPNOTSUPP` from a driver without DCB,
//! `-ENODEV`) is a [`ReplyError::Kernel`] with its errno. The reader follows a fixed schema
//! (the message, `DCB_ATTR_IEEE`, its APP and trust tables): it descends only into those, so
//! no nesting in a reply can make it recurse.

use serde::{Deserialize, Serialize};

/// `RTM_GETDCB` (include/uapi/linux/rtnetlink.h).
pub const RTM_GETDCB: u16 = 78;
/// `enum dcbnl_commands`: the IEEE 802.1Qaz configuration, and the DCBX mode.
pub const DCB_CMD_IEEE_GET: u8 = 21;
pub const DCB_CMD_GDCBX: u8 = 22;

/// The DCBX mode bits (`DCB_CAP_DCBX_*`): who runs DCBX and which flavours it speaks.
pub mod dcbx {
    /// The host's LLDP agent negotiates and sets the device.
    pub const HOST: u8 = 0x01;
    /// Another entity (the NIC's firmware) negotiates: what the switch says can change the
    /// device's PFC after boot.
    pub const LLD_MANAGED: u8 = 0x02;
    pub const VER_CEE: u8 = 0x04;
    pub const VER_IEEE: u8 = 0x08;
    /// No negotiation: the initial configuration stands.
    pub const STATIC: u8 = 0x10;
}

/// APP table selectors (`IEEE_8021QAZ_APP_SEL_*`, `DCB_APP_SEL_PCP`).
pub mod selector {
    pub const ETHERTYPE: u8 = 1;
    pub const STREAM: u8 = 2;
    pub const DGRAM: u8 = 3;
    pub const ANY: u8 = 4;
    /// Differentiated Services Code Point: `protocol` is the DSCP, `priority` what it maps to.
    pub const DSCP: u8 = 5;
    /// Not an IEEE selector: the PCP (802.1p) trust and rewrite entries.
    pub const PCP: u8 = 255;
}

/// Netlink's message types and flags (include/uapi/linux/netlink.h).
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_HDRLEN: usize = 16;
const NLA_HDRLEN: usize = 4;
/// `nla_type` without `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER`: newer tables of the reply
/// (`DCB_ATTR_DCB_REWR_TABLE`, the trust table) are started with `nla_nest_start`, which sets
/// the nested flag.
const NLA_TYPE_MASK: u16 = 0x3fff;
/// `struct dcbmsg`: `dcb_family`, `cmd`, `dcb_pad`.
const DCBMSG_LEN: usize = 4;
/// IFNAMSIZ: a netdev name and its NUL.
const IFNAMSIZ: usize = 16;

/// `enum dcbnl_attrs`.
const DCB_ATTR_IFNAME: u16 = 1;
const DCB_ATTR_IEEE: u16 = 13;
const DCB_ATTR_DCBX: u16 = 14;
/// `enum ieee_attrs`.
const DCB_ATTR_IEEE_ETS: u16 = 1;
const DCB_ATTR_IEEE_PFC: u16 = 2;
const DCB_ATTR_IEEE_APP_TABLE: u16 = 3;
const DCB_ATTR_DCB_BUFFER: u16 = 10;
const DCB_ATTR_DCB_APP_TRUST_TABLE: u16 = 11;
/// `enum ieee_attrs_app`: an entry with an IEEE selector, and one with another (PCP).
const DCB_ATTR_IEEE_APP: u16 = 1;
const DCB_ATTR_DCB_APP: u16 = 2;

/// `sizeof` of the kernel's structs on every architecture Linux runs (checked against the
/// headers with `offsetof`): `ieee_pfc` has a pad byte before `delay` and four before
/// `requests`.
const IEEE_PFC_LEN: usize = 136;
const IEEE_ETS_LEN: usize = 59;
const DCB_APP_LEN: usize = 4;
const DCBNL_BUFFER_LEN: usize = 44;

/// What dcbnl said of one netdev.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dcb {
    /// `DCB_ATTR_IEEE_PFC`; absent when the driver has no `ieee_getpfc` or it failed.
    pub pfc: Option<Pfc>,
    /// `DCB_ATTR_IEEE_ETS`.
    pub ets: Option<Ets>,
    /// `DCB_ATTR_IEEE_APP_TABLE`, in the kernel's order.
    pub app: Vec<App>,
    /// `DCB_ATTR_DCB_APP_TRUST_TABLE`: the selectors the port trusts, most trusted first;
    /// absent where the driver has no `dcbnl_getapptrust` (mlx5 among them: there DSCP trust
    /// shows as DSCP entries in `app`).
    pub trust: Option<Vec<u8>>,
    /// `DCB_ATTR_DCB_BUFFER`.
    pub buffer: Option<Buffer>,
    /// `DCB_ATTR_DCBX`: the [`dcbx`] bits; absent where the driver has no `getdcbx`.
    pub dcbx: Option<u8>,
}

/// `struct ieee_pfc`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pfc {
    /// `pfc_cap`: how many traffic classes may have PFC at once.
    pub cap: u8,
    /// `pfc_en`: bit N set = PFC on for priority N.
    pub enabled: u8,
    /// `mbc`: MACsec bypass capability.
    pub mbc: u8,
    /// `delay`: the allowance for the link's round trip, in bits.
    pub delay: u16,
    /// PFC frames sent, per priority.
    pub requests: [u64; 8],
    /// PFC frames received, per priority.
    pub indications: [u64; 8],
}

impl Pfc {
    /// Whether PFC is on for `priority` (0-7).
    pub fn on(&self, priority: u8) -> bool {
        priority < 8 && self.enabled & (1 << priority) != 0
    }

    /// The priorities with PFC on, lowest first.
    pub fn priorities(&self) -> Vec<u8> {
        (0..8).filter(|&p| self.on(p)).collect()
    }

    /// The priorities with PFC on as a report says them: `3`, `3,4`, or `none`.
    pub fn shown(&self) -> String {
        let on = self.priorities();
        if on.is_empty() {
            return "none".into();
        }
        on.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
    }

    /// `pfc_en 0x08 (priorities 3)`: the evidence of a report.
    pub fn evidence(&self) -> String {
        format!("0x{:02x} (priorities {})", self.enabled, self.shown())
    }
}

/// `struct ieee_ets`, less the recommendation TLV's fields (`tc_reco_*`, `reco_prio_tc`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ets {
    pub willing: u8,
    pub ets_cap: u8,
    pub cbs: u8,
    /// Transmit bandwidth per traffic class, percent.
    pub tc_tx_bw: [u8; 8],
    pub tc_rx_bw: [u8; 8],
    /// Transmission selection per traffic class: 0 strict, 1 credit-based shaper, 2 ETS,
    /// 255 vendor.
    pub tc_tsa: [u8; 8],
    /// Priority N's traffic class.
    pub prio_tc: [u8; 8],
}

/// `struct dcb_app`: one APP table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct App {
    /// What `protocol` is ([`selector`]): `5` a DSCP, `1` an EtherType, ...
    pub selector: u8,
    /// The priority traffic that matches is given.
    pub priority: u8,
    pub protocol: u16,
}

/// `struct dcbnl_buffer`: the port's receive buffers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffer {
    /// Priority N's buffer.
    pub prio2buffer: [u8; 8],
    /// Each buffer's size, bytes.
    pub buffer_size: [u32; 8],
    pub total_size: u32,
}

/// Why a reply says nothing of the netdev.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// The kernel refused the request (`NLMSG_ERROR`): the errno, positive (`EOPNOTSUPP` for
    /// a driver without DCB or a kernel without CONFIG_DCB, `ENODEV` for no such netdev).
    Kernel(i32),
    /// The bytes are not such a reply: what was wrong, and where.
    Malformed(String),
}

impl std::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplyError::Kernel(errno) => write!(f, "the kernel answered errno {errno}"),
            ReplyError::Malformed(why) => write!(f, "not a dcbnl reply: {why}"),
        }
    }
}

fn malformed<T>(why: impl Into<String>) -> Result<T, ReplyError> {
    Err(ReplyError::Malformed(why.into()))
}

/// Whether `name` can be asked for: a netdev name fits IFNAMSIZ with its NUL and has no NUL,
/// `/`, `:` or space in it (the kernel's `dev_valid_name`, net/core/dev.c).
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() < IFNAMSIZ
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == 0 || b == b'/' || b == b':' || b.is_ascii_whitespace())
}

/// The request for `cmd` on `ifname`: one `RTM_GETDCB` message, `NLM_F_REQUEST` only (no
/// `NLM_F_ACK`: the reply or the error is the only answer). `None` for a name the kernel could
/// not hold ([`valid_ifname`]).
pub fn request(cmd: u8, ifname: &str, seq: u32) -> Option<Vec<u8>> {
    if !valid_ifname(ifname) {
        return None;
    }
    let name_len = ifname.len() + 1;
    let attr_len = NLA_HDRLEN + name_len;
    let total = NLMSG_HDRLEN + DCBMSG_LEN + align(attr_len);
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_GETDCB.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: the kernel fills in the sender's
    // struct dcbmsg: AF_UNSPEC, the command, the pad.
    m.extend_from_slice(&[0, cmd, 0, 0]);
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&DCB_ATTR_IFNAME.to_ne_bytes());
    m.extend_from_slice(ifname.as_bytes());
    m.resize(total, 0);
    Some(m)
}

/// The reply to `DCB_CMD_IEEE_GET` for `ifname`, sent with `seq`.
pub fn parse_ieee(reply: &[u8], seq: u32, ifname: &str) -> Result<Dcb, ReplyError> {
    let (attrs, at) = message(reply, seq, DCB_CMD_IEEE_GET)?;
    let top = Attrs::read(attrs, at, "the message")?;
    check_ifname(&top, ifname)?;
    let mut dcb = Dcb {
        dcbx: dcbx_attr(&top)?,
        ..Dcb::default()
    };
    let Some(ieee) = top.one(DCB_ATTR_IEEE, "DCB_ATTR_IEEE")? else {
        return malformed("no DCB_ATTR_IEEE in the reply");
    };
    let ieee = Attrs::read(ieee.data, ieee.at + NLA_HDRLEN, "DCB_ATTR_IEEE")?;
    if let Some(a) = ieee.one(DCB_ATTR_IEEE_PFC, "DCB_ATTR_IEEE_PFC")? {
        dcb.pfc = Some(pfc(a.sized(
            "DCB_ATTR_IEEE_PFC",
            "struct ieee_pfc",
            IEEE_PFC_LEN,
        )?));
    }
    if let Some(a) = ieee.one(DCB_ATTR_IEEE_ETS, "DCB_ATTR_IEEE_ETS")? {
        dcb.ets = Some(ets(a.sized(
            "DCB_ATTR_IEEE_ETS",
            "struct ieee_ets",
            IEEE_ETS_LEN,
        )?));
    }
    if let Some(a) = ieee.one(DCB_ATTR_DCB_BUFFER, "DCB_ATTR_DCB_BUFFER")? {
        let b = a.sized(
            "DCB_ATTR_DCB_BUFFER",
            "struct dcbnl_buffer",
            DCBNL_BUFFER_LEN,
        )?;
        dcb.buffer = Some(buffer(b));
    }
    if let Some(t) = ieee.one(DCB_ATTR_IEEE_APP_TABLE, "DCB_ATTR_IEEE_APP_TABLE")? {
        let table = Attrs::read(t.data, t.at + NLA_HDRLEN, "DCB_ATTR_IEEE_APP_TABLE")?;
        for e in table.of(&[DCB_ATTR_IEEE_APP, DCB_ATTR_DCB_APP]) {
            let b = e.sized("an APP table entry", "struct dcb_app", DCB_APP_LEN)?;
            dcb.app.push(App {
                selector: b[0],
                priority: b[1],
                protocol: u16::from_ne_bytes([b[2], b[3]]),
            });
        }
    }
    if let Some(t) = ieee.one(DCB_ATTR_DCB_APP_TRUST_TABLE, "DCB_ATTR_DCB_APP_TRUST_TABLE")? {
        let table = Attrs::read(t.data, t.at + NLA_HDRLEN, "DCB_ATTR_DCB_APP_TRUST_TABLE")?;
        let mut trust = Vec::new();
        for e in table.of(&[DCB_ATTR_IEEE_APP, DCB_ATTR_DCB_APP]) {
            trust.push(e.sized("a trust table entry", "a selector (u8)", 1)?[0]);
        }
        dcb.trust = Some(trust);
    }
    Ok(dcb)
}

/// The reply to `DCB_CMD_GDCBX` (`DCB_ATTR_DCBX` alone; no name), sent with `seq`.
pub fn parse_dcbx(reply: &[u8], seq: u32) -> Result<Option<u8>, ReplyError> {
    let (attrs, at) = message(reply, seq, DCB_CMD_GDCBX)?;
    let top = Attrs::read(attrs, at, "the message")?;
    dcbx_attr(&top)
}

fn dcbx_attr(top: &Attrs) -> Result<Option<u8>, ReplyError> {
    top.one(DCB_ATTR_DCBX, "DCB_ATTR_DCBX")?
        .map(|a| a.sized("DCB_ATTR_DCBX", "a u8", 1).map(|b| b[0]))
        .transpose()
}

/// A reply that names a netdev names the one asked about.
fn check_ifname(top: &Attrs, ifname: &str) -> Result<(), ReplyError> {
    let Some(a) = top.one(DCB_ATTR_IFNAME, "DCB_ATTR_IFNAME")? else {
        return Ok(());
    };
    let name = a.data.split(|&b| b == 0).next().unwrap_or_default();
    if name != ifname.as_bytes() {
        return malformed(format!(
            "the reply is for {:?}, not {ifname:?}",
            String::from_utf8_lossy(name)
        ));
    }
    Ok(())
}

/// The attributes of the one `RTM_GETDCB` message for `cmd` in `reply`, and their offset; or
/// the kernel's error. Acknowledgements and no-ops around it are skipped.
fn message(reply: &[u8], seq: u32, cmd: u8) -> Result<(&[u8], usize), ReplyError> {
    let mut at = 0;
    while at < reply.len() {
        let rest = &reply[at..];
        if rest.len() < NLMSG_HDRLEN {
            return malformed(format!(
                "{} bytes at byte {at}: a message header is {NLMSG_HDRLEN}",
                rest.len()
            ));
        }
        let len = u32::from_ne_bytes(word(rest, 0)) as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return malformed(format!(
                "the message at byte {at} claims {len} bytes; {} are there",
                rest.len()
            ));
        }
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        let got_seq = u32::from_ne_bytes(word(rest, 8));
        if got_seq != seq {
            return malformed(format!(
                "the message at byte {at} answers request {got_seq}, not {seq}"
            ));
        }
        let body = &rest[NLMSG_HDRLEN..len];
        match kind {
            NLMSG_ERROR => {
                if body.len() < 4 {
                    return malformed(format!("the error message at byte {at} has no errno"));
                }
                match i32::from_ne_bytes(word(body, 0)) {
                    0 => {} // an acknowledgement
                    e if e < 0 && e > -4096 => return Err(ReplyError::Kernel(-e)),
                    e => return malformed(format!("error {e} at byte {at}: not an errno")),
                }
            }
            NLMSG_NOOP | NLMSG_DONE => {}
            RTM_GETDCB => {
                if body.len() < DCBMSG_LEN {
                    return malformed(format!(
                        "the message at byte {at} has {} bytes after its header: struct dcbmsg is {DCBMSG_LEN}",
                        body.len()
                    ));
                }
                if body[1] != cmd {
                    return malformed(format!("the reply is to command {}, not {cmd}", body[1]));
                }
                return Ok((&body[DCBMSG_LEN..], at + NLMSG_HDRLEN + DCBMSG_LEN));
            }
            other => {
                return malformed(format!("message type {other} at byte {at}"));
            }
        }
        at += align(len).min(rest.len());
    }
    malformed("no reply in the message")
}

/// One attribute: its type (flags cleared), its payload, and its offset in the reply.
#[derive(Clone, Copy)]
struct Attr<'a> {
    kind: u16,
    data: &'a [u8],
    at: usize,
}

impl<'a> Attr<'a> {
    /// The payload, at least `len` bytes (a newer kernel may append fields: they are not read).
    fn sized(&self, what: &str, layout: &str, len: usize) -> Result<&'a [u8], ReplyError> {
        if self.data.len() < len {
            return malformed(format!(
                "{what} at byte {} has {} bytes; {layout} has {len}",
                self.at,
                self.data.len()
            ));
        }
        Ok(&self.data[..len])
    }
}

/// The attributes of one level, every length checked.
struct Attrs<'a> {
    list: Vec<Attr<'a>>,
}

impl<'a> Attrs<'a> {
    /// `bytes` is a run of attributes starting at byte `at` of the reply, inside `what`.
    fn read(bytes: &'a [u8], at: usize, what: &str) -> Result<Attrs<'a>, ReplyError> {
        let mut list = Vec::new();
        let mut off = 0;
        while off < bytes.len() {
            let rest = &bytes[off..];
            let pos = at + off;
            if rest.len() < NLA_HDRLEN {
                return malformed(format!(
                    "{} stray bytes at byte {pos} in {what}",
                    rest.len()
                ));
            }
            let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
            if len < NLA_HDRLEN {
                return malformed(format!(
                    "the attribute at byte {pos} in {what} claims {len} bytes, less than its header"
                ));
            }
            if len > rest.len() {
                return malformed(format!(
                    "the attribute at byte {pos} in {what} claims {len} bytes; {} are left",
                    rest.len()
                ));
            }
            list.push(Attr {
                kind: u16::from_ne_bytes([rest[2], rest[3]]) & NLA_TYPE_MASK,
                data: &rest[NLA_HDRLEN..len],
                at: pos,
            });
            // The last attribute may end without its padding.
            off += align(len).min(rest.len());
        }
        Ok(Attrs { list })
    }

    /// The attribute of `kind`, if there is one; twice is an error (the kernel writes each
    /// once: a second one would leave the reader to pick).
    fn one(&self, kind: u16, name: &str) -> Result<Option<Attr<'a>>, ReplyError> {
        let mut found = self.list.iter().filter(|a| a.kind == kind);
        let first = found.next().copied();
        if let Some(second) = found.next() {
            return malformed(format!("{name} twice (the second at byte {})", second.at));
        }
        Ok(first)
    }

    /// The attributes of these kinds, in order (a table's entries).
    fn of(&self, kinds: &[u16]) -> Vec<Attr<'a>> {
        self.list
            .iter()
            .filter(|a| kinds.contains(&a.kind))
            .copied()
            .collect()
    }
}

fn align(len: usize) -> usize {
    len.saturating_add(3) & !3
}

/// Four bytes at `at` (the caller checked the length).
fn word(b: &[u8], at: usize) -> [u8; 4] {
    [b[at], b[at + 1], b[at + 2], b[at + 3]]
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(w)
}

fn eight(b: &[u8], at: usize) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    a
}

/// `struct ieee_pfc`: `pfc_cap` 0, `pfc_en` 1, `mbc` 2, `delay` 4 (u16), `requests` 8 and
/// `indications` 72 (u64[8] each).
fn pfc(b: &[u8]) -> Pfc {
    Pfc {
        cap: b[0],
        enabled: b[1],
        mbc: b[2],
        delay: u16::from_ne_bytes([b[4], b[5]]),
        requests: std::array::from_fn(|i| u64_at(b, 8 + 8 * i)),
        indications: std::array::from_fn(|i| u64_at(b, 72 + 8 * i)),
    }
}

/// `struct ieee_ets`: `willing` 0, `ets_cap` 1, `cbs` 2, then u8[8] arrays at 3 (`tc_tx_bw`),
/// 11 (`tc_rx_bw`), 19 (`tc_tsa`), 27 (`prio_tc`), 35, 43, 51 (the recommendation).
fn ets(b: &[u8]) -> Ets {
    Ets {
        willing: b[0],
        ets_cap: b[1],
        cbs: b[2],
        tc_tx_bw: eight(b, 3),
        tc_rx_bw: eight(b, 11),
        tc_tsa: eight(b, 19),
        prio_tc: eight(b, 27),
    }
}

/// `struct dcbnl_buffer`: `prio2buffer` u8[8] at 0, `buffer_size` u32[8] at 8, `total_size`
/// u32 at 40.
fn buffer(b: &[u8]) -> Buffer {
    Buffer {
        prio2buffer: eight(b, 0),
        buffer_size: std::array::from_fn(|i| u32::from_ne_bytes(word(b, 8 + 4 * i))),
        total_size: u32::from_ne_bytes(word(b, 40)),
    }
}

// The kernel's layouts written out byte by byte, as a little-endian host has them.
#[cfg(all(test, target_endian = "little"))]
mod tests;
