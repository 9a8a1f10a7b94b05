"""The structured ask every judge-model request shares (README "Judging tasks without a
check") against the local test server: the retry, who failed, provider errors, the
token budget."""

from __future__ import annotations

from pytest_skillcourt.models.llm import TokenBudget, UnreadableReply, ask_structured, parse_json_object
from tests.support.builders import chat_client
from tests.support.llm_server import LLMServer, RecordedRequest, Reply

MESSAGES = [{"role": "system", "content": "rules"}, {"role": "user", "content": "data"}]


def parse_answer(text: str) -> str:
    value = parse_json_object(text)
    if not isinstance(value.get("answer"), str):
        raise UnreadableReply(f'"answer" must be a string, got {value.get("answer")!r}')
    return value["answer"]


# --------------------------------------------------------------------------
# asking, against the local test server


def test_ask_structured_retries_once_with_the_reply_and_a_note():
    def handler(request: RecordedRequest) -> Reply:
        if len(request.messages) == 2:
            return Reply(content="the answer is 4", input_tokens=30, output_tokens=3)
        return Reply(content='{"answer": "4"}', input_tokens=40, output_tokens=4)

    budget = TokenBudget(None)
    with LLMServer(handler) as server:
        asked = ask_structured(chat_client(server.base_url), MESSAGES, parse_answer, budget, who="tester")
        requests = server.requests
    assert (asked.value, asked.error, asked.budget_reached) == ("4", None, False)
    assert (asked.input_tokens, asked.output_tokens, budget.used) == (70, 7, 77)
    assert len(requests) == 2
    assert requests[1].messages[2] == {"role": "assistant", "content": "the answer is 4"}
    assert "could not be read" in requests[1].messages[3]["content"]


def test_ask_structured_names_who_failed_after_two_unreadable_replies():
    with LLMServer(lambda r: Reply(content="no", input_tokens=5, output_tokens=1)) as server:
        asked = ask_structured(chat_client(server.base_url), MESSAGES, parse_answer, None, who="tester")
        n = len(server.requests)
    assert asked.value is None and n == 2
    assert asked.error.startswith("tester reply unreadable after 2 attempt(s): ")
    assert (asked.input_tokens, asked.output_tokens) == (10, 2)


def test_ask_structured_records_a_provider_error():
    with LLMServer(lambda r: Reply(status=401, error_message="nope")) as server:
        asked = ask_structured(chat_client(server.base_url), MESSAGES, parse_answer, None, who="tester")
    assert asked.value is None and asked.error.startswith("tester provider error (auth): ")


def test_ask_structured_does_not_ask_once_the_budget_is_spent():
    budget = TokenBudget(10)
    budget.charge(10)
    with LLMServer(lambda r: Reply(content='{"answer": "x"}')) as server:
        asked = ask_structured(chat_client(server.base_url), MESSAGES, parse_answer, budget)
        assert server.requests == []
    assert asked.budget_reached and asked.error == budget.reason()
