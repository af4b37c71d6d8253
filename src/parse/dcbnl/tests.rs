//! Replies laid out byte by byte as the kernel writes them on a little-endian host
//! (net/dcb/dcbnl.c `dcbnl_ieee_fill`, `dcbnl_getdcbx`; netlink's `nlmsgerr`), then cut, bent
//! and corrupted: every one either parses or is a clear error, never a panic.

use super::*;

const SEQ: u32 = 7;

/// `struct nlattr` and its payload, padded to four bytes as `nla_put` pads it.
fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut a = Vec::new();
    a.extend_from_slice(&((4 + payload.len()) as u16).to_le_bytes());
    a.extend_from_slice(&kind.to_le_bytes());
    a.extend_from_slice(payload);
    a.resize(align(a.len()), 0);
    a
}

/// A nest of attributes (`nla_nest_start_noflag`; `flags` 0x8000 for `nla_nest_start`).
fn nest(kind: u16, children: &[Vec<u8>]) -> Vec<u8> {
    attr(kind, &children.concat())
}

/// One netlink message: `struct nlmsghdr` (len, type, flags, seq, pid) and its body.
fn msg(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&((16 + body.len()) as u32).to_le_bytes());
    m.extend_from_slice(&kind.to_le_bytes());
    m.extend_from_slice(&0u16.to_le_bytes());
    m.extend_from_slice(&seq.to_le_bytes());
    m.extend_from_slice(&4242u32.to_le_bytes());
    m.extend_from_slice(body);
    m.resize(align(m.len()), 0);
    m
}

/// The kernel's reply to `cmd`: `struct dcbmsg` (AF_UNSPEC, cmd, pad) and the attributes.
fn reply(cmd: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![0, cmd, 0, 0];
    body.extend(attrs.concat());
    msg(RTM_GETDCB, SEQ, &body)
}

/// `NLMSG_ERROR`: `struct nlmsgerr` (the negative errno, then the request's header).
fn error(errno: i32) -> Vec<u8> {
    let mut body = (-errno).to_le_bytes().to_vec();
    body.extend_from_slice(&request(DCB_CMD_IEEE_GET, "eth0", SEQ).unwrap()[..16]);
    msg(NLMSG_ERROR, SEQ, &body)
}

/// `struct ieee_pfc` with PFC on priority 3 (`pfc_en` 0x08), `pfc_cap` 8, `delay` 0x1234,
/// 5 PFC frames sent and 9 received on priority 3.
fn pfc_bytes() -> Vec<u8> {
    let mut b = vec![0u8; 136];
    b[0] = 8;
    b[1] = 0x08;
    b[2] = 0;
    b[3] = 0xee; // the pad byte: never read
    b[4..6].copy_from_slice(&0x1234u16.to_le_bytes());
    b[8 + 3 * 8..8 + 4 * 8].copy_from_slice(&5u64.to_le_bytes());
    b[72 + 3 * 8..72 + 4 * 8].copy_from_slice(&9u64.to_le_bytes());
    b
}

/// `struct ieee_ets`: priorities 0-7 on traffic classes 0,0,0,1,0,0,2,0; TC 0 ETS 50%, TC 1
/// ETS 50%, TC 2 strict.
fn ets_bytes() -> Vec<u8> {
    let mut b = vec![0u8; 59];
    b[0] = 1; // willing
    b[1] = 8; // ets_cap
    b[3..11].copy_from_slice(&[50, 50, 0, 0, 0, 0, 0, 0]);
    b[19..27].copy_from_slice(&[2, 2, 0, 0, 0, 0, 0, 0]);
    b[27..35].copy_from_slice(&[0, 0, 0, 1, 0, 0, 2, 0]);
    b[35..59].fill(0xaa); // the recommendation TLV: not read
    b
}

/// `struct dcbnl_buffer`: priority 3 in buffer 1, the rest in 0; 128 KiB and 64 KiB.
fn buffer_bytes() -> Vec<u8> {
    let mut b = vec![0u8; 44];
    b[3] = 1;
    b[8..12].copy_from_slice(&131072u32.to_le_bytes());
    b[12..16].copy_from_slice(&65536u32.to_le_bytes());
    b[40..44].copy_from_slice(&262144u32.to_le_bytes());
    b
}

