//! The elements NCCL uses, as a typed tree with the lines they are on: what NCCL makes of each
//! `pci`, `nic` and `net` (src/graph/topo.cc, xml.cc), and what it refuses outright.

use super::{Document, Element, NCCL_MAX_NODES, NCCL_MAX_SUBS};
use crate::parse::pci::Bdf;

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

/// Which library reads the file: NCCL, or AMD's RCCL (its port to HIP, the library of a node
/// whose GPUs are AMD's). As `nccl verify` names it in JSON: `nccl`, `rccl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Library {
    #[default]
    Nccl,
    Rccl,
}

impl Library {
    pub fn name(self) -> &'static str {
        match self {
            Library::Nccl => "NCCL",
            Library::Rccl => "RCCL",
        }
    }

    /// The GPU runtime it runs on: `CUDA`, or `HIP` for RCCL.
    pub fn runtime(self) -> &'static str {
        match self {
            Library::Nccl => "CUDA",
            Library::Rccl => "HIP",
        }
    }

    /// The `<system version>` it reads.
    pub fn xml_version(self) -> u32 {
        match self {
            Library::Nccl => 1,
            Library::Rccl => 2,
        }
    }
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
    let (v, _) = crate::parse::nccl_conf::nccl_int(s.unwrap_or(""));
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

    /// What in the file the library refuses outright (its communicator initialisation then
    /// fails): a missing or wrong version, more elements or children than it holds. `(line,
    /// message)`. NCCL and RCCL read the same grammar (src/graph/xml.cc) but each only its own
    /// `NCCL_TOPO_XML_VERSION`: 1 in NCCL, 2 in RCCL, whose test suite checks that any other is
    /// refused (ROCm/rccl test/graph/XmlTests.cpp, `TestXmlWarnings_WrongVersion`).
    pub fn refusals(&self, library: Library) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let (name, version, other) = match library {
            Library::Nccl => ("NCCL", 1, "RCCL writes 2"),
            Library::Rccl => ("RCCL", 2, "NCCL writes 1"),
        };
        match &self.system {
            None => {}
            Some((line, None)) => out.push((
                *line,
                format!("<system> has no version attribute ({name}: \"Attribute version of node system not found\")"),
            )),
            Some((line, Some(v))) => {
                let (n, _) = crate::parse::nccl_conf::nccl_int(v);
                if n != version {
                    out.push((
                        *line,
                        format!("<system version=\"{v}\">: {name} reads only version {version} (\"XML Topology has wrong version\"; {other})"),
                    ));
                }
            }
        }
        if self.kept > NCCL_MAX_NODES {
            out.push((
                1,
                format!(
                    "{} elements: {name} 2.21 and later hold at most {NCCL_MAX_NODES} (\"XML parser is limited to {NCCL_MAX_NODES} nodes\")",
                    self.kept
                ),
            ));
        }
        if self.widest.0 > NCCL_MAX_SUBS {
            out.push((
                self.widest.1,
                format!(
                    "an element with {} children: {name} 2.21 to 2.29 hold at most {NCCL_MAX_SUBS} (32 before 2.21)",
                    self.widest.0
                ),
            ));
        }
        out
    }
}
