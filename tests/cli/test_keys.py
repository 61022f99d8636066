"""Keys fail loudly, `keygen --out`, unknown MRTR_PROXY_* variables, `--version`, `check-config --effective`
(proxy/cli/keys.py), through the real CLI process where the behaviour is the process's."""

from __future__ import annotations

import sys
from pathlib import Path

import peers
import pytest
import yaml

from proxy.cli.keys import effective_yaml
from proxy.config import Config, UpstreamConfig
from proxy.handle import generate_key_b64, load_keys

PROXY = [sys.executable, "-m", "proxy"]
UP = "upstreams: [{name: a, url: 'http://127.0.0.1:1/mcp', headers: {x-api-key: hunter2-static}}]\n"
pytestmark = pytest.mark.asyncio(loop_scope="session")


def _config(tmp_path: Path, keys: str) -> Path:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"keys: {keys}\n{UP}")
    return cfg


async def test_keygen_out_writes_0600_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "mrtr-key-0"
    run = await peers.run_once([*PROXY, "keygen", "--out", str(out)], limit_s=30)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""  # the key goes to the file only
    assert out.stat().st_mode & 0o777 == 0o600
    (key,) = load_keys(files=[out])
    first = out.read_text()
    again = await peers.run_once([*PROXY, "keygen", "--out", str(out)], limit_s=30)
    assert again.returncode == 1
    assert "exists; not replaced (--force replaces it)" in again.stderr
    assert out.read_text() == first
    out.chmod(0o644)
    forced = await peers.run_once([*PROXY, "keygen", "--out", str(out), "--force"], limit_s=30)
    assert forced.returncode == 0, forced.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    assert load_keys(files=[out])[0].kid != key.kid


async def test_keygen_out_into_a_missing_directory_says_so(tmp_path: Path) -> None:
    run = await peers.run_once([*PROXY, "keygen", "--out", str(tmp_path / "no" / "k")], limit_s=30)
    assert run.returncode == 1
    assert f"cannot write {tmp_path / 'no' / 'k'}: No such file or directory" in run.stderr


async def test_serve_with_an_unset_keys_env_variable_is_a_start_up_error(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "{env: [MRTR_TEST_KEY_TYPO]}")
    run = await peers.run_once([*PROXY, "serve", "--config", str(cfg), "--listen", "127.0.0.1:1"], limit_s=30)
    assert run.returncode == 2
    assert "keys.env: environment variable MRTR_TEST_KEY_TYPO is unset or empty" in run.stderr
    assert "keys.ephemeral" not in run.stderr + run.stdout  # never falls back to a key nobody else has
    empty = await peers.run_once(
        [*PROXY, "serve", "--config", str(cfg), "--listen", "127.0.0.1:1"],
        limit_s=30,
        env={"MRTR_TEST_KEY_TYPO": "  "},
    )
    assert empty.returncode == 2
    assert "MRTR_TEST_KEY_TYPO is unset or empty" in empty.stderr


async def test_check_config_loads_and_counts_keys_without_printing_them(tmp_path: Path) -> None:
    key = tmp_path / "k"
    secret = generate_key_b64()
    key.write_text(secret)
    key.chmod(0o600)
    cfg = _config(tmp_path, f"{{files: ['{key}'], env: [MRTR_PROXY_KEY_NEXT]}}")
    run = await peers.run_once(
        [*PROXY, "check-config", str(cfg)], limit_s=30, env={"MRTR_PROXY_KEY_NEXT": generate_key_b64()}
    )
    assert run.returncode == 0, run.stderr
    assert "keys: 2 key(s) loaded" in run.stdout
    assert secret not in run.stdout + run.stderr
    assert "warning" not in run.stderr  # MRTR_PROXY_KEY_NEXT is named by keys.env: not unknown
    key.unlink()
    missing = await peers.run_once([*PROXY, "check-config", str(cfg)], limit_s=30)
    assert missing.returncode == 2
    assert f"keys: key from {key}: cannot read (No such file or directory)" in missing.stderr


