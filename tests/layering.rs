//! The crate's layering, checked: the list in `src/lib.rs` says which modules may import
//! which; this test reads every `crate::` and `super::` path of `src/` (code compiled into the
//! broker, not its unit tests) and fails on an import the list forbids, and on an import
//! circle between the files of one module. Circles and upward imports grew unseen for weeks
//! before a review counted nine; now the next one fails CI.
//!
//! A few known circles are being removed (see [`KNOWN_CIRCLES`]); the list may only shrink:
//! an entry that no longer occurs fails the test, so the fix also deletes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles between files of one module that exist today and are being taken apart: each is the
/// sorted list of the circle's files (module paths). Nothing may be added here (empty today).
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// Imports across one layer that exist today and are being removed: (importer, imported)
/// top-level modules. Nothing may be added here (empty today).
const KNOWN_ACROSS: &[(&str, &str)] = &[];

/// A module path, `["shard", "offline"]` for `src/shard/offline.rs`.
type ModPath = Vec<String>;

#[test]
fn every_import_goes_down_the_layers_in_lib_rs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers = layers(&std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs"));
    let files = broker_files(&src);
    let mut wrong = Vec::new();
    let mut known_seen = BTreeSet::new();
    let mut unlisted = BTreeSet::new();
    for (module, imports) in imports(&files) {
        let Some(&from) = layers.get(&module[0]) else {
            unlisted.insert(module[0].clone());
            continue;
        };
        for target in imports {
            if target[0] == module[0] {
                continue;
            }
            match layers.get(&target[0]) {
                Some(&to) if to > from => {}
                Some(_) if KNOWN_ACROSS.contains(&(module[0].as_str(), target[0].as_str())) => {
                    known_seen.insert((module[0].clone(), target[0].clone()));
                }
                Some(_) => wrong.push(format!("{} imports {}", module.join("/"), target.join("/"))),
                None => {
                    unlisted.insert(target[0].clone());
                }
            }
        }
    }
    assert!(
        unlisted.is_empty(),
        "modules missing from the layer list in src/lib.rs: {unlisted:?}"
    );
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports that go up or across the layers of src/lib.rs (move the shared piece down, \
         or pass it in):\n  {}",
        wrong.join("\n  ")
    );
    let gone: Vec<_> = KNOWN_ACROSS
        .iter()
        .filter(|(a, b)| !known_seen.contains(&(a.to_string(), b.to_string())))
        .collect();
    assert!(
        gone.is_empty(),
        "KNOWN_ACROSS lists imports that no longer exist; delete them: {gone:?}"
    );
}

#[test]
fn no_import_circle_between_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = broker_files(&src);
    let edges = imports(&files);
    let circles: BTreeSet<Vec<String>> = circles(&edges)
        .into_iter()
        .map(|c| c.iter().map(|m| m.join("/")).collect())
        .collect();
    let known: BTreeSet<Vec<String>> = KNOWN_CIRCLES
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let new: Vec<_> = circles.difference(&known).collect();
    assert!(
        new.is_empty(),
        "files that import each other (directly or round a circle): {new:?}\nMove what they \
         share into a file both import."
    );
    let gone: Vec<_> = known.difference(&circles).collect();
    assert!(
        gone.is_empty(),
        "KNOWN_CIRCLES lists circles that no longer exist; delete them: {gone:?}"
    );
}

/// Layer of each top-level module, numbered from the top, read from the numbered list in the
/// doc comment of `lib.rs`: "//! 3. `server`: …".
fn layers(lib_rs: &str) -> BTreeMap<String, usize> {
    let mut layers = BTreeMap::new();
    for line in lib_rs.lines() {
        let Some(item) = line.strip_prefix("//! ") else {
            continue;
        };
        let Some((number, rest)) = item.split_once(". ") else {
            continue;
        };
        let Ok(layer) = number.parse::<usize>() else {
            continue;
        };
        let names = rest.split(':').next().unwrap_or("");
        for name in names.split('`').skip(1).step_by(2) {
            layers.insert(name.to_string(), layer);
        }
    }
    assert!(layers.len() > 10, "no layer list found in src/lib.rs");
    layers
}

/// Every `.rs` file of the library with its module path, except `lib.rs`, `main.rs` and
/// modules compiled only for tests.
fn broker_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut files = BTreeMap::new();
    collect(src, src, &mut files);
    let test_only: Vec<ModPath> = files
        .iter()
        .flat_map(|(module, path)| {
            let text = std::fs::read_to_string(path).expect("read source");
            // `a/mod.rs` and `a.rs` both declare the children of `a/`.
            let parent = module.clone();
            test_only_children(&text)
                .into_iter()
                .map(move |child| [parent.clone(), vec![child]].concat())
        })
        .collect();
    files.retain(|module, _| {
        !module.is_empty()
            && module != &["main"]
            && !test_only.iter().any(|t| module.starts_with(t))
    });
    files
}

fn collect(src: &Path, dir: &Path, files: &mut BTreeMap<ModPath, PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect(src, &path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(src)
                .expect("under src")
                .with_extension("");
            let mut module: ModPath = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if is_mod_file(&path) {
                module.pop();
            }
            files.insert(module, path);
        }
    }
}

