//! `gdrdoctor topo --format svg|dot`, the picture of the PCIe tree (issue 15, item 5): the SVG
//! parses as XML, names every GPU, RDMA NIC and bridge on their paths, marks the ACS redirect the
//! acs check fails on, escapes what a captured root says, and renders with a real renderer
//! (rsvg-convert, which the test run installs); the DOT is balanced and names the same devices.
#![allow(clippy::disallowed_methods)] // tests read the repository and build roots, not a node

use crate::common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The fixtures whose pictures are checked: one switch with an ACS redirect, the 8-GPU node,
/// a GPU beyond the GDR level, and a VM with its GPUs on the root bus.
const FIXTURES: &[&str] = &[
    "acs-redirect-on-path",
    "healthy-8gpu-roce",
    "placement-sys",
    "h200x2-vm",
    "config-unprivileged",
];

/// The fixtures whose rendered pictures are in docs/ (and the README).
const DOCS: &[&str] = &["healthy-8gpu-roce", "acs-redirect-on-path"];

fn topo(root: &str, format: &str) -> String {
    let out = gdrdoctor(&["--root", root, "topo", "--format", format]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    stdout(&out)
}

/// What a picture must name, worked out here from the fixture's files (the PCI addresses
/// `topo --format json` lists, and every function on their sysfs paths, read off the links),
/// not from the picture code.
struct Expected {
    gpus: Vec<String>,
    /// (PCI address, RDMA device).
    nics: Vec<(String, String)>,
    bridges: BTreeSet<String>,
}

fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| [4, 7, 10].contains(&i) || c.is_ascii_hexdigit())
}

fn expected(root: &str) -> Expected {
    let t = json(&gdrdoctor(&["--root", root, "topo", "--format", "json"]));
    // The links are read off a directory: a real capture is an archive, so unpack a copy.
    let copy = root.ends_with(".tar.gz").then(|| {
        let name = root
            .trim_start_matches("fixtures/")
            .trim_end_matches("/capture.tar.gz");
        fixture_copy(name)
    });
    let tree = match &copy {
        Some((_, dir)) => dir.clone(),
        None => home().join(root),
    };
    let mut e = Expected {
        gpus: Vec::new(),
        nics: Vec::new(),
        bridges: BTreeSet::new(),
    };
    for d in t["devices"].as_array().unwrap() {
        let bdf = d["bdf"].as_str().unwrap().to_owned();
        let real = std::fs::canonicalize(tree.join("sys/bus/pci/devices").join(&bdf)).unwrap();
        e.bridges.extend(
            real.to_str()
                .unwrap()
                .split('/')
                .filter(|c| is_bdf(c) && *c != bdf)
                .map(str::to_owned),
        );
        if d["kind"] == "gpu" {
            e.gpus.push(bdf);
        } else {
            e.nics
                .push((bdf, d["rdma_device"].as_str().unwrap().to_owned()));
        }
    }
    e
}

/// Every `<text>` of the picture (what it shows, not its tooltips).
fn texts(doc: &roxmltree::Document) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").to_owned())
        .collect()
}

/// The PCI addresses shown in the boxes whose class includes `class`.
fn boxes_with(doc: &roxmltree::Document, class: &str) -> BTreeSet<String> {
    doc.descendants()
        .filter(|n| {
            n.has_tag_name("g")
                && n.attribute("class")
                    .is_some_and(|c| c.split(' ').any(|c| c == class))
        })
        .flat_map(|g| g.children().filter(|n| n.has_tag_name("text")))
        .filter_map(|t| t.text())
        .filter(|t| is_bdf(t))
        .map(str::to_owned)
        .collect()
}

#[test]
fn svg_parses_and_names_every_device_on_the_tree() {
    for fixture in FIXTURES {
        let root = crate::common::fixture(fixture).to_owned();
        let svg = topo(&root, "svg");
        let doc = roxmltree::Document::parse(&svg)
            .unwrap_or_else(|e| panic!("{fixture}: the SVG is not XML: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert_eq!(
            doc.root_element().tag_name().namespace(),
            Some("http://www.w3.org/2000/svg")
        );
        let shown = texts(&doc);
        let has = |s: &str| shown.iter().any(|t| t == s);
        let e = expected(&root);
        assert!(!e.gpus.is_empty(), "{fixture}");
        for g in &e.gpus {
            assert!(has(g), "{fixture}: GPU {g} is not in the picture");
        }
        assert_eq!(boxes_with(&doc, "gpu"), e.gpus.iter().cloned().collect());
        for (bdf, name) in &e.nics {
            assert!(has(bdf), "{fixture}: NIC {bdf} is not in the picture");
            assert!(
                shown.iter().any(|t| t.ends_with(&format!(" {name}"))),
                "{fixture}: RDMA device {name} is not in the picture"
            );
        }
        for b in &e.bridges {
            assert!(has(b), "{fixture}: bridge {b} is not in the picture");
        }
        assert_eq!(
            boxes_with(&doc, "bridge"),
            e.bridges,
            "{fixture}: the bridges drawn are those on the paths"
        );
        assert!(has("Legend"), "{fixture}");
        // No script, no reference outside the file.
        for n in doc.descendants() {
            assert!(!n.has_tag_name("script") && !n.has_tag_name("image"));
            assert!(
                n.attributes().all(|a| a.name() != "href"),
                "{fixture}: {n:?}"
            );
        }
    }
}

#[test]
fn svg_draws_the_pairs_and_marks_the_acs_redirect() {
    let svg = topo(fixture("acs-redirect-on-path"), "svg");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    // The acs check fails on 0000:02:01.0 (ACSCtl 0x001d); 0000:02:00.0, on the same path, is
    // clear.
    assert_eq!(
        boxes_with(&doc, "redirect"),
        BTreeSet::from(["0000:02:01.0".to_owned()])
    );
    let pairs: Vec<_> = doc
        .descendants()
        .filter(|n| {
            n.attribute("class") == Some("pair acs")
                && n.children().any(|c| c.has_tag_name("title"))
        })
        .collect();
    assert_eq!(pairs.len(), 1, "one GPU-NIC pair, through the redirect");
    assert!(texts(&doc).iter().any(|t| t == "PIX ACS"));
    assert!(
        texts(&doc)
            .iter()
            .any(|t| t.starts_with("ACS redirect at 0000:02:01.0: ACSCtl 0x001d has ReqRedir, CmpltRedir set, on the path of GPU 0000:03:00.0 - mlx5_0")),
        "the note says which bits and which pair"
    );

    // Every GPU of the 8-GPU node with both NICs of its switch (PIX), no redirect anywhere.
    let svg = topo(fixture("healthy-8gpu-roce"), "svg");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert!(boxes_with(&doc, "redirect").is_empty());
    let labels: Vec<String> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("pair"))
        .flat_map(|g| g.descendants().filter(|n| n.has_tag_name("text")))
        .filter_map(|t| t.text().map(str::to_owned))
        .collect();
    assert_eq!(labels, vec!["PIX".to_owned(); 16]);

    // A GPU whose nearest NIC is across the sockets: no line, marked, and said in a note.
    let svg = topo(fixture("placement-sys"), "svg");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        boxes_with(&doc, "nogdr"),
        BTreeSet::from(["0000:01:00.0".to_owned()])
    );
    assert!(!svg.contains(r#"<g class="pair"><title>"#), "no pair drawn");
    assert!(texts(&doc).iter().any(|t| t == "no GDR: NIC at SYS"));
}

/// A copy of `fixtures/<name>` in a new temporary directory.
fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    fixture_copy(name)
}

