"""A call's outcome (proxy/calls/outcomes.py) as the 2026-07-28 client's answer, with its canonical line."""

from __future__ import annotations

from proxy.calls.outcomes import Completed, Failed, Forward, NeedsInput, Outcome
from proxy.front.modern.limits import admission_refused
from proxy.front.modern.plain import complete
from proxy.observe.line import Outcome as Said
from proxy.observe.line import RequestLine
from proxy.tasks.front import TaskCreated
from proxy.upstream.base import UpstreamAuthChallenge
from proxy.wire import jsonrpc, mcp


def answer(
    msg: jsonrpc.Request, outcome: Outcome | TaskCreated, line: RequestLine, *, started: bool
) -> jsonrpc.Response | Forward:
    """`started`: the answer's SSE stream has begun (a refusal can no longer be a 503)."""
    match outcome:
        case Completed(response=jsonrpc.Result(result=result)):
            line.set_outcome(Said.COMPLETE)
            return jsonrpc.Result(msg.id, complete(msg.method, result))
        case Completed(response=jsonrpc.Error(error=error)):
            line.set_outcome(Said.UPSTREAM_ERROR, error.code)
            return jsonrpc.Error(msg.id, error)
        case NeedsInput(input_requests=requests, request_state=state, round=rnd):
            line.set_outcome(Said.INPUT_REQUIRED)
            line.round = rnd
            line.input_keys = len(requests)
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
            line.set_outcome(Said.FAILED, error.code)
            return jsonrpc.Error(msg.id, error)
        case Forward():
            return outcome
        case TaskCreated(result=result, task=task):
            line.set_outcome(Said.TASK)
            line.task = task
            return jsonrpc.Result(msg.id, result)
    raise AssertionError(outcome)  # pragma: no cover
