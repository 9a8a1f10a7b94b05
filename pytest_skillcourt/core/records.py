"""What a run leaves behind: the record stored and the summary on the report."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

#: Run statuses.  Only "answered" and "incomplete" can carry an outcome.
ANSWERED = "answered"  # the agent gave a final answer
INCOMPLETE = "incomplete"  # iteration limit, or provider error after it answered: a failure
TIMEOUT = "timeout"  # interrupted at the timeout: no outcome
NO_ANSWER = "no_answer"  # the model never answered: left out, not held against the skill
NO_OUTCOME = "no_outcome"  # ran, but could not be scored (capture failed, check could not run)
HARNESS_ERROR = "error"  # the sandbox or harness broke: the item fails
NOT_OFFERED = "not_offered"  # the arms did not differ in the skill: no outcome (offer.py)

#: The two arms of a pair: the library as is, and the skill under test hidden.
ARM_WITH = "with"
ARM_WITHOUT = "without"
ARMS = (ARM_WITH, ARM_WITHOUT)


@dataclass(slots=True)
class RunRecord:
    """Everything recorded about one run (docs/architecture.md, "A run").

    Slotted: a cached session holds one per run it serves (120,000 for 10,000 skills x 6
    tasks), and without a ``__dict__`` each is about half the memory and quicker to make."""

    run_id: str
    cache_key: str
    trial: str
    skill: str
    suite: str  # suite path relative to the rootdir
    task_id: str
    arm: str
    rep: int
    model: str
    status: str
    outcome: bool | None = None  # success from the check; None until judged / no outcome
    outcome_source: str | None = None  # "check" | "judge" | None
    needs_judge: bool = False  # check-less task with a scorable run
    answer: str = ""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    captured: dict[str, Any] | None = None  # CapturedFiles as a dict, for the judge
    check_exit: int | None = None
    check_output: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    priced: bool = False
    api_calls: int = 0
    skill_loaded: bool = False
    #: skills whose body the run may have read, with their hash at the time
    #: (the run cache reuses the run only while those hashes hold)
    loaded_skills: dict[str, str] = field(default_factory=dict)
    #: digest of every skill whose files the run's agent could reach (present in
    #: its sandbox or readable by its tools) with its hash at the time
    #: (``cache.reach_digest``): the run cache reuses the run only while exactly
    #: these skills hold these hashes (``cache.still_valid``).  A digest, not the
    #: list: a run of a 2,000-skill library would otherwise store 2,000 hashes.
    #: None on runs recorded before this rule.
    reach: str | None = None
    #: proof of offer (``offer.py``): how many skills the agent's listing offered the
    #: model, and whether the skill under test was among them (None: no listing read)
    listed: int | None = None
    skill_listed: bool | None = None
    started_at: str = ""
    duration_s: float = 0.0
    error: str | None = None
    runner: str = "builtin"
    image: str | None = None
    backend: str | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cacheable(self) -> bool:
        """Runs without outcome are never cached (README "Store, cache and budget"); a check-less run
        that awaits the judge is reusable because its judgment is keyed apart."""
        return self.status in (ANSWERED, INCOMPLETE) and (self.outcome is not None or self.needs_judge)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, default=str)

    def head(self) -> RunHead:
        """What a session needs of this run when it reuses it (:class:`RunHead`)."""
        return RunHead(*[getattr(self, name) for name in HEAD_FIELDS])

    @classmethod
    def from_json(cls, text: str) -> "RunRecord":
        data = json.loads(text)
        known = _FIELDS.get(cls)
        if known is None:
            known = _FIELDS[cls] = frozenset(f.name for f in fields(cls))
        if data.keys() <= known:  # as this version wrote it: nothing to leave out
            return cls(**data)
        return cls(**{k: v for k, v in data.items() if k in known})


#: The field names of each record class, for :meth:`RunRecord.from_json` (asked once).
_FIELDS: dict[type, frozenset[str]] = {}


#: The first item of a head's stored text: a head written by another layout is not read
#: as this one (the store then decodes the whole record, :meth:`RunHead.from_text`).
HEAD_FORMAT = 1


class RunHead(NamedTuple):
    """What a session needs of a run it reuses, without its answer, transcript, files and
    check output: its place (which trial, skill, suite, task, arm, rep, model), how it
    ended, its outcome, tokens, cost, and the digest its reuse is checked against.

    A cached session serves 24,000 runs for 2,000 skills; reading each whole record (its
    transcript can be hundreds of kilobytes) only to count outcomes is most of its time.
    The store keeps this beside each record (``runs.head``); the judge, the reports and
    anything that shows a run read the whole :class:`RunRecord` (``Store.runs_by_id``).
    A named tuple: made from its stored text in a third of a frozen dataclass's time."""

    run_id: str
    cache_key: str
    trial: str
    skill: str
    suite: str
    task_id: str
    arm: str
    rep: int
    model: str
    status: str
    outcome: bool | None
    needs_judge: bool
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    api_calls: int
    skill_loaded: bool
    reach: str | None
    duration_s: float
    check_exit: int | None
    error: str | None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_text(self) -> str:
        """The stored text: ``[HEAD_FORMAT, field, ...]`` in :data:`HEAD_FIELDS` order."""
        return json.dumps([HEAD_FORMAT, *[getattr(self, name) for name in HEAD_FIELDS]], ensure_ascii=False)

    @classmethod
    def from_text(cls, text: str) -> RunHead | None:
        """The head :meth:`to_text` wrote, or None when ``text`` is not one this version
        wrote (another format, a damaged or hand-edited row): its record is read instead.

        Raises:
            ValueError: ``text`` is not JSON.
        """
        data = json.loads(text)
        if type(data) is not list or len(data) != len(HEAD_FIELDS) + 1 or data[0] != HEAD_FORMAT:
            return None
        return cls._make(data[1:])

    @classmethod
    def from_texts(cls, texts: list[str | None]) -> list[RunHead | None]:
        """:meth:`from_text` of each (None for None), decoded as one JSON text: a cached
        session reads 24,000 heads, and one ``json.loads`` of them all takes a third of
        the time of one each.  A text that is not a head falls back to :meth:`from_text`.

        Raises:
            ValueError: a text is not JSON.
        """
        try:
            rows = json.loads("[" + ",".join(t if t is not None else "null" for t in texts) + "]")
        except ValueError:  # one of them is damaged: find which, one by one
            return [None if t is None else cls.from_text(t) for t in texts]
        size, make = len(HEAD_FIELDS) + 1, tuple.__new__
        if len(rows) != len(texts):  # a text that was more than one JSON value
            return [None if t is None else cls.from_text(t) for t in texts]
        return [make(cls, row[1:]) if type(row) is list and len(row) == size and row[0] == HEAD_FORMAT
                else None for row in rows]


#: The fields of a :class:`RunHead`, in its order (the order of its stored text).
HEAD_FIELDS = RunHead._fields

#: A run as far as pairs and verdicts read it: its whole record, or its head (both carry
#: every :data:`HEAD_FIELDS` name and ``tokens``).
RunFacts = RunRecord | RunHead