const HOSTILE_PRODUCT: &str = r#"</text><script>alert("x")</script> & ]]> 'q'"#;
const HOSTILE_MODEL: &str = "H100 </svg>\u{1b}[2J\"";

/// A captured root that names itself with markup: the product, the hostname, the GPU's model.
fn hostile_root() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = copy("acs-redirect-on-path");
    let dmi = root.join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    std::fs::write(dmi.join("product_name"), format!("{HOSTILE_PRODUCT}\n")).unwrap();
    std::fs::write(
        root.join("proc/sys/kernel/hostname"),
        "node\"><g onload=\"x\n",
    )
    .unwrap();
    let info = root.join("proc/driver/nvidia/gpus/0000:03:00.0/information");
    let text = std::fs::read_to_string(&info).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("Model:") {
                format!("Model: \t\t {HOSTILE_MODEL}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&info, text).unwrap();
    (dir, root)
}

#[test]
fn text_from_the_node_is_escaped() {
    let (_dir, root) = hostile_root();
    let root = root.to_str().unwrap();
    let svg = topo(root, "svg");
    let doc = roxmltree::Document::parse(&svg).expect("a hostile name keeps the SVG well-formed");
    for n in doc.descendants() {
        assert!(
            !n.has_tag_name("script"),
            "markup from the node became markup"
        );
        assert!(n.attribute("onload").is_none());
    }
    let shown = texts(&doc).join("\n");
    assert!(
        shown.contains(HOSTILE_PRODUCT),
        "the product is shown as text: {shown}"
    );
    assert!(shown.contains("node\"><g onload=\"x"), "{shown}");
    // The model's control character is shown escaped, as the human report shows it; the
    // model is shortened to fit its box.
    assert!(shown.contains("H100 </svg>\\u{1b}"), "{shown}");
    assert!(!svg.contains('\u{1b}'));

    let dot = topo(root, "dot");
    dot_is_well_formed(&dot).unwrap_or_else(|e| panic!("{e}\n{dot}"));
    assert!(
        dot.contains(r#"</text><script>alert(\"x\")</script>"#),
        "{dot}"
    );
    assert!(!dot.contains('\u{1b}'));
    render(
        &svg,
        &std::env::temp_dir().join("gdrdoctor-topo-hostile.png"),
    );
}

/// Where `rsvg-convert` is; the test run installs it (librsvg2-bin), so its absence is an
/// error, not a reason to skip.
fn rsvg_convert() -> &'static str {
    match Command::new("rsvg-convert").arg("--version").output() {
        Ok(o) if o.status.success() => "rsvg-convert",
        Ok(o) => panic!(
            "rsvg-convert --version failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!(
            "rsvg-convert is missing ({e}): the tests render the topo SVG with it; install librsvg2-bin (apt-get install librsvg2-bin), as .ci/run does"
        ),
    }
}

/// Where Graphviz's `dot` is; the test run installs it (graphviz), so its absence is an error,
/// not a reason to skip.
fn graphviz() -> &'static str {
    match Command::new("dot").arg("-V").output() {
        Ok(o) if o.status.success() => "dot",
        Ok(o) => panic!("dot -V failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!(
            "dot is missing ({e}): the tests lay out topo --format dot with Graphviz; install graphviz (apt-get install graphviz), as tests/all.sh does"
        ),
    }
}

/// Lays `dot` out with Graphviz (`dot -Tsvg`, as docs/topo-svg.md tells users to), under
/// `name` in the build directory; the SVG it made. Debian 12's Graphviz 2.43 gave up on the
/// 8-GPU fixtures ("trouble in init_rank", issue 25).
fn lay_out(dot: &str, name: &str) -> String {
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("topo-{name}.dot"));
    std::fs::write(&file, dot).unwrap();
    let out = Command::new(graphviz())
        .arg("-Tsvg")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dot -Tsvg {} failed ({}): {}",
        file.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
            .chars()
            .take(2000)
            .collect::<String>()
    );
    let svg = String::from_utf8(out.stdout).unwrap();
    // Graphviz writes a DOCTYPE, which roxmltree refuses unless told.
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    roxmltree::Document::parse_with_options(&svg, options)
        .unwrap_or_else(|e| panic!("dot -Tsvg {}: not SVG: {e}", file.display()));
    svg
}

/// Both pictures of every fixture render with the renderers users have: the DOT laid out by
/// Graphviz, the SVG drawn by librsvg.
#[test]
fn dot_lays_out_with_graphviz_on_every_fixture() {
    let mut laid = 0;
    for name in fixture_names() {
        let root = fixture(&name);
        let cfg = fixture_config(&name);
        let mut args = vec!["--root", root];
        if let Some(c) = &cfg {
            args.extend(["--config", c.as_str()]);
        }
        args.extend(["topo", "--format", "dot"]);
        let out = gdrdoctor(&args);
        if code(&out) == 2 {
            continue; // nothing to show (tested apart)
        }
        let dot = stdout(&out);
        dot_is_well_formed(&dot).unwrap_or_else(|e| panic!("{name}: {e}\n{dot}"));
        // Names of their own: other tests render some of these fixtures at the same time.
        let file = format!("every-{}", name.replace('/', "-"));
        let svg = lay_out(&dot, &file);
        // Every GPU's box is in the layout.
        let t = json(&gdrdoctor(&["--root", root, "topo", "--format", "json"]));
        for d in t["devices"].as_array().unwrap() {
            if let (Some(bdf), "gpu") = (d["bdf"].as_str(), d["kind"].as_str().unwrap()) {
                assert!(svg.contains(bdf), "{name}: {bdf} not laid out");
            }
        }
        // The same cause for our own SVG: rendered on a few fixtures only, until now. Every
        // fixture's renders, at the size it declares.
        let args: Vec<&str> = args[..args.len() - 1]
            .iter()
            .copied()
            .chain(["svg"])
            .collect();
        let ours = stdout(&gdrdoctor(&args));
        let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("topo-{file}.png"));
        assert_eq!(render(&ours, &png), svg_size(&ours), "{name}");
        laid += 1;
    }
    assert!(laid > 40, "only {laid} fixtures laid out");
}

