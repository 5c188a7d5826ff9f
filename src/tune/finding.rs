//! One judged setting: what it is, what it should be, why, and how to change it.

use std::path::PathBuf;

use serde::Serialize;

/// The outcome of checking one setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable identifier (`vm.swappiness`, `memlock`, `fs.atime`...).
    pub name: String,
    pub current: String,
    pub recommended: String,
    pub ok: bool,
    pub why: String,
    /// How to change (or persist) it by hand, when `tune --apply` cannot or should not.
    pub hint: Option<String>,
    /// What `tune --apply` would write to bring it to the recommended value (empty when
    /// it is fine, or cannot be changed safely at runtime).
    pub apply: Vec<Write>,
}

/// One runtime write: a value into a kernel file (`/proc/sys/...`, `/sys/...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Write {
    /// The kernel path, absolute (`/proc/sys/vm/swappiness`); re-rooted by [`super::sysroot::SysRoot`].
    pub path: PathBuf,
    pub value: String,
}

impl Finding {
    pub(crate) fn new(
        name: &str,
        current: impl Into<String>,
        recommended: impl Into<String>,
    ) -> Finding {
        Finding {
            name: name.to_string(),
            current: current.into(),
            recommended: recommended.into(),
            ok: true,
            why: String::new(),
            hint: None,
            apply: Vec::new(),
        }
    }

    pub(crate) fn ok(mut self, ok: bool) -> Finding {
        self.ok = ok;
        self
    }

    pub(crate) fn why(mut self, why: impl Into<String>) -> Finding {
        self.why = why.into();
        self
    }

    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Finding {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a write, but only when the finding is off: a fine setting is left alone.
    pub(crate) fn apply(mut self, path: &str, value: impl Into<String>) -> Finding {
        if !self.ok {
            self.apply.push(Write {
                path: PathBuf::from(path),
                value: value.into(),
            });
        }
        self
    }
}
