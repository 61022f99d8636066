"""A call's outcome (proxy/calls/outcomes.py) as the 2026-07-28 client's answer, with its canonical line."""

from __future__ import annotations

from typing import Any

from proxy.calls.outcomes import Completed, Failed, Forward, NeedsInput, Outcome
from proxy.front.modern.limits import admission_refused
from proxy.front.modern.plain import complete
from proxy.tasks.front import TaskCreated
from proxy.upstream.base import UpstreamAuthChallenge
from proxy.wire import jsonrpc, mcp


def answer(
    msg: jsonrpc.Request, outcome: Outcome | TaskCreated, line: dict[str, Any], *, started: bool
) -> jsonrpc.Response | Forward:
    """`started`: the answer's SSE stream has begun (a refusal can no longer be a 503)."""
    match outcome:
        case Completed(response=jsonrpc.Result(result=result)):
            line["outcome"] = "complete"
            return jsonrpc.Result(msg.id, complete(msg.method, result))
        case Completed(response=jsonrpc.Error(error=error)):
            line["outcome"] = f"upstream_error:{error.code}"
            return jsonrpc.Error(msg.id, error)
        case NeedsInput(input_requests=requests, request_state=state, round=rnd):
            line.update(outcome="input_required", round=rnd, input_keys=len(requests))
            return jsonrpc.Result(
                msg.id,
                {
                    "resultType": mcp.RESULT_INPUT_REQUIRED,
                    "inputRequests": requests,
                    "requestState": state,
                },
            )
        case Failed(challenge=UpstreamAuthChallenge() as challenge):
            raise challenge  # relayed with its status (handled where the request's route is known)
        case Failed(error=error, refused=True) if not started:
            raise admission_refused(error, line)  # 503: nothing began, another replica may take it
        case Failed(error=error):
            line["outcome"] = f"failed:{error.code}"
            return jsonrpc.Error(msg.id, error)
        case Forward():
            return outcome
        case TaskCreated(result=result, task=task):
            line.update(outcome="task", task=task)
            return jsonrpc.Result(msg.id, result)
    raise AssertionError(outcome)  # pragma: no cover
