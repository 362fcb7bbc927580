#!/usr/bin/python3
"""replica_server.py - a stand-in replica for the integration tests.

Stdlib only. Listens on --host:--port and identifies itself by --name:

  --mode http       any GET is answered "replica=NAME\\n" (threaded),
                    after --delay-ms (a slow replica); with --status-file,
                    with the HTTP status that file holds when asked (200
                    when it is empty or absent), as ClickHouse's
                    /replicas_status answers 503 on a lagging replica
  --mode tcp        every connection gets "replica=NAME\\n", then is closed
  --mode blackhole  a silent replica: a listener whose accept queue is full
                    (listen(0), idle connections queued, never accepted);
                    the kernel drops further SYNs, so a connect to it is
                    neither refused nor accepted: it stays pending until
                    the client's own timeout. Prints "queued=N" (the idle
                    connections it took; 1 on Linux) before "ready".

Prints "ready" on stdout once listening, writes --pidfile, exits 0 on
SIGTERM or SIGINT. With --log-accepts (http and tcp), also prints
"accepted HOST:PORT" (the peer) for each connection it accepts, flushed.
"""

import argparse
import http.server
import os
import select
import signal
import socket
import sys
import threading


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", choices=("http", "tcp", "blackhole"),
                   default="http")
    p.add_argument("--pidfile")
    p.add_argument("--delay-ms", type=int, default=0,
                   help="http: wait this long before each answer (a slow "
                   "replica)")
    p.add_argument("--status-file",
                   help="http: answer with the status this file holds")
    p.add_argument("--log-accepts", action="store_true",
                   help="print \"accepted HOST:PORT\" for each connection "
                   "accepted (http, tcp)")
    return p.parse_args()


_out_lock = threading.Lock()


def say(line):
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def accepted(args, peer):
    if args.log_accepts:
        say("accepted %s:%d" % (peer[0], peer[1]))


def listener(host, port, backlog):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(backlog)
    return s


def serve_http(args, stop):
    body = ("replica=%s\n" % args.name).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if args.delay_ms:
                stop.wait(args.delay_ms / 1000.0)
            status = 200
            if args.status_file:
                try:
                    with open(args.status_file) as f:
                        status = int(f.read().strip() or 200)
                except (OSError, ValueError):
                    pass
            if args.log_accepts:
                say("GET %s %d" % (self.path, status))
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *a):
            pass

    class Server(http.server.ThreadingHTTPServer):
        allow_reuse_address = True
        daemon_threads = True
        request_queue_size = 128
        address_family = (socket.AF_INET6 if ":" in args.host
                          else socket.AF_INET)

        def get_request(self):
            conn, peer = super().get_request()
            accepted(args, peer)
            return conn, peer

    srv = Server((args.host, args.port), Handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={
        "poll_interval": 0.05}, daemon=True)
    t.start()
    ready()
    stop.wait()
    srv.shutdown()
    srv.server_close()


def serve_tcp(args, stop):
    # Single-threaded accept loop: writing a short line to a fresh socket
    # never blocks, and this keeps up with the thread stress test.
    msg = ("replica=%s\n" % args.name).encode()
    s = listener(args.host, args.port, 1024)
    ready()
    while not stop.is_set():
        r, _, _ = select.select([s], [], [], 0.1)
        if not r:
            continue
        try:
            c, peer = s.accept()
        except OSError:
            continue
        accepted(args, peer)
        try:
            c.sendall(msg)
        except OSError:
            pass
        c.close()
    s.close()


# Idle connections a blackhole may need before its accept queue is full.
# Linux (the listen(0) queue holds one connection) needs 1: the second
# connect already stays pending. More means the kernel is not dropping
# SYNs the way the tests rely on, so the helper gives up.
BLACKHOLE_MAX_QUEUED = 4


def serve_blackhole(args, stop):
    s = listener(args.host, args.port, 0)
    fillers = []
    queued = 0
    # Fill the accept queue; stop as soon as a connect stays pending. A
    # connect that fails (refused, reset) means this is no blackhole.
    while True:
        c = socket.socket(s.family, socket.SOCK_STREAM)
        c.setblocking(False)
        c.connect_ex((args.host, args.port))
        fillers.append(c)
        _, w, _ = select.select([], [c], [], 0.3)
        if not w:
            break
        err = c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise RuntimeError("blackhole: filler connect failed: %s"
                               % os.strerror(err))
        queued += 1
        if queued > BLACKHOLE_MAX_QUEUED:
            raise RuntimeError("blackhole: accept queue not full after %d "
                               "connections" % queued)
    say("queued=%d" % queued)
    ready()
    stop.wait()
    for c in fillers:
        c.close()
    s.close()


def ready():
    say("ready")


def main():
    args = parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    if args.pidfile:
        with open(args.pidfile, "w") as f:
            f.write("%d\n" % os.getpid())
    serve = {"http": serve_http, "tcp": serve_tcp,
             "blackhole": serve_blackhole}[args.mode]
    failed = []

    def run():
        try:
            serve(args, stop)
        except Exception as e:
            failed.append(e)
            stop.set()

    # The main thread only waits, so that signal handlers run promptly.
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
    if failed:
        sys.stderr.write("replica_server %s: %s\n" % (args.name, failed[0]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
