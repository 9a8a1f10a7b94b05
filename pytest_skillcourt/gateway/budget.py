"""What a run may spend (:class:`RunLimits`), and the checks that hold it to that.

Before each model call: the run's model-call limit, then the budget
(``spent_usd() + this run's cost so far >= budget_usd``: refused).  Uncounted
calls (model listing, token counting) have a limit of their own.  A refusal by
limit or budget is a :data:`~.refusal.REFUSAL_STATUS` and sets the run's
``limit_hit``: the run did not complete.  After a call, its tokens and cost
come from the provider's usage (:func:`account`), never from the agent.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from pytest_skillcourt.gateway.dialect import non_negative_float
from pytest_skillcourt.gateway.dialect_registry import dialect
from pytest_skillcourt.gateway.limits import PriceFn, RunLimits
from pytest_skillcourt.gateway.recording import CallRecord
from pytest_skillcourt.gateway.refusal import REFUSAL_STATUS, Refused

if TYPE_CHECKING:
    from pytest_skillcourt.gateway.grants import Run

def _closed() -> Refused:
    return Refused(401, "closed", "this run is closed; its token is revoked")


def _calls_refused(run: Run) -> Refused:
    """The model-call limit is reached: noted on the run (call with its lock held)."""
    limit = run.limits.max_calls
    run.limit_hit = run.limit_hit or "model_calls"
    run.error = run.error or f"model-call limit reached: {limit} calls"
    return Refused(REFUSAL_STATUS, "model_calls",
                   f"skill-court gateway: this run's model-call limit ({limit}) is reached")


def _budget_refused(limits: RunLimits) -> Refused:
    return Refused(REFUSAL_STATUS, "budget",
                   f"skill-court gateway: the session budget (${limits.budget_usd:.2f}) is spent")


def _aux_refused(limits: RunLimits) -> Refused:
    return Refused(REFUSAL_STATUS, "aux_calls", f"skill-court gateway: this run's limit of {limits.max_aux_calls} "
                                                "model-list and token-count calls is reached")


def precheck(run: Run, model_call: bool) -> Refused | None:
    """The refusal a call gets before its body is read, when its run can already tell."""
    limits = run.limits
    with run.lock:
        if run.closed:
            return _closed()
        if not model_call:
            return _aux_refused(limits) if run.aux_calls >= limits.max_aux_calls else None
        if run.api_calls >= limits.max_calls:
            return _calls_refused(run)
        if run.limit_hit == "budget" and limits.budget_usd is not None:  # spend never goes down
            return _budget_refused(limits)
    return None


def admit(run: Run, exchange: CallRecord) -> None:
    """Count a model call against the run's limits (recorded, in flight), or raise :class:`Refused`."""
    limits = run.limits
    spent = 0.0
    if limits.budget_usd is not None and limits.spent_usd is not None:
        try:
            spent = float(limits.spent_usd())
        except Exception as err:  # the session's ledger broke: do not guess, refuse
            exchange.notes.append(f"spent_usd() raised {type(err).__name__}: {err}")
            spent = math.inf
    with run.lock:
        if run.closed:
            raise _closed()
        if run.api_calls >= limits.max_calls:
            raise _calls_refused(run)
        if limits.budget_usd is not None:
            total = spent + run.cost()
            if not total < limits.budget_usd:
                run.limit_hit = run.limit_hit or "budget"
                run.error = run.error or (f"budget reached: ${total:.4f} of ${limits.budget_usd:.2f}")
                raise _budget_refused(limits)
        run.api_calls += 1
        run.inflight += 1
        exchange.model_call = True
        run.append(exchange)


def admit_aux(run: Run, exchange: CallRecord) -> None:
    """Count an uncounted call (kept while the record has room, in flight), or raise :class:`Refused`."""
    with run.lock:
        if run.closed:
            raise _closed()
        if run.aux_calls >= run.limits.max_aux_calls:
            raise _aux_refused(run.limits)
        run.aux_calls += 1
        run.keep(exchange)
        run.inflight += 1


def done(run: Run) -> None:
    """A call admitted by :func:`admit` or :func:`admit_aux` is over."""
    with run.lock:
        run.inflight -= 1
        run.lock.notify_all()


def account(run: Run, exchange: CallRecord, price: PriceFn | None) -> None:
    """Tokens and cost of a finished model call, from the provider's usage."""
    api = dialect(exchange.api)
    body = exchange.response
    usage: Any = None
    if exchange.stream and isinstance(body, list):
        usage, reply, error = api.stream_result(body)
    else:
        usage, reply, error = api.body_result(body)
    if exchange.status == 200:
        exchange.reply = reply
    if error and not exchange.error:
        exchange.error = error
    if exchange.status != 200:
        return  # an error reply: no usage to count (providers do not bill them)
    in_tok, out_tok, reported = api.read_usage(usage, exchange.notes)
    exchange.input_tokens, exchange.output_tokens, exchange.reported_cost = in_tok, out_tok, reported
    model = run.model
    if exchange.model and exchange.model != model.name:
        model = dataclasses.replace(model, name=exchange.model)
    cost: Any = reported
    if price is not None:
        try:
            cost = price(model, in_tok, out_tok, reported)
        except Exception as err:  # a pricing bug must not lose the exchange
            exchange.notes.append(f"price() raised {type(err).__name__}: {err}; not priced")
            cost = None
    exchange.cost_usd = non_negative_float(cost, "price", exchange.notes)