async def test_readable_key_files_and_unknown_variables_are_warned_about(tmp_path: Path) -> None:
    key = tmp_path / "k"
    key.write_text(generate_key_b64())
    key.chmod(0o604)  # world-readable
    cfg = _config(tmp_path, f"{{files: ['{key}']}}")
    env = {"MRTR_PROXY_LISTN": "127.0.0.1:9"}  # a typo of MRTR_PROXY_LISTEN
    run = await peers.run_once([*PROXY, "check-config", str(cfg)], limit_s=30, env=env)
    assert run.returncode == 0, run.stderr
    assert f"warning: key file {key} (mode 0604) is readable by others: chmod 600 it" in run.stderr
    assert (
        "warning: MRTR_PROXY_LISTN is not a setting (known: MRTR_PROXY_LISTEN, MRTR_PROXY_UPSTREAM"
        in run.stderr
    )
    async with peers.run_peer(
        "mrtr-proxy",
        lambda p: [
            *PROXY,
            "serve",
            "--config",
            str(cfg),
            "--listen",
            f"127.0.0.1:{p}",
            "--log-format",
            "json",
        ],
        env=env,
    ) as peer:
        log = peer.log_text()
    assert '"keys.file_readable_by_others"' in log
    assert '"config.unknown_env"' in log
    key.chmod(0o600)
    quiet = await peers.run_once([*PROXY, "check-config", str(cfg)], limit_s=30)
    assert "readable by others" not in quiet.stderr


async def test_version() -> None:
    run = await peers.run_once([*PROXY, "--version"], limit_s=30)
    assert run.returncode == 0
    assert run.stdout.strip() == "mrtr-proxy 0.1.0"


async def test_check_config_effective_prints_the_merged_configuration_redacted(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        UP + "calls: {gather_window_ms: 50}\nlisten: {port: 1234}\n"
        "tracing: {otlp_endpoint: 'http://user:otlp-pass@collector:4318/v1?api_key=otlp-key&x=1'}\n"
    )
    env = {"MRTR_PROXY_LOG_LEVEL": "debug", "MRTR_PROXY_LISTEN": "127.0.0.1:9999"}
    argv = [*PROXY, "check-config", "--effective", str(cfg), "--log-format", "json"]
    run = await peers.run_once(argv, limit_s=30, env=env)
    assert run.returncode == 0, run.stderr
    for secret in ("hunter2", "otlp-pass", "otlp-key"):
        assert secret not in run.stdout
    doc = yaml.safe_load(run.stdout)  # YAML only: the keys note went to stderr
    assert "keys: no key configured" in run.stderr
    assert doc["logging"] == {"level": "debug", "format": "json"}  # from the environment, from the flag
    assert doc["listen"]["port"] == 9999  # the variable over the file
    assert doc["upstreams"][0]["headers"] == {"x-api-key": "<redacted>"}
    assert doc["upstreams"][0]["pool"]["max_sessions"] == 1024  # defaults included
    assert doc["upstreams"][0]["era"] == "auto"  # probed at run time (/readyz and /metrics show the verdict)
    assert doc["calls"]["gather_window_ms"] == 50
    assert doc["admin"] == {"listen": None, "token_file": None}  # a path names the secret: shown
    assert doc["tracing"]["otlp_endpoint"] == "http://<redacted>@collector:4318/v1?api_key=<redacted>&x=1"


async def test_check_config_effective_output_feeds_back_into_check_config(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "{}")  # no key: the note that once led stdout and broke the YAML
    argv = [*PROXY, "check-config", "--effective", str(cfg)]
    first = await peers.run_once(argv, limit_s=30)
    assert first.returncode == 0, first.stderr
    assert first.stderr == "keys: no key configured: an ephemeral key at start\n"
    out = tmp_path / "out.yaml"
    out.write_text(first.stdout)  # check-config --effective FILE > out.yaml
    assert yaml.safe_load(out.read_text())["upstreams"][0]["name"] == "a"
    plain = await peers.run_once([*PROXY, "check-config", str(out)], limit_s=30)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines()[0] == "keys: no key configured: an ephemeral key at start"  # the report
    again = await peers.run_once([*PROXY, "check-config", "--effective", str(out)], limit_s=30)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout  # a fixed point: the written file is the same configuration


