//! NCCL's configuration files as NCCL itself reads them, and the job environment a site
//! declares for its jobs.
//!
//! NCCL (src/misc/param.cc `setEnvFile`, every release from 2.4 to 2.30) reads `/etc/nccl.conf`,
//! `~/.nccl.conf` and the file `NCCL_CONF_FILE` names one line at a time: the line's newline is
//! cut (from 2.26 a carriage return too), a line starting with `#` is a comment (from 2.26;
//! before, it set a variable named `#...`, which nothing reads), a line without `=` is skipped,
//! and everything before the first `=` is the name and everything after it the value, each cut
//! at 1023 bytes. Nothing is trimmed or unquoted: `NCCL_IB_HCA = mlx5_0` sets a variable named
//! `NCCL_IB_HCA ` that NCCL never looks up, and `NCCL_IB_HCA="mlx5_0"` a value with the quotes
//! in it. The value is set with `setenv(name, value, 0)`, so the first definition of a name
//! wins, within a file and across files.

/// Longest name and value NCCL keeps (`char envVar[1024]`, `envValue[1024]`).
pub const NCCL_MAX: usize = 1023;

/// One `NAME=value` line, as NCCL reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfLine {
    /// 1-based.
    pub line: usize,
    pub name: String,
    pub value: String,
}

/// A line that does not do what it looks like it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OddLine {
    pub line: usize,
    /// The line as written (control characters kept; shown escaped).
    pub text: String,
    /// The variable the line seems meant to set, when one can be told (`NCCL_IB_HCA` for
    /// `export NCCL_IB_HCA=x` or `NCCL_IB_HCA = x`).
    pub meant: Option<String>,
    pub why: Oddity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oddity {
    /// No `=`: NCCL skips the line.
    NoEquals,
    /// Spaces or tabs around the name, or `export `: NCCL sets a variable of that very name,
    /// which nothing reads.
    NameNotBare,
    /// The value is in quotes: NCCL keeps the quotes as part of the value.
    Quoted,
    /// Spaces or tabs around the value: NCCL keeps them.
    ValueSpaces,
    /// A carriage return ends the line: NCCL before 2.26 keeps it in the value.
    CarriageReturn,
}

impl Oddity {
    pub fn explain(self) -> &'static str {
        match self {
            Oddity::NoEquals => "it has no '=', so NCCL skips it",
            Oddity::NameNotBare => {
                "NCCL takes everything before the first '=' as the name, spaces and 'export' included, so it sets a variable nothing reads"
            }
            Oddity::Quoted => "NCCL does not remove quotes: the quotes become part of the value",
            Oddity::ValueSpaces => "NCCL keeps the spaces around the value as part of it",
            Oddity::CarriageReturn => {
                "the line ends in a carriage return (a file written on Windows): NCCL before 2.26 keeps it in the value"
            }
        }
    }
}

/// A configuration file, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfFile {
    /// Every `NAME=value` line in order, duplicates included (NCCL uses the first).
    pub lines: Vec<ConfLine>,
    pub odd: Vec<OddLine>,
}

fn is_env_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// Parses a configuration file's bytes the way NCCL's `setEnvFile` does. Bytes that are not
/// UTF-8 are replaced (NCCL reads bytes; a name with them is no name NCCL looks up anyway).
pub fn parse(bytes: &[u8]) -> ConfFile {
    let text = String::from_utf8_lossy(bytes);
    let mut out = ConfFile::default();
    for (i, raw) in text.split('\n').enumerate() {
        let line = i + 1;
        let cr = raw.ends_with('\r');
        let body = raw.strip_suffix('\r').unwrap_or(raw);
        if body.starts_with('#') || body.trim().is_empty() {
            continue;
        }
        let odd = |why, meant: Option<&str>| OddLine {
            line,
            text: body.to_owned(),
            meant: meant.map(str::to_owned),
            why,
        };
        let Some((name, value)) = body.split_once('=') else {
            // `NCCL_IB_HCA mlx5_0`: the name is the first word that looks like one of NCCL's.
            let word = body
                .split_whitespace()
                .find(|w| w.starts_with("NCCL_") && is_env_name(w));
            out.odd.push(odd(Oddity::NoEquals, word));
            continue;
        };
        let bare = name
            .trim()
            .strip_prefix("export ")
            .unwrap_or(name.trim())
            .trim();
        if name != bare {
            out.odd
                .push(odd(Oddity::NameNotBare, is_env_name(bare).then_some(bare)));
        } else if value.len() >= 2
            && ((value.starts_with('"') && value.ends_with('"'))
                || (value.starts_with('\'') && value.ends_with('\'')))
        {
            out.odd.push(odd(Oddity::Quoted, Some(name)));
        } else if value != value.trim() {
            out.odd.push(odd(Oddity::ValueSpaces, Some(name)));
        } else if cr {
            out.odd.push(odd(Oddity::CarriageReturn, Some(name)));
        }
        if name.is_empty() {
            // setenv("") fails: nothing is set.
            continue;
        }
        out.lines.push(ConfLine {
            line,
            name: cut(name, NCCL_MAX),
            value: cut(value, NCCL_MAX),
        });
    }
    out
}

