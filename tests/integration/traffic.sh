#!/bin/bash
# traffic.sh - the host's traffic counts (design.md §11.8, §12.13): per
# replica, connects established, connects failed and connections open now,
# counted by every process that shares the state, as `replicalbctl status`
# shows them. Real programs (curl, python3) against real local servers:
# - curl's connects count, a refused replica's failure too;
# - a python3 client's held connections are in flight while open, and a
#   connection copied by dup(), socket.dup(), fcntl(F_DUPFD_CLOEXEC) or
#   dup2() counts once;
# - a forked child that holds its parent's connections keeps them counted
#   after the parent closes its copies, until it exits - unless it execs,
#   which ends its close-on-exec copies;
# - os.closerange() (close_range) lets go;
# - a connection sent with SCM_RIGHTS to an unrelated process counts
#   once, and while that process holds it;
# - 16 clients SIGKILLed holding connections are given back at once in
#   status, and the counter a selection reads within the reclaim time.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

PORT=$(free_port)
DEAD=$(free_port) # nothing listens: refused
write_config <<EOF
load_balancing = "in_order";
state_dir = "$T/state";
clusters = (
  { name = "t.cluster"; port = $PORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "dead.cluster";
    replicas = ( "127.0.0.2:$DEAD", "127.0.0.3:$PORT" ); }
);
EOF
start_replica r1 127.0.0.2 "$PORT" || fail "replica r1"
start_replica r2 127.0.0.3 "$PORT" || fail "replica r2"

stat_of() # CLUSTER HOST KEY
{
	replica_stat "$1" "$2" "$3"
}

# 1. curl: three requests, three connects to the first replica.
for i in 1 2 3; do
	preload curl -s -o /dev/null "http://t.cluster:$PORT/" 2>>"$T/curl.err"
done
check_eq "curl: three connects counted" "3" \
	"$(stat_of t.cluster 127.0.0.2 connects)"
check_eq "curl: none in flight after" "0" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
check_eq "curl: no failure" "0" "$(stat_of t.cluster 127.0.0.2 failures)"
check_empty "curl: silent" "$T/curl.err"

# A refused replica: one failure there, the connect on the next one.
preload curl -s -o /dev/null "http://dead.cluster/" 2>>"$T/curl.err"
check_eq "refused: one failure counted" "1" \
	"$(stat_of dead.cluster "127.0.0.2:$DEAD" failures)"
check_eq "refused: the next replica's connect counted" "1" \
	"$(stat_of dead.cluster "127.0.0.3:$PORT" connects)"

# 2. A client holding connections: in flight while open, copies count
# once. It prints "held" when set up, then waits for a line on stdin.
cat >"$T/hold.py" <<'EOF'
import fcntl, os, socket, sys

n, mode = int(sys.argv[1]), sys.argv[2]
socks = [socket.create_connection(("t.cluster", int(sys.argv[3])))
         for _ in range(n)]
extra = []
if mode == "copies":
    for s in socks:
        extra.append(s.dup())
        extra.append(os.dup(s.fileno()))
        extra.append(fcntl.fcntl(s.fileno(), fcntl.F_DUPFD_CLOEXEC, 100))
    # dup2 over another copy: that one closes, this one counts
    os.dup2(socks[0].fileno(), extra[1])
print("held", flush=True)
sys.stdin.readline()
if mode == "copies":
    for s in socks:
        s.close()               # copies left: still in flight
    print("closed originals", flush=True)
    sys.stdin.readline()
    os.closerange(3, 1000)      # close_range: all gone
    print("closed all", flush=True)
    sys.stdin.readline()
elif mode == "forkexec":
    pid = os.fork()
    if pid == 0:
        # Its copies are close-on-exec (Python's sockets are): gone.
        os.execv("/bin/sleep", ["sleep", "3"])
    for s in socks:
        s.close()
    print("parent closed", flush=True)
    sys.stdin.readline()
    os.kill(pid, 9)
    os.waitpid(pid, 0)
elif mode == "fork":
    pid = os.fork()
    if pid == 0:
        sys.stdin.readline()    # the child holds them until told
        os._exit(0)
    for s in socks:
        s.close()
    print("parent closed", flush=True)
    os.waitpid(pid, 0)
    print("child gone", flush=True)
    sys.stdin.readline()
EOF

# Drives one hold.py through a fifo: say LINE, wait for its reply.
start_holder() # NAME N MODE
{
	mkfifo "$T/$1.in"
	preload $PY "$T/hold.py" "$2" "$3" "$PORT" <"$T/$1.in" >"$T/$1.out" \
		2>"$T/$1.err" &
	echo $! >"$T/$1.pid"
	exec {holder_fd}>"$T/$1.in"
	eval "fd_$1=$holder_fd"
}
say() # NAME WANT : one line to NAME, then wait for WANT in its output
{
	local fd
	eval "fd=\$fd_$1"
	echo go >&"$fd"
	wait_until 10 grep -q "^$2\$" "$T/$1.out"
}
wait_for() # NAME WANT
{
	wait_until 10 grep -q "^$2\$" "$T/$1.out"
}

