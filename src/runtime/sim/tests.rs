use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::runtime;

/// Three tasks that sleep and record: the trace of one seed, for comparisons.
fn trace_of(seed: u64) -> (Vec<(u32, u128)>, Duration) {
    run(SimConfig::seeded(seed), async {
        let trace = Rc::new(RefCell::new(Vec::new()));
        let mut tasks = Vec::new();
        for t in 0..3u32 {
            let trace = Rc::clone(&trace);
            tasks.push(runtime::spawn(async move {
                for i in 0..5u64 {
                    runtime::sleep(Duration::from_millis(10 * (t as u64 + 1) + i)).await;
                    trace.borrow_mut().push((t, elapsed().as_millis()));
                    runtime::yield_if_needed().await;
                }
            }));
        }
        for t in tasks {
            t.await;
        }
        let out = trace.borrow().clone();
        (out, elapsed())
    })
    .expect("the run ends")
}

#[test]
fn virtual_time_moves_only_to_timers_and_a_seed_replays_its_run() {
    let started = std::time::Instant::now();
    let (trace, took) = run(SimConfig::seeded(1), async {
        runtime::sleep(Duration::from_secs(1800)).await;
        (runtime::now_ms(), elapsed())
    })
    .expect("the run ends");
    assert_eq!(took, Duration::from_secs(1800));
    assert_eq!(trace, SimConfig::seeded(1).start_unix_ms + 1800 * 1000);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "half an hour of sleep is not slept"
    );
    assert_eq!(trace_of(7), trace_of(7));
    let (t, end) = trace_of(7);
    assert_eq!(t.len(), 15);
    // Task 2 sleeps 30+31+32+33+34 ms.
    assert_eq!(end, Duration::from_millis(160));
}

#[test]
fn the_seed_picks_the_interleaving() {
    let order = |seed| {
        run(SimConfig::seeded(seed), async {
            let order = Rc::new(RefCell::new(Vec::new()));
            let tasks: Vec<_> = (0..6)
                .map(|i| {
                    let order = Rc::clone(&order);
                    runtime::spawn(async move { order.borrow_mut().push(i) })
                })
                .collect();
            for t in tasks {
                t.await;
            }
            let o = order.borrow().clone();
            o
        })
        .expect("runs")
    };
    let orders: crate::util::hash::HashSet<Vec<i32>> = (0..20).map(order).collect();
    assert!(orders.len() > 1, "every seed ran the tasks in one order");
    assert_eq!(order(3), order(3));
}

#[test]
fn a_run_that_cannot_progress_is_a_deadlock_and_limits_hold() {
    let (_tx, rx) = runtime::local_channel::<u8>(1);
    let stuck = run(SimConfig::seeded(1), async move { rx.recv().await });
    assert_eq!(stuck, Err(SimError::Deadlock { at: Duration::ZERO }));
    let config = SimConfig {
        max_time: Duration::from_secs(10),
        ..SimConfig::seeded(1)
    };
    let long = run(config, async {
        loop {
            runtime::sleep(Duration::from_secs(1)).await;
        }
    });
    assert_eq!(
        long,
        Err(SimError::TimeLimit {
            limit: Duration::from_secs(10)
        })
    );
}

#[test]
fn channels_and_timeouts_work_in_a_simulation() {
    run(SimConfig::seeded(2), async {
        let (tx, rx) = runtime::local_channel::<u32>(2);
        let producer = runtime::spawn(async move {
            for i in 0..10 {
                tx.send(i).await.expect("receiver alive");
                runtime::sleep(Duration::from_millis(1)).await;
            }
        });
        let mut got = Vec::new();
        while let Some(v) = rx.recv().await {
            got.push(v);
        }
        producer.await;
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        let late = runtime::timeout(
            Duration::from_millis(5),
            runtime::sleep(Duration::from_secs(1)),
        )
        .await;
        assert_eq!(late, None);
        assert_eq!(elapsed(), Duration::from_millis(15));
    })
    .expect("runs");
}

