//! `ringbroker log dump` against a log written by the library.

use std::process::Command;

use ringbroker::log::{AppendOptions, Log, LogConfig};
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::runtime::block_on;

fn write_log(dir: &std::path::Path, batches: usize) {
    block_on(async {
        let config = LogConfig {
            segment_bytes: 1024,
            ..LogConfig::default()
        };
        let log = Log::open(dir, config).await.expect("open");
        for i in 0..batches {
            let mut b = BatchBuilder::new(1000);
            b.push(Some(b"k"), Some(format!("v{i}").as_bytes()), 1000, &[]);
            b.push(None, Some(b"second"), 1001, &[]);
            log.append(
                &b.build(),
                AppendOptions {
                    durable: false,
                    now_ms: 0,
                    leader_epoch: None,
                },
            )
            .await
            .expect("append");
        }
        log.close().await.expect("close");
    })
    .expect("executor");
}

#[test]
fn dump_lists_segments_and_flags_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_log(dir.path(), 30);
    let out = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["log", "dump", "--batches"])
        .arg(dir.path())
        .output()
        .expect("run ringbroker");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("segment 00000000000000000000"), "{text}");
    assert!(
        text.contains("base_offset 58 last_offset 59 count 2"),
        "{text}"
    );
    assert!(text.contains("30 batches, 60 records"), "{text}");

    // Flip a byte inside the first segment's first batch: the dump reports it and exits 1.
    let first = dir.path().join("00000000000000000000.log");
    let mut bytes = std::fs::read(&first).expect("read");
    bytes[70] ^= 0xff;
    std::fs::write(&first, bytes).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["log", "dump"])
        .arg(dir.path())
        .output()
        .expect("run ringbroker");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("ERROR invalid data at position 0"), "{text}");
}

#[test]
fn dump_of_a_missing_directory_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["log", "dump", "/nonexistent/ringbroker-test"])
        .output()
        .expect("run ringbroker");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error:"));
}