/// Renders an SVG to a PNG at `png`; returns the PNG's width and height.
fn render(svg: &str, png: &Path) -> (u32, u32) {
    let svg_file = png.with_extension("svg");
    std::fs::write(&svg_file, svg).unwrap();
    let out = Command::new(rsvg_convert())
        .arg("-o")
        .arg(png)
        .arg(&svg_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rsvg-convert failed on {}: {}",
        svg_file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    png_size(&std::fs::read(png).unwrap())
        .unwrap_or_else(|| panic!("{} is not a PNG", png.display()))
}

/// A PNG's width and height, from its signature and IHDR chunk.
fn png_size(b: &[u8]) -> Option<(u32, u32)> {
    let sig = b.get(..8)?;
    if sig != b"\x89PNG\r\n\x1a\n" || b.get(12..16)? != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?);
    let h = u32::from_be_bytes(b.get(20..24)?.try_into().ok()?);
    Some((w, h))
}

fn svg_size(svg: &str) -> (u32, u32) {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let n = |a: &str| doc.root_element().attribute(a).unwrap().parse().unwrap();
    (n("width"), n("height"))
}

/// The command that renders docs/topo-<fixture>.png again, as docs/topo-svg.md gives it.
const REGENERATE: &str = "cargo build && for f in healthy-8gpu-roce acs-redirect-on-path; do fixtures/build.sh $f target/docs-fixtures/fixtures/$f && (cd target/docs-fixtures && ../debug/gdrdoctor --root fixtures/$f topo --format svg) | rsvg-convert -o docs/topo-$f.png; done";

#[test]
fn svg_renders_with_rsvg_and_the_docs_pictures_are_current() {
    let build = Path::new(env!("CARGO_TARGET_TMPDIR"));
    for fixture in FIXTURES {
        let svg = topo(crate::common::fixture(fixture), "svg");
        let png = build.join(format!("topo-{fixture}.png"));
        let (w, h) = render(&svg, &png);
        assert_eq!(
            (w, h),
            svg_size(&svg),
            "{fixture}: rendered at the SVG's own size"
        );
        // Two GPUs on the root bus and a legend of two lines (h200x2-vm) are some 370 high.
        assert!(
            (500..=4000).contains(&w) && (300..=2000).contains(&h),
            "{fixture}: {w}x{h} is not a sensible size for a node's picture"
        );
        let bytes = std::fs::metadata(&png).unwrap().len();
        assert!(
            bytes > 20_000,
            "{fixture}: {} is {bytes} bytes: nothing drawn?",
            png.display()
        );
        if DOCS.contains(fixture) {
            let docs = crate_dir().join(format!("docs/topo-{fixture}.png"));
            let committed = std::fs::read(&docs).unwrap_or_else(|e| {
                panic!("{}: {e}; render it with: {REGENERATE}", docs.display())
            });
            assert_eq!(
                png_size(&committed),
                Some((w, h)),
                "{} is not the picture topo draws now: render it again with: {REGENERATE}",
                docs.display()
            );
        }
    }
}

/// DOT's structure, without Graphviz: the header, strings closed, braces and brackets
/// balanced outside strings, one statement per line.
fn dot_is_well_formed(dot: &str) -> Result<(), String> {
    let body: Vec<&str> = dot
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    if !body
        .first()
        .is_some_and(|l| l.starts_with("graph \"gdrdoctor-topo\" {"))
    {
        return Err("no graph header".into());
    }
    let (mut braces, mut brackets) = (0i32, 0i32);
    for (k, line) in body.iter().enumerate() {
        let (mut in_string, mut escaped) = (false, false);
        for c in line.chars() {
            if in_string {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                '{' => braces += 1,
                '}' => braces -= 1,
                '[' => brackets += 1,
                ']' => brackets -= 1,
                _ => {}
            }
            if braces < 0 || brackets < 0 {
                return Err(format!("line {k}: closes what is not open: {line}"));
            }
        }
        if in_string {
            return Err(format!("line {k}: a string left open: {line}"));
        }
        if brackets != 0 {
            return Err(format!("line {k}: an attribute list left open: {line}"));
        }
        let t = line.trim_end();
        if !(t.ends_with(';') || t.ends_with('{') || t.ends_with('}')) {
            return Err(format!("line {k}: not a whole statement: {line}"));
        }
    }
    if braces != 0 {
        return Err(format!("{braces} braces left open"));
    }
    Ok(())
}

