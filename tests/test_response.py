"""The algorithms' response model (tcpeval.response) against the published closed forms:
with periodic loss and a receiver that ACKs every segment -- what those forms assume --
it must reproduce Mathis (Reno), RFC 3649 (HighSpeed), RFC 8312 (CUBIC) and the
Scalable cycle; on the paper's path (random loss, delayed ACKs) Reno stays near Mathis,
as the validation campaign's runs did, and a loss-free path gives the link."""
from __future__ import annotations

import math

import pytest

from tcpeval import mathis, response
from tcpeval.condition import MSS_BYTES

LINK = 9.5e9


def _window(variant, rtt_ms, p):
    """The model's mean window (segments) under the closed forms' assumptions."""
    r = response.response(variant, rtt_ms, p, LINK, packets_per_ack=1, periodic=True)
    assert not r.link_limited, "a closed form holds where the loss, not the link, limits"
    return r.mean_window


@pytest.mark.parametrize("rtt_ms, p", [(24.2, 1e-5), (6.2, 1e-6)])
def test_reno_under_periodic_loss_is_mathis(rtt_ms, p):
    assert _window("reno", rtt_ms, p) == pytest.approx(math.sqrt(1.5 / p), rel=0.03)


@pytest.mark.parametrize("p", [1e-5, 1e-6])
def test_highspeed_follows_rfc_3649_as_the_kernels_band_table_rounds_it(p):
    # the port's table (read from cc/src/highspeed316.c) rounds a(w) up to its band's and
    # b(w) down: a few per cent above the RFC's continuous w = 0.12 / p^0.835
    ratio = _window("highspeed", 24.2, p) / response.hstcp_rfc_window(p)
    assert 1.0 <= ratio <= 1.15


@pytest.mark.parametrize("rtt_ms, p", [(24.2, 1e-7), (12.2, 1e-6)])
def test_cubic_in_its_cubic_region_follows_rfc_8312(rtt_ms, p):
    c, beta, rtt_s = 0.4, 0.7, rtt_ms / 1e3
    closed = (c * (3 + beta) / (4 * (1 - beta))) ** 0.25 * rtt_s ** 0.75 / p ** 0.75
    # the port counts time in 4-ms jiffies and whole-ms minimum RTTs and truncates
    # C (t - K)^3 to whole segments: 0.94-1.10 of the continuous form at these points
    assert _window("cubic", rtt_ms, p) == pytest.approx(closed, rel=0.12)


def test_scalable_follows_its_multiplicative_cycle():
    # Kelly's rule with Linux's constants: +1/50 a segment, -1/8 on loss. A cycle of 1/p
    # segments climbs from 7W/8 to W in ln(8/7)/ln(1.02) rounds (sum of windows W/8 / 0.02
    # = 6.25 W), plus one recovery round at 7W/8 that does not grow -- the closed form
    # (Kelly 2003: W = a / (b p)) leaves that round out, which at a 7-round cycle is 13 %.
    rounds = math.log(8 / 7) / math.log(1.02) + 1
    p = 1e-5
    peak = (1 / p) / (6.25 + 7 / 8)
    assert _window("scalable", 24.2, p) == pytest.approx(peak * (6.25 + 7 / 8) / rounds, rel=0.05)


@pytest.mark.parametrize("rtt_ms, p", [(0.2, 1e-4), (0.2, 1e-3)])
def test_reno_on_the_papers_path_is_near_mathis(rtt_ms, p):
    # random loss, delayed ACKs: Mathis' C = 0.87; random loss sits a little above it
    got = response.response("reno316", rtt_ms, p, LINK).throughput_bps
    assert got / mathis.throughput_bps(rtt_ms, p) == pytest.approx(1.03, abs=0.06)


def test_a_path_without_loss_gives_the_links_payload_rate():
    payload = LINK * MSS_BYTES / (MSS_BYTES + response.HEADER_BYTES)     # 9.16 of 9.5 Gbit/s
    for variant in response.VARIANTS:
        r = response.response(variant, 6.2, 0.0, LINK)
        assert r.throughput_bps == pytest.approx(payload, rel=1e-9) and r.link_limited, variant


def test_the_window_never_exceeds_bdp_plus_buffer():
    r = response.response("scalable", 0.2, 1e-6, LINK)
    bdp = LINK / ((MSS_BYTES + response.HEADER_BYTES) * 8) * 0.2e-3
    assert r.mean_window <= 2 * bdp and r.link_limited


def test_an_unknown_variant_is_named():
    with pytest.raises(ValueError, match="no response model for variant 'vegas'"):
        response.response("vegas", 0.2, 1e-4, LINK)


def test_the_command_gives_one_condition_and_names_what_is_wrong(capsys):
    from tcpeval.cli import main
    assert main(["response", "--rtt", "0.2", "--drop", "1e-4", "--variant", "reno", "--variant", "bic"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("reno") and "Gbit/s" in out[0] and "loss events" in out[0]
    assert out[1].startswith("bic") and "link-limited" in out[1]
    assert main(["response", "--rtt", "0.2"]) == 2
    assert "give --rtt and --drop" in capsys.readouterr().err
    assert main(["response", "--rtt", "0.2", "--drop", "1e-4", "--rate", "9.5GB"]) == 2
    assert "--rate: '9.5GB' is not a rate" in capsys.readouterr().err


def test_the_command_checks_each_finding_on_the_model_at_a_campaigns_grid(capsys):
    from tcpeval.cli import main
    from tcpeval.report.claims import VERDICTS
    assert main(["response", "--claims", "paper/claims.yaml", "--campaign", "smoke"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(any(line.startswith(v) for v in VERDICTS) for line in lines)
    assert not any("\\" in line or "$" in line for line in lines)      # plain text, not LaTeX
    assert main(["response", "--claims", "paper/claims.yaml", "--campaign", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err
