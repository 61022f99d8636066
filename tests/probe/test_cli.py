"""`mrtr-proxy probe` argument handling (no I/O: bad arguments never reach the network)."""

from __future__ import annotations

import pytest

from proxy.cli.main import main
from proxy.probe.cli import parse_env, parse_headers


def test_parse_headers_and_env() -> None:
    assert parse_headers(["Authorization: Bearer a:b", "X-T:1"]) == {
        "Authorization": "Bearer a:b",
        "X-T": "1",
    }
    assert parse_env(["A=1", "B=x=y"]) == {"A": "1", "B": "x=y"}
    with pytest.raises(ValueError, match="expected 'Name: value'"):
        parse_headers(["nocolon"])
    with pytest.raises(ValueError, match="expected NAME=value"):
        parse_env(["=1"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give a URL, or -- COMMAND ARGS… for a stdio server"),
        (["--args", "[1]", "http://x/mcp"], "--args must be a JSON object"),
        (["--args", "{", "http://x/mcp"], "--args is not JSON: '{'"),
        (["--timeout", "0", "http://x/mcp"], "--timeout must be positive"),
        (["--header", "bad", "http://x/mcp"], "--header 'bad': expected 'Name: value'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["probe", *argv]) == 2
    assert capsys.readouterr().err == f"mrtr-proxy probe: {message}\n"
