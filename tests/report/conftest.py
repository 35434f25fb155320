import json

import pytest
from report_helpers import CC_PARAMS_FIXTURE, build_results

from tcpeval import spec


@pytest.fixture(scope="session")
def design():
    return spec.load_design()


@pytest.fixture(scope="session")
def smoke_results(tmp_path_factory):
    return build_results(tmp_path_factory.mktemp("smoke"))


@pytest.fixture(scope="session")
def partial_results(tmp_path_factory):
    return build_results(tmp_path_factory.mktemp("partial"), fraction=0.34, flag_every=0)


@pytest.fixture
def cc_params_fixture():
    return CC_PARAMS_FIXTURE


@pytest.fixture
def cc_params_file(tmp_path):
    path = tmp_path / "cc_params.json"
    path.write_text(json.dumps(CC_PARAMS_FIXTURE))
    return path
