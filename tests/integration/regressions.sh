#!/bin/bash
# regressions.sh - defects found in review, each shown with real programs
# (design.md §5.1, §11.5):
#
# 1. close() must not consume a socket's pending error: after a refused
#    non-blocking connect to a replica, closing one descriptor of the
#    socket leaves SO_ERROR for the program's other descriptor (a dup, or
#    the parent's after a fork child closed its copy), exactly as without
#    the library; the refusal is counted.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

# Nothing listens on 127.0.0.2:$PORT: connects to it are refused.
PORT=$(free_port)

write_config <<EOF
distributed_replica_error_half_life = 3600;
clusters = (
  { name = "refuse.cluster";
    replicas = ( "127.0.0.2:$PORT" ); }
);
EOF

# so_error.py NAME PORT dup|fork : a non-blocking connect to the first
# address of NAME, waited for with poll(); then, with "dup", dup the
# descriptor and close the original; with "fork", a child closes its
# inherited copy and exits. Prints what the remaining descriptor's
# getsockopt(SO_ERROR) reads (an errno name, or 0).
cat >"$T/so_error.py" <<'EOF'
import errno, os, select, socket, sys

name, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
addr = socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setblocking(False)
rc = s.connect_ex(addr)
if rc != errno.EINPROGRESS:
    sys.exit("connect: %s" % errno.errorcode.get(rc, rc))
p = select.poll()
p.register(s, select.POLLOUT)
p.poll(10000)
fd = s.detach()
if mode == "dup":
    keep = os.dup(fd)
    os.close(fd)
else:
    pid = os.fork()
    if pid == 0:
        os.close(fd)
        os._exit(0)
    os.waitpid(pid, 0)
    keep = fd
err = socket.socket(fileno=keep).getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
print(errno.errorcode.get(err, err))
EOF

for mode in dup fork; do
	check_eq "$mode: SO_ERROR without the library" ECONNREFUSED \
		"$($PY "$T/so_error.py" 127.0.0.2 "$PORT" $mode 2>&1)"
	rlbctl reset >/dev/null 2>&1
	out=$(preload $PY "$T/so_error.py" refuse.cluster "$PORT" $mode \
		2>"$T/$mode.err")
	check_eq "$mode: close leaves SO_ERROR to the other descriptor" \
		ECONNREFUSED "$out"
	check_empty "$mode: silent" "$T/$mode.err"
	errors=$(replica_errors refuse.cluster "127.0.0.2:$PORT")
	if [ $mode = dup ]; then
		check_eq "dup: the refusal is counted once" 1 "$errors"
	else
		# The child's copy of the pending entry counts at its close,
		# the parent's at SO_ERROR: each process holds the entry
		# (design.md §9, inherited pending connects).
		check_ge "fork: the refusal is counted" 1 "$errors"
		check_le "fork: at most once per process" 2 "$errors"
	fi
done

finish