start_holder copies 2 copies
check "copies: the client connected" wait_for copies held
check_eq "copies: two connections, each copied 3 times, count 2" "2" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
check "copies: originals closed" say copies "closed originals"
check_eq "copies: the copies keep them in flight" "2" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
check "copies: closerange" say copies "closed all"
check_eq "copies: close_range let go of them" "0" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
say copies nothing >/dev/null
wait "$(cat "$T/copies.pid")"
check_empty "copies: silent" "$T/copies.err"

# 3. fork: the child holds what its parent closed.
start_holder fork 3 fork
check "fork: the client connected" wait_for fork held
check_eq "fork: three in flight" "3" "$(stat_of t.cluster 127.0.0.2 in_flight)"
check "fork: the parent closed its copies" say fork "parent closed"
check_eq "fork: the child keeps them in flight" "3" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
eval "echo go >&\$fd_fork"
check "fork: the child exited" wait_for fork "child gone"
check_eq "fork: none in flight once the child is gone" "0" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
eval "echo go >&\$fd_fork"
wait "$(cat "$T/fork.pid")"
check_empty "fork: silent" "$T/fork.err"

# A forked child that execs: its close-on-exec copies end with its image,
# so the parent's close lets the connections go while the child lives on.
start_holder forkexec 2 forkexec
check "fork+exec: the client connected" wait_for forkexec held
check "fork+exec: the parent closed its copies" say forkexec "parent closed"
check_eq "fork+exec: none in flight while the exec'd child runs" "0" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
eval "echo go >&\$fd_forkexec"
wait "$(cat "$T/forkexec.pid")"
check_empty "fork+exec: silent" "$T/forkexec.err"

# 4. SCM_RIGHTS: a connection sent to an unrelated process (which never
# resolved a name) and closed by its sender at once counts once, while
# the receiver holds it, and not after.
cat >"$T/scm.py" <<'EOF'
import os, socket, sys
mode, path = sys.argv[1], sys.argv[2]
if mode == "recv":
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    print("listening", flush=True)
    c, _ = srv.accept()
    msg, fds, flags, addr = socket.recv_fds(c, 16, 4)
    print("received %d" % len(fds), flush=True)
    sys.stdin.readline()
    for f in fds:
        os.close(f)
    print("closed", flush=True)
    sys.stdin.readline()
else:
    s = socket.create_connection(("t.cluster", int(sys.argv[3])))
    u = socket.socket(socket.AF_UNIX)
    u.connect(path)
    socket.send_fds(u, [b"x"], [s.fileno()])
    s.close()
EOF
mkfifo "$T/scm.in"
LD_PRELOAD="$RLB_LIB" $PY "$T/scm.py" recv "$T/scm.sock" <"$T/scm.in" \
	>"$T/scm.out" 2>"$T/scm.err" &
scm_pid=$!
exec {scm_fd}>"$T/scm.in"
check "scm: the receiver listens" wait_for scm listening
preload $PY "$T/scm.py" send "$T/scm.sock" "$PORT" 2>>"$T/scm.err"
check "scm: the receiver got the descriptor" wait_for scm "received 1"
check_eq "scm: sent, then closed by its sender: the receiver's, counted once" \
	"1" "$(stat_of t.cluster 127.0.0.2 in_flight)"
echo go >&"$scm_fd"
check "scm: the receiver closed it" wait_for scm closed
check_eq "scm: none in flight once the receiver closed it" "0" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
echo go >&"$scm_fd"
wait "$scm_pid"
check_empty "scm: silent" "$T/scm.err"

# 5. 16 clients SIGKILLed holding two connections each.
cat >"$T/sit.py" <<'EOF'
import socket, sys, time
socks = [socket.create_connection(("t.cluster", int(sys.argv[1])))
         for _ in range(2)]
print("held", flush=True)
time.sleep(60)
EOF
pids=
for i in $(seq 16); do
	# Not through preload(): $! must be python itself, not a subshell.
	LD_PRELOAD="$RLB_LIB" $PY "$T/sit.py" "$PORT" >"$T/sit$i.out" 2>&1 &
	pids="$pids $!"
done
bg_track "$pids"
all_held()
{
	local i
	for i in $(seq 16); do
		grep -q '^held$' "$T/sit$i.out" || return 1
	done
}
check "killed: 16 clients connected" wait_until 20 all_held
check_eq "killed: 32 in flight" "32" "$(stat_of t.cluster 127.0.0.2 in_flight)"
t0=$(now_ms)
kill -KILL $pids
for p in $pids; do wait "$p" 2>/dev/null; done 2>/dev/null
check_eq "killed: status shows none in flight at once" "0" \
	"$(stat_of t.cluster 127.0.0.2 in_flight)"
# The counter a selection ranks by: a survivor gives it back within a
# second of its next operation (design.md §12.13). curl is the survivor;
# its own connect is over before resolve -v looks.
reclaimed()
{
	preload curl -s -o /dev/null "http://t.cluster:$PORT/"
	rlbctl resolve -v t.cluster | grep -q '^  127.0.0.2:[0-9]* .* in_flight=0 '
}
check "killed: the counter is back to 0 within 3 s" wait_until 3 reclaimed
echo "    reclaimed in $(($(now_ms) - t0)) ms"
finish
