//! Kernel-wide text files: `/proc/cmdline`, `/proc/modules`, the release string, the kernel
//! config, `/proc/driver/nvidia/version`, `/proc/self/limits`.

use std::collections::BTreeMap;

/// One word of the kernel command line: `iommu=pt` -> (`iommu`, Some(`pt`)), `quiet` -> (`quiet`,
/// None). Quotes are removed the way the kernel removes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub key: String,
    pub value: Option<String>,
}

/// Splits a command line into parameters, as the kernel's `next_arg()` does (lib/cmdline.c):
/// double quotes group words (`foo="a b"` or `"foo=a b"`) and are dropped; `--` ends the kernel's
/// parameters (the rest belongs to init).
pub fn cmdline(line: &str) -> Vec<Param> {
    let mut params = Vec::new();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let mut in_quote = false;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            if c == '"' {
                in_quote = !in_quote;
            } else if !in_quote && c.is_whitespace() {
                end = i;
                break;
            }
        }
        let word = &rest[..end];
        rest = rest[end..].trim_start();
        if word == "--" {
            break;
        }
        let unquoted: String = word.chars().filter(|&c| c != '"').collect();
        let (key, value) = match unquoted.split_once('=') {
            Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
            None => (unquoted, None),
        };
        params.push(Param { key, value });
    }
    params
}

/// A module line of `/proc/modules`: `nvidia_peermem 16384 0 - Live 0x0000000000000000 (O)`.
/// kernel: kernel/module/procfs.c m_show().
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleLine {
    pub name: String,
    pub state: String,
}

pub fn proc_modules(text: &str) -> Vec<ModuleLine> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let name = f.next()?;
            if !is_module_name(name) {
                return None;
            }
            let state = f.nth(3).unwrap_or("Live");
            Some(ModuleLine {
                name: name.to_owned(),
                state: state.to_owned(),
            })
        })
        .collect()
}

/// Module names are C identifiers (the kernel turns `-` into `_`).
pub fn is_module_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A kernel version: `6.18.44-fc-v657-gpu` -> 6.18.44.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelVersion(pub u32, pub u32, pub u32);

impl std::fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.2 == 0 {
            write!(f, "{}.{}", self.0, self.1)
        } else {
            write!(f, "{}.{}.{}", self.0, self.1, self.2)
        }
    }
}

pub fn kernel_version(release: &str) -> Option<KernelVersion> {
    let numeric: String = release
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts = numeric
        .split('.')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    (major > 0 && major < 100).then_some(KernelVersion(major, minor, patch))
}

/// The release from `/proc/version`: `Linux version 6.18.44-fc-v657-gpu (builder@...) ...`.
pub fn release_from_proc_version(text: &str) -> Option<String> {
    let rest = text.trim_start().strip_prefix("Linux version ")?;
    let release = rest.split_whitespace().next()?;
    Some(release.to_owned())
}

/// A kernel config value: `CONFIG_X=y` -> Some("y"); `# CONFIG_X is not set` -> None.
pub fn kernel_config(text: &str) -> BTreeMap<String, Option<String>> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(name) = rest.strip_suffix(" is not set") {
                if name.starts_with("CONFIG_") {
                    map.insert(name.to_owned(), None);
                }
            }
        } else if let Some((name, value)) = line.split_once('=') {
            if name.starts_with("CONFIG_") {
                map.insert(name.to_owned(), Some(value.trim_matches('"').to_owned()));
            }
        }
    }
    map
}

/// What `/proc/driver/nvidia/version` says about the loaded NVIDIA kernel module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaVersion {
    pub version: String,
    pub major: u32,
    /// The open kernel modules (`NVIDIA UNIX Open Kernel Module`), required for the DMA-BUF path.
    pub open: bool,
}

/// Seen: `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...`;
/// the proprietary module prints `NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  ...`.
pub fn nvidia_version(text: &str) -> Option<NvidiaVersion> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let version = line.split_whitespace().find(|w| {
        w.starts_with(|c: char| c.is_ascii_digit())
            && w.contains('.')
            && w.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && !w.contains("..")
    })?;
    let major = version.split('.').next()?.parse().ok()?;
    Some(NvidiaVersion {
        version: version.to_owned(),
        major,
        open: line.contains("Open Kernel Module"),
    })
}

