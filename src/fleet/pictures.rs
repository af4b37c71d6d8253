//! `--pictures DIR`: the picture of the first node of each model, drawn by the worker that
//! analyses it and written as DIR/<model>.svg.

use super::{NodeResult, model_of};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which capture draws each model's picture for `--pictures`: the first of the model in input
/// order. The workers analyse out of order, so one draws unless a capture before it of the same
/// model already has; the first of a model to be emitted (the first in input order) has then
/// always drawn, and the writer keeps only that one. Later captures of a model draw only when
/// they get ahead of an earlier one: a few pictures at most, within the workers' window.
#[derive(Debug, Default)]
pub struct Pictures {
    claimed: std::sync::Mutex<BTreeMap<String, usize>>,
}

impl Pictures {
    /// Whether capture `index` of `model` draws.
    pub(super) fn claim(&self, model: &str, index: usize) -> bool {
        // Nothing panics while the lock is held; a poisoned lock is still a sound map.
        let mut m = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        match m.get(model) {
            Some(&first) if first <= index => false,
            _ => {
                m.insert(model.to_owned(), index);
                true
            }
        }
    }
}

/// A file name for a model's picture: lower-case ASCII letters and digits, the rest as single
/// dashes, at most 64 characters. The model comes from the capture (untrusted): no `/`, no
/// `..`, no hidden file, nothing a shell or a web server would read twice.
pub fn slug(model: &str) -> String {
    let mut s = String::new();
    for c in model.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.is_empty() && !s.ends_with('-') {
            s.push('-');
        }
        if s.len() >= 64 {
            break;
        }
    }
    let s = s.trim_end_matches('-');
    if s.is_empty() {
        "model".to_owned()
    } else {
        s.to_owned()
    }
}

/// Writes `--pictures DIR/<model-slug>.svg`, one per model: the first node of each model to
/// be emitted, which is the first in input order.
#[derive(Debug)]
pub struct PictureWriter {
    dir: PathBuf,
    /// The models drawn, and the file names taken.
    models: BTreeSet<String>,
    names: BTreeSet<String>,
}

impl PictureWriter {
    /// Creates `dir` when it does not exist.
    pub fn new(dir: &Path) -> std::io::Result<PictureWriter> {
        std::fs::create_dir_all(dir)?;
        Ok(PictureWriter {
            dir: dir.to_owned(),
            models: BTreeSet::new(),
            names: BTreeSet::new(),
        })
    }

    /// Writes the node's picture when it is the first of its model; returns the file written.
    /// An error names the file.
    pub fn write(&mut self, n: &NodeResult) -> Result<Option<PathBuf>, String> {
        let Some(svg) = &n.picture else {
            return Ok(None);
        };
        let model = model_of(n.product.as_deref());
        if self.models.contains(&model) {
            return Ok(None);
        }
        self.models.insert(model.clone());
        // Two models can make one slug ("A/B", "A B"): the later one gets a number.
        let base = slug(&model);
        let mut name = base.clone();
        let mut k = 2;
        while self.names.contains(&name) {
            name = format!("{base}-{k}");
            k += 1;
        }
        self.names.insert(name.clone());
        let path = self.dir.join(format!("{name}.svg"));
        crate::output::write_atomic(&path, svg.as_bytes())
            .map_err(|e| format!("cannot write the picture {}: {e}", path.display()))?;
        Ok(Some(path))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn model_slugs_are_safe_file_names() {
        use super::slug;
        assert_eq!(
            slug("Supermicro SYS-821GE-TNHR"),
            "supermicro-sys-821ge-tnhr"
        );
        assert_eq!(slug("(model unknown)"), "model-unknown");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug(".hidden"), "hidden");
        assert_eq!(
            slug("NVIDIA DGXA100 920-23687-2530-000"),
            "nvidia-dgxa100-920-23687-2530-000"
        );
        assert_eq!(slug("Ünïcode / \u{1b}"), "n-code");
        assert_eq!(slug("///"), "model");
        assert_eq!(slug(&"x".repeat(500)).len(), 64);
    }

    #[test]
    fn the_first_capture_of_a_model_draws() {
        let p = super::Pictures::default();
        // Capture 3 gets ahead of capture 1 of the same model: both draw, capture 5 does not.
        assert!(p.claim("A", 3));
        assert!(p.claim("A", 1));
        assert!(!p.claim("A", 5));
        assert!(!p.claim("A", 2));
        assert!(p.claim("B", 4));
    }
}
