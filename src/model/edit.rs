//! A file edit a persistent fix makes (`gdrdoctor edit`): what it is and the command line
//! that does it. How it is done is src/edit.rs.

/// A value as one shell word: as it is when plainly safe, else single-quoted.
pub fn sh(value: &str) -> String {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:/=@,+".contains(&b))
    {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// One edit, as `gdrdoctor edit` takes it and a fix names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// `KEY=VALUE` files read first-definition-wins (NCCL's /etc/nccl.conf): the first
    /// definition of KEY becomes `KEY=VALUE` where it stands, or the line is appended.
    Set {
        file: String,
        key: String,
        value: String,
    },
    /// Every definition of KEY commented out (`# KEY=...`).
    Unset { file: String, key: String },
    /// The exact line present (appended when missing).
    Line { file: String, line: String },
    /// The first line that is exactly `old` becomes `new` (nothing when none is).
    Replace {
        file: String,
        old: String,
        new: String,
    },
    /// The whole file: these lines.
    Write { file: String, lines: Vec<String> },
    /// The kernel command line: words added (replacing words with the same parameter) and
    /// removed, in every place the boot loader takes it from (see `kernel_args`).
    KernelArgs {
        add: Vec<String>,
        remove: Vec<String>,
    },
}

impl Edit {
    /// The command line that does this edit: `gdrdoctor edit set /etc/nccl.conf NCCL_IB_TC=106`.
    pub fn command(&self) -> String {
        match self {
            Edit::Set { file, key, value } => {
                format!(
                    "gdrdoctor edit set {} {}",
                    sh(file),
                    sh(&format!("{key}={value}"))
                )
            }
            Edit::Unset { file, key } => format!("gdrdoctor edit unset {} {}", sh(file), sh(key)),
            Edit::Line { file, line } => format!("gdrdoctor edit line {} {}", sh(file), sh(line)),
            Edit::Replace { file, old, new } => format!(
                "gdrdoctor edit replace {} {} {}",
                sh(file),
                sh(old),
                sh(new)
            ),
            Edit::Write { file, lines } => {
                let mut s = format!("gdrdoctor edit write {}", sh(file));
                for l in lines {
                    s.push(' ');
                    s.push_str(&sh(l));
                }
                s
            }
            Edit::KernelArgs { add, remove } => {
                let mut s = "gdrdoctor edit kernel-args".to_owned();
                for w in add {
                    s.push_str(&format!(" --add {}", sh(w)));
                }
                for w in remove {
                    s.push_str(&format!(" --remove {}", sh(w)));
                }
                s
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn commands_quote_what_needs_it() {
        let e = Edit::Set {
            file: "/etc/nccl.conf".into(),
            key: "NCCL_IB_TC".into(),
            value: "106".into(),
        };
        assert_eq!(
            e.command(),
            "gdrdoctor edit set /etc/nccl.conf NCCL_IB_TC=106"
        );
        let w = Edit::Write {
            file: "/etc/modprobe.d/x.conf".into(),
            lines: v(&["blacklist nouveau", "options nouveau modeset=0"]),
        };
        assert_eq!(
            w.command(),
            "gdrdoctor edit write /etc/modprobe.d/x.conf 'blacklist nouveau' 'options nouveau modeset=0'"
        );
    }
}
