"""The session kernel's activity as the provisioner reports it (service/kernel_activity.Activity).

The real kernels are in tests/service/test_sessions.py (embedded), test_remote_sessions.py and
test_kubernetes_sessions.py; this is the order of reports for the cases they cannot time.
"""

from __future__ import annotations

from jupyter_gpuplat.service.sessions.kernel_activity import Activity


def test_a_cell_seen_before_the_probe_is_answered_reports_ready_then_busy_then_idle() -> None:
    a = Activity("ready")
    assert a.status("execute_request", "cell-1", "busy") == ["ready", "busy"]
    assert a.probe_replied() == []
    assert a.probe_echoed() == []  # answered after the cell started: still busy
    assert a.status("execute_request", "cell-1", "idle") == ["idle"]


def test_the_probe_answered_first_is_ready_and_idle_and_pings_are_not_activity() -> None:
    a = Activity("ready")
    assert a.status("kernel_info_request", "probe", "busy") == []
    assert a.probe_echoed() == []
    assert a.probe_replied() == ["ready"]
    assert a.status("comm_info_request", "c", "busy") == []
    assert a.status("execute_request", "cell-1", "busy") == ["busy"]


def test_an_unanswered_probe_is_a_cell_whose_busy_was_missed_until_the_answer_comes() -> None:
    a = Activity("restarted")
    assert a.probe_overdue() == ["restarted", "busy"]
    assert a.status("execute_request", "missed", "idle") == []  # its busy was never seen
    assert a.probe_replied() == []
    assert a.probe_echoed() == ["idle"]


def test_queued_cells_keep_it_busy_until_the_last_ends() -> None:
    a = Activity("ready")
    a.probe_replied(), a.probe_echoed()
    assert a.status("execute_request", "c1", "busy") == ["busy"]
    assert a.status("execute_request", "c2", "busy") == []
    assert a.status("execute_request", "c1", "idle") == []
    assert a.status("execute_request", "c2", "idle") == ["idle"]


def test_a_reply_without_its_iopub_status_is_not_an_answer() -> None:
    """The subscription may not be live yet (ZeroMQ's slow joiner): a cell started after the probe
    would have its busy status lost and count as idle for its whole run. Until the probe's own status
    comes on IOPub it is probed again, and an overdue probe keeps the kernel busy."""
    a = Activity("ready")
    assert a.probe_replied() == []  # no echo: not known to be up and idle yet
    assert a.probe_overdue() == ["ready", "busy"]
    a.probe_again()
    assert a.probe_replied() == [] and a.busy  # still unanswered: busy
    assert a.probe_echoed() == ["idle"]
