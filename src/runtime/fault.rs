//! A fault-injecting, power-loss-simulating layer under [`super::File`] (the storage simulator
//! idea of TigerBeetle and FoundationDB), for tests of the log.
//!
//! A test installs a [`FaultScope`] on a directory. Files opened under it from then on are
//! *tracked*:
//! - **Faults**: [`FaultRule`]s make matching operations fail with an errno (EIO, ENOSPC), or
//!   make a write short, after a number of matching calls and for a number of times.
//! - **Power loss**: the scope keeps, per file, the content that is durable (what the last
//!   successful `fdatasync` covered) and the writes and truncations since. Directory changes
//!   (creating, renaming and removing files) are durable once their directory is synced.
//!   [`FaultScope::power_loss`] then rewrites the real files to what a machine that lost power
//!   at that moment could show: every unsynced change dropped, or a random subset of them kept
//!   (write-back happens in any order). A failed fsync is modelled as Linux does it: the
//!   pending changes are never made durable (the kernel may mark the pages clean anyway), even
//!   if a later fsync succeeds.
//!
//! Files opened while no scope covers them are not tracked and pay nothing: the check is made
//! once, at open. Scopes are keyed by directory, so tests in one process can run in parallel.
//! Operations outside [`super::File`], `rename`, `remove_file` and `sync_dir` (plain `std::fs`
//! calls) are not seen.

use crate::util::hash::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::util::rng::SeededRng;

/// Set while any scope is installed: the only cost untracked I/O pays (at open, rename, ...).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static SCOPES: Mutex<Vec<ScopeState>> = Mutex::new(Vec::new());

/// An operation a rule can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    Open,
    Read,
    Write,
    Fsync,
    Truncate,
    SyncDir,
}

/// What a matching operation does instead of its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    /// Fails with this errno and changes nothing.
    Errno(i32),
    /// A write stores only its first `keep` bytes, then fails as a full device would.
    ShortWrite { keep: usize },
}

/// Fails operations of one kind on files whose name contains a string.
#[derive(Debug, Clone)]
pub struct FaultRule {
    op: FileOp,
    name_contains: String,
    skip: u32,
    times: Option<u32>,
    injected: Injected,
}

impl FaultRule {
    /// A rule for `op` on every tracked file, failing with EIO every time.
    pub fn on(op: FileOp) -> FaultRule {
        FaultRule {
            op,
            name_contains: String::new(),
            skip: 0,
            times: None,
            injected: Injected::Errno(libc::EIO),
        }
    }

    /// Only files whose name contains `text`.
    pub fn matching(mut self, text: &str) -> FaultRule {
        self.name_contains = text.to_string();
        self
    }

    /// Lets the first `n` matching operations through.
    pub fn after(mut self, n: u32) -> FaultRule {
        self.skip = n;
        self
    }

    /// Fires `n` times, then lets operations through again.
    pub fn times(mut self, n: u32) -> FaultRule {
        self.times = Some(n);
        self
    }

    pub fn errno(mut self, errno: i32) -> FaultRule {
        self.injected = Injected::Errno(errno);
        self
    }

    pub fn short_write(mut self, keep: usize) -> FaultRule {
        self.injected = Injected::ShortWrite { keep };
        self
    }

    fn matches(&self, op: FileOp, path: &Path) -> bool {
        self.op == op
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains(&self.name_contains))
    }
}

/// What a power loss keeps of the changes that were not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerLoss {
    /// Nothing: every file is exactly what its last fsync covered.
    DropUnsynced,
    /// Each unsynced write or truncation survives with probability 1/2 (seeded). Directory
    /// changes that were not synced are always undone.
    KeepSome { seed: u64 },
}

/// What a power loss did, for the test's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PowerLossReport {
    pub files: usize,
    pub changes_dropped: usize,
    pub changes_kept: usize,
    /// Directory changes (create, rename, remove) undone.
    pub dir_changes_undone: usize,
    /// What was dropped, one line per change (file name and change), for a failing test.
    pub dropped: Vec<String>,
}

