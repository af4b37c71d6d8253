//! One NCCL setting as gdrdoctor read it: its name, its value and where it came from (the
//! declared job environment, or a line of a file NCCL reads). Below the readers of NCCL's inputs
//! ([`super::nccl`], [`super::nccl_plugin`]), which both hand settings up.

/// Which of NCCL's configuration files a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The file `NCCL_CONF_FILE` names.
    ConfFile,
    /// `~/.nccl.conf` of the configured user.
    User,
    /// `/etc/nccl.conf`.
    Etc,
}

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The site's config, `nccl.env`.
    Config,
    /// `--nccl-env FILE`, at a line.
    EnvFile { path: String, line: usize },
    /// A configuration file NCCL reads, at a line.
    File {
        path: String,
        line: usize,
        role: Role,
    },
}

impl Origin {
    /// `/etc/nccl.conf line 2`, `the declared environment (config nccl.env)`.
    pub fn describe(&self) -> String {
        match self {
            Origin::Config => "the declared job environment (config nccl.env)".into(),
            Origin::EnvFile { path, line } => {
                format!("the declared job environment ({path} line {line})")
            }
            Origin::File { path, line, .. } => format!("{path} line {line}"),
        }
    }

    /// Short, for lists: `/etc/nccl.conf:2`, `environment`.
    pub fn short(&self) -> String {
        match self {
            Origin::Config => "environment, config nccl.env".into(),
            Origin::EnvFile { path, line } => format!("environment, {path}:{line}"),
            Origin::File { path, line, .. } => format!("{path}:{line}"),
        }
    }

    pub fn is_environment(&self) -> bool {
        !matches!(self, Origin::File { .. })
    }

    /// The file a finding's evidence names.
    pub fn path(&self) -> String {
        match self {
            Origin::Config => "config: nccl.env".into(),
            Origin::EnvFile { path, .. } | Origin::File { path, .. } => path.clone(),
        }
    }
}

/// One definition of a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub name: String,
    pub value: String,
    pub origin: Origin,
}

impl Setting {
    pub fn evidence(&self) -> crate::model::Evidence {
        let value = match &self.origin {
            Origin::Config => format!("{}: {:?}", self.name, self.value),
            Origin::EnvFile { line, .. } | Origin::File { line, .. } => {
                format!("line {line}: {}={}", self.name, self.value)
            }
        };
        crate::model::Evidence {
            path: self.origin.path(),
            value,
        }
    }
}
