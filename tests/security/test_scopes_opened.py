"""The isolation tests of test_scopes.py, test_files.py, test_causes.py,
test_traces.py and test_names.py that run on the shared computer of fixed users, run again on
scopes opened on demand (issue 41: every isolation test that runs on fixed
users passes on opened scopes too).

The same tests, collected here with a ``target`` of this module's: a computer
with ``AGENTENV_MAX_SCOPES``, where the users the tests name are scopes
opened with ``scopes/open`` (their minted tokens kept as the users' tokens):

- ``fixed-and-opened``: alice is a fixed user (the home scope), bob an
  opened scope;
- ``opened``: no fixed user at all; alice and bob are both opened scopes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.security.test_causes import test_a_workers_act_is_no_cause_in_another_scope
from tests.security.test_files import (
    test_a_file_from_the_downloads_folder_is_fine,
    test_a_scope_reaches_no_other_scopes_downloads,
    test_downloads_land_in_the_downloads_folder_after_a_client_moved_them,
    test_dropped_files_stay_in_the_downloads_folder,
    test_file_inputs_take_no_file_outside_the_downloads_folder,
)
from tests.security.test_names import (
    test_a_role_header_never_renames_an_agent,
    test_a_user_query_parameter_never_renames_a_cdp_agent,
    test_an_mcp_caller_is_its_token,
    test_an_mcp_session_serves_the_caller_who_made_it,
    test_no_granted_token_is_on_any_command_line,
)
from tests.security.test_scopes import (
    test_a_reset_leaves_nothing_of_the_contexts_agents_made,
    test_a_tab_type_id_reaches_only_its_own_scopes_page,
    test_another_scope_cannot_clear_the_home_scopes_storage,
    test_playwright_in_two_scopes_at_once,
    test_two_scopes_see_and_reach_nothing_of_each_other,
)
from tests.security.test_traces import (
    MAX_S,
    test_a_gzip_stream_and_what_cannot_be_kept,
    test_one_agent_starting_again_at_each_end_lets_others_trace,
    test_playwright_start_tracing_in_two_scopes,
    test_the_relay_ends_a_trace_at_its_bound,
    test_two_scopes_trace_at_once_each_its_own,
)
from tests.support.container import USERS, Computer, computer

__all__ = [
    "test_a_file_from_the_downloads_folder_is_fine",
    "test_a_gzip_stream_and_what_cannot_be_kept",
    "test_a_reset_leaves_nothing_of_the_contexts_agents_made",
    "test_a_role_header_never_renames_an_agent",
    "test_a_scope_reaches_no_other_scopes_downloads",
    "test_a_tab_type_id_reaches_only_its_own_scopes_page",
    "test_a_user_query_parameter_never_renames_a_cdp_agent",
    "test_a_workers_act_is_no_cause_in_another_scope",
    "test_an_mcp_caller_is_its_token",
    "test_an_mcp_session_serves_the_caller_who_made_it",
    "test_another_scope_cannot_clear_the_home_scopes_storage",
    "test_downloads_land_in_the_downloads_folder_after_a_client_moved_them",
    "test_dropped_files_stay_in_the_downloads_folder",
    "test_file_inputs_take_no_file_outside_the_downloads_folder",
    "test_no_granted_token_is_on_any_command_line",
    "test_one_agent_starting_again_at_each_end_lets_others_trace",
    "test_playwright_in_two_scopes_at_once",
    "test_playwright_start_tracing_in_two_scopes",
    "test_the_relay_ends_a_trace_at_its_bound",
    "test_two_scopes_see_and_reach_nothing_of_each_other",
    "test_two_scopes_trace_at_once_each_its_own",
]


KINDS = ["fixed-and-opened", "opened"]


@contextmanager
def _opened(
    image: str, kind: str, env: dict[str, str] | None = None, **kwargs: Any
) -> Iterator[Computer]:
    """alice and bob, as the tests name them, bob (and alice) opened on demand."""
    fixed = {"alice": USERS["alice"]} if kind == "fixed-and-opened" else {}
    # Two may be opened, and eight Playwright MCPs: each caller's share of
    # them (the fixed users and the scopes that may be opened) is 2 or more,
    # as on the fixed users' computer the tests were written for.
    settings = {"AGENTENV_MAX_SCOPES": "2", "AGENTENV_MCP_SESSIONS": "8", **(env or {})}
    with computer(image, users=fixed, env=settings, **kwargs) as running:
        running.serve_site()
        for name in ("alice", "bob"):
            if name not in fixed:
                made = running.op("scopes/open", {"name": name})
                assert made["scope"] == name, made
                running.users[name] = made["token"]
        yield running


@pytest.fixture(scope="module", params=KINDS)
def target(image: str, request: pytest.FixtureRequest) -> Iterator[Computer]:
    with _opened(image, request.param) as running:
        yield running


@pytest.fixture(scope="module", params=KINDS)
def traced(image: str, request: pytest.FixtureRequest) -> Iterator[Computer]:
    """As test_traces.py's: the trace bound short."""
    with _opened(image, request.param, {"AGENTENV_TRACE_MAX_S": str(MAX_S)}) as running:
        yield running
