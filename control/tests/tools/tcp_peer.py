#!/usr/bin/env python3
"""Linux-side peer for iwarpd's TCP end-to-end tests (runs in the kernel network namespace).

  echo HOST PORT BYTES            send BYTES seeded-random bytes to an echo service and read them
                                  back concurrently; prints 'echo ok=... sha256=...'
  many HOST PORT CONNS BYTES      CONNS concurrent connections, each sends BYTES and checks the
                                  echo byte for byte; prints 'many ok=... done=N'
  discard HOST PORT BYTES         send BYTES, half-close, wait for the FIN; prints the SHA-256
  server PORT                     accept one connection, read to EOF, check the last 32 bytes are
                                  the SHA-256 of the rest; prints 'server ok=... bytes=...'
  inject SRC DST DPORT SPORT N    N rounds of hostile segments to DST:DPORT from SRC:SPORT (raw
                                  socket): bad checksum, bad data offset, truncated header,
                                  out-of-window data, RST with a wrong sequence number, and a SYN
                                  with data; prints 'inject sent=K'
Every mode is bounded in time (TIMEOUT env, default 300 s). CC=<name> sets the congestion
control of every socket (TCP_CONGESTION; root may pick one outside
net.ipv4.tcp_allowed_congestion_control), for like-for-like comparisons.
"""
import hashlib, os, random, selectors, socket, struct, sys, threading, time

TIMEOUT = float(os.environ.get("TIMEOUT", "300"))


def tune(s):
    """Apply the CC environment variable to socket `s` (before connect/listen)."""
    cc = os.environ.get("CC")
    if cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    return s


def connect(host, port):
    s = tune(socket.socket())
    s.settimeout(TIMEOUT)
    s.connect((host, port))
    return s


def data(n, seed=1):
    r = random.Random(seed)
    chunk = 1 << 20
    return b"".join(r.randbytes(min(chunk, n - i)) for i in range(0, n, chunk))


def echo(host, port, nbytes):
    payload = data(nbytes)
    s = connect(host, port)
    print(f"echo local_port={s.getsockname()[1]}", flush=True)
    got = bytearray()
    err = []

    def rd():
        try:
            while len(got) < nbytes:
                b = s.recv(1 << 20)
                if not b:
                    break
                got.extend(b)
        except Exception as e:  # noqa
            err.append(repr(e))

    t = threading.Thread(target=rd)
    t0 = time.time()
    t.start()
    view = memoryview(payload)
    for i in range(0, nbytes, 1 << 20):
        s.sendall(view[i:i + (1 << 20)])
    s.shutdown(socket.SHUT_WR)
    t.join(TIMEOUT)
    dt = time.time() - t0
    ok = bytes(got) == payload
    print(f"echo ok={ok} sent={nbytes} got={len(got)} secs={dt:.2f} "
          f"gbps={nbytes * 8 / dt / 1e9:.3f} sha256={hashlib.sha256(got).hexdigest()} err={err}")
    return ok


def many(host, port, conns, nbytes):
    sel = selectors.DefaultSelector()
    state = {}
    for i in range(conns):
        s = tune(socket.socket())
        s.setblocking(False)
        s.connect_ex((host, port))
        payload = data(nbytes, seed=i + 7)
        state[s] = {"out": memoryview(payload), "sent": 0, "got": bytearray(), "want": payload}
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    done = bad = 0
    deadline = time.time() + TIMEOUT
    while state and time.time() < deadline:
        for key, ev in sel.select(timeout=1):
            s = key.fileobj
            st = state.get(s)
            if st is None:
                continue
            try:
                if ev & selectors.EVENT_WRITE and st["sent"] < nbytes:
                    st["sent"] += s.send(st["out"][st["sent"]:st["sent"] + 65536])
                    if st["sent"] == nbytes:
                        s.shutdown(socket.SHUT_WR)
                        sel.modify(s, selectors.EVENT_READ)
                if ev & selectors.EVENT_READ:
                    b = s.recv(65536)
                    if b:
                        st["got"].extend(b)
                    if not b or len(st["got"]) >= nbytes:
                        if bytes(st["got"]) == st["want"]:
                            done += 1
                        else:
                            bad += 1
                        sel.unregister(s)
                        s.close()
                        del state[s]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                bad += 1
                sel.unregister(s)
                s.close()
                del state[s]
    print(f"many ok={done == conns} done={done} bad={bad} unfinished={len(state)}")
    return done == conns


