"""What `ss -ti` says about a socket's ECN (tcpeval.cc.parse_ss, ss_algorithms): the flags
`ecn` (negotiated) and `ecnseen` (a CE-marked segment arrived) stand before the
algorithm's name on the info line, and neither is taken for it."""
from __future__ import annotations

import subprocess
import uuid

import pytest

from tcpeval.cc import ecn_response, parse_ss, ss_algorithms

# iproute2's layout (-tinoH state established): one line per socket (with -o, its timer), an
# indented info line
SS_OUT = """\
0      0          10.0.1.1:5201          10.0.2.1:40312 timer:(on,204ms,0)
\t ts sack ecn ecnseen dctcp_tev wscale:7,7 rto:204 rtt:2.281/0.07 mss:1448 cwnd:94
0      0          10.0.1.1:5201          10.0.2.1:40310
\t ts sack ecn cubic wscale:7,7 rto:204 rtt:2.1/0.1 mss:1448 cwnd:10
0      0          10.0.1.1:44012         10.0.2.1:5201
\t ts sack bbr wscale:7,7 rto:204 rtt:10.2/0.3 mss:1448 cwnd:120
0      1299400    10.0.1.1:46022         10.0.2.1:5201 timer:(on,012ms,0)
\t sack ecnseen dctcp_tev wscale:7,7 rto:204 rtt:2.1/0.1 mss:1448 cwnd:10
"""


def test_the_ecn_flags_are_read_and_the_algorithm_after_them():
    flows = parse_ss(SS_OUT)
    # the last: ECT segments arrived (a DCTCP sender's SYN is ECT) but ECN was not negotiated
    assert [(f["algorithm"], f["ecn"], f["ecn_seen"]) for f in flows] == [
        ("dctcp_tev", True, True), ("cubic", True, False), ("bbr", False, False), ("dctcp_tev", False, True)]
    assert flows[2]["local"] == "10.0.1.1:44012" and flows[2]["peer"] == "10.0.2.1:5201"


def test_each_algorithm_answers_a_mark_as_its_kind_does():
    assert [ecn_response(n) for n in ("reno", "cubic", "cubic316", "nv_tev", "dctcp_tev", "dctcp", "bbr")] == [
        "as_loss", "as_loss", "as_loss", "as_loss", "marked_fraction", "marked_fraction", "ignores"]


@pytest.mark.root
@pytest.mark.parametrize("tcp_ecn, negotiated", [(1, True), (0, False)])
def test_ss_reads_what_a_real_connection_negotiated(tcp_ecn, negotiated):
    ns = f"tevss{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        run = ["ip", "netns", "exec", ns]
        subprocess.run(run + ["ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(run + ["sysctl", "-qw", f"net.ipv4.tcp_ecn={tcp_ecn}"], check=True)
        # a server and a client in the namespace, connected and idle while ss looks
        script = ("import socket,sys,time\n"
                  "s=socket.socket();s.bind(('127.0.0.1',5399));s.listen()\n"
                  "c=socket.create_connection(('127.0.0.1',5399));a,_=s.accept()\n"
                  "print('up',flush=True);sys.stdin.read()\n")
        proc = subprocess.Popen(run + ["python3", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline().strip() == "up"
            flows = ss_algorithms(ns, 5399)
        finally:
            proc.stdin.close()
            proc.wait(timeout=10)
        assert len(flows) == 2 and all(f["algorithm"] for f in flows)
        assert [f["ecn"] for f in flows] == [negotiated, negotiated]
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