/// One variable of a declared job environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvLine {
    pub line: usize,
    pub name: String,
    /// `None`: `unset NAME`.
    pub value: Option<String>,
}

/// A line of an environment file that is not `[export] NAME=value` or `unset NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Parses a job environment as a site writes it down: what a Slurm TaskProlog prints
/// (`export NAME=value`, `unset NAME`), or a file of `NAME=value` lines. Values may be single-
/// or double-quoted as a shell would take them; nothing is expanded (`$HOME` stays as written,
/// which is what a job sees only if the prolog wrote it so). `#` starts a comment line.
pub fn parse_env(text: &str) -> Result<Vec<EnvLine>, EnvError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw.trim();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let err = |column: usize, message: String| EnvError {
            line,
            column,
            message,
        };
        let indent = raw.len() - raw.trim_start().len();
        if let Some(rest) = body.strip_prefix("unset ") {
            for name in rest.split_whitespace() {
                if !is_env_name(name) {
                    return Err(err(indent + 1, format!("{name:?} is not a variable name")));
                }
                out.push(EnvLine {
                    line,
                    name: name.to_owned(),
                    value: None,
                });
            }
            continue;
        }
        let assignment = body
            .strip_prefix("export ")
            .map(str::trim_start)
            .unwrap_or(body);
        let Some((name, value)) = assignment.split_once('=') else {
            return Err(err(
                indent + 1,
                "expected NAME=value, export NAME=value or unset NAME".into(),
            ));
        };
        if !is_env_name(name) {
            return Err(err(
                indent + 1,
                format!("{name:?} is not a variable name (no spaces around '=')"),
            ));
        }
        let at = raw.find('=').map(|p| p + 2).unwrap_or(1);
        let value = unquote(value).map_err(|m| err(at, m))?;
        out.push(EnvLine {
            line,
            name: name.to_owned(),
            value: Some(value),
        });
    }
    Ok(out)
}

