//! What a read of the node leaves: a value read from one file with its evidence ([`Fact`]), why a
//! read failed ([`ReadError`], always with the path), and what could not be read at all
//! ([`Problem`]). Reading is the root's and the inventory's; these are what they hand up.

use super::Evidence;

/// Why a read failed, always with the node path it was for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: not found")]
    NotFound { path: String },
    #[error("{path}: permission denied")]
    PermissionDenied { path: String },
    #[error("{path}: too many levels of symbolic links")]
    Loop { path: String },
    /// A path, link target or component over Linux's limits; `path` is shortened for display.
    #[error("{path}: file name too long")]
    NameTooLong { path: String },
    #[error("{path}: not a regular file ({kind})")]
    NotRegular { path: String, kind: &'static str },
    #[error("{path}: not a directory")]
    NotDir { path: String },
    #[error("{path}: larger than {limit} bytes")]
    TooLarge { path: String, limit: u64 },
    #[error("{path}: not UTF-8 text")]
    NotUtf8 { path: String },
    #[error("{path}: {message}")]
    Io {
        path: String,
        errno: Option<i32>,
        message: String,
    },
}

impl ReadError {
    pub fn path(&self) -> &str {
        match self {
            ReadError::NotFound { path }
            | ReadError::PermissionDenied { path }
            | ReadError::Loop { path }
            | ReadError::NameTooLong { path }
            | ReadError::NotRegular { path, .. }
            | ReadError::NotDir { path }
            | ReadError::TooLarge { path, .. }
            | ReadError::NotUtf8 { path }
            | ReadError::Io { path, .. } => path,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::NotFound { .. })
    }

    /// The short reason without the path, for messages that name the path elsewhere.
    pub fn reason(&self) -> String {
        let full = self.to_string();
        full.strip_prefix(self.path())
            .and_then(|s| s.strip_prefix(": "))
            .map(str::to_owned)
            .unwrap_or(full)
    }
}

/// A value read from one file: the path, the raw text (or why it could not be read), and the
/// parsed value when the text made sense.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact<T> {
    pub path: String,
    pub raw: Result<String, ReadError>,
    pub value: Option<T>,
}

impl<T> Fact<T> {
    pub fn value(&self) -> Option<&T> {
        self.value.as_ref()
    }

    pub fn is_missing(&self) -> bool {
        matches!(&self.raw, Err(e) if e.is_not_found())
    }

    /// What was read, for a report: the text (its first line, for multi-line files), or why
    /// there is none.
    pub fn shown(&self) -> String {
        match &self.raw {
            Ok(s) => match s.split_once('\n') {
                Some((first, rest)) => format!(
                    "{} (+{} more lines)",
                    first.trim_end(),
                    rest.lines().count()
                ),
                None => s.clone(),
            },
            Err(e) => format!("<{}>", e.reason()),
        }
    }

    pub fn evidence(&self) -> Evidence {
        Evidence {
            path: self.path.clone(),
            value: self.shown(),
        }
    }

    /// Why there is no value: the read error, or that the text made no sense.
    pub fn problem(&self) -> Option<String> {
        match (&self.raw, &self.value) {
            (_, Some(_)) => None,
            (Err(e), None) => Some(e.to_string()),
            (Ok(raw), None) => Some(format!(
                "{}: cannot parse {}",
                self.path,
                crate::sanitize::quoted(raw)
            )),
        }
    }

    /// The same as a [`Problem`] naming this fact's file; `None` when it has a value or when the
    /// file is simply absent (`missing_ok`).
    pub fn as_problem(&self, missing_ok: bool) -> Option<Problem> {
        if self.value.is_some() || (missing_ok && self.is_missing()) {
            return None;
        }
        let message = match &self.raw {
            Err(e) => e.reason(),
            Ok(raw) => format!("cannot parse {}", crate::sanitize::quoted(raw)),
        };
        Some(Problem {
            path: self.path.clone(),
            message,
        })
    }
}

/// Something the inventory could not read at all (a directory, an unidentifiable device).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

/// How problems about names gdrdoctor refused start: names that would not be safe in a path or
/// a shell command (`x;rm -rf ~`, `$(reboot)`). `gdrdoctor fix` refuses to write a script for a
/// node that has any.
pub const UNSAFE_NAME: &str = "unsafe name";

impl Problem {
    /// A directory entry or value that is not a valid name of its kind, and was ignored.
    pub fn unsafe_name(path: impl Into<String>, what: &str) -> Problem {
        Problem {
            path: path.into(),
            message: format!("{UNSAFE_NAME}: not a valid {what}; ignored"),
        }
    }

    /// A file whose content should be a name, and is not one.
    pub fn unsafe_value(path: impl Into<String>, what: &str, value: &str) -> Problem {
        Problem {
            path: path.into(),
            message: format!(
                "{UNSAFE_NAME}: {} is not a valid {what}; ignored",
                crate::sanitize::quoted(value.trim())
            ),
        }
    }

    pub fn is_unsafe_name(&self) -> bool {
        self.message.starts_with(UNSAFE_NAME)
    }

    pub fn from_error(e: &ReadError) -> Problem {
        Problem {
            path: e.path().to_owned(),
            message: e.reason(),
        }
    }
}