#[derive(Debug, Clone)]
enum ContentChange {
    Write { pos: u64, data: Vec<u8> },
    Truncate(u64),
}

impl ContentChange {
    fn describe(&self) -> String {
        match self {
            ContentChange::Write { pos, data } => format!("write of {} bytes at {pos}", data.len()),
            ContentChange::Truncate(size) => format!("truncation to {size}"),
        }
    }

    fn apply(&self, content: &mut Vec<u8>) {
        match self {
            ContentChange::Write { pos, data } => {
                let pos = *pos as usize;
                let end = pos + data.len();
                if content.len() < end {
                    content.resize(end, 0);
                }
                content[pos..end].copy_from_slice(data);
            }
            ContentChange::Truncate(size) => content.resize(*size as usize, 0),
        }
    }
}

/// One file (one inode: it moves with renames) as the power-loss model sees it.
#[derive(Debug, Clone, Default)]
struct Tracked {
    durable: Vec<u8>,
    pending: Vec<ContentChange>,
}

#[derive(Debug)]
enum DirChange {
    Create {
        path: PathBuf,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
        replaced: Option<Tracked>,
    },
    Remove {
        path: PathBuf,
        file: Tracked,
    },
}

impl DirChange {
    fn dir(&self) -> Option<&Path> {
        match self {
            DirChange::Create { path } | DirChange::Remove { path, .. } => path.parent(),
            DirChange::Rename { to, .. } => to.parent(),
        }
    }
}

struct ActiveRule {
    rule: FaultRule,
    seen: u32,
    fired: u32,
}

struct ScopeState {
    root: PathBuf,
    rules: Vec<ActiveRule>,
    files: HashMap<PathBuf, Tracked>,
    unsynced_dir_changes: Vec<DirChange>,
    /// Every path the scope has seen, to remove the ones a power loss undoes.
    known_paths: Vec<PathBuf>,
    injected: u64,
    /// Set by [`FaultScope::crash`]: every operation fails, as if the process were gone.
    crashed: bool,
    /// Operations left before the scope crashes by itself ([`FaultScope::crash_after`]).
    crash_countdown: Option<u64>,
}

impl ScopeState {
    fn new(root: PathBuf) -> ScopeState {
        ScopeState {
            root,
            rules: Vec::new(),
            files: HashMap::default(),
            unsynced_dir_changes: Vec::new(),
            known_paths: Vec::new(),
            injected: 0,
            crashed: false,
            crash_countdown: None,
        }
    }

    fn file(&mut self, path: &Path) -> &mut Tracked {
        if !self.files.contains_key(path) {
            // A file that existed before the scope saw it counts as durable.
            let durable = std::fs::read(path).unwrap_or_default();
            self.remember(path);
            self.files.insert(
                path.to_path_buf(),
                Tracked {
                    durable,
                    pending: Vec::new(),
                },
            );
        }
        self.files.entry(path.to_path_buf()).or_default()
    }

    fn remember(&mut self, path: &Path) {
        if !self.known_paths.iter().any(|p| p == path) {
            self.known_paths.push(path.to_path_buf());
        }
    }

    /// The injected outcome, if a rule fires for this call.
    /// Counts one operation towards a planned crash; true once crashed.
    fn tick(&mut self) -> bool {
        if let Some(left) = self.crash_countdown {
            if left == 0 {
                self.crashed = true;
                self.crash_countdown = None;
            } else {
                self.crash_countdown = Some(left - 1);
            }
        }
        self.crashed
    }

    fn fire(&mut self, op: FileOp, path: &Path) -> Option<Injected> {
        if self.tick() {
            return Some(Injected::Errno(libc::EIO));
        }
        for active in self.rules.iter_mut() {
            if !active.rule.matches(op, path) {
                continue;
            }
            active.seen += 1;
            if active.seen <= active.rule.skip {
                continue;
            }
            if active.rule.times.is_some_and(|t| active.fired >= t) {
                continue;
            }
            active.fired += 1;
            self.injected += 1;
            return Some(active.rule.injected);
        }
        None
    }
}

