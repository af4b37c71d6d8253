//! NVIDIA's driver failing to initialise a GPU, in the kernel's log: `NVRM: GPU 0000:02:00.0:
//! RmInitAdapter failed! (0x22:0x56:884)`, the `rm_init_adapter failed, device minor number 0`
//! after it, and the proprietary module's refusal of a GPU that only the open kernel modules
//! drive (`... requires use of the NVIDIA open kernel modules.`). [`super::events`] turns them
//! into events.

use super::super::pci::Bdf;

/// What `RmInitAdapter failed! (0x%x:0x%x:%d)` says (OGKM osinit.c at df1c9a3, line 2417):
/// the step that failed (enum `rm_init_status`: 0x22 RM_INIT_GPU_GPUMGR_ATTACH_GPU_FAILED, 0x62
/// RM_INIT_FIRMWARE_INIT_FAILED, ...), the RM status code (nvstatuscodes.h: 0x56
/// NV_ERR_NOT_SUPPORTED, ...) and the source line, which differs between driver builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmInitStatus {
    pub init: u32,
    pub rm: u32,
    pub line: u32,
}

impl RmInitStatus {
    /// `0x22:0x56`: attaching the GPU failed as not supported, which is what the proprietary
    /// module logs after refusing a GPU that needs the open kernel modules (every posted refusal
    /// carries it: 884 in 570- to 580-series builds, 1017 in a 595 one; the line number is
    /// not part of the signature).
    pub fn open_module_refusal(&self) -> bool {
        self.init == 0x22 && self.rm == 0x56
    }
}

impl std::fmt::Display for RmInitStatus {
    /// As the driver prints it: `0x22:0x56:884`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}:{:#x}:{}", self.init, self.rm, self.line)
    }
}

pub(super) const NVIDIA_GPU: &str = "NVRM: The NVIDIA GPU ";
pub(super) const REFUSAL: &str = "requires use of the NVIDIA open kernel modules";

/// The GPU a `NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2c58)` line names, with the PCI
/// ID where it follows (OGKM osapi.c prints its siblings' first line with the same format,
/// `"NVRM: The NVIDIA GPU %04x:%02x:%02x.%x (PCI ID: %04x:%04x)\n"`). Found anywhere in the
/// record: the refusal's two lines may arrive as one record.
pub(super) fn gpu_named(text: &str) -> Option<(Bdf, Option<String>)> {
    let rest = &text[text.find(NVIDIA_GPU)? + NVIDIA_GPU.len()..];
    // The address ends at a space, or at the escaped newline (`\x0a`) /dev/kmsg gives for an
    // embedded one.
    let addr = rest.split([' ', '\\']).next()?;
    let bdf = Bdf::parse(addr)?;
    let pci_id = rest[addr.len()..]
        .trim_start()
        .strip_prefix("(PCI ID: ")
        .and_then(|r| r.split_once(')'))
        .map(|(id, _)| id)
        .filter(|id| {
            id.len() == 9
                && id.split_once(':').is_some_and(|(v, d)| {
                    v.len() == 4
                        && d.len() == 4
                        && v.bytes().chain(d.bytes()).all(|b| b.is_ascii_hexdigit())
                })
        })
        .map(|id| id.to_ascii_lowercase());
    Some((bdf, pci_id))
}

/// Whether a record carries the proprietary module's refusal of a GPU that needs the open
/// kernel modules, and the GPU when the record names it itself. The closed module prints
///
/// ```text
/// NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2c58)
/// NVRM: installed in this system requires use of the NVIDIA open kernel modules.
/// ```
///
/// as one printk with an embedded newline: `/dev/kmsg` gives it as one record, the newline
/// escaped as `\x0a` (kernel/printk/printk.c `msg_add_ext_text` escapes every byte below
/// 0x20), `dmesg` as two lines, the second without a time; a syslog relay may split it into two
/// records, or join the lines with a space. Posted: NVIDIA/open-gpu-kernel-modules#862 (an RTX
/// 5090, 10de:2b85, syslog), a 580.105.08 dmesg on a 10de:2c58 laptop GPU and a 595 one on an
/// RTX PRO 4500 Blackwell, 10de:2c31 (research notes, grace.md section 1.4).
pub(super) fn open_module_refusal(text: &str) -> Option<Option<(Bdf, Option<String>)>> {
    text.contains(REFUSAL).then(|| gpu_named(text))
}