async fn echo_server(addr: std::net::SocketAddr) {
    let listener = runtime::TcpListener::bind(addr, 1).expect("bind");
    loop {
        let mut s = listener.accept().await.expect("accept");
        runtime::spawn_detached(async move {
            let mut buf = [0u8; 64];
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }
}

#[test]
fn connections_between_hosts_partitions_heal_and_crashes() {
    run(SimConfig::seeded(3), async {
        let server = NodeId(0);
        let client = NodeId(1);
        let addr = std::net::SocketAddr::new(net::host_ip(server), 9092);
        let _server_task = spawn_on(server, echo_server(addr));
        let client_task = spawn_on(client, async move {
            let mut s = runtime::connect(addr, Duration::from_secs(1))
                .await
                .expect("connect");
            assert_eq!(s.peer_addr().expect("peer"), addr);
            s.write_all(b"hello").await.expect("write");
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.expect("read");
            assert_eq!(&buf, b"hello");
            // Partitioned: held, not lost; delivered once healed.
            net::partition(server, client);
            s.write_all(b"again").await.expect("write");
            let held = runtime::timeout(Duration::from_secs(5), s.read_exact(&mut buf)).await;
            assert!(held.is_none(), "nothing crosses a partition");
            let refused = runtime::connect(addr, Duration::from_millis(300)).await;
            assert_eq!(
                refused.err().map(|e| e.kind()),
                Some(std::io::ErrorKind::TimedOut)
            );
            net::heal(server, client);
            s.read_exact(&mut buf).await.expect("read after heal");
            assert_eq!(&buf, b"again");
            s
        });
        let mut s = client_task.await;
        // The server's process dies: its connections reset, its port refuses.
        crash(server);
        let mut buf = [0u8; 1];
        let r = s.read(&mut buf).await;
        assert!(
            matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{r:?}"
        );
        let again = runtime::connect(addr, Duration::from_secs(1)).await;
        assert_eq!(
            again.err().map(|e| e.kind()),
            Some(std::io::ErrorKind::ConnectionRefused)
        );
    })
    .expect("runs");
}

#[test]
fn files_are_read_and_written_in_a_simulation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    run(SimConfig::seeded(4), async move {
        crate::runtime::tests::file_round_trip(&path).await;
        assert_eq!(runtime::spawn_blocking(|| 5).await, 5);
    })
    .expect("runs");
}

#[test]
fn a_step_check_stops_the_run_at_the_step_that_broke_it() {
    let counter = Rc::new(std::cell::Cell::new(0u32));
    let seen = Rc::clone(&counter);
    let result = run(SimConfig::seeded(3), async move {
        check_every_step(move || match seen.get() {
            n if n > 2 => Err(format!("counter at {n}")),
            _ => Ok(()),
        });
        for _ in 0..10 {
            counter.set(counter.get() + 1);
            runtime::sleep(Duration::from_millis(5)).await;
        }
    });
    match result {
        Err(SimError::Invariant { message, at, .. }) => {
            assert_eq!(message, "counter at 3");
            // The third increment follows the second sleep.
            assert_eq!(at, Duration::from_millis(10));
        }
        other => panic!("expected the check to stop the run, got {other:?}"),
    }
}

#[test]
fn a_paused_node_runs_nothing_until_it_resumes() {
    let ticks = run(SimConfig::seeded(4), async {
        let ticks = Rc::new(RefCell::new(Vec::new()));
        let seen = Rc::clone(&ticks);
        let node = NodeId(7);
        let _task = spawn_on(node, async move {
            for _ in 0..10 {
                seen.borrow_mut().push(elapsed().as_millis());
                runtime::sleep(Duration::from_millis(100)).await;
            }
        });
        runtime::sleep(Duration::from_millis(250)).await;
        pause(node);
        runtime::sleep(Duration::from_millis(1000)).await;
        resume(node);
        runtime::sleep(Duration::from_millis(250)).await;
        let out = ticks.borrow().clone();
        out
    })
    .expect("the run ends");
    // 0, 100, 200; the 300 ms timer fired while paused and runs at the resume (1250); then on.
    assert_eq!(ticks, vec![0, 100, 200, 1250, 1350, 1450]);
}
