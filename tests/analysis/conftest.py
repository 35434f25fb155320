import pytest

from tcpeval import spec
from tcpeval.analysis import synthetic


@pytest.fixture(scope="session")
def design():
    return spec.load_design()


@pytest.fixture(scope="session")
def smoke_conditions(design):
    return synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=3.0)


@pytest.fixture
def smoke_raw(tmp_path, smoke_conditions):
    raw = tmp_path / "raw"
    synthetic.write_traces(smoke_conditions, raw, flag_every=5)
    return raw
