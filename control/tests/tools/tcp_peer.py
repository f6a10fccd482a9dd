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
  synflood DST DPORT N NET       N SYNs to DST:DPORT from random source addresses in NET (a
                                  /16 such as 198.18.0.0, off-link: the SYN-ACKs go to the
                                  gateway and die there), random ports and sequence numbers
                                  (raw socket, IP_HDRINCL); prints 'synflood sent=N secs=S'
  ooo SRC DST DPORT BASE CONNS SEGS
                                  CONNS hand-made connections from SRC ports BASE.. (raw
                                  sockets; the caller drops the kernel's RSTs for those ports),
                                  each then sends SEGS 1-byte segments out of order (the first
                                  byte is never sent); prints 'ooo conns=C segs=K'
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
    # Goodput is timed from the established connection (as iperf3 does); the handshake's
    # time is reported on its own.
    t1 = time.time()
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    dt = time.time() - t1
    print(f"discard sent={nbytes} secs={dt:.3f} gbps={nbytes * 8 / dt / 1e9:.3f} "
          f"connect_secs={t1 - t0:.3f} sha256={hashlib.sha256(payload).hexdigest()}")
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


def tcp_seg(src, dst, sport, dport, seq, ack, flags, payload=b"", doff=5, good_sum=True, window=65535,
            opts=b""):
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, window, 0, 0) + opts
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


def synflood(dst, dport, n, net):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    r = random.Random(4987)
    base = socket.inet_aton(net)[:2]
    t0 = time.time()
    for _ in range(n):
        src = socket.inet_ntoa(base + bytes([r.randrange(256), r.randrange(1, 255)]))
        tcp = tcp_seg(src, dst, r.randrange(1024, 65536), dport, r.getrandbits(32), 0, 0x02,
                      window=64240)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), r.getrandbits(16), 0, 64, 6, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        s.sendto(ip + tcp, (dst, 0))
    print(f"synflood sent={n} secs={time.time() - t0:.2f}", flush=True)
    return True


def ooo(src, dst, dport, base, conns, segs):
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.settimeout(0.2)
    ACK, SYN = 0x10, 0x02
    mss = struct.pack("!BBH", 2, 4, 1460)
    isn = {}
    ports = list(range(base, base + conns))
    for p in ports:
        syn = tcp_seg(src, dst, p, dport, 1000 * p, 0, SYN, doff=6, window=65535,
                      opts=mss)
        tx.sendto(syn, (dst, 0))
    deadline = time.time() + min(TIMEOUT, 30)
    last = time.time()
    while len(isn) < conns and time.time() < deadline:
        if time.time() - last > 1.0:
            last = time.time()
            for p in ports:  # resend the SYNs still unanswered
                if p not in isn:
                    tx.sendto(tcp_seg(src, dst, p, dport, 1000 * p, 0, SYN, doff=6,
                                      window=65535, opts=mss), (dst, 0))
        try:
            pkt = rx.recv(65535)
        except socket.timeout:
            continue
        ihl = (pkt[0] & 0xF) * 4
        sp, dp, seq, ack, _, flags = struct.unpack("!HHIIBB", pkt[ihl:ihl + 14])
        if sp == dport and dp in ports and flags & (SYN | ACK) == SYN | ACK and dp not in isn:
            isn[dp] = seq
            tx.sendto(tcp_seg(src, dst, dp, dport, 1000 * dp + 1, seq + 1, ACK), (dst, 0))
    sent = 0
    for p, s_isn in isn.items():
        for k in range(segs):
            # Byte 0 of the stream is never sent: everything after it stays out of order.
            seq = (1000 * p + 1 + 1 + 2 * k) & 0xFFFFFFFF
            tx.sendto(tcp_seg(src, dst, p, dport, seq, (s_isn + 1) & 0xFFFFFFFF, ACK, b"o"),
                      (dst, 0))
            sent += 1
    print(f"ooo conns={len(isn)} segs={sent}", flush=True)
    return len(isn) == conns


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
    elif mode == "synflood":
        ok = synflood(a[1], int(a[2]), int(a[3]), a[4])
    elif mode == "ooo":
        ok = ooo(a[1], a[2], int(a[3]), int(a[4]), int(a[5]), int(a[6]))
    elif mode == "inject":
        ok = inject(a[1], a[2], int(a[3]), int(a[4]), int(a[5]))
    else:
        print(__doc__)
        sys.exit(2)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