/// `struct dcb_app`.
fn app(selector: u8, priority: u8, protocol: u16) -> Vec<u8> {
    let mut b = vec![selector, priority];
    b.extend_from_slice(&protocol.to_le_bytes());
    b
}

/// What mlx5 with DSCP trust and PFC on 3 answers, in `dcbnl_ieee_fill`'s order: the name,
/// the IEEE nest (ETS, PFC, buffer, APP table, the empty rewrite table, the trust table, the
/// peer's ETS), then DCBX.
fn full() -> Vec<u8> {
    reply(
        DCB_CMD_IEEE_GET,
        &[
            attr(DCB_ATTR_IFNAME, b"enp1s0f0np0\0"),
            nest(
                DCB_ATTR_IEEE,
                &[
                    attr(DCB_ATTR_IEEE_ETS, &ets_bytes()),
                    attr(7, &[0u8; 64]), // DCB_ATTR_IEEE_MAXRATE: not read
                    attr(DCB_ATTR_IEEE_PFC, &pfc_bytes()),
                    attr(DCB_ATTR_DCB_BUFFER, &buffer_bytes()),
                    nest(
                        DCB_ATTR_IEEE_APP_TABLE,
                        &[
                            attr(DCB_ATTR_IEEE_APP, &app(5, 3, 26)),
                            attr(DCB_ATTR_IEEE_APP, &app(5, 6, 48)),
                            attr(DCB_ATTR_DCB_APP, &app(255, 1, 1)),
                        ],
                    ),
                    nest(12 | 0x8000, &[]), // DCB_ATTR_DCB_REWR_TABLE, NLA_F_NESTED
                    nest(
                        DCB_ATTR_DCB_APP_TRUST_TABLE | 0x8000,
                        &[
                            attr(DCB_ATTR_IEEE_APP, &[5]),
                            attr(DCB_ATTR_DCB_APP, &[255]),
                        ],
                    ),
                    attr(4, &ets_bytes()), // DCB_ATTR_IEEE_PEER_ETS: not read
                ],
            ),
            attr(DCB_ATTR_DCBX, &[dcbx::LLD_MANAGED | dcbx::VER_IEEE]),
        ],
    )
}

fn parse(b: &[u8]) -> Result<Dcb, ReplyError> {
    parse_ieee(b, SEQ, "enp1s0f0np0")
}

fn malformed_with(b: &[u8], words: &str) {
    match parse(b) {
        Err(ReplyError::Malformed(why)) => assert!(why.contains(words), "{why}"),
        other => panic!("expected an error saying {words:?}: {other:?}"),
    }
}

#[test]
fn the_request_is_the_kernel_layout() {
    let r = request(DCB_CMD_IEEE_GET, "eth0", 0x01020304).unwrap();
    #[rustfmt::skip]
    let expect: &[u8] = &[
        32, 0, 0, 0,   78, 0,   1, 0,   4, 3, 2, 1,   0, 0, 0, 0, // nlmsghdr: RTM_GETDCB, REQUEST
        0, 21, 0, 0,                                               // dcbmsg: AF_UNSPEC, IEEE_GET
        9, 0, 1, 0,   b'e', b't', b'h', b'0', 0,   0, 0, 0,        // DCB_ATTR_IFNAME "eth0\0", pad
    ];
    assert_eq!(r, expect);
    assert_eq!(request(DCB_CMD_GDCBX, "eth0", 1).unwrap()[17], 22);
    // A name the kernel could not hold is not sent.
    assert!(request(DCB_CMD_IEEE_GET, "", 1).is_none());
    assert!(request(DCB_CMD_IEEE_GET, "sixteen-chars-ab", 1).is_none());
    assert!(request(DCB_CMD_IEEE_GET, "a/b", 1).is_none());
    assert!(request(DCB_CMD_IEEE_GET, "a\0b", 1).is_none());
    assert!(request(DCB_CMD_IEEE_GET, "fifteen-chars-a", 1).is_some());
}