#[test]
fn dot_is_balanced_and_names_every_device() {
    for fixture in FIXTURES {
        let root = crate::common::fixture(fixture).to_owned();
        let dot = topo(&root, "dot");
        dot_is_well_formed(&dot).unwrap_or_else(|e| panic!("{fixture}: {e}\n{dot}"));
        let e = expected(&root);
        let declared = |bdf: &str| dot.contains(&format!("\"{bdf}\" [label=\""));
        for b in e.gpus.iter().chain(&e.bridges) {
            assert!(declared(b), "{fixture}: {b} is not a node");
        }
        for (bdf, name) in &e.nics {
            assert!(declared(bdf), "{fixture}: {bdf} is not a node");
            assert!(
                dot.contains(&format!(" {name}\\n{bdf}")),
                "{fixture}: {name}"
            );
        }
    }
    let dot = topo(fixture("acs-redirect-on-path"), "dot");
    assert!(dot.contains("\"0000:03:00.0\" -- \"0000:04:00.0\" [xlabel=\"PIX ACS redirect\""));
    assert!(
        dot.contains("\"0000:02:01.0\" [label=\"0000:02:01.0\\nswitch downstream port\\nACS redirect: ReqRedir, CmpltRedir\", color=\"#dc2626\"")
    );
    // Graphviz is not needed; where it is installed, it must read the file.
    if Command::new("dot").arg("-V").output().is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("topo.dot");
        std::fs::write(&file, &dot).unwrap();
        let out = Command::new("dot")
            .args(["-Tsvg", "-o"])
            .arg(dir.path().join("topo.svg"))
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn snapshots_of_a_small_node() {
    insta::assert_snapshot!(
        "acs-redirect-on-path.svg",
        topo(fixture("acs-redirect-on-path"), "svg")
    );
    insta::assert_snapshot!(
        "acs-redirect-on-path.dot",
        topo(fixture("acs-redirect-on-path"), "dot")
    );
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn fleet_draws_the_first_node_of_each_model() {
    let dir = tempfile::tempdir().unwrap();
    let pictures = dir.path().join("pictures");
    let out = gdrdoctor(&[
        "fleet",
        "fixtures/fleet",
        "--jobs",
        "4",
        "--pictures",
        pictures.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 1, "the small fleet differs: {}", stderr(&out));
    assert_eq!(
        stdout(&out),
        stdout(&gdrdoctor(&["fleet", "fixtures/fleet"])),
        "the pictures change nothing on standard output"
    );
    // Seven Supermicro nodes (node01..node07) and one DGX A100 (node08).
    assert_eq!(
        files(&pictures),
        [
            "nvidia-dgxa100-920-23687-2530-000.svg",
            "supermicro-sys-821ge-tnhr.svg"
        ]
    );
    let svg = std::fs::read_to_string(pictures.join("supermicro-sys-821ge-tnhr.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert!(
        texts(&doc)
            .iter()
            .any(|t| t.contains("root fixtures/fleet/node01.tar.gz ")),
        "the first node of the model is drawn"
    );
    render(
        &svg,
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("fleet-supermicro.png"),
    );

    // A model named to escape the directory, and a capture without one.
    let (_a, hostile) = copy("acs-redirect-on-path");
    let dmi = hostile.join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    std::fs::write(dmi.join("product_name"), "../../x <y>\n").unwrap();
    let (_b, plain) = copy("acs-redirect-on-path");
    let out = gdrdoctor(&[
        "fleet",
        hostile.to_str().unwrap(),
        plain.to_str().unwrap(),
        "--pictures",
        pictures.to_str().unwrap(),
    ]);
    assert_ne!(code(&out), 2, "{}", stderr(&out));
    assert_eq!(
        files(&pictures),
        [
            "model-unknown.svg",
            "nvidia-dgxa100-920-23687-2530-000.svg",
            "supermicro-sys-821ge-tnhr.svg",
            "x-y.svg"
        ]
    );
    assert_eq!(
        files(dir.path()),
        ["pictures"],
        "nothing written outside DIR"
    );

    // A directory that cannot be made: exit 2, naming it.
    let file = dir.path().join("pictures/x-y.svg");
    let out = gdrdoctor(&[
        "fleet",
        fixture("fleet/node08"),
        "--pictures",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("cannot create the pictures directory"),
        "{}",
        stderr(&out)
    );
}

// -- several GPUs: one NUMA rule, NVLink groups, a legend of what is drawn (issue 24) ---------

use gdrdoctor::inventory::Inventory;
use gdrdoctor::model::gpu::{Probe, Runtime};

/// The GPUs of fixtures/healthy-4gpu-ib-peermem, as NVML names them.
const FOUR: [&str; 4] = [
    "00000000:18:00.0",
    "00000000:1A:00.0",
    "00000000:3A:00.0",
    "00000000:3C:00.0",
];

/// A node like the 4x H100 machine of issue 24: four GPUs, no RDMA NIC, one NUMA node (CPUs
/// 0-63) and `numa_node` -1 on every GPU. It is fixtures/healthy-4gpu-ib-peermem (one socket,
/// 4 GPUs, node0 = 0-63) without its RDMA devices and with the kernel giving no node.
fn four_gpus_no_nic() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = copy("healthy-4gpu-ib-peermem");
    std::fs::remove_dir_all(root.join("sys/class/infiniband")).unwrap();
    for g in FOUR {
        let bdf = g[4..].to_lowercase();
        std::fs::write(
            root.join(format!("sys/bus/pci/devices/{bdf}/numa_node")),
            "-1\n",
        )
        .unwrap();
    }
    (dir, root)
}

/// The real 2x H200 VM's capture with the node list its kernel had (node0 = CPUs 0-31, as
/// nvidia-smi's CPU Affinity there says; the capture predates recording it).
fn h200_pair_with_nodes() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = copy("h200x2-vm");
    let node = root.join("sys/devices/system/node/node0");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("cpulist"), "0-31\n").unwrap();
    (dir, root)
}

fn inventory(root: &Path) -> Inventory {
    let root = gdrdoctor::root::Root::open(root).unwrap();
    Inventory::load(&root, &gdrdoctor::config::Config::default())
}

/// A GPU probe whose NVML lists `gpus` (bus IDs), each with its active NVLinks as
/// (remote type, remote bus ID).
fn nvml(gpus: &[(&str, Vec<(&str, &str)>)]) -> Runtime {
    let devices: Vec<serde_json::Value> = gpus
        .iter()
        .enumerate()
        .map(|(i, (bus, links))| {
            let links: Vec<_> = links
                .iter()
                .enumerate()
                .map(|(k, (kind, remote))| {
                    serde_json::json!({"link": k, "remote_type": kind, "remote_bus_id": remote})
                })
                .collect();
            serde_json::json!({"index": i, "bus_id": bus, "name": "NVIDIA H100 80GB HBM3",
                "bar1_total": null, "bar1_used": null, "nvlinks": links})
        })
        .collect();
    let probe: Probe = serde_json::from_value(serde_json::json!({
        "nvml": {"status": "ready", "library": "libnvidia-ml.so.1", "driver_version": null,
                 "cuda_driver_version": null, "devices": devices}
    }))
    .unwrap();
    Runtime::Probed(Box::new(probe))
}

/// `n` links to NVSwitches (NVML gives no remote bus for those).
fn to_switch(n: usize) -> Vec<(&'static str, &'static str)> {
    vec![("switch", "FFFFFFFF:FF:FF.0"); n]
}

/// `topo`'s human output for `inv`, as `topo` writes it.
fn topo_human(inv: &Inventory, gpu: &Runtime) -> String {
    let config = gdrdoctor::config::Config::default();
    let gdr = gdrdoctor::report::topo::gdr(inv, &gdrdoctor::nccl::effective::judge(inv, &config));
    gdrdoctor::report::topo::human(&gdrdoctor::placement::matrix(inv, gpu), &gdr)
}

/// The SVG of `inv` as `topo --format svg` draws it (the live path: the pictures read NVML's
/// NVLinks from the GPU probe, `gpu`).
fn svg_of(inv: &Inventory, gpu: &Runtime, root: &str) -> String {
    let config = gdrdoctor::config::Config::default();
    let p = gdrdoctor::report::picture::picture(inv, gpu, &config, root);
    let mut out = Vec::new();
    gdrdoctor::report::svg::write(&p, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The DOT of `inv`, as `topo --format dot` writes it.
fn dot_of(inv: &Inventory, gpu: &Runtime, root: &str) -> String {
    let config = gdrdoctor::config::Config::default();
    let p = gdrdoctor::report::picture::picture(inv, gpu, &config, root);
    let mut out = Vec::new();
    gdrdoctor::report::dot::write(&p, &mut out).unwrap();
    let dot = String::from_utf8(out).unwrap();
    dot_is_well_formed(&dot).unwrap_or_else(|e| panic!("{e}\n{dot}"));
    lay_out(&dot, &root.replace([' ', ',', '/'], "-"));
    dot
}

/// The lines of the legend.
fn legend_of(doc: &roxmltree::Document) -> Vec<String> {
    doc.descendants()
        .find(|n| n.attribute("class") == Some("legend"))
        .expect("a legend")
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(str::to_owned))
        .filter(|t| t != "Legend")
        .collect()
}

/// The groups drawn with `class` (not the legend's swatches, which have no tooltip): their
/// tooltip and their texts.
fn groups_of(doc: &roxmltree::Document, class: &str) -> Vec<(String, Vec<String>)> {
    doc.descendants()
        .filter(|n| {
            n.has_tag_name("g")
                && n.attribute("class")
                    .is_some_and(|c| c.split(' ').any(|c| c == class))
        })
        .filter_map(|g| {
            let title = g
                .children()
                .find(|n| n.has_tag_name("title"))
                .and_then(|t| t.text())?
                .to_owned();
            let texts = g
                .descendants()
                .filter(|n| n.has_tag_name("text"))
                .filter_map(|t| t.text().map(str::to_owned))
                .collect();
            Some((title, texts))
        })
        .collect()
}

/// Renders into the build directory (`target/tmp/topo-<name>.png`, for a person to look at)
/// and checks the size as the fixtures' pictures are checked.
fn render_and_size(svg: &str, name: &str) {
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("topo-{name}.png"));
    let (w, h) = render(svg, &png);
    assert_eq!((w, h), svg_size(svg), "{name}");
    assert!(
        (500..=4000).contains(&w) && (300..=2000).contains(&h),
        "{name}: {w}x{h}"
    );
}

/// The NUMA Affinity column of `gdrdoctor topo`, per GPU row.
fn numa_affinity_column(root: &str) -> Vec<String> {
    let out = gdrdoctor(&["--root", root, "topo"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    stdout(&out)
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("GPU"))
        .map(|l| l.rsplit('\t').next().unwrap().to_owned())
        .collect()
}

#[test]
fn numa_is_one_rule_for_topo_and_the_picture() {
    // numa_node -1 on a one-node machine: topo says NUMA Affinity 0, as nvidia-smi does on the
    // 4x H100 and the 2x H200 machines, and so does the picture.
    for (name, (_dir, root), gpus) in [
        ("4 GPUs", four_gpus_no_nic(), 4),
        ("2x H200", h200_pair_with_nodes(), 2),
    ] {
        let root = root.to_str().unwrap();
        assert_eq!(numa_affinity_column(root), vec!["0"; gpus], "{name}");
        let svg = topo(root, "svg");
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let shown = texts(&doc);
        assert!(
            shown.iter().any(|t| t == "NUMA node 0"),
            "{name}: {shown:?}"
        );
        assert!(shown.iter().any(|t| t == "NUMA 0"), "{name}: {shown:?}");
        assert!(
            !shown.iter().any(|t| t.contains("unknown") || t == "NUMA ?"),
            "{name}: {shown:?}"
        );
        let dot = topo(root, "dot");
        assert!(dot.contains("label=\"NUMA node 0\""), "{name}");
    }
    // Without the kernel's node list neither knows: topo N/A, the picture unknown.
    let root = fixture("h200x2-vm");
    assert_eq!(numa_affinity_column(root), vec!["N/A"; 2]);
    let svg = topo(root, "svg");
    let shown = texts(&roxmltree::Document::parse(&svg).unwrap());
    assert!(shown.iter().any(|t| t == "NUMA node unknown"));
    assert!(shown.iter().any(|t| t == "NUMA ?"));
}

#[test]
fn legend_lists_only_what_is_drawn() {
    let starts = |legend: &[String], prefix: &str| legend.iter().any(|t| t.starts_with(prefix));
    let levels = |legend: &[String]| -> Vec<String> {
        legend
            .iter()
            .filter_map(|t| t.split_once(':').map(|(l, _)| l.to_owned()))
            .filter(|l| ["PIX", "PXB", "PHB", "NODE", "SYS"].contains(&l.as_str()))
            .collect()
    };
    // GPUs on the root bus, no NIC, no bridge: GPU and host bridge only.
    let svg = topo(fixture("h200x2-vm"), "svg");
    let legend = legend_of(&roxmltree::Document::parse(&svg).unwrap());
    assert_eq!(legend.len(), 2, "{legend:?}");
    assert!(starts(&legend, "GPU: ") && starts(&legend, "PCIe host bridge"));

    // Four GPUs behind switches, no NIC: no NIC, ACS, level or NVLink line.
    let (_dir, root) = four_gpus_no_nic();
    let svg = topo(root.to_str().unwrap(), "svg");
    let legend = legend_of(&roxmltree::Document::parse(&svg).unwrap());
    for prefix in ["GPU: ", "PCIe bridge", "PCIe host bridge", "PCIe switch"] {
        assert!(starts(&legend, prefix), "{prefix}: {legend:?}");
    }
    for absent in [
        "RDMA NIC",
        "GPU whose",
        "ACS redirect",
        "a GPU-NIC pair",
        "NVLink",
        "a pair of an NVLink",
    ] {
        assert!(!starts(&legend, absent), "{absent}: {legend:?}");
    }
    assert!(levels(&legend).is_empty(), "{legend:?}");
    assert!(
        !svg.contains("NCCL_NET_GDR_LEVEL"),
        "no NIC, no GDR level to speak of"
    );
    // The DOT's legend likewise.
    let dot = topo(root.to_str().unwrap(), "dot");
    let legend = dot.lines().find(|l| l.contains("legend [")).unwrap();
    assert!(legend.contains("green: GPU   grey: PCIe bridge   yellow: host bridge\\l"));
    for absent in ["RDMA NIC", "ACS", " edge:", "NVLink"] {
        assert!(!legend.contains(absent), "{absent}: {legend}");
    }

    // A NIC, a switch, an ACS redirect and a PIX pair through it: each said, and only PIX.
    let svg = topo(fixture("acs-redirect-on-path"), "svg");
    let legend = legend_of(&roxmltree::Document::parse(&svg).unwrap());
    for prefix in [
        "RDMA NIC",
        "PCIe switch",
        "ACS redirect",
        "a GPU-NIC pair whose path",
    ] {
        assert!(starts(&legend, prefix), "{prefix}: {legend:?}");
    }
    assert_eq!(levels(&legend), ["PIX"]);

    // The 8-GPU node: PIX pairs, no redirect.
    let svg = topo(fixture("healthy-8gpu-roce"), "svg");
    let legend = legend_of(&roxmltree::Document::parse(&svg).unwrap());
    assert_eq!(levels(&legend), ["PIX"]);
    assert!(!starts(&legend, "ACS redirect") && !starts(&legend, "a GPU-NIC pair whose"));

    // A GPU beyond the GDR level: its mark is explained, and no pair line is.
    let svg = topo(fixture("placement-sys"), "svg");
    let legend = legend_of(&roxmltree::Document::parse(&svg).unwrap());
    assert!(
        starts(&legend, "GPU whose nearest NIC is beyond"),
        "{legend:?}"
    );
    assert!(levels(&legend).is_empty(), "{legend:?}");
}

#[test]
fn nvlink_groups_all_to_all_and_not() {
    let (_dir, root) = four_gpus_no_nic();
    let inv = inventory(&root);

    // NV18 between every pair (the 4x H100 machine): one group, one bar, one label.
    let all: Vec<_> = FOUR.iter().map(|g| (*g, to_switch(18))).collect();
    let gpu = nvml(&all);
    let topo_m = topo_human(&inv, &gpu);
    assert!(topo_m.contains("GPU0\t X \tNV18\tNV18\tNV18\t"), "{topo_m}");
    let svg = svg_of(&inv, &gpu, "healthy-4gpu-ib-peermem without RDMA, NV18");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        groups_of(&doc, "nvlink"),
        [(
            "NVLink group GPU0, GPU1, GPU2, GPU3: NV18 between every pair".to_owned(),
            vec!["NV18 between every pair".to_owned()]
        )]
    );
    assert!(groups_of(&doc, "nvother").is_empty());
    let legend = legend_of(&doc);
    assert!(legend.iter().any(|t| t.starts_with("NVLink group:")));
    assert!(!legend.iter().any(|t| t.starts_with("a pair of an NVLink")));
    render_and_size(&svg, "4gpu-nv18");
    let dot = dot_of(&inv, &gpu, "healthy-4gpu-ib-peermem without RDMA, NV18");
    assert!(dot.contains("\"nvlink0\" [label=\"NVLink group\\nNV18 between every pair\""));
    assert_eq!(dot.matches("\"nvlink0\" -- ").count(), 4);
    assert!(!dot.contains("nvlink1"));

    // GPU3 with 12 of its links up: its three pairs are NV12, drawn and named.
    let mut fewer = all.clone();
    fewer[3].1 = to_switch(12);
    let gpu = nvml(&fewer);
    let topo_m = topo_human(&inv, &gpu);
    assert!(topo_m.contains("GPU3\tNV12\tNV12\tNV12\t X \t"), "{topo_m}");
    let svg = svg_of(
        &inv,
        &gpu,
        "healthy-4gpu-ib-peermem without RDMA, GPU3 NV12",
    );
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let groups = groups_of(&doc, "nvlink");
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].1, ["NV18 between every pair but those below"]);
    assert_eq!(
        groups_of(&doc, "nvother"),
        ["GPU0", "GPU1", "GPU2"].map(|g| (
            format!("{g} - GPU3: NV12 where the group's other pairs have NV18"),
            vec!["NV12".to_owned()]
        ))
    );
    assert!(
        legend_of(&doc)
            .iter()
            .any(|t| t.starts_with("a pair of an NVLink"))
    );
    render_and_size(&svg, "4gpu-nv18-one-nv12");
    let dot = dot_of(
        &inv,
        &gpu,
        "healthy-4gpu-ib-peermem without RDMA, GPU3 NV12",
    );
    for gpu in ["0000:18:00.0", "0000:1a:00.0", "0000:3a:00.0"] {
        assert!(
            dot.contains(&format!("\"{gpu}\" -- \"0000:3c:00.0\" [xlabel=\"NV12\"")),
            "{gpu}: {dot}"
        );
    }

    // Two pairs joined by NVLink bridges (direct links): two groups of two.
    let bus = |k: usize| FOUR[k];
    let bridged: Vec<_> = (0..4)
        .map(|k| (bus(k), vec![("gpu", bus(k ^ 1)); 4]))
        .collect();
    let gpu = nvml(&bridged);
    let svg = svg_of(
        &inv,
        &gpu,
        "healthy-4gpu-ib-peermem without RDMA, bridged pairs",
    );
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        groups_of(&doc, "nvlink"),
        [
            (
                "NVLink group GPU0, GPU1: NV4".to_owned(),
                vec!["NV4".to_owned()]
            ),
            (
                "NVLink group GPU2, GPU3: NV4".to_owned(),
                vec!["NV4".to_owned()]
            )
        ]
    );
    render_and_size(&svg, "4gpu-bridged-pairs");

    // No NVLink: no group, no legend line.
    let gpu = nvml(&FOUR.map(|g| (g, Vec::new())));
    let svg = svg_of(
        &inv,
        &gpu,
        "healthy-4gpu-ib-peermem without RDMA, no NVLink",
    );
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert!(groups_of(&doc, "nvlink").is_empty());
    assert!(!legend_of(&doc).iter().any(|t| t.contains("NVLink")));
}