fn is_mod_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
}

/// Child modules declared `#[cfg(test)] mod name;`.
fn test_only_children(text: &str) -> Vec<String> {
    let mut children = Vec::new();
    let mut cfg_test = false;
    for line in text.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            cfg_test = true;
            continue;
        }
        if cfg_test {
            let decl = line.strip_prefix("pub ").unwrap_or(line);
            if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                children.push(name.to_string());
            }
        }
        cfg_test = false;
    }
    children
}

/// The code of a file that the broker compiles: without comments and without the inline
/// `#[cfg(test)] mod … { … }` at its end.
fn broker_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| {
                let next = next.trim();
                (next.starts_with("mod ") || next.starts_with("pub mod ")) && next.ends_with('{')
            })
        {
            break;
        }
        if !t.starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Each file's imports: the files (module paths) its `crate::` and `super::` paths name.
/// A module's own descendants and ancestors are not counted (a folder's `mod.rs` declares
/// its children; children name their folder's shared types).
fn imports(files: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut edges = BTreeMap::new();
    for (module, path) in files {
        let text = broker_code(&std::fs::read_to_string(path).expect("read source"));
        let mut targets = BTreeSet::new();
        for raw in paths(&text, &module[..module.len() - 1]) {
            if let Some(target) = resolve(files, &raw) {
                let related = target.starts_with(module) || module.starts_with(&target);
                if !related {
                    targets.insert(target);
                }
            }
        }
        edges.insert(module.clone(), targets);
    }
    edges
}

/// Absolute module paths named in `code`: `crate::a::b::{c, d::e}` gives `a/b/c` and
/// `a/b/d/e`; `super::x` is resolved against `parent` (the module `super` names).
fn paths(code: &str, parent: &[String]) -> Vec<ModPath> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let at_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let (base, skip) = if at_word && rest.starts_with("crate::") {
            (Vec::new(), "crate::".len())
        } else if at_word && rest.starts_with("super::") {
            let mut base = parent.to_vec();
            let mut skip = "super::".len();
            while code[i + skip..].starts_with("super::") {
                base.pop();
                skip += "super::".len();
            }
            (base, skip)
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let (tails, used) = path_tails(&code[i + skip..]);
        for tail in tails {
            out.push([base.clone(), tail].concat());
        }
        i += skip + used.max(1);
    }
    out
}

/// The segments after `crate::`: one path, or one per item of a `{…}` group (nested groups
/// flattened). Returns the paths and the bytes read.
fn path_tails(s: &str) -> (Vec<ModPath>, usize) {
    let mut segments = Vec::new();
    let mut i = 0;
    loop {
        let word: String = s[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        i += word.len();
        if !word.is_empty() && word != "self" {
            segments.push(word);
        }
        if s[i..].starts_with("::{") {
            i += 3;
            let mut out = Vec::new();
            loop {
                let (inner, used) = path_tails(&s[i..]);
                for tail in inner {
                    out.push([segments.clone(), tail].concat());
                }
                i += used;
                let skipped = s[i..].len() - s[i..].trim_start_matches([' ', '\n', ',']).len();
                i += skipped;
                if s[i..].starts_with('}') || s[i..].is_empty() || used == 0 && skipped == 0 {
                    i += usize::from(s[i..].starts_with('}'));
                    break;
                }
            }
            if out.is_empty() {
                out.push(segments);
            }
            return (out, i);
        }
        if s[i..].starts_with("::") {
            i += 2;
            continue;
        }
        return (vec![segments], i);
    }
}

/// The longest prefix of `path` that is a file of the crate.
fn resolve(files: &BTreeMap<ModPath, PathBuf>, path: &[String]) -> Option<ModPath> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| files.contains_key(prefix))
}

/// Strongly connected groups of more than one file (Tarjan's algorithm), each sorted.
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a ModPath) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.edges.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    group.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn paths_are_read_like_the_compiler_reads_them() {
    let parent = vec!["shard".to_string()];
    let found = paths(
        "use crate::a::b::{c, d::{e, f}};\nlet x = super::g::h();\nuse super::super::i;\nnotcrate::z",
        &parent,
    );
    let found: Vec<String> = found.iter().map(|p| p.join("/")).collect();
    assert_eq!(
        found,
        ["a/b/c", "a/b/d/e", "a/b/d/f", "shard/g/h", "i"],
        "{found:?}"
    );
    assert_eq!(
        broker_code("use a;\n// crate::x\n#[cfg(test)]\nmod tests {\nuse crate::y;\n}\n"),
        "use a;\n"
    );
    let edges: BTreeMap<ModPath, BTreeSet<ModPath>> = [("a", "b"), ("b", "a"), ("c", "a")]
        .iter()
        .map(|(x, y)| (vec![x.to_string()], BTreeSet::from([vec![y.to_string()]])))
        .collect();
    assert_eq!(
        circles(&edges),
        vec![vec![vec!["a".to_string()], vec!["b".to_string()]]]
    );
}
