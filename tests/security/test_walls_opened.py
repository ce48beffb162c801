"""The walls' tests that run on fixed users, run again where every scope is
opened on demand (issue 41: every isolation test that runs on fixed users
passes on opened scopes too).

test_scopes_opened.py runs the tests that set two scopes against each other
both ways (alice fixed and bob opened, and both opened). The tests here are
one agent against the computer (passwords, loopback, local URLs, the command
table, bad input, the shares of one agent), so they run once, on a computer
with no fixed user at all, where alice and bob are scopes opened with
``scopes/open`` and their minted tokens are the tokens the tests use.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.test_bad_input import (
    test_a_binary_frame_closes_with_a_reason,
    test_a_crafted_host_never_reaches_a_url_handed_back,
    test_a_huge_value_made_to_be_slow_to_redact_is_not,
    test_a_reused_id_in_flight_is_refused,
    test_a_same_site_frame_of_another_origin_is_bounded_too,
    test_a_session_never_attached_is_refused_and_answers_stay_apart,
    test_an_agents_huge_messages_cost_only_its_own_connections,
    test_an_origins_storage_is_bounded_in_every_scope,
    test_malformed_commands_answer_at_once_and_hold_nothing_up,
    test_params_nested_deep_hold_nothing_up,
    test_target_ids_cannot_walk_to_other_chromium_paths,
)
from tests.security.test_extensions_and_targets import (
    test_a_page_launches_no_program_of_the_machine,
    test_agentenv_commands_need_the_control_token,
    test_commands_the_table_refuses_are_refused_with_their_reason,
)
from tests.security.test_loopback import (
    test_a_fresh_tabs_blank_page_reaches_no_inner_port,
    test_a_page_at_the_computers_own_address_reaches_no_inner_port,
    test_no_agent_opens_the_computers_doors_on_any_loopback,
    test_no_page_or_agent_reaches_the_doors_at_the_computers_own_address,
    test_no_page_reaches_the_computers_doors_on_any_loopback,
)
from tests.security.test_passwords import (
    test_a_harness_typing_key_by_key_keeps_the_password_out_of_its_args,
    test_a_password_field_in_a_closed_shadow_root,
    test_a_password_field_under_many_open_shadow_roots,
    test_a_tool_call_header_cannot_smuggle_a_password,
    test_cdp_typing_dropping_and_setting_a_password,
    test_local_storage_values_stay_out_of_the_log,
    test_pixel_ops_typing_a_password,
    test_typing_a_visible_field_is_kept,
)
from tests.security.test_scopes_opened import _opened
from tests.security.test_shares import test_nested_and_list_parameters_write_no_huge_line
from tests.security.test_urls import (
    test_a_pages_own_script_is_stopped_by_chromium,
    test_cdp_commands_open_no_local_page,
    test_json_new_opens_no_local_page,
    test_playwright_cannot_go_to_a_local_page,
)
from tests.support.container import Computer

__all__ = [
    "test_a_binary_frame_closes_with_a_reason",
    "test_a_crafted_host_never_reaches_a_url_handed_back",
    "test_a_fresh_tabs_blank_page_reaches_no_inner_port",
    "test_a_harness_typing_key_by_key_keeps_the_password_out_of_its_args",
    "test_a_huge_value_made_to_be_slow_to_redact_is_not",
    "test_a_page_at_the_computers_own_address_reaches_no_inner_port",
    "test_a_page_launches_no_program_of_the_machine",
    "test_a_pages_own_script_is_stopped_by_chromium",
    "test_a_password_field_in_a_closed_shadow_root",
    "test_a_password_field_under_many_open_shadow_roots",
    "test_a_reused_id_in_flight_is_refused",
    "test_a_same_site_frame_of_another_origin_is_bounded_too",
    "test_a_session_never_attached_is_refused_and_answers_stay_apart",
    "test_a_tool_call_header_cannot_smuggle_a_password",
    "test_agentenv_commands_need_the_control_token",
    "test_an_agents_huge_messages_cost_only_its_own_connections",
    "test_an_origins_storage_is_bounded_in_every_scope",
    "test_cdp_commands_open_no_local_page",
    "test_cdp_typing_dropping_and_setting_a_password",
    "test_commands_the_table_refuses_are_refused_with_their_reason",
    "test_json_new_opens_no_local_page",
    "test_local_storage_values_stay_out_of_the_log",
    "test_malformed_commands_answer_at_once_and_hold_nothing_up",
    "test_nested_and_list_parameters_write_no_huge_line",
    "test_no_agent_opens_the_computers_doors_on_any_loopback",
    "test_no_page_or_agent_reaches_the_doors_at_the_computers_own_address",
    "test_no_page_reaches_the_computers_doors_on_any_loopback",
    "test_params_nested_deep_hold_nothing_up",
    "test_pixel_ops_typing_a_password",
    "test_playwright_cannot_go_to_a_local_page",
    "test_target_ids_cannot_walk_to_other_chromium_paths",
    "test_typing_a_visible_field_is_kept",
]


@pytest.fixture(scope="module")
def target(image: str) -> Iterator[Computer]:
    """alice and bob both opened on demand, on a computer with no fixed user."""
    with _opened(image, "opened") as running:
        yield running
