use super::*;
use crate::parse::pci::Bdf;

/// Azure's ND A100 v4 file, as azhpc-images ships it (fixtures/nccl-topo/ndv4-topo.xml).
const NDV4: &str = include_str!("../../../fixtures/nccl-topo/ndv4-topo.xml");
/// A dump NCCL 2.22 wrote on an IBM Cloud H100 VSI (fixtures/nccl-topo/ibm-gx3d-h100-topo.xml).
const IBM: &str = include_str!("../../../fixtures/nccl-topo/ibm-gx3d-h100-topo.xml");
/// RCCL's dump from ROCm/rccl#1185 (version 2, two-level Broadcom switches).
const RCCL: &str = include_str!("../../../fixtures/nccl-topo/rccl-1185-topo.xml");

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
    assert!(t.refusals(Library::Nccl).is_empty());
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
    assert!(
        t.refusals(Library::Nccl).is_empty(),
        "{:?}",
        t.refusals(Library::Nccl)
    );
    // nvlink elements are kept (NCCL counts them), and nothing is dropped.
    assert!(t.ignored.is_empty());
}

#[test]
fn rccl_dump_is_read_by_rccl_and_refused_by_nccl() {
    let t = topo(RCCL);
    assert_eq!(t.pcis.iter().filter(|p| p.kind == PciKind::Gpu).count(), 8);
    let r = t.refusals(Library::Nccl);
    assert_eq!(r.len(), 1);
    assert!(r[0].1.contains("NCCL reads only version 1"), "{r:?}");
    // RCCL reads its own dump (version 2), and refuses NCCL's (version 1).
    assert!(t.refusals(Library::Rccl).is_empty());
    let r =
        topo("<system version=\"1\">\n  <cpu numaid=\"0\"/>\n</system>\n").refusals(Library::Rccl);
    assert_eq!(r.len(), 1);
    assert!(r[0].1.contains("RCCL reads only version 2"), "{r:?}");
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
