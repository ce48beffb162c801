"""More of the one-agent isolation tests that run on fixed users, run again
where every scope is opened on demand (issue 41: every isolation test that
runs on fixed users passes on opened scopes too): the secrets in what an
agent sends (test_secrets.py), and the acts that change a page, on the
record and framed in a recording (test_acting.py).

As test_walls_opened.py does: a computer with no fixed user, where alice and
bob are scopes opened with ``scopes/open`` and their minted tokens are the
tokens the tests use.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.test_acting import (
    ROOT,
    test_what_changes_a_page_is_acting_and_framed,
    test_what_undoes_a_sessions_settings_is_acting,
)
from tests.security.test_scopes_opened import _opened
from tests.security.test_secrets import (
    test_a_browser_context_takes_no_proxy_or_universal_access_from_an_agent,
    test_a_new_target_is_a_tab_on_the_record,
    test_a_paused_request_goes_on_to_no_other_url,
    test_headers_and_cookies_in_odd_shapes_are_withheld,
    test_no_permission_opens_the_local_network_to_pages,
    test_url_credentials_are_redacted_in_every_form_chromium_reads,
    test_url_credentials_through_the_navigate_op,
)
from tests.support.container import Computer

__all__ = [
    "test_a_browser_context_takes_no_proxy_or_universal_access_from_an_agent",
    "test_a_new_target_is_a_tab_on_the_record",
    "test_a_paused_request_goes_on_to_no_other_url",
    "test_headers_and_cookies_in_odd_shapes_are_withheld",
    "test_no_permission_opens_the_local_network_to_pages",
    "test_url_credentials_are_redacted_in_every_form_chromium_reads",
    "test_url_credentials_through_the_navigate_op",
    "test_what_changes_a_page_is_acting_and_framed",
    "test_what_undoes_a_sessions_settings_is_acting",
]


@pytest.fixture(scope="module")
def target(image: str) -> Iterator[Computer]:
    """alice and bob both opened on demand, on a computer with no fixed user
    (recordings may be written under ROOT, as test_acting.py's)."""
    with _opened(image, "opened", {"AGENTENV_UPLOAD_ROOTS": ROOT}) as running:
        running.exec("mkdir", "-p", ROOT, user="agentenv")
        yield running
