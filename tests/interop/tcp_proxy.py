#!/usr/bin/env python3
"""A TCP proxy that cuts its connections, for the idempotence interop test.

    tcp_proxy.py --listen PORT --target HOST:PORT [--seed 1] [--every-ms 100:800] [--bytes 4096:262144]

Forwards every accepted connection to the target. While cutting is on it closes connections
  - all at once, every `every-ms` milliseconds (uniformly random in the range), and
  - one by one, when a connection has carried its byte budget in either direction (a budget is
    drawn per connection and direction, uniformly random in the `bytes` range); the chunk that
    crosses the budget is forwarded only up to the budget, so requests and responses are cut
    in the middle as well as between them.
Randomness comes from one random.Random(seed), so a run's budgets and intervals are
reproducible (the exact cut points still depend on thread timing).

Used as a module (TcpProxy(...).start(), .cutting = True/False, .stats(), .stop()) or from the
command line (runs until SIGINT/SIGTERM, then prints its counters).
"""

import argparse
import random
import signal
import socket
import sys
import threading
import time


class _Conn:
    def __init__(self, proxy, client, upstream, budgets):
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.budgets = budgets  # [client->upstream, upstream->client]
        self.sent = [0, 0]
        self.closed = False
        self.lock = threading.Lock()

    def start(self):
        for d, (src, dst) in enumerate(((self.client, self.upstream), (self.upstream, self.client))):
            threading.Thread(target=self._pump, args=(d, src, dst), daemon=True).start()

    def close(self):
        with self.lock:
            if self.closed:
                return False
            self.closed = True
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
        self.proxy._forget(self)
        return True

    def _pump(self, d, src, dst):
        try:
            while not self.closed:
                data = src.recv(65536)
                if not data:
                    break
                if self.proxy.cutting:
                    left = self.budgets[d] - self.sent[d]
                    if len(data) > left:
                        if left > 0:
                            dst.sendall(data[:left])
                        if self.close():
                            self.proxy._count("byte_cuts")
                        return
                self.sent[d] += len(data)
                dst.sendall(data)
        except OSError:
            pass
        self.close()


class TcpProxy:
    def __init__(self, listen_port, target, seed=1, every_ms=(100, 800), budget_bytes=(4096, 262144),
                 host="127.0.0.1"):
        self.listen = (host, listen_port)
        self.target = target  # (host, port)
        self.rng = random.Random(seed)
        self.every_ms = every_ms
        self.budget_bytes = budget_bytes
        self.cutting = False
        self._lock = threading.Lock()
        self._conns = set()
        self._stop = threading.Event()
        self._counters = {"connections": 0, "timer_cuts": 0, "timer_cut_connections": 0, "byte_cuts": 0,
                          "upstream_refused": 0}
        self._sock = None

    # -- counters
    def _count(self, name, n=1):
        with self._lock:
            self._counters[name] += n

    def stats(self):
        with self._lock:
            s = dict(self._counters)
        s["cut_connections"] = s["timer_cut_connections"] + s["byte_cuts"]
        return s

    def _forget(self, conn):
        with self._lock:
            self._conns.discard(conn)

    def _rand(self, lo, hi):
        with self._lock:
            return self.rng.uniform(lo, hi)

    # -- lifecycle
    def start(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(self.listen)
        s.listen(128)
        s.settimeout(0.2)
        self._sock = s
        threading.Thread(target=self._accept_loop, daemon=True).start()
        threading.Thread(target=self._timer_loop, daemon=True).start()
        return self

    def stop(self):
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass
        self.cut_all()

    def cut_all(self):
        with self._lock:
            conns = list(self._conns)
        return sum(1 for c in conns if c.close())

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                self._count("upstream_refused")
                client.close()
                continue
            client.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            budgets = [int(self._rand(*self.budget_bytes)), int(self._rand(*self.budget_bytes))]
            conn = _Conn(self, client, upstream, budgets)
            with self._lock:
                self._conns.add(conn)
                self._counters["connections"] += 1
            conn.start()

    def _timer_loop(self):
        while not self._stop.wait(self._rand(*self.every_ms) / 1000.0):
            if self.cutting:
                n = self.cut_all()
                if n:
                    self._count("timer_cuts")
                    self._count("timer_cut_connections", n)


def _range(s, conv=float):
    lo, hi = s.split(":", 1)
    return conv(lo), conv(hi)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--target", required=True, help="HOST:PORT")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--every-ms", default="100:800")
    ap.add_argument("--bytes", default="4096:262144")
    a = ap.parse_args(argv)
    host, port = a.target.rsplit(":", 1)
    p = TcpProxy(a.listen, (host, int(port)), a.seed, _range(a.every_ms), _range(a.bytes, int)).start()
    p.cutting = True
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print(f"tcp_proxy: 127.0.0.1:{a.listen} -> {a.target}, cutting", flush=True)
    while not done.wait(0.5):
        pass
    p.stop()
    time.sleep(0.1)
    print(f"tcp_proxy: {p.stats()}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