#[test]
fn nvlink_groups_on_the_real_pair_and_the_8_gpu_node() {
    // The 2x H200 VM with what its NVML said (tests/data/gpu-runtime-h200x2.json).
    let (_dir, root) = h200_pair_with_nodes();
    let inv = inventory(&root);
    let text =
        std::fs::read_to_string(crate_dir().join("tests/data/gpu-runtime-h200x2.json")).unwrap();
    let gpu = Runtime::Probed(Box::new(serde_json::from_str(&text).unwrap()));
    let svg = svg_of(&inv, &gpu, "fixtures/h200x2-vm");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        groups_of(&doc, "nvlink"),
        [(
            "NVLink group GPU0, GPU1: NV18".to_owned(),
            vec!["NV18".to_owned()]
        )]
    );
    render_and_size(&svg, "h200x2-nv18");

    // Eight GPUs on NVSwitches and their NICs: one group over the eight, the GDR pairs kept.
    let inv = inventory(&fixture_path("healthy-8gpu-roce"));
    let gpus: Vec<String> = inv
        .gpus
        .iter()
        .map(|g| format!("0000{}", g.bdf).to_uppercase())
        .collect();
    let gpu = nvml(
        &gpus
            .iter()
            .map(|g| (g.as_str(), to_switch(18)))
            .collect::<Vec<_>>(),
    );
    let svg = svg_of(&inv, &gpu, "fixtures/healthy-8gpu-roce");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let groups = groups_of(&doc, "nvlink");
    assert_eq!(groups.len(), 1);
    assert_eq!(
        groups[0].0,
        "NVLink group GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7: NV18 between every pair"
    );
    let pairs = groups_of(&doc, "pair").len();
    assert_eq!(pairs, 16, "every GDR pair still drawn");
    render_and_size(&svg, "8gpu-nv18-roce");
}

