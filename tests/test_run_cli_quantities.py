"""`tcpeval run --rate/--buffer` read rates and sizes with the design's grammar
(tcpeval.quantity): what a design accepts, the command line accepts, and the same errors."""
import pytest

from tcpeval import quantity
from tcpeval.backends.cli import parse_bytes, parse_rate
from tcpeval.errors import UserError


@pytest.mark.parametrize("text", ["9.5G", "9.5gbit", "9500M", "9.5e9", "9.5Gbps", "9.5Gbit/s"])
def test_a_rate_reads_as_in_a_design(text):
    assert parse_rate(text) == quantity.rate(text) == 9.5e9


@pytest.mark.parametrize("text", ["fast", "1GB", "9.5 G bit"])
def test_a_rate_that_is_not_one_names_the_option_and_the_forms(text):
    with pytest.raises(UserError, match=r"--rate: .* accepted: a number of bit/s"):
        parse_rate(text)


def test_a_rate_must_be_positive():
    with pytest.raises(UserError, match="must be > 0"):
        parse_rate("0")


@pytest.mark.parametrize("text, want", [("65536", 65536), ("64KiB", 65536), ("4M", 4_000_000),
                                        ("16MiB", 16 * 2**20), ("2MB", 2_000_000)])
def test_a_buffer_reads_as_in_a_design(text, want):
    assert parse_bytes(text) == quantity.size(text) == want


def test_bdp_leaves_the_buffer_to_the_path_and_a_bad_size_names_the_forms():
    assert parse_bytes("bdp") is None and parse_bytes(" BDP ") is None
    with pytest.raises(UserError, match=r"--buffer: .* accepted: .*\(or bdp\)"):
        parse_bytes("big")


def _adhoc(*extra: str):
    import argparse

    from tcpeval.backends.cli import _condition, add_parsers
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers())
    args = parser.parse_args(["run", "--variant", "dctcp", "--variant", "cubic", "--rtt", "2", "--drop", "0",
                                      "--duration", "5", "--out", "/tmp/x", *extra])
    return _condition(args)[0]


def test_ecn_and_its_queues_reach_an_adhoc_condition():
    cond = _adhoc("--ecn", "30k", "--ecn-queues", "2")
    assert cond.ecn_threshold_bytes == 30_000 and cond.ecn_queues == 2
    assert _adhoc().ecn_threshold_bytes is None and _adhoc().ecn_queues is None


def test_a_second_queue_without_marking_and_a_bad_threshold_name_the_option():
    with pytest.raises(UserError, match=r"--ecn-queues: a second queue .* needs ECN marking in the first \(--ecn\)"):
        _adhoc("--ecn-queues", "2")
    with pytest.raises(UserError, match=r"--ecn: .* accepted"):
        _adhoc("--ecn", "lots")
