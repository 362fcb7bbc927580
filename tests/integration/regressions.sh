#!/bin/bash
# regressions.sh - defects found in review, each shown with real programs
# (design.md §4.3, §5.1, §11.5):
#
# 1. close() must not consume a socket's pending error: after a refused
#    non-blocking connect to a replica, closing one descriptor of the
#    socket leaves SO_ERROR for the program's other descriptor (a dup, or
#    the parent's after a fork child closed its copy), exactly as without
#    the library; the refusal is counted.
# 2. gethostbyname2_r and gethostbyname2 of a virtual name in a family no
#    resolver answers (AF_UNIX) fail exactly as glibc's do for a name it
#    knows: EAFNOSUPPORT, h_errno NO_DATA (not NETDB_INTERNAL).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

# Nothing listens on 127.0.0.2:$PORT: connects to it are refused.
PORT=$(free_port)

write_config <<EOF
distributed_replica_error_half_life = 3600;
clusters = (
  { name = "refuse.cluster";
    replicas = ( "127.0.0.2:$PORT" ); },
  { name = "unix.cluster";
    replicas = ( "127.0.0.2" ); }
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
	# Once: a forked child forgets the parent's pending attempts
	# (design.md §13.4), so its close counts nothing.
	check_eq "$mode: the refusal is counted once" 1 \
		"$(replica_errors refuse.cluster "127.0.0.2:$PORT")"
done

# ---------------------------------------------------------------------
# 2. gethostbyname2(_r) in AF_UNIX: return value, result, h_errno, errno.

cat >"$T/bad_family.py" <<'EOF'
import ctypes, socket, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.__h_errno_location.restype = ctypes.POINTER(ctypes.c_int)
libc.gethostbyname2.restype = ctypes.c_void_p
name = sys.argv[1].encode()
he, res = ctypes.create_string_buffer(64), ctypes.c_void_p(1)
buf, herr = ctypes.create_string_buffer(1024), ctypes.c_int(99)
ctypes.set_errno(0)
rc = libc.gethostbyname2_r(name, socket.AF_UNIX, he, buf, 1024,
                           ctypes.byref(res), ctypes.byref(herr))
print("r rc=%d result=%s h_errno=%d errno=%d" %
      (rc, res.value, herr.value, ctypes.get_errno()))
ctypes.set_errno(0)
libc.__h_errno_location()[0] = 99
h = libc.gethostbyname2(name, socket.AF_UNIX)
print("nr result=%s h_errno=%d errno=%d" %
      (h, libc.__h_errno_location()[0], ctypes.get_errno()))
EOF
want=$($PY "$T/bad_family.py" localhost 2>&1)
check_match "AF_UNIX: glibc's answer for localhost" \
	'^r rc=97 result=None h_errno=4 errno=97$' "$want"
check_eq "AF_UNIX: a virtual name answers as glibc's" "$want" \
	"$(preload $PY "$T/bad_family.py" unix.cluster 2>&1)"

finish
