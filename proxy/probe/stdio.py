"""Talking to a stdio server: spawn the command, newline-delimited JSON-RPC on its stdin and stdout.

The child gets the environment the proxy would give it (`proxy.upstream.stdio.child_env`: a short list of
inherited variables plus `env`), so a server that needs more fails here as it would behind the proxy."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.probe.channel import ProbeError, Recorder, StreamChannel, decode
from proxy.probe.discover import probe_era
from proxy.probe.findings import ModernSide
from proxy.upstream.base import UpstreamError
from proxy.upstream.modern import Notify
from proxy.upstream.stdio import child_env
from proxy.wire import jsonrpc

_STDERR_TAIL = 2000
_STOP_S = 3.0


class StdioConversation:
    def __init__(
        self, command: Sequence[str], recorder: Recorder, env: Mapping[str, str] | None = None
    ) -> None:
        self.command = tuple(command)
        self.env = dict(env or {})
        self.recorder = recorder
        self.channel = StreamChannel(self._send, recorder)
        self._process: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr_task: asyncio.Task[None] | None = None
        self._stderr = bytearray()

    async def open(self) -> None:
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=child_env(self.env),
                start_new_session=True,
                limit=16 * 1024 * 1024,
            )
        except OSError as exc:
            raise ProbeError(f"cannot start {self.command[0]}: {exc.strerror or exc}") from None
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        self._tasks = [asyncio.create_task(self._read()), self._stderr_task]

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def stderr_tail(self) -> str:
        text = self._stderr.decode(errors="replace").strip().splitlines()
        return text[-1][:200] if text else ""

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        while line := await self._process.stdout.readline():
            message = decode(line.decode(errors="replace")) if line.strip() else None
            if message is not None:
                await self.channel.deliver(message)
        code = await self._process.wait()
        with contextlib.suppress(TimeoutError):  # its last words, for the error
            if self._stderr_task is not None:
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        tail = self.stderr_tail()
        self.channel.fail(f"the server exited with code {code}" + (f": {tail}" if tail else ""))

    async def _drain_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        while chunk := await self._process.stderr.read(4096):
            self._stderr += chunk
            del self._stderr[:-_STDERR_TAIL]

    async def _send(self, body: bytes) -> None:
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write(body + b"\n")
            await self._process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise ProbeError(self.channel.closed or "the server closed its stdin") from None

    async def request(self, method: str, params: jsonrpc.JSONObject, timeout: float) -> jsonrpc.Response:
        return await self.channel.request(method, params, timeout)

    async def notify(self, method: str, params: jsonrpc.JSONObject) -> None:
        await self.channel.notify(method, params)

    async def close(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), _STOP_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, 15)
                try:
                    await asyncio.wait_for(process.wait(), _STOP_S)
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(process.pid, 9)
                    await process.wait()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def stdio_era(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    step_s: float,
    call: str | None = None,
    call_arguments: Mapping[str, Any] | None = None,
    call_s: float = 20.0,
) -> ModernSide | None:
    """`server/discover` first, on a child of its own (the stdio binding's "Backward Compatibility", as the
    proxy probes a stdio upstream): the era it shows; None when the command cannot be started or says
    nothing in time (the legacy steps that follow report it)."""
    conv = StdioConversation(command, Recorder(), env)
    try:
        await conv.open()

        async def send(msg: jsonrpc.Request, timeout: float, on_note: Notify | None) -> jsonrpc.Response:
            conv.channel.on_note = on_note  # one request at a time: the notifications meanwhile are its
            try:
                return await conv.request(msg.method, msg.params, timeout)
            except ProbeError as exc:
                raise UpstreamError(str(exc)) from None

        return await probe_era(send, step_s=step_s, call=call, call_arguments=call_arguments, call_s=call_s)
    except ProbeError:
        return None
    finally:
        await conv.close()