fn scopes() -> MutexGuard<'static, Vec<ScopeState>> {
    // A test that panicked while holding the lock leaves valid data behind.
    SCOPES.lock().unwrap_or_else(|e| e.into_inner())
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Runs `f` on the scope covering `path`, if any.
fn with_scope<T>(path: &Path, f: impl FnOnce(&mut ScopeState) -> T) -> Option<T> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    let mut all = scopes();
    let scope = all.iter_mut().find(|s| path.starts_with(&s.root))?;
    Some(f(scope))
}

fn injected_error(errno: i32, op: FileOp, path: &Path) -> io::Error {
    let os = io::Error::from_raw_os_error(errno);
    io::Error::new(
        os.kind(),
        format!("{os} (injected on {op:?} of {})", path.display()),
    )
}

/// Fault injection and power-loss tracking for every file opened under `root` from now on.
/// Dropping the scope stops both.
pub struct FaultScope {
    root: PathBuf,
}

impl FaultScope {
    pub fn install(root: &Path) -> FaultScope {
        let root = absolute(root);
        scopes().push(ScopeState::new(root.clone()));
        ACTIVE.store(true, Ordering::Relaxed);
        FaultScope { root }
    }

    fn with<T>(&self, f: impl FnOnce(&mut ScopeState) -> T) -> T {
        let mut all = scopes();
        match all.iter_mut().find(|s| s.root == self.root) {
            Some(scope) => f(scope),
            None => unreachable!("a scope lives until its FaultScope drops"),
        }
    }

    pub fn add_rule(&self, rule: FaultRule) {
        self.with(|s| {
            s.rules.push(ActiveRule {
                rule,
                seen: 0,
                fired: 0,
            })
        });
    }

    pub fn clear_rules(&self) {
        self.with(|s| s.rules.clear());
    }

    /// How many operations failed by injection so far.
    pub fn injected(&self) -> u64 {
        self.with(|s| s.injected)
    }

    /// The process "dies" here: from now on every operation on the scope's files fails (and
    /// changes nothing), so the test can let the tasks that were running end on their errors
    /// and stop the executor with no I/O left in flight. Then [`FaultScope::restart`] (a
    /// `kill -9`: the page cache survives) or [`FaultScope::power_loss`].
    pub fn crash(&self) {
        self.with(|s| s.crashed = true);
    }

    /// Crashes (as [`FaultScope::crash`]) at the `n`-th file operation from now (0: the next
    /// one): stepping `n` up walks a crash through every point of a multi-step change.
    pub fn crash_after(&self, n: u64) {
        self.with(|s| s.crash_countdown = Some(n));
    }

    /// Whether the scope has crashed (by [`FaultScope::crash`] or a countdown).
    pub fn crashed(&self) -> bool {
        self.with(|s| s.crashed)
    }

    /// After [`FaultScope::crash`]: operations work again; files are as the crash left them.
    pub fn restart(&self) {
        self.with(|s| {
            s.crashed = false;
            s.crash_countdown = None;
        });
    }

