"""When a call becomes a task (proxy/tasks/policy.py), and the extension's capability rules."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.config import TasksConfig
from proxy.tasks.policy import Plan, TaskPolicy, advertise, declares_tasks, missing_capability

EXT = "io.modelcontextprotocol/tasks"
CAPS = "io.modelcontextprotocol/clientCapabilities"


@pytest.mark.parametrize(
    ("config", "tool", "plan"),
    [
        (TasksConfig(policy="never"), "t", None),
        (TasksConfig(policy="always"), "t", Plan(0.0, True)),
        (TasksConfig(policy="on_elicit"), "t", Plan(None, True)),
        (TasksConfig(policy="after_ms", after_ms=2500), "t", Plan(2.5, False)),
        (TasksConfig(policy="never", tools=("t",)), "t", Plan(0.0, True)),
        (TasksConfig(policy="after_ms", tools=("t",)), "t", Plan(0.0, True)),
        (TasksConfig(policy="never", tools=("t",)), "u", None),
    ],
)
def test_plans(config: TasksConfig, tool: str, plan: Plan | None) -> None:
    assert TaskPolicy(config).plan(tool) == plan


def test_enabled_and_forced() -> None:
    assert not TaskPolicy(TasksConfig(policy="never")).enabled
    assert TaskPolicy(TasksConfig(policy="never", tools=("t",))).enabled
    assert TaskPolicy(TasksConfig()).enabled
    policy = TaskPolicy(TasksConfig(tools=("t",)))
    assert policy.forced("t") and not policy.forced("u") and not policy.forced(None)


@pytest.mark.parametrize(
    ("params", "declared"),
    [
        ({"_meta": {CAPS: {"extensions": {EXT: {}}}}}, True),
        ({"_meta": {CAPS: {"extensions": {EXT: {"x": 1}}}}}, True),
        ({"_meta": {CAPS: {"extensions": {EXT: True}}}}, False),
        ({"_meta": {CAPS: {"extensions": {"other/ext": {}}}}}, False),
        ({"_meta": {CAPS: {"tasks": {}}}}, False),  # the 2025-11-25 capability is not the extension
        ({"_meta": {CAPS: {}}}, False),
        ({"_meta": {}}, False),
        ({}, False),
        ({"_meta": "x"}, False),
    ],
)
def test_declares_tasks(params: dict[str, Any], declared: bool) -> None:
    assert declares_tasks(params) is declared


def test_advertise() -> None:
    upstream = {"tools": {"listChanged": False}, "tasks": {"list": {}}, "extensions": {"a/b": {}}}
    assert advertise(upstream, enabled=True) == {
        "tools": {"listChanged": False},
        "extensions": {"a/b": {}, EXT: {}},
    }
    assert advertise(upstream, enabled=False) == {"tools": {"listChanged": False}, "extensions": {"a/b": {}}}
    assert advertise({}, enabled=True) == {"extensions": {EXT: {}}}


def test_missing_capability_names_the_extension() -> None:
    error = missing_capability("tasks/get")
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": {"extensions": {EXT: {}}}}
    assert "tasks/get" in error.message