/// `NVRM: GPU 0000:02:00.0: RmInitAdapter failed! (0x22:0x56:884)` -> the GPU and the status;
/// `NVRM: GPU 0000:02:00.0: rm_init_adapter failed, device minor number 0` -> the GPU and
/// `None`. OGKM's `NV_DEV_PRINTF` prefixes `NVRM: GPU %04x:%02x:%02x.%x: `.
/// Drivers before NV_DEV_PRINTF print it without the GPU: `NVRM: RmInitAdapter failed!
/// (0x26:0xffff:1211)` and `NVRM: rm_init_adapter failed for device bearing minor number 0`:
/// the GPU is then `None`.
pub(super) fn rm_init_adapter(text: &str) -> Option<(Option<Bdf>, Option<RmInitStatus>)> {
    let (bdf, msg) = match text.strip_prefix("NVRM: GPU ") {
        Some(rest) => {
            let (addr, msg) = rest.split_once(": ")?;
            (Some(Bdf::parse(addr)?), msg)
        }
        None => (None, text.strip_prefix("NVRM: ")?),
    };
    if msg.starts_with("rm_init_adapter failed") {
        return Some((bdf, None));
    }
    let inside = msg
        .strip_prefix("RmInitAdapter failed! (")?
        .split_once(')')?
        .0;
    let mut f = inside.split(':');
    let hex = |s: &str| u32::from_str_radix(s.strip_prefix("0x")?, 16).ok();
    let init = hex(f.next()?)?;
    let rm = hex(f.next()?)?;
    let line = f.next()?.parse().ok()?;
    if f.next().is_some() {
        return None;
    }
    Some((bdf, Some(RmInitStatus { init, rm, line })))
}

#[cfg(test)]
mod tests {
    use super::super::{EventKind, Record, events, kept};
    use super::*;

    fn rec(seq: u64, text: &str) -> Record {
        Record {
            level: 3,
            seq,
            usec: seq * 1000,
            text: text.into(),
        }
    }

    /// The proprietary module refusing a Blackwell GPU, as a 580.105.08 node's `dmesg` showed
    /// it (research notes grace.md 1.4, example B: a laptop GPU 10de:2c58 at 0000:02:00.0; the
    /// second line printed indented, without a time, because it is part of the first record).
    /// /dev/kmsg gives that record with its newline escaped.
    #[test]
    fn the_open_module_refusal_as_dev_kmsg_gives_it() {
        let r = Record::parse(
            "3,812,5559842,-;NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2c58)\\x0aNVRM: installed in this system requires use of the NVIDIA open kernel modules.\n",
        )
        .unwrap();
        assert!(
            r.text
                .ends_with("requires use of the NVIDIA open kernel modules.")
        );
        let log = [
            r,
            rec(
                813,
                "NVRM: GPU 0000:02:00.0: RmInitAdapter failed! (0x22:0x56:884)",
            ),
            rec(
                814,
                "NVRM: GPU 0000:02:00.0: rm_init_adapter failed, device minor number 0",
            ),
            // Not an event: the driver's banner.
            rec(
                811,
                "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.105.08  Wed Oct 29 23:15:11 UTC 2025",
            ),
        ];
        let e = events(&log);
        let status = RmInitStatus {
            init: 0x22,
            rm: 0x56,
            line: 884,
        };
        let got: Vec<_> = e.iter().map(|e| (e.kind.clone(), e.device)).collect();
        let gpu = Bdf::parse("0000:02:00.0");
        assert_eq!(
            got,
            vec![
                (
                    EventKind::OpenModuleRequired {
                        pci_id: Some("10de:2c58".into())
                    },
                    gpu
                ),
                (EventKind::RmInitAdapter(status), gpu),
                (
                    EventKind::RmInitAdapterMinor {
                        status: Some(status)
                    },
                    gpu
                ),
            ]
        );
        assert!(status.open_module_refusal());
        assert_eq!(status.to_string(), "0x22:0x56:884");
        // A capture keeps the three, not the banner.
        assert_eq!(
            log.iter().map(kept).collect::<Vec<_>>(),
            [true, true, true, false]
        );
    }