/// The `Model:` line of `/proc/driver/nvidia/gpus/<bdf>/information`.
pub fn nvidia_gpu_model(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("Model:"))?;
    let model = line["Model:".len()..].trim();
    (!model.is_empty()).then(|| model.to_owned())
}

/// The `GPU UUID:` line of the same file (`GPU-c783c174-2489-07fb-69e0-b646a5b7d417`), in the
/// form `CUDA_VISIBLE_DEVICES` takes; anything else (`??`, an odd length) is `None`.
pub fn nvidia_gpu_uuid(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("GPU UUID:"))?;
    let uuid = line["GPU UUID:".len()..].trim();
    let hex = uuid.strip_prefix("GPU-")?;
    let groups: Vec<usize> = hex.split('-').map(str::len).collect();
    (groups == [8, 4, 4, 4, 12] && hex.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()))
        .then(|| uuid.to_owned())
}

/// A limit from `/proc/<pid>/limits`: soft and hard, `None` = unlimited.
/// kernel: fs/proc/base.c proc_pid_limits().
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

pub fn proc_limit(text: &str, name: &str) -> Option<Limit> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let mut fields = line[name.len()..].split_whitespace();
    let value = |f: Option<&str>| -> Option<Option<u64>> {
        match f? {
            "unlimited" => Some(None),
            n => n.parse().ok().map(Some),
        }
    };
    Some(Limit {
        soft: value(fields.next())?,
        hard: value(fields.next())?,
    })
}