    /// Rewrites the tracked files as a power loss now would leave them. Call it once nothing
    /// runs on the files (the executor that used them has stopped).
    pub fn power_loss(&self, mode: PowerLoss) -> io::Result<PowerLossReport> {
        let mut report = PowerLossReport::default();
        let mut rng = mode_rng(mode);
        let (files, known) = self.with(|s| {
            // Undo unsynced directory changes, newest first.
            while let Some(change) = s.unsynced_dir_changes.pop() {
                report.dir_changes_undone += 1;
                report.dropped.push(format!("{change:?}"));
                match change {
                    DirChange::Create { path } => {
                        s.files.remove(&path);
                    }
                    DirChange::Rename { from, to, replaced } => {
                        if let Some(file) = s.files.remove(&to) {
                            s.files.insert(from, file);
                        }
                        if let Some(old) = replaced {
                            s.files.insert(to, old);
                        }
                    }
                    DirChange::Remove { path, file } => {
                        s.files.insert(path, file);
                    }
                }
            }
            let files = std::mem::take(&mut s.files);
            (files, s.known_paths.clone())
        });
        for path in &known {
            if !files.contains_key(path) {
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
        }
        // In path order, so that a seed's choices fall on the same changes in every run (a
        // table's order follows the paths' hashes, and a test's temporary directory has a new
        // name each run).
        let mut files: Vec<_> = files.into_iter().collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, file) in &files {
            let mut content = file.durable.clone();
            for change in &file.pending {
                let keep = rng.as_mut().is_some_and(|r| r.next_u64() & 1 == 1);
                if keep {
                    change.apply(&mut content);
                    report.changes_kept += 1;
                } else {
                    report.changes_dropped += 1;
                    report
                        .dropped
                        .push(format!("{}: {}", path.display(), change.describe()));
                }
            }
            std::fs::write(path, &content)?;
            report.files += 1;
        }
        // What is on disk now is all durable: the model starts over from it.
        self.with(|s| {
            s.files.clear();
            s.known_paths.clear();
            s.crashed = false;
            s.crash_countdown = None;
        });
        Ok(report)
    }
}

impl Drop for FaultScope {
    fn drop(&mut self) {
        let mut all = scopes();
        all.retain(|s| s.root != self.root);
        ACTIVE.store(!all.is_empty(), Ordering::Relaxed);
    }
}

/// The seeded choice of which unsynced changes a power loss keeps.
fn mode_rng(mode: PowerLoss) -> Option<SeededRng> {
    match mode {
        PowerLoss::DropUnsynced => None,
        PowerLoss::KeepSome { seed } => Some(SeededRng::new(seed)),
    }
}

// ---------------------------------------------------------------------------------------------
// Hooks called by the file layer.

/// A tracked file's path, kept by [`super::File`] when a scope covers it at open.
#[derive(Debug)]
pub(super) struct TrackedPath(PathBuf);

impl TrackedPath {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// Before an open: a rule may fail it. Returns the path to keep when the file is tracked.
/// `creating` says whether the open may create the file.
pub(super) fn before_open(path: &Path, creating: bool) -> io::Result<Option<TrackedPath>> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let path = absolute(path);
    let outcome = with_scope(&path, |s| {
        if let Some(Injected::Errno(errno)) = s.fire(FileOp::Open, &path) {
            return Err(injected_error(errno, FileOp::Open, &path));
        }
        if creating && !path.exists() {
            s.remember(&path);
            s.files.insert(path.clone(), Tracked::default());
            s.unsynced_dir_changes
                .push(DirChange::Create { path: path.clone() });
        } else if path.exists() {
            s.file(&path);
        }
        Ok(())
    });
    match outcome {
        None => Ok(None),
        Some(Err(e)) => Err(e),
        Some(Ok(())) => Ok(Some(TrackedPath(path))),
    }
}

/// Before a read, fsync or truncate of a tracked file: a rule may fail it.
pub(super) fn before(tracked: &TrackedPath, op: FileOp) -> io::Result<()> {
    let path = tracked.path();
    let injected = with_scope(path, |s| {
        let injected = s.fire(op, path);
        if op == FileOp::Fsync && injected.is_some() && !s.crashed {
            // Linux: after a failed writeback the pages may be marked clean; what was pending
            // never becomes durable, whatever later fsyncs say.
            s.file(path).pending.clear();
        }
        injected
    });
    match injected.flatten() {
        Some(Injected::Errno(errno)) => Err(injected_error(errno, op, path)),
        _ => Ok(()),
    }
}

/// Before a write: how many bytes to write (all, or fewer for a short write), or an error.
pub(super) fn before_write(tracked: &TrackedPath, len: usize) -> io::Result<usize> {
    let path = tracked.path();
    match with_scope(path, |s| s.fire(FileOp::Write, path)).flatten() {
        Some(Injected::Errno(errno)) => Err(injected_error(errno, FileOp::Write, path)),
        Some(Injected::ShortWrite { keep }) => Ok(keep.min(len)),
        None => Ok(len),
    }
}

