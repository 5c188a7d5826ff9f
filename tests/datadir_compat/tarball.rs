//! Fixtures as gzip'ed tarballs: packed reproducibly (sorted, no owner or time), unpacked
//! in-process.

use super::*;

pub(crate) fn git(args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// Packs `data` (paths relative to it, sorted, no owner or time) into a gzip'ed tarball.
pub(crate) fn pack(data: &Path, tarball: &Path) {
    write_tarball(data, walk(vec![data.to_path_buf()]), tarball);
}

pub(crate) fn unpack(tarball: &Path, into: &Path) {
    let file = std::fs::File::open(tarball).expect("open the fixture");
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    archive.set_preserve_mtime(false);
    archive.unpack(into).expect("unpack the fixture");
}

/// Appends `path` as `rel`: no owner, no time, mode 644 or 755.
pub(crate) fn append<W: std::io::Write>(tar: &mut tar::Builder<W>, path: &Path, rel: &Path) {
    let meta = std::fs::metadata(path).expect("metadata");
    let mut header = tar::Header::new_gnu();
    header.set_mode(if meta.is_dir() { 0o755 } else { 0o644 });
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    if meta.is_dir() {
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        tar.append_data(&mut header, rel, std::io::empty())
            .expect("append a directory");
    } else {
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(meta.len());
        let f = std::fs::File::open(path).expect("open");
        tar.append_data(&mut header, rel, f).expect("append a file");
    }
}

/// Packs the directories `dirs` of `base` (paths relative to `base`) into a gzip'ed tarball.
pub(crate) fn pack_dirs(base: &Path, dirs: &[&str], tarball: &Path) {
    let roots: Vec<PathBuf> = dirs.iter().map(|d| base.join(d)).collect();
    let mut files = roots.clone();
    files.extend(walk(roots));
    write_tarball(base, files, tarball);
}

/// Everything under `roots` (not the roots themselves), depth first.
fn walk(mut stack: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            files.push(path);
        }
    }
    files
}

/// Writes `files`, sorted, as paths relative to `base`: no owner, no time.
fn write_tarball(base: &Path, mut files: Vec<PathBuf>, tarball: &Path) {
    let file = std::fs::File::create(tarball).expect("create the tarball");
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    files.sort();
    for path in files {
        append(
            &mut tar,
            &path,
            path.strip_prefix(base).expect("under base"),
        );
    }
    tar.into_inner()
        .expect("finish the tar")
        .finish()
        .expect("finish the gzip");
}