/// The flags of the first CPU in `/proc/cpuinfo` (x86 prints `flags\t\t: fpu vme ...`; arm64
/// prints `Features`, which has no hypervisor bit): `None` without such a line.
/// kernel: arch/x86/kernel/cpu/proc.c show_cpuinfo().
pub fn cpuinfo_flags(text: &str) -> Option<Vec<String>> {
    let line = text
        .lines()
        .find(|l| l.split(':').next().is_some_and(|k| k.trim() == "flags"))?;
    let (_, flags) = line.split_once(':')?;
    Some(
        flags
            .split_whitespace()
            .filter(|f| f.len() < 64 && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            .map(str::to_owned)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x86's first block (flags of a KVM guest as /proc/cpuinfo prints them), and arm64's,
    /// which has `Features`, not `flags`.
    #[test]
    fn cpuinfo_flags_of_the_first_cpu() {
        let guest = "processor\t: 0\nmodel name\t: Intel Xeon Processor\nflags\t\t: fpu vme sse2 hypervisor lahf_lm\n\nprocessor\t: 1\nflags\t\t: fpu\n";
        let f = cpuinfo_flags(guest).unwrap();
        assert_eq!(f, ["fpu", "vme", "sse2", "hypervisor", "lahf_lm"]);
        assert_eq!(
            cpuinfo_flags("processor\t: 0\nFeatures\t: fp asimd\n"),
            None
        );
        assert_eq!(cpuinfo_flags("flags\t\t:\n"), Some(Vec::new()));
    }

    #[test]
    fn nvidia_uuid_line() {
        // The H200 VM's /proc/driver/nvidia/gpus/0000:00:06.0/information (shortened).
        let info = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-c783c174-2489-07fb-69e0-b646a5b7d417\nBus Type: \t PCIe\n";
        assert_eq!(
            nvidia_gpu_uuid(info).as_deref(),
            Some("GPU-c783c174-2489-07fb-69e0-b646a5b7d417")
        );
        assert_eq!(nvidia_gpu_model(info).as_deref(), Some("NVIDIA H200"));
        // What a capture keeps (the line removed), and what older drivers print instead.
        assert_eq!(nvidia_gpu_uuid("Model: \t\t NVIDIA H200\n"), None);
        assert_eq!(nvidia_gpu_uuid("GPU UUID: \t ??\n"), None);
        assert_eq!(nvidia_gpu_uuid("GPU UUID: \t GPU-c783c174;reboot\n"), None);
    }

    #[test]
    fn cmdline_words_and_quotes() {
        // The H200 VM's /proc/cmdline (shortened): init's arguments follow `--`.
        let p = cmdline(
            "console=ttyS0 quiet pci=realloc=off -- --firecracker-init --addr 0.0.0.0:2024",
        );
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["console", "quiet", "pci"]);
        assert_eq!(p[2].value.as_deref(), Some("realloc=off"));
        let q = cmdline(r#"dyndbg="file drivers/x.c +p" "acpi_osi=Linux 2" iommu=pt"#);
        assert_eq!(
            q[0],
            Param {
                key: "dyndbg".into(),
                value: Some("file drivers/x.c +p".into())
            }
        );
        assert_eq!(
            q[1],
            Param {
                key: "acpi_osi".into(),
                value: Some("Linux 2".into())
            }
        );
        assert_eq!(
            q[2],
            Param {
                key: "iommu".into(),
                value: Some("pt".into())
            }
        );
        // An unterminated quote runs to the end, as in the kernel.
        assert_eq!(cmdline(r#"a="b c"#).len(), 1);
        assert!(cmdline("").is_empty());
    }

    #[test]
    fn modules() {
        // The H200 VM's /proc/modules.
        let m = proc_modules(
            "nvidia_uvm 1830912 - - Live 0xffffffffc080c000 (O)\nnvidia 14299136 - - Live 0xffffffffc0400000 (O)\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[1],
            ModuleLine {
                name: "nvidia".into(),
                state: "Live".into()
            }
        );
        assert!(proc_modules("\u{0}\u{1}garbage;rm -rf / 1 2 3\n").is_empty());
    }

    #[test]
    fn versions() {
        assert_eq!(
            kernel_version("6.18.44-fc-v657-gpu"),
            Some(KernelVersion(6, 18, 44))
        );
        assert_eq!(
            kernel_version("5.15.0-119-generic"),
            Some(KernelVersion(5, 15, 0))
        );
        assert_eq!(kernel_version("6.8"), Some(KernelVersion(6, 8, 0)));
        assert_eq!(kernel_version("banana"), None);
        assert_eq!(kernel_version("99999999999.1"), None);
        assert!(KernelVersion(5, 12, 0) > KernelVersion(5, 4, 300));
        assert_eq!(
            release_from_proc_version(
                "Linux version 6.18.44-fc-v657-gpu (builder@sandboxing) (gcc (GCC) 15.3.0)"
            )
            .as_deref(),
            Some("6.18.44-fc-v657-gpu")
        );
    }

    #[test]
    fn config() {
        let c = kernel_config(
            "CONFIG_PCI_P2PDMA=y\n# CONFIG_DMABUF_MOVE_NOTIFY is not set\nCONFIG_LOCALVERSION=\"-gpu\"\n",
        );
        assert_eq!(c["CONFIG_PCI_P2PDMA"].as_deref(), Some("y"));
        assert_eq!(c["CONFIG_DMABUF_MOVE_NOTIFY"], None);
        assert_eq!(c["CONFIG_LOCALVERSION"].as_deref(), Some("-gpu"));
    }

    #[test]
    fn nvidia() {
        // Seen on the H200 VM.
        let v = nvidia_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n").unwrap();
        assert_eq!(
            v,
            NvidiaVersion {
                version: "580.159.04".into(),
                major: 580,
                open: true
            }
        );
        let p = nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n").unwrap();
        assert_eq!((p.version.as_str(), p.open), ("535.183.01", false));
        assert_eq!(nvidia_version("garbage"), None);
        assert_eq!(
            nvidia_gpu_model("Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\n").as_deref(),
            Some("NVIDIA H200")
        );
    }

    #[test]
    fn limits() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max locked memory         8388608              8388608              bytes     \n\
                    Max open files            1024                 unlimited            files     \n";
        assert_eq!(
            proc_limit(text, "Max locked memory"),
            Some(Limit {
                soft: Some(8388608),
                hard: Some(8388608)
            })
        );
        assert_eq!(
            proc_limit(text, "Max open files"),
            Some(Limit {
                soft: Some(1024),
                hard: None
            })
        );
        assert_eq!(proc_limit(text, "Max realtime timeout"), None);
    }
}