/// One GPU's GDR decision as a view shows it: verdict, NCCL's level, the nearest NICs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decision {
    verdict: String,
    level: Option<String>,
    nics: BTreeSet<String>,
}

/// `pcie-placement`'s decision per GPU (by PCI address), from `check --format json`: the code
/// of the GPU's finding, the level and the NICs its message names ("nearest NICs: mlx5_0,
/// mlx5_1 at PIX ...", "nearest NIC mlx5_0 at SYS, beyond ...").
fn check_decisions(report: &serde_json::Value) -> std::collections::BTreeMap<String, Decision> {
    let mut out = std::collections::BTreeMap::new();
    let placement = check(report, "pcie-placement");
    for f in placement["findings"].as_array().unwrap() {
        let subject = f["subject"].as_str().unwrap();
        let Some(bdf) = subject
            .strip_prefix("GPU ")
            .and_then(|s| s.split(' ').next())
        else {
            continue;
        };
        let message = f["message"].as_str().unwrap();
        let code = f["code"].as_str().unwrap();
        let verdict = match code {
            "gpu-nic-near" | "gpu-nic-c2c" => "gdr",
            "gpu-nic-too-far" | "gpu-nic-c2c-no-gdr" => "no-gdr",
            "placement-unknown" | "gpu-nic-c2c-release-unknown" => "unknown",
            other => panic!("{subject}: code {other}"),
        };
        let (level, nics) = match verdict {
            // Over NVLink-C2C: `nearest NICs mlx5_0, mlx5_1 over NVLink-C2C to the GPU's CPU
            // (NCCL's P2C; NODE in sysfs): ...`, the level topo gives being sysfs's.
            _ if code.starts_with("gpu-nic-c2c") => {
                let rest = ["nearest NICs ", "nearest NIC "]
                    .iter()
                    .find_map(|p| message.strip_prefix(p))
                    .unwrap_or_else(|| panic!("{subject}: {message}"));
                let (names, after) = rest.split_once(" over NVLink-C2C").unwrap();
                let level = after
                    .split_once("; ")
                    .and_then(|(_, r)| r.split(' ').next())
                    .unwrap()
                    .to_owned();
                (Some(level), names.split(", ").map(str::to_owned).collect())
            }
            "unknown" => (None, BTreeSet::new()),
            _ => {
                let rest = [
                    "nearest NICs: ",
                    "nearest NIC: ",
                    "nearest NICs ",
                    "nearest NIC ",
                ]
                .iter()
                .find_map(|p| message.strip_prefix(p))
                .unwrap_or_else(|| panic!("{subject}: {message}"));
                let (names, after) = rest.split_once(" at ").unwrap();
                let level = after.split([' ', ',']).next().unwrap().to_owned();
                (Some(level), names.split(", ").map(str::to_owned).collect())
            }
        };
        out.insert(
            bdf.to_owned(),
            Decision {
                verdict: verdict.to_owned(),
                level,
                nics,
            },
        );
    }
    out
}