#[test]
fn a_full_reply() {
    let d = parse(&full()).unwrap();
    let pfc = d.pfc.unwrap();
    assert_eq!(
        (pfc.cap, pfc.enabled, pfc.mbc, pfc.delay),
        (8, 0x08, 0, 0x1234)
    );
    assert_eq!(pfc.priorities(), vec![3]);
    assert!(pfc.on(3) && !pfc.on(0) && !pfc.on(9));
    assert_eq!((pfc.requests[3], pfc.indications[3]), (5, 9));
    assert_eq!(pfc.requests.iter().sum::<u64>(), 5);
    let ets = d.ets.unwrap();
    assert_eq!(ets.prio_tc, [0, 0, 0, 1, 0, 0, 2, 0]);
    assert_eq!(ets.tc_tx_bw, [50, 50, 0, 0, 0, 0, 0, 0]);
    assert_eq!(ets.tc_tsa, [2, 2, 0, 0, 0, 0, 0, 0]);
    assert_eq!((ets.willing, ets.ets_cap, ets.cbs), (1, 8, 0));
    assert_eq!(
        d.app,
        vec![
            App {
                selector: 5,
                priority: 3,
                protocol: 26
            },
            App {
                selector: 5,
                priority: 6,
                protocol: 48
            },
            App {
                selector: 255,
                priority: 1,
                protocol: 1
            },
        ]
    );
    assert_eq!(d.trust, Some(vec![selector::DSCP, selector::PCP]));
    let buf = d.buffer.unwrap();
    assert_eq!(buf.prio2buffer, [0, 0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(buf.buffer_size[..2], [131072, 65536]);
    assert_eq!(buf.total_size, 262144);
    assert_eq!(d.dcbx, Some(0x0a));
}

/// A driver with only PFC (no ETS, buffer, trust or getdcbx): the rest is absent, not zero.
#[test]
fn a_sparse_reply() {
    let r = reply(
        DCB_CMD_IEEE_GET,
        &[
            attr(DCB_ATTR_IFNAME, b"enp1s0f0np0\0"),
            nest(
                DCB_ATTR_IEEE,
                &[
                    attr(DCB_ATTR_IEEE_PFC, &pfc_bytes()),
                    nest(DCB_ATTR_IEEE_APP_TABLE, &[]),
                ],
            ),
        ],
    );
    let d = parse(&r).unwrap();
    assert!(d.pfc.is_some());
    assert_eq!(
        (d.ets, d.buffer, d.trust, d.dcbx, d.app.len()),
        (None, None, None, None, 0)
    );
}

/// A longer struct from a newer kernel is read for the fields this one knows.
#[test]
fn a_longer_struct_is_read_for_its_known_fields() {
    let mut pfc = pfc_bytes();
    pfc.extend_from_slice(&[1, 2, 3, 4]);
    let r = reply(
        DCB_CMD_IEEE_GET,
        &[nest(DCB_ATTR_IEEE, &[attr(DCB_ATTR_IEEE_PFC, &pfc)])],
    );
    assert_eq!(parse(&r).unwrap().pfc.unwrap().enabled, 0x08);
}

#[test]
fn the_kernels_refusals_are_errnos() {
    // A driver without dcbnl_ops (virtio-net, veth, lo) or a kernel without CONFIG_DCB.
    assert_eq!(parse(&error(95)), Err(ReplyError::Kernel(95)));
    // No such netdev.
    assert_eq!(parse(&error(19)), Err(ReplyError::Kernel(19)));
    assert_eq!(parse_dcbx(&error(95), SEQ), Err(ReplyError::Kernel(95)));
    // An acknowledgement (error 0) before the reply is skipped.
    let mut acked = error(0);
    acked.extend(full());
    assert!(parse(&acked).is_ok());
    // ... but alone it is no answer.
    malformed_with(&error(0), "no reply");
    // Not an errno.
    let mut body = i32::MIN.to_le_bytes().to_vec();
    body.extend_from_slice(&[0u8; 16]);
    malformed_with(&msg(NLMSG_ERROR, SEQ, &body), "not an errno");
    malformed_with(&msg(NLMSG_ERROR, SEQ, &5i32.to_le_bytes()), "not an errno");
    malformed_with(&msg(NLMSG_ERROR, SEQ, &[0, 0]), "no errno");
}

/// `NLMSG_ERROR` for EOPNOTSUPP exactly as a little-endian kernel sends it.
#[test]
fn a_literal_error_reply() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        36, 0, 0, 0,   2, 0,   0, 1,   7, 0, 0, 0,   0xd2, 0x04, 0, 0, // NLMSG_ERROR, NLM_F_CAPPED
        0xa1, 0xff, 0xff, 0xff,                                       // -95
        32, 0, 0, 0,   78, 0,   1, 0,   7, 0, 0, 0,   0, 0, 0, 0,     // the request's header
    ];
    assert_eq!(parse(bytes), Err(ReplyError::Kernel(95)));
}

