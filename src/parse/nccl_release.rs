//! The NCCL release named by the files an installation leaves (issue 38): the library's file
//! name, the header's version macros, the package's file list. Pure: names and text in,
//! versions out; `inventory::nccl_release` reads the files.

use super::nccl_log::Version;

/// `libnccl.so.2.27.3` -> 2.27.3. NVIDIA's packages (libnccl2's .deb and .rpm, the tarballs'
/// `lib/`) install the library as `libnccl.so.<major>.<minor>.<patch>` with `libnccl.so.2` a
/// link to it (NVIDIA/nccl `makefiles/version.mk`, `src/Makefile`: `LIBNAME` with
/// `$(NCCL_MAJOR).$(NCCL_MINOR).$(NCCL_PATCH)`). The bare soname carries no release.
pub fn library_name(name: &str) -> Option<Version> {
    let rest = name.strip_prefix("libnccl.so.")?;
    let mut parts = rest.split('.');
    let (major, minor, patch) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let n = |s: &str| {
        (!s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u16>().ok())
            .flatten()
    };
    Some(Version::new(n(major)?, n(minor)?, n(patch)?))
}

/// `nccl.h`'s release: `#define NCCL_MAJOR 2`, `NCCL_MINOR 27`, `NCCL_PATCH 3` (NVIDIA/nccl
/// `src/nccl.h.in`, filled in by `makefiles/version.mk`; libnccl-dev installs it).
pub fn header(text: &str) -> Option<Version> {
    let define = |name: &str| -> Option<u16> {
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "#define" && w.next()? == name)
                .then(|| w.next()?.parse::<u16>().ok())
                .flatten()
        })
    };
    Some(Version::new(
        define("NCCL_MAJOR")?,
        define("NCCL_MINOR")?,
        define("NCCL_PATCH")?,
    ))
}

/// A package's file list (dpkg's `/var/lib/dpkg/info/libnccl2.list`, one installed path a
/// line): the release of the library file it installed, and that path.
pub fn file_list(text: &str) -> Option<(Version, &str)> {
    text.lines().find_map(|l| {
        let l = l.trim();
        let name = l.rsplit('/').next()?;
        Some((library_name(name)?, l))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            library_name("libnccl.so.2.27.3"),
            Some(Version::new(2, 27, 3))
        );
        assert_eq!(library_name("libnccl.so.2"), None);
        assert_eq!(library_name("libnccl.so.2.27"), None);
        assert_eq!(library_name("libnccl.so.2.27.3.bak"), None);
        assert_eq!(library_name("libnccl.so.2.x.3"), None);
        assert_eq!(library_name("libnccl-net.so"), None);
    }

    #[test]
    fn headers() {
        // The lines of nccl.h as libnccl-dev 2.26.5 installs it.
        let h = "#ifndef NCCL_H_\n#define NCCL_H_\n\n#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 5\n#define NCCL_SUFFIX \"\"\n\n#define NCCL_VERSION_CODE 22605\n";
        assert_eq!(header(h), Some(Version::new(2, 26, 5)));
        assert_eq!(header("#define NCCL_MAJOR 2\n"), None);
        assert_eq!(
            header("#define NCCL_MAJOR x\n#define NCCL_MINOR 1\n#define NCCL_PATCH 1\n"),
            None
        );
    }

    #[test]
    fn lists() {
        // libnccl2 2.27.3-1+cuda12.9's file list, as dpkg keeps it.
        let l = "/.\n/usr\n/usr/lib\n/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/libnccl.so.2.27.3\n/usr/share/doc/libnccl2\n/usr/lib/x86_64-linux-gnu/libnccl.so.2\n";
        assert_eq!(
            file_list(l),
            Some((
                Version::new(2, 27, 3),
                "/usr/lib/x86_64-linux-gnu/libnccl.so.2.27.3"
            ))
        );
        assert_eq!(file_list("/usr/lib/libnccl.so.2\n"), None);
    }
}