/// The label a picture gives a GDR pair: NCCL's level, the sysfs level beside where it differs;
/// `C2C (sysfs NODE)` for a GPU that reaches the NIC over NVLink-C2C (`via` of topo's GPU).
fn pair_label(gpu: &serde_json::Value, nic: &serde_json::Value) -> String {
    let level = nic["level"].as_str().unwrap();
    if gpu["via"] == "c2c" {
        return format!("C2C (sysfs {level})");
    }
    match nic["sysfs_level"].as_str() {
        Some(s) if s != level => format!("{level} (sysfs {s})"),
        _ => level.to_owned(),
    }
}

/// Issue 25: `check` passed every GPU of an Azure VM from NCCL's topology file while the
/// pictures said "no GDR: NIC at NODE" for all 8. One function decides; on every fixture, the
/// check's findings, `topo`'s JSON and human output, the SVG and the DOT say the same about
/// every GPU (and every GDR pair drawn).
#[test]
fn every_view_judges_gdr_as_check_does() {
    let mut wrong: Vec<String> = Vec::new();
    let mut judged = 0;
    for name in fixture_names() {
        let root = fixture(&name);
        let cfg = fixture_config(&name);
        let run = |args: &[&str]| {
            let mut a = vec!["--root", root];
            if let Some(c) = &cfg {
                a.extend(["--config", c.as_str()]);
            }
            a.extend(args);
            gdrdoctor(&a)
        };
        let report = json(&run(&[
            "check",
            "--select",
            "pcie-placement",
            "--format",
            "json",
        ]));
        let topo_out = run(&["topo", "--format", "json"]);
        let Ok(topo) = serde_json::from_slice::<serde_json::Value>(&topo_out.stdout) else {
            // A root topo cannot read says so and prints no matrix (tested apart).
            continue;
        };
        let from_check = check_decisions(&report);
        let devices = topo["devices"].as_array().unwrap();
        let bdf_of = |n: &str| {
            devices
                .iter()
                .find(|d| d["name"] == n)
                .and_then(|d| d["bdf"].as_str())
                .map(str::to_owned)
        };
        let rdma_devices = devices.iter().filter(|d| d["kind"] == "nic").count();
        let gpus = topo["gdr"]["gpus"].as_array().unwrap();
        let mut no_gdr = BTreeSet::new();
        let mut pairs = BTreeSet::new();
        let mut human_expected = Vec::new();
        for g in gpus {
            judged += 1;
            let bdf = g["bdf"].as_str().unwrap();
            let verdict = g["verdict"].as_str().unwrap();
            let nics: BTreeSet<String> = g["nics"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["rdma_device"].as_str().unwrap().to_owned())
                .collect();
            let from_topo = Decision {
                verdict: verdict.to_owned(),
                level: g["level"].as_str().map(str::to_owned),
                nics,
            };
            match from_check.get(bdf) {
                Some(c) if *c != from_topo => {
                    wrong.push(format!("{name} GPU {bdf}: check {c:?}, topo {from_topo:?}"))
                }
                None if verdict != "no-nic" => wrong.push(format!(
                    "{name} GPU {bdf}: no pcie-placement finding, topo {from_topo:?}"
                )),
                _ => {}
            }
            if verdict == "no-gdr"
                || verdict == "unknown"
                || (verdict == "no-nic" && rdma_devices > 0)
            {
                no_gdr.insert(bdf.to_owned());
            }
            if verdict == "gdr" {
                for n in g["nics"].as_array().unwrap() {
                    if let Some(nic) = bdf_of(n["name"].as_str().unwrap()) {
                        pairs.insert((bdf.to_owned(), nic, pair_label(g, n)));
                    }
                }
            }
            human_expected.push((g["name"].as_str().unwrap().to_owned(), verdict.to_owned()));
        }
        for bdf in from_check.keys() {
            if !gpus.iter().any(|g| g["bdf"] == bdf.as_str()) {
                wrong.push(format!("{name} GPU {bdf}: in check, not in topo's gdr"));
            }
        }

        // The human output's lines, `GPU0: GDR: NIC0 at PIX`.
        let human = stdout(&run(&["topo"]));
        let section = human
            .split_once("\nGPUDirect RDMA as NCCL decides it")
            .map(|(_, s)| s);
        let shown: Vec<(String, String)> = section
            .into_iter()
            .flat_map(|s| s.lines())
            .filter_map(|l| l.strip_prefix("  "))
            .filter_map(|l| {
                let mut parts = l.splitn(3, ": ");
                let (gpu, what, rest) = (parts.next()?, parts.next()?, parts.next()?);
                let verdict = match (what, rest) {
                    ("GDR", _) => "gdr",
                    ("no GDR", "NCCL uses no RDMA NIC") => "no-nic",
                    ("no GDR", _) => "no-gdr",
                    ("unknown", _) => "unknown",
                    _ => return None,
                };
                Some((gpu.to_owned(), verdict.to_owned()))
            })
            .collect();
        let all_no_nic = human_expected.iter().all(|(_, v)| v == "no-nic");
        if shown != human_expected && !(all_no_nic && shown.is_empty()) {
            wrong.push(format!(
                "{name}: topo's human lines {shown:?}, JSON {human_expected:?}"
            ));
        }

        // The SVG: GPUs outlined as without GDR, and the pairs drawn with their labels.
        let svg = stdout(&run(&["topo", "--format", "svg"]));
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let drawn_gpus = boxes_with(&doc, "gpu");
        let drawn_nics = boxes_with(&doc, "nic");
        let want_no_gdr: BTreeSet<String> = no_gdr.intersection(&drawn_gpus).cloned().collect();
        let svg_no_gdr = boxes_with(&doc, "nogdr");
        if svg_no_gdr != want_no_gdr {
            wrong.push(format!(
                "{name}: SVG marks {svg_no_gdr:?} without GDR, the decision {want_no_gdr:?}"
            ));
        }
        let want_pairs: BTreeSet<(String, String, String)> = pairs
            .iter()
            .filter(|(g, n, _)| drawn_gpus.contains(g) && drawn_nics.contains(n))
            .cloned()
            .collect();
        let svg_pairs: BTreeSet<(String, String, String)> = groups_of(&doc, "pair")
            .into_iter()
            .map(|(title, _)| {
                // `GPU0 - NIC0 mlx5_0: PIX (sysfs NODE)[, through an ACS redirect]`
                let (who, label) = title.split_once(": ").unwrap();
                let (gpu, nic) = who.split_once(" - ").unwrap();
                let nic = nic.split(' ').next().unwrap();
                let label = label.trim_end_matches(", through an ACS redirect");
                (bdf_of(gpu).unwrap(), bdf_of(nic).unwrap(), label.to_owned())
            })
            .collect();
        if svg_pairs != want_pairs {
            wrong.push(format!(
                "{name}: SVG pairs {svg_pairs:?}, the decision {want_pairs:?}"
            ));
        }

        // The DOT: the same GPUs marked, the same pairs as coloured edges.
        let dot = stdout(&run(&["topo", "--format", "dot"]));
        let dot_no_gdr: BTreeSet<String> = dot
            .lines()
            .filter(|l| l.contains("\\nno GDR: "))
            .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next())
            .map(str::to_owned)
            .collect();
        if dot_no_gdr != want_no_gdr {
            wrong.push(format!(
                "{name}: DOT marks {dot_no_gdr:?} without GDR, the decision {want_no_gdr:?}"
            ));
        }
        let dot_pairs: BTreeSet<(String, String, String)> = dot
            .lines()
            .filter(|l| l.contains("penwidth=2.5"))
            .filter_map(|l| {
                let mut q = l.split('"');
                let gpu = q.nth(1)?.to_owned();
                let nic = q.nth(1)?.to_owned();
                let label = l.split_once("label=\"")?.1.split('"').next()?;
                let label = label.trim_end_matches(" ACS redirect").to_owned();
                Some((gpu, nic, label))
            })
            .collect();
        if dot_pairs != want_pairs {
            wrong.push(format!(
                "{name}: DOT pairs {dot_pairs:?}, the decision {want_pairs:?}"
            ));
        }
    }
    assert!(
        judged > 50,
        "only {judged} GPUs judged: the fixtures are not all there"
    );
    assert!(
        wrong.is_empty(),
        "{} differences:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// `fleet --pictures` draws with the same judgement: the Azure VM whose nccl.conf names the
/// image's topology file has every GPU paired at PIX, none marked "no GDR" (issue 25).
#[test]
fn fleet_pictures_judge_as_check_does() {
    let out_dir = tempfile::tempdir().unwrap();
    let o = gdrdoctor(&[
        "fleet",
        fixture("azure-ndv4-vm-topo"),
        "--pictures",
        out_dir.path().to_str().unwrap(),
    ]);
    code(&o);
    let svgs = files(out_dir.path());
    assert_eq!(svgs.len(), 1, "{svgs:?}\n{}", stderr(&o));
    let svg = std::fs::read_to_string(out_dir.path().join(&svgs[0])).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert!(boxes_with(&doc, "nogdr").is_empty(), "{svg}");
    let pairs = groups_of(&doc, "pair");
    assert_eq!(pairs.len(), 16, "{pairs:?}");
    assert!(
        pairs.iter().all(|(t, _)| t.ends_with(": PIX (sysfs NODE)")),
        "{pairs:?}"
    );
    assert!(!svg.contains("no GDR"), "{svg}");
}

/// Sets ACS Control of the function whose config space is `config` (extended capability 0x000d,
/// Control at +6), as a bridge that redirects peer-to-peer traffic has it.
fn set_acs_control(config: &Path, control: u16) {
    let mut bytes = std::fs::read(config).unwrap();
    let mut at = 0x100;
    loop {
        let header = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        if header & 0xffff == 0x000d {
            bytes[at + 6..at + 8].copy_from_slice(&control.to_le_bytes());
            break;
        }
        at = (header >> 20) as usize;
        assert!(at >= 0x100, "no ACS capability in {}", config.display());
    }
    std::fs::write(config, bytes).unwrap();
}

/// Issue 25, the same cause in `acs`: it judged the bridges between each GPU and its nearest
/// NIC over every NIC, while NCCL uses only those NCCL_IB_HCA selects. On the 8-GPU node with
/// NCCL told to use mlx5_2 alone, GPU0's traffic crosses the root port above mlx5_2's switch;
/// a redirect there is on a path NCCL uses, and the check and the picture say so.
#[test]
fn acs_judges_the_paths_nccl_uses() {
    let (_dir, root) = fixture_copy("healthy-8gpu-roce");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/nccl.conf"), "NCCL_IB_HCA==mlx5_2\n").unwrap();
    set_acs_control(
        &root.join("sys/bus/pci/devices/0000:37:01.0/config"),
        0x001d,
    );
    let root = root.to_str().unwrap();
    let report = json(&gdrdoctor(&[
        "--root", root, "check", "--select", "acs", "--format", "json",
    ]));
    let acs = check(&report, "acs");
    let redirect: Vec<&serde_json::Value> = acs["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "acs-redirect-on-path")
        .collect();
    assert_eq!(redirect.len(), 1, "{acs:#}");
    assert_eq!(redirect[0]["subject"], "bridge 0000:37:01.0", "{acs:#}");
    assert!(
        redirect[0]["message"]
            .as_str()
            .unwrap()
            .contains("GPU 0000:18:00.0 - mlx5_2"),
        "{acs:#}"
    );
    let svg = topo(root, "svg");
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        boxes_with(&doc, "redirect"),
        BTreeSet::from(["0000:37:01.0".to_owned()])
    );
}