#[test]
fn the_dcbx_reply() {
    #[rustfmt::skip]
    let bytes: &[u8] = &[
        28, 0, 0, 0,   78, 0,   0, 0,   7, 0, 0, 0,   0, 0, 0, 0,
        0, 22, 0, 0,                       // dcbmsg: GDCBX
        5, 0, 14, 0,   0x0a, 0, 0, 0,      // DCB_ATTR_DCBX = LLD_MANAGED | VER_IEEE
    ];
    assert_eq!(parse_dcbx(bytes, SEQ), Ok(Some(0x0a)));
    assert_eq!(parse_dcbx(&reply(DCB_CMD_GDCBX, &[]), SEQ), Ok(None));
    // An empty DCBX attribute.
    let empty = reply(DCB_CMD_GDCBX, &[attr(DCB_ATTR_DCBX, &[])]);
    assert!(matches!(parse_dcbx(&empty, SEQ), Err(ReplyError::Malformed(w)) if w.contains("a u8")));
    // The reply to another command.
    assert!(parse_dcbx(&full(), SEQ).is_err());
}

#[test]
fn another_request_command_or_netdev_is_refused() {
    assert!(matches!(parse_ieee(&full(), SEQ + 1, "enp1s0f0np0"),
        Err(ReplyError::Malformed(w)) if w.contains("answers request 7, not 8")));
    malformed_with(&reply(DCB_CMD_GDCBX, &[]), "command 22, not 21");
    assert!(matches!(parse_ieee(&full(), SEQ, "eth0"),
        Err(ReplyError::Malformed(w)) if w.contains("\"enp1s0f0np0\", not \"eth0\"")));
    malformed_with(&msg(16, SEQ, &[0; 8]), "message type 16");
    malformed_with(&msg(RTM_GETDCB, SEQ, &[0, 21]), "struct dcbmsg");
    malformed_with(&reply(DCB_CMD_IEEE_GET, &[]), "no DCB_ATTR_IEEE");
    malformed_with(&[], "no reply");
}

/// Every prefix of a reply is an error, none a panic.
#[test]
fn every_truncation_is_an_error() {
    let full = full();
    for n in 0..full.len() {
        assert!(parse(&full[..n]).is_err(), "{n} bytes parsed");
    }
    // The message's own length shorter than the bytes: the nest it cuts is short.
    let mut short = full.clone();
    short[0..4].copy_from_slice(&100u32.to_le_bytes());
    assert!(parse(&short).is_err());
}

#[test]
fn lengths_that_lie() {
    let base = full();
    // The first attribute (DCB_ATTR_IFNAME, at byte 20) claims more than is left.
    let mut past = base.clone();
    past[20..22].copy_from_slice(&0xfff0u16.to_le_bytes());
    malformed_with(
        &past,
        "the attribute at byte 20 in the message claims 65520 bytes",
    );
    // Zero, and less than its own header.
    let mut zero = base.clone();
    zero[20..22].copy_from_slice(&0u16.to_le_bytes());
    malformed_with(&zero, "claims 0 bytes, less than its header");
    let mut three = base.clone();
    three[20..22].copy_from_slice(&3u16.to_le_bytes());
    malformed_with(&three, "claims 3 bytes");
    // The message claims less than its header.
    let mut tiny = base.clone();
    tiny[0..4].copy_from_slice(&8u32.to_le_bytes());
    malformed_with(&tiny, "claims 8 bytes");
    // ... or more than was received.
    let mut huge = base;
    huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    malformed_with(&huge, "claims 4294967295 bytes");
    // Stray bytes after the last attribute of a nest.
    let r = reply(
        DCB_CMD_IEEE_GET,
        &[attr(DCB_ATTR_IEEE, &[8, 0, 2, 0, 1, 2, 3, 4, 9, 9])],
    );
    malformed_with(&r, "2 stray bytes");
}

