"""RemoteService when the model service is not there: the page waits, calls fail clearly, nothing crashes."""

from __future__ import annotations

import pytest

from model_service import SamplingSettings
from model_service.deploy.remote import RemoteService
from model_service.models.switching import ServiceNotReady
from model_service.records import validation
from tests.conftest import free_port


def test_an_absent_service_is_a_waiting_status_and_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    remote = RemoteService(url, connect_timeout=1.0)
    status = remote.status
    assert not status.ready and status.error is None and url in status.message  # the header says it waits
    assert not remote.wait(0.2).ready
    with pytest.raises(ServiceNotReady, match="waiting for the model service"):
        _ = remote.service
    with pytest.raises(validation.Unavailable) as e:
        remote.generate("Hello", SamplingSettings(seed=1), 4)
    assert e.value.key == "service_away" and url in str(e.value)
    with pytest.raises(validation.Unavailable):
        remote.trace("Hello")


def test_the_service_flag_takes_only_http_urls():
    import app

    with pytest.raises(SystemExit, match="--service must be an http"):
        app.parse_args(["--service", "javascript:alert(1)"])
    args = app.parse_args(["--service", "http://gpu-box:8000"])
    assert args.service == "http://gpu-box:8000"