def discard(host, port, nbytes):
    payload = data(nbytes, seed=3)
    t0 = time.time()
    s = connect(host, port)
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    dt = time.time() - t0
    print(f"discard sent={nbytes} secs={dt:.3f} gbps={nbytes * 8 / dt / 1e9:.3f} "
          f"sha256={hashlib.sha256(payload).hexdigest()}")
    return True


def server(port):
    ls = tune(socket.socket())
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(4)
    ls.settimeout(TIMEOUT)
    print("server listening", flush=True)
    c, _ = ls.accept()
    tune(c)
    c.settimeout(TIMEOUT)
    h = hashlib.sha256()
    tail = b""
    n = 0
    t0 = time.time()
    while True:
        b = c.recv(1 << 20)
        if not b:
            break
        buf = tail + b
        h.update(buf[:-32])
        tail = buf[-32:]
        n += len(b)
    dt = time.time() - t0
    ok = h.hexdigest() == tail.hex()
    print(f"server ok={ok} bytes={n} secs={dt:.2f} gbps={(n - 32) * 8 / dt / 1e9:.3f} sha256={h.hexdigest()}")
    return ok


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def tcp_seg(src, dst, sport, dport, seq, ack, flags, payload=b"", doff=5, good_sum=True, window=65535):
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, window, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(hdr) + len(payload))
    c = csum(pseudo + hdr + payload)
    if not good_sum:
        c ^= 0x5A5A
    return hdr[:16] + struct.pack("!H", c) + hdr[18:] + payload


def inject(src, dst, dport, sport, rounds):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    r = random.Random(99)
    sent = 0
    ACK, RST, SYN, PSH = 0x10, 0x04, 0x02, 0x08
    for _ in range(rounds):
        seq, ack = r.getrandbits(32), r.getrandbits(32)
        segs = [
            tcp_seg(src, dst, sport, dport, seq, ack, ACK | PSH, b"X" * 100, good_sum=False),
            tcp_seg(src, dst, sport, dport, seq, ack, ACK, b"Y" * 40, doff=15),  # offset beyond
            tcp_seg(src, dst, sport, dport, seq, ack, ACK, b"Z" * 8, doff=2),  # offset < 5
            tcp_seg(src, dst, sport, dport, seq, ack, ACK | PSH, b"W" * 500),  # out of window
            tcp_seg(src, dst, sport, dport, seq, 0, RST),  # RST, wrong seq
            tcp_seg(src, dst, sport, dport, seq, 0, SYN, b"S" * 10),  # SYN with data
        ]
        for seg in segs:
            s.sendto(seg, (dst, 0))
            sent += 1
        # Header truncated inside the TCP header (raw IP send of 12 bytes).
        s.sendto(segs[0][:12], (dst, 0))
        sent += 1
        time.sleep(0.002)
    print(f"inject sent={sent}")
    return True


def main():
    a = sys.argv[1:]
    mode = a[0]
    if mode == "echo":
        ok = echo(a[1], int(a[2]), int(a[3]))
    elif mode == "many":
        ok = many(a[1], int(a[2]), int(a[3]), int(a[4]))
    elif mode == "discard":
        ok = discard(a[1], int(a[2]), int(a[3]))
    elif mode == "server":
        ok = server(int(a[1]))
    elif mode == "inject":
        ok = inject(a[1], a[2], int(a[3]), int(a[4]), int(a[5]))
    else:
        print(__doc__)
        sys.exit(2)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