pub(super) fn after_write(tracked: &TrackedPath, pos: u64, data: &[u8]) {
    let path = tracked.path();
    with_scope(path, |s| {
        s.file(path).pending.push(ContentChange::Write {
            pos,
            data: data.to_vec(),
        })
    });
}

pub(super) fn after_truncate(tracked: &TrackedPath, size: u64) {
    let path = tracked.path();
    with_scope(path, |s| {
        s.file(path).pending.push(ContentChange::Truncate(size))
    });
}

pub(super) fn after_fsync(tracked: &TrackedPath) {
    let path = tracked.path();
    with_scope(path, |s| {
        let file = s.file(path);
        let mut content = std::mem::take(&mut file.durable);
        for change in file.pending.drain(..) {
            change.apply(&mut content);
        }
        file.durable = content;
    });
}

pub(super) fn before_sync_dir(dir: &Path) -> io::Result<()> {
    let dir = absolute(dir);
    match with_scope(&dir, |s| s.fire(FileOp::SyncDir, &dir)).flatten() {
        Some(Injected::Errno(errno)) => Err(injected_error(errno, FileOp::SyncDir, &dir)),
        _ => Ok(()),
    }
}

pub(super) fn after_sync_dir(dir: &Path) {
    let dir = absolute(dir);
    with_scope(&dir, |s| {
        s.unsynced_dir_changes
            .retain(|c| c.dir() != Some(dir.as_path()));
    });
}

/// Before a rename: fails once the scope has crashed.
pub(super) fn before_rename(to: &Path) -> io::Result<()> {
    let to = absolute(to);
    if with_scope(&to, |s| s.tick()) == Some(true) {
        return Err(injected_error(libc::EIO, FileOp::Write, &to));
    }
    Ok(())
}

pub(super) fn after_rename(from: &Path, to: &Path) {
    let (from, to) = (absolute(from), absolute(to));
    let under = to.clone();
    with_scope(&under, |s| {
        let file = s.file(&from).clone();
        s.files.remove(&from);
        let replaced = s.files.insert(to.clone(), file);
        s.remember(&to);
        s.unsynced_dir_changes
            .push(DirChange::Rename { from, to, replaced });
    });
}

pub(super) fn before_remove(path: &Path) -> io::Result<()> {
    let path = absolute(path);
    let under = path.clone();
    let crashed = with_scope(&under, |s| {
        if s.tick() {
            return true;
        }
        if !path.exists() {
            return false;
        }
        let file = s.file(&path).clone();
        s.files.remove(&path);
        s.unsynced_dir_changes
            .push(DirChange::Remove { path, file });
        false
    });
    if crashed == Some(true) {
        return Err(injected_error(libc::EIO, FileOp::Write, &under));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_changes_apply_in_order() {
        let mut content = b"hello".to_vec();
        ContentChange::Write {
            pos: 3,
            data: b"p me".to_vec(),
        }
        .apply(&mut content);
        assert_eq!(content, b"help me");
        ContentChange::Truncate(4).apply(&mut content);
        assert_eq!(content, b"help");
        ContentChange::Write {
            pos: 6,
            data: b"!".to_vec(),
        }
        .apply(&mut content);
        assert_eq!(content, b"help\0\0!");
    }

    #[test]
    fn rules_skip_then_fire_a_number_of_times() {
        let mut scope = ScopeState::new(PathBuf::from("/x"));
        scope.rules.push(ActiveRule {
            rule: FaultRule::on(FileOp::Fsync)
                .matching(".log")
                .after(1)
                .times(2),
            seen: 0,
            fired: 0,
        });
        let log = Path::new("/x/0.log");
        let fired: Vec<bool> = (0..4)
            .map(|_| scope.fire(FileOp::Fsync, log).is_some())
            .collect();
        assert_eq!(fired, [false, true, true, false]);
        assert!(scope.fire(FileOp::Fsync, Path::new("/x/0.index")).is_none());
        assert!(scope.fire(FileOp::Write, log).is_none());
    }
}