/// A shell word without expansion: quotes removed, backslash escapes in double quotes and
/// outside quotes honoured.
fn unquote(word: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next() {
                    Some('\'') => break,
                    Some(c) => out.push(c),
                    None => return Err("unterminated single quote".into()),
                }
            },
            '"' => loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c @ ('"' | '\\' | '$' | '`')) => out.push(c),
                        Some(c) => {
                            out.push('\\');
                            out.push(c);
                        }
                        None => return Err("unterminated double quote".into()),
                    },
                    Some(c) => out.push(c),
                    None => return Err("unterminated double quote".into()),
                }
            },
            '\\' => {
                if let Some(c) = chars.next() {
                    out.push(c);
                }
            }
            c if c.is_whitespace() => {
                return Err(
                    "a space in an unquoted value: quote it (the shell would split it)".into(),
                );
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// An integer parameter as NCCL reads it: `strtoll(str, NULL, 0)` (src/misc/param.cc
/// `ncclLoadParam`): leading spaces, a sign, then decimal, `0x` hex or `0` octal digits, the
/// rest ignored; no digits at all reads as 0. Returns the number and whether the whole text was
/// the number (`"1"`, not `"1abc"`, `"true"` or `"08"`).
pub fn nccl_int(s: &str) -> (i64, bool) {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if h.starts_with(|c: char| c.is_ascii_hexdigit()) {
            (16, h)
        } else {
            (8, t)
        }
    } else if t.starts_with('0') {
        (8, t)
    } else {
        (10, t)
    };
    let len = digits
        .bytes()
        .take_while(|b| (*b as char).is_digit(radix))
        .count();
    // Overflow saturates in strtoll (with ERANGE, which NCCL treats as "use the default"); a
    // value this large is nonsense either way.
    let value = match i64::from_str_radix(&digits[..len], radix) {
        Ok(v) => v,
        Err(_) if len > 0 => i64::MAX,
        Err(_) => 0,
    };
    let whole = len > 0 && len == digits.len() && s == s.trim();
    (if neg { -value } else { value }, whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_strtoll_reads_them() {
        assert_eq!(nccl_int("1"), (1, true));
        assert_eq!(nccl_int("0x10"), (16, true));
        assert_eq!(nccl_int("010"), (8, true));
        assert_eq!(nccl_int("08"), (0, false));
        assert_eq!(nccl_int("true"), (0, false));
        assert_eq!(nccl_int("3 "), (3, false));
        assert_eq!(nccl_int("-1"), (-1, true));
        assert_eq!(nccl_int(""), (0, false));
        assert_eq!(nccl_int("99999999999999999999"), (i64::MAX, true));
    }

    /// Azure's /etc/nccl.conf for ND A100 v4 (azhpc-images components/customizations/ndv4.sh).
    const NDV4: &str = "NCCL_IB_PCI_RELAXED_ORDERING=1\nNCCL_TOPO_FILE=/opt/microsoft/ndv4/topo.xml\nNCCL_IGNORE_CPU_AFFINITY=1\n";

    #[test]
    fn azure_ndv4() {
        let c = parse(NDV4.as_bytes());
        assert!(c.odd.is_empty());
        assert_eq!(c.lines.len(), 3);
        assert_eq!(
            c.lines[1],
            ConfLine {
                line: 2,
                name: "NCCL_TOPO_FILE".into(),
                value: "/opt/microsoft/ndv4/topo.xml".into()
            }
        );
    }

    #[test]
    fn read_as_nccl_reads_it() {
        let c = parse(
            b"# comment\nNCCL_IB_HCA = mlx5_0\nexport NCCL_NET_GDR_LEVEL=PHB\nNCCL_IB_GID_INDEX=\"3\"\nNCCL_DEBUG=INFO \nNCCL_X=a=b\r\njunk\n=nothing\n",
        );
        let names: Vec<&str> = c.lines.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "NCCL_IB_HCA ",
                "export NCCL_NET_GDR_LEVEL",
                "NCCL_IB_GID_INDEX",
                "NCCL_DEBUG",
                "NCCL_X"
            ]
        );
        assert_eq!(c.lines[0].value, " mlx5_0");
        assert_eq!(c.lines[2].value, "\"3\"");
        assert_eq!(c.lines[4].value, "a=b");
        let why: Vec<(usize, Oddity, Option<&str>)> = c
            .odd
            .iter()
            .map(|o| (o.line, o.why, o.meant.as_deref()))
            .collect();
        assert_eq!(
            why,
            [
                (2, Oddity::NameNotBare, Some("NCCL_IB_HCA")),
                (3, Oddity::NameNotBare, Some("NCCL_NET_GDR_LEVEL")),
                (4, Oddity::Quoted, Some("NCCL_IB_GID_INDEX")),
                (5, Oddity::ValueSpaces, Some("NCCL_DEBUG")),
                (6, Oddity::CarriageReturn, Some("NCCL_X")),
                (7, Oddity::NoEquals, None),
            ]
        );
    }

    #[test]
    fn long_and_binary_lines_are_cut_not_fatal() {
        let mut text = b"NCCL_A=".to_vec();
        text.extend(std::iter::repeat_n(b'x', 5000));
        text.extend(b"\n\xff\xfe=\x00\n");
        let c = parse(&text);
        assert_eq!(c.lines[0].value.len(), NCCL_MAX);
        assert_eq!(c.lines.len(), 2);
    }

    #[test]
    fn environment_files() {
        let env = parse_env(
            "# Slurm TaskProlog output\nexport NCCL_IB_HCA==mlx5_0,mlx5_1\nNCCL_NET_GDR_LEVEL='PHB'\nexport NCCL_SOCKET_IFNAME=\"eth0\"\nunset NCCL_IB_DISABLE\n",
        )
        .unwrap();
        assert_eq!(env.len(), 4);
        assert_eq!(env[0].value.as_deref(), Some("=mlx5_0,mlx5_1"));
        assert_eq!(env[1].value.as_deref(), Some("PHB"));
        assert_eq!(env[2].value.as_deref(), Some("eth0"));
        assert_eq!(env[3].value, None);
        let e = parse_env("NCCL_A=1\nNCCL B=2\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 1));
        let e = parse_env("NCCL_A='x\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("quote"), "{}", e.message);
        assert!(parse_env("just words\n").is_err());
    }
}