#[test]
fn structs_of_the_wrong_size() {
    let ieee = |a: Vec<u8>| reply(DCB_CMD_IEEE_GET, &[nest(DCB_ATTR_IEEE, &[a])]);
    malformed_with(
        &ieee(attr(DCB_ATTR_IEEE_PFC, &pfc_bytes()[..135])),
        "DCB_ATTR_IEEE_PFC at byte 24 has 135 bytes; struct ieee_pfc has 136",
    );
    malformed_with(
        &ieee(attr(DCB_ATTR_IEEE_ETS, &[0; 58])),
        "struct ieee_ets has 59",
    );
    malformed_with(
        &ieee(attr(DCB_ATTR_DCB_BUFFER, &[0; 40])),
        "struct dcbnl_buffer has 44",
    );
    malformed_with(
        &ieee(nest(
            DCB_ATTR_IEEE_APP_TABLE,
            &[attr(DCB_ATTR_IEEE_APP, &[5, 3, 26])],
        )),
        "struct dcb_app has 4",
    );
    malformed_with(
        &ieee(nest(
            DCB_ATTR_DCB_APP_TRUST_TABLE,
            &[attr(DCB_ATTR_IEEE_APP, &[])],
        )),
        "a selector (u8)",
    );
    // The same attribute twice.
    let twice = reply(
        DCB_CMD_IEEE_GET,
        &[nest(
            DCB_ATTR_IEEE,
            &[
                attr(DCB_ATTR_IEEE_PFC, &pfc_bytes()),
                attr(DCB_ATTR_IEEE_PFC, &pfc_bytes()),
            ],
        )],
    );
    malformed_with(&twice, "DCB_ATTR_IEEE_PFC twice");
}

/// Nests inside nests, thousands deep, where the reader expects none: it never descends into
/// what its schema does not name, so depth costs nothing and cannot overflow the stack. An IEEE
/// nest inside the IEEE nest, or an APP table inside the APP table, is an unknown attribute of
/// that level.
#[test]
fn deep_and_self_nesting_is_not_followed() {
    let mut deep = attr(1, &[0; 4]);
    for _ in 0..2000 {
        // Each level adds a four-byte header: stop before u16 lengths overflow.
        if deep.len() + 8 > u16::MAX as usize {
            break;
        }
        deep = nest(9, &[deep]);
    }
    let r = reply(
        DCB_CMD_IEEE_GET,
        &[
            nest(DCB_ATTR_IEEE, &[deep.clone(), nest(DCB_ATTR_IEEE, &[deep])]),
            nest(
                DCB_ATTR_IEEE,
                &[nest(
                    DCB_ATTR_IEEE_APP_TABLE,
                    &[nest(DCB_ATTR_IEEE_APP_TABLE, &[attr(1, &app(5, 3, 26))])],
                )],
            ),
        ],
    );
    // Two IEEE nests at the top is refused, not merged.
    malformed_with(&r, "DCB_ATTR_IEEE twice");
    let one = reply(
        DCB_CMD_IEEE_GET,
        &[nest(
            DCB_ATTR_IEEE,
            &[nest(
                DCB_ATTR_IEEE_APP_TABLE,
                &[nest(DCB_ATTR_IEEE_APP_TABLE, &[attr(1, &app(5, 3, 26))])],
            )],
        )],
    );
    assert_eq!(parse(&one).unwrap().app, vec![]);
}

/// Every byte of a full reply set to each of a few values: a result every time.
#[test]
fn corrupted_bytes_never_panic() {
    let full = full();
    for i in 0..full.len() {
        for v in [0u8, 1, 3, 0x7f, 0x80, 0xff] {
            let mut b = full.clone();
            b[i] = v;
            let _ = parse(&b);
            let _ = parse_dcbx(&b, SEQ);
        }
    }
}

#[test]
fn errors_say_what_they_are() {
    assert_eq!(
        ReplyError::Kernel(95).to_string(),
        "the kernel answered errno 95"
    );
    assert_eq!(
        ReplyError::Malformed("x".into()).to_string(),
        "not a dcbnl reply: x"
    );
}
