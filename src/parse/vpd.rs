//! PCI Vital Product Data, as sysfs gives it (`/sys/bus/pci/devices/<bdf>/vpd`, root only): a
//! list of resource tags (PCI Local Bus Specification 3.0, section 6.4 and appendix I). Large
//! resources start with a byte of bit 7 set, then a 16-bit little-endian length: 0x82 the
//! Identifier String, 0x90 VPD-R (read-only keywords), 0x91 VPD-W. Small resources pack the
//! length in bits 2:0; 0x78 ends the list. A keyword is two ASCII characters, a length byte and
//! that many bytes of data. ConnectX functions carry `V3` (a UUID shared by a NIC's functions,
//! its Data Direct function among them) and `SN` in VPD-R.

/// The identifier string (`NVIDIA ConnectX-8 ...`) and the read-only keywords, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vpd {
    pub identifier: Option<String>,
    pub read_only: Vec<(String, Vec<u8>)>,
}

impl Vpd {
    /// A read-only keyword's value as text: printable ASCII, trailing spaces and NULs dropped.
    /// `None` when absent, empty or not text.
    pub fn text(&self, key: &str) -> Option<String> {
        let (_, v) = self.read_only.iter().find(|(k, _)| k == key)?;
        text(v)
    }
}

fn text(bytes: &[u8]) -> Option<String> {
    let end = bytes
        .iter()
        .rposition(|b| *b != 0 && *b != b' ')
        .map_or(0, |i| i + 1);
    let t = &bytes[..end];
    (!t.is_empty() && t.iter().all(|b| b.is_ascii_graphic() || *b == b' '))
        .then(|| String::from_utf8_lossy(t).into_owned())
}

const TAG_ID_STRING: u8 = 0x82;
const TAG_READ_ONLY: u8 = 0x90;
const TAG_END: u8 = 0x78;

/// Parses what was read; a truncated or malformed list ends the walk (what was found before it
/// stays), it never panics. The specification caps VPD at 32 KiB.
pub fn parse(bytes: &[u8]) -> Vpd {
    let mut vpd = Vpd::default();
    let mut at = 0usize;
    let bytes = &bytes[..bytes.len().min(32 << 10)];
    while at < bytes.len() {
        let tag = bytes[at];
        if tag == TAG_END || tag == 0xff || tag == 0 {
            break;
        }
        let (body, len) = if tag & 0x80 != 0 {
            let Some(l) = bytes.get(at + 1..at + 3) else {
                break;
            };
            (at + 3, usize::from(u16::from_le_bytes([l[0], l[1]])))
        } else {
            (at + 1, usize::from(tag & 0x07))
        };
        let Some(data) = bytes.get(body..body + len) else {
            break;
        };
        match tag {
            TAG_ID_STRING => vpd.identifier = text(data),
            TAG_READ_ONLY => vpd.read_only.extend(keywords(data)),
            _ => {}
        }
        at = body + len;
    }
    vpd
}

fn keywords(mut data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while data.len() >= 3 {
        let len = usize::from(data[2]);
        let Some(value) = data.get(3..3 + len) else {
            break;
        };
        if data[..2].iter().all(u8::is_ascii_alphanumeric) {
            out.push((
                String::from_utf8_lossy(&data[..2]).into_owned(),
                value.to_vec(),
            ));
        }
        data = &data[3 + len..];
    }
    out
}

/// VPD bytes for the tests and the fixtures' stand-ins: an identifier string and read-only
/// keywords (the checksum keyword `RV` is left out: nothing here reads it).
#[cfg(test)]
pub fn build(identifier: &str, read_only: &[(&str, &str)]) -> Vec<u8> {
    let mut out = vec![TAG_ID_STRING];
    out.extend((identifier.len() as u16).to_le_bytes());
    out.extend(identifier.as_bytes());
    let mut ro = Vec::new();
    for (k, v) in read_only {
        ro.extend(k.as_bytes());
        ro.push(v.len() as u8);
        ro.extend(v.as_bytes());
    }
    out.push(TAG_READ_ONLY);
    out.extend((ro.len() as u16).to_le_bytes());
    out.extend(ro);
    out.push(TAG_END);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_of_a_connectx() {
        let bytes = build(
            "NVIDIA ConnectX-8 C8180 HHHL SuperNIC",
            &[
                ("PN", "900-9X81Q-00CN-ST0"),
                ("SN", "MT2436X00001"),
                ("V3", "0f5a5b1c2d3e4f50a1b2c3d4e5f60718"),
            ],
        );
        let v = parse(&bytes);
        assert_eq!(
            v.identifier.as_deref(),
            Some("NVIDIA ConnectX-8 C8180 HHHL SuperNIC")
        );
        assert_eq!(
            v.text("V3").as_deref(),
            Some("0f5a5b1c2d3e4f50a1b2c3d4e5f60718")
        );
        assert_eq!(v.text("SN").as_deref(), Some("MT2436X00001"));
        assert_eq!(v.text("V9"), None);
    }

    #[test]
    fn malformed_lists_end_the_walk() {
        let good = build("x", &[("V3", "abc")]);
        for cut in 0..good.len() {
            let _ = parse(&good[..cut]);
        }
        // A length past the end, a keyword length past its resource, binary values.
        assert_eq!(parse(&[0x82, 0xff, 0xff, b'a']), Vpd::default());
        let v = parse(&[0x90, 0x05, 0x00, b'V', b'3', 0x09, b'a', b'b']);
        assert!(v.read_only.is_empty());
        let v = parse(&[0x90, 0x05, 0x00, b'V', b'3', 0x02, 0x1b, 0x00]);
        assert_eq!(v.text("V3"), None);
        assert_eq!(parse(&[]), Vpd::default());
        assert_eq!(parse(&[0xff; 64]), Vpd::default());
    }
}