async def test_a_bad_value_from_a_variable_is_not_reported_in_the_file(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "{}")
    env = {"MRTR_PROXY_LOG_LEVEL": "loud"}
    run = await peers.run_once([*PROXY, "serve", "--config", str(cfg)], limit_s=30, env=env)
    assert run.returncode == 2
    assert run.stderr.splitlines()[0] == "mrtr-proxy: invalid configuration:"  # not "in c.yaml"
    assert "logging.level: 'loud' is not one of" in run.stderr
    assert "(from MRTR_PROXY_LOG_LEVEL)" in run.stderr


async def test_an_empty_key_directory_or_a_missing_key_file_flag_stops_the_start(tmp_path: Path) -> None:
    empty = tmp_path / "keys"
    empty.mkdir()  # a Secret mounted with no keys in it
    cfg = _config(tmp_path, f"{{dirs: ['{empty}']}}")
    run = await peers.run_once([*PROXY, "serve", "--config", str(cfg), "--listen", "127.0.0.1:1"], limit_s=30)
    assert run.returncode == 2
    assert f"keys: key from {empty}: no key files in directory" in run.stderr
    argv = [
        *PROXY,
        "serve",
        "--config",
        str(_config(tmp_path, "{}")),
        "--key-file",
        "nope",
        "--listen",
        "127.0.0.1:1",
    ]
    flag = await peers.run_once(argv, limit_s=30, cwd=tmp_path)
    assert flag.returncode == 2
    assert f"keys: key from {tmp_path / 'nope'}: cannot read (No such file or directory)" in flag.stderr


async def test_effective_configuration_shows_the_era_the_transport_decides() -> None:
    config = Config(
        upstreams=(
            UpstreamConfig(name="a", url="http://x/mcp"),
            UpstreamConfig(name="b", url="http://x/sse", transport="sse"),
            UpstreamConfig(name="c", command="srv", transport="stdio"),
            UpstreamConfig(name="d", url="http://y/mcp", era="modern"),
            UpstreamConfig(name="e", command="srv", transport="stdio", era="modern"),
        )
    )
    doc = yaml.safe_load(effective_yaml(config))
    # stdio: probed like a URL (server/discover on a 2026-07-28 child), or fixed by era
    assert [u["era"] for u in doc["upstreams"]] == ["auto", "legacy", "auto", "modern", "modern"]


async def test_a_replica_address_derived_from_a_wildcard_listen_host_is_warned_about(tmp_path: Path) -> None:
    """`--listen 0.0.0.0:PORT` with no replica.address made 0.0.0.0 the owner in every handle, silently."""
    cfg = _config(tmp_path, "{}")
    argv = [*PROXY, "check-config", str(cfg), "--listen", "0.0.0.0:9000"]
    alone = await peers.run_once(argv, limit_s=30)
    assert alone.returncode == 0, alone.stderr
    assert (
        "mrtr-proxy: warning: the replica address is 0.0.0.0:9000 (from listen.host), which no other replica "
        "can reach: fine for a single replica; set replica.address" in alone.stderr
    )
    peered = await peers.run_once([*argv, "--replica-address", "10.0.0.7:9000"], limit_s=30)
    assert "replica address" not in peered.stderr  # set: nothing to say
    refused = await peers.run_once([*argv, "--replica-address", "0.0.0.0:9000"], limit_s=30)
    assert refused.returncode == 2
    assert "replica.address: '0.0.0.0:9000' is no address another replica can reach" in refused.stderr