    /// The same refusal with its two lines as records of their own (a relay that split the
    /// printk), from a 595 driver on an RTX PRO 4500 Blackwell, 10de:2c31 (grace.md 1.4,
    /// example C), and joined by a space; and NVIDIA/open-gpu-kernel-modules#862's syslog of an
    /// RTX 5090 (10de:2b85 at 0000:01:00.0), whose post stops at the first line.
    #[test]
    fn the_refusal_split_into_records_or_joined() {
        let split = [
            rec(1, "NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2c31)"),
            rec(
                2,
                "NVRM: installed in this system requires use of the NVIDIA open kernel modules.",
            ),
            rec(
                3,
                "NVRM: GPU 0000:02:00.0: RmInitAdapter failed! (0x22:0x56:1017)",
            ),
        ];
        assert!(split.iter().all(kept));
        let e = events(&split);
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(
            (e[0].kind.clone(), e[0].device),
            (
                EventKind::OpenModuleRequired {
                    pci_id: Some("10de:2c31".into())
                },
                Bdf::parse("0000:02:00.0")
            )
        );
        // The second line's record is the event's: it is the one that says why.
        assert_eq!(e[0].record.seq, 2);
        let joined = events(&[rec(
            1,
            "NVRM: The NVIDIA GPU 0008:01:00.0 (PCI ID: 10DE:2941) NVRM: installed in this system requires use of the NVIDIA open kernel modules.",
        )]);
        assert_eq!(
            (joined[0].kind.clone(), joined[0].device),
            (
                EventKind::OpenModuleRequired {
                    pci_id: Some("10de:2941".into())
                },
                Bdf::parse("0008:01:00.0")
            )
        );
        let gh862 = events(&[
            rec(1, "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:2b85)"),
            rec(
                2,
                "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)",
            ),
            rec(
                3,
                "NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0",
            ),
        ]);
        assert_eq!(gh862.len(), 2);
        assert!(gh862.iter().all(|e| e.device == Bdf::parse("0000:01:00.0")));
        // A refusal line with no GPU named before it is still the event, of no known GPU.
        let orphan = events(&[rec(
            1,
            "NVRM: installed in this system requires use of the NVIDIA open kernel modules.",
        )]);
        assert_eq!(
            (orphan[0].kind.clone(), orphan[0].device),
            (EventKind::OpenModuleRequired { pci_id: None }, None)
        );
    }

    /// Other RmInitAdapter statuses are not the refusal: GSP firmware failing to start
    /// (NVIDIA/open-gpu-kernel-modules#789, `(0x62:0x65:1792)`), an open module on a GPU it did
    /// not support yet (#230, `(0x63:0x0:1905)`). Half-written lines are no events, and a
    /// sibling of the refusal (a GPU fallen off the bus) is kept but is not one.
    #[test]
    fn other_rm_init_adapter_statuses_and_junk() {
        let e = events(&[
            rec(
                1,
                "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x62:0x65:1792)",
            ),
            rec(
                2,
                "NVRM: GPU 0000:41:00.0: rm_init_adapter failed, device minor number 1",
            ),
            rec(
                3,
                "NVRM: GPU 0000:42:00.0: RmInitAdapter failed! (0x63:0x0:1905)",
            ),
        ]);
        let s = RmInitStatus {
            init: 0x62,
            rm: 0x65,
            line: 1792,
        };
        assert_eq!(e[0].kind, EventKind::RmInitAdapter(s));
        assert!(!s.open_module_refusal());
        assert_eq!(e[1].kind, EventKind::RmInitAdapterMinor { status: Some(s) });
        assert_eq!(e[2].kind.clone(), {
            let s = RmInitStatus {
                init: 0x63,
                rm: 0,
                line: 1905,
            };
            assert_eq!(s.to_string(), "0x63:0x0:1905");
            EventKind::RmInitAdapter(s)
        });
        for junk in [
            "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x62:0x65)",
            "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x62:0x65:17:2)",
            "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (62:0x65:1792)",
            "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0xzz:0x65:1792",
            "NVRM: GPU 0000:4g:00.0: rm_init_adapter failed, device minor number 1",
            "NVRM: The NVIDIA GPU \u{e9}\\x0a",
            "NVRM: The NVIDIA GPU ",
        ] {
            assert!(events(&[rec(1, junk)]).is_empty(), "{junk}");
        }
        // OGKM osapi.c's fallen-off-the-bus message starts the same way: an event of its own,
        // the GPU it names (issue 40: it passed kernel-log).
        let off = rec(
            1,
            "NVRM: The NVIDIA GPU 0000:18:00.0\\x0aNVRM: (PCI ID: 10de:2901) installed in this system has\\x0aNVRM: fallen off the bus and is not responding to commands.",
        );
        assert!(kept(&off));
        let e = events(&[off]);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind, EventKind::FallenOffBus);
        assert_eq!(e[0].device, crate::parse::pci::Bdf::parse("0000:18:00.0"));
    }
}
