"""Per-run settings (LangGraph `context_schema`): models, thresholds, limits and prompt overrides."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from grounded_agent.principals import EVERYONE, Viewer, parse_groups, principal_named
from grounded_agent.prompts.answer import (
    ANSWER_SYSTEM,
    JUDGED_ANSWER_SYSTEM,
    TRANSLATE_ANSWER_SYSTEM,
)
from grounded_agent.prompts.call_tools import CALL_TOOLS_SYSTEM
from grounded_agent.prompts.check_support import CHECK_SUPPORT_SYSTEM
from grounded_agent.prompts.local_judge import LOCAL_JUDGE_PROMPT
from grounded_agent.prompts.reformulate_query import REFORMULATE_QUERY_SYSTEM
from grounded_agent.prompts.route_request import ROUTE_REQUEST_SYSTEM
from grounded_agent.schemas import (
    DEFAULT_THRESHOLDS,
    SOURCE_NAME_PATTERN,
    SOURCE_NAMES,
    SourceName,
    Thresholds,
)

MODEL_LOW_THRESHOLD = 0.35
"""With a model, where the relevance floor lies. Chosen on SQuAD and three project knowledge bases
(clearwater, harbor, northwind): the share of answerable questions whose right document reaches
the model rises from 80-90% at 0.55 to 90-100%, and gains little below (benchmarks/README.md)."""

MAX_ATTEMPTS = 2
"""Hard cap on attempts per question; Context may lower it, never raise it."""


def default_sources() -> list[SourceName]:
    """GROUNDED_AGENT_SOURCES (comma-separated), or none: the graph's own default then
    (`Deps.default_sources`)."""
    raw = os.environ.get("GROUNDED_AGENT_SOURCES", "")
    return parse_sources(raw) if raw.strip() else []


def parse_sources(raw: str | list[str]) -> list[SourceName]:
    """Validates a source list's form (names, no duplicates); raises ValueError naming the
    malformed entries. Whether a graph has a source of that name is the graph's to say
    (`Deps.source_names`): a user's own source is as good a name as a built-in one."""
    if not isinstance(raw, str | list | tuple):
        raise ValueError("sources must be a list of names or a comma-separated text")
    given = raw.split(",") if isinstance(raw, str) else list(raw)
    if not all(isinstance(s, str) for s in given):
        raise ValueError(f"each source must be a name, such as {', '.join(SOURCE_NAMES)}")
    items = [s.strip() for s in given if s.strip()]
    malformed = [s for s in items if not is_source_name(s)]
    if malformed:
        raise ValueError(
            f"not a source name: {shown_names(malformed)}; a name is a letter, then up to 63 "
            "letters, digits, '_' or '-'"
        )
    out: list[SourceName] = []
    for s in items:
        if s not in out:
            out.append(s)
    if not out:
        raise ValueError("at least one source is needed")
    return out


def shown_names(names: Sequence[str]) -> str:
    """Names as given, quoted and cut: a name may hold line breaks or be very long."""
    return ", ".join(repr(s) if len(s) <= 40 else repr(s[:40]) + "…" for s in names[:5])


_SOURCE_NAME = re.compile(SOURCE_NAME_PATTERN)


def is_source_name(name: object) -> bool:
    """Whether `name` may name a source (SOURCE_NAME_PATTERN)."""
    return isinstance(name, str) and _SOURCE_NAME.fullmatch(name) is not None


def checked_sources(value: list[str] | None, known: Sequence[str]) -> list[str] | None:
    """`value` if every name is one of `known` (a graph's sources); raises ValueError naming the
    others and the ones there are."""
    unknown = [s for s in value or [] if s not in known]
    if unknown:
        raise ValueError(f"unknown source(s): {shown_names(unknown)}; choose from {', '.join(known)}")
    return value


FLAGGED_DOCUMENTS = ("exclude", "include")
"""What a run does with documents the ingest-time screening flagged (screening.py)."""
LOCAL_JUDGE_RULES = ("gate", "veto")
"""How an opt-in local judge decides (Context.local_judge_rule)."""


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _env_seconds(name: str, default: float) -> float:
    """A time limit from the environment: a slow local model (a small one on two cores) needs
    more than the defaults, which suit a hosted one, in the CLI and the server as well."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw[:40]!r}") from None


def _env_flag(name: str, default: bool = False) -> bool:
    """A switch from the environment ("1", "true", "yes", "on"; "0", "false", "no", "off"), so
    the CLI and the server take a setting a local model's setup recommends (scripts/local_model.py
    serve prints it)."""
    raw = os.environ.get(name, "").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    return default


@dataclass(kw_only=True)
class Context:
    """Settings for one run. Every field has a default and a description so Studio can show it."""

    model: str = field(
        default_factory=lambda: _env("GROUNDED_AGENT_MODEL", "gpt-4o-mini"),
        metadata={"description": "Chat model name at the OpenAI-compatible endpoint."},
    )
    sources: list[str] = field(
        default_factory=lambda: list(default_sources()),
        metadata={
            "description": "Sources searched when the input names none; empty: the graph's "
            "default (the sources brought to build_graph, else knowledge_base)."
        },
    )
    principal: str | None = field(
        default=None,
        metadata={
            "description": "Who asks, as the application authenticated it (None: an application "
            "without principals, which reads every document). A principal reads the public "
            "documents and those of its groups, and its threads are its own. Never taken from "
            "a remote client: the endpoint and LangGraph Server set it from the caller's key."
        },
    )
    groups: list[str] | None = field(
        default=None,
        metadata={
            "description": "The principal's groups: documents whose access names one of them are "
            "read too (None with a principal: public documents only)."
        },
    )
    found_threshold: float = field(
        default=DEFAULT_THRESHOLDS.found,
        metadata={"description": "Calibrated relevance at or above which a passage answers."},
    )
    low_threshold: float = field(
        default=DEFAULT_THRESHOLDS.low,
        metadata={"description": "Calibrated relevance below which a passage does not count."},
    )
    model_low_threshold: float = field(
        default=MODEL_LOW_THRESHOLD,
        metadata={
            "description": "LLM mode: calibrated relevance from which a passage reaches the model, "
            "which judges whether it answers; offline and with judge_model_answers (the model judges "
            "nothing), low_threshold applies (the lower of the two is used)."
        },
    )
    closest_threshold: float = field(
        default=0.3,
        metadata={
            "description": "Calibrated relevance a passage needs to be listed among the closest "
            "passages when nothing answered."
        },
    )
    max_attempts: int = field(
        default=MAX_ATTEMPTS,
        metadata={"description": "Attempts per question (1 or 2; 2 is the hard cap)."},
    )
    top_k: int = field(
        default=5, metadata={"description": "Passages fetched per source call (1 to 10)."}
    )
    judge_veto: float | None = field(
        default=None,
        metadata={
            "description": "Offline: the least probability the trained judge must give the "
            "sentences an answer would quote (0 to 1; 0 turns the veto off); None takes the one "
            "chosen on the judge's tuning split (its manifest)."
        },
    )
    judge_margin: float | None = field(
        default=None,
        metadata={
            "description": "Offline: how much higher the trained judge may rate another sentence "
            "of the passages than the ones an answer would quote before the agent abstains "
            "(0 to 1; 1 turns it off); None takes the one chosen on the judge's tuning split."
        },
    )
    max_tool_calls_per_attempt: int = field(
        default=3,
        metadata={"description": "Tool calls executed per attempt; extra calls are rejected."},
    )
    max_model_rounds: int = field(
        default=4, metadata={"description": "Tool-calling model rounds per question."}
    )
    max_model_calls: int = field(
        default=5,
        metadata={
            "description": "Model calls per question, all nodes together (5 is the hard cap)."
        },
    )
    token_budget: int = field(
        default=24_000,
        metadata={
            "description": "Input plus output tokens per question; past it the agent stops asking the model."
        },
    )
    time_budget_s: float = field(
        default_factory=lambda: _env_seconds("GROUNDED_AGENT_TIME_BUDGET_S", 45.0),
        metadata={"description": "Wall-clock budget per question, in seconds "
                  "(GROUNDED_AGENT_TIME_BUDGET_S)."},
    )
    tool_timeout_s: float = field(
        default=12.0, metadata={"description": "Timeout of one source call, in seconds."}
    )
    model_timeout_s: float = field(
        default_factory=lambda: _env_seconds("GROUNDED_AGENT_MODEL_TIMEOUT_S", 20.0),
        metadata={
            "description": "Timeout of one model call, in seconds (within what the time budget "
            "leaves): one slow reply must not spend the whole question's budget "
            "(GROUNDED_AGENT_MODEL_TIMEOUT_S)."
        },
    )
    judgement_max_tokens: int = field(
        default=256,
        metadata={
            "description": "Tokens a judgement or tool choice may generate (routing, search "
            "choice, confidence, support check)."
        },
    )
    rewrite_max_tokens: int = field(
        default=96,
        metadata={
            "description": "Tokens a query rewrite or a resolved follow-up question may generate."
        },
    )
    answer_max_tokens: int = field(
        default=512,
        metadata={"description": "Tokens an answer (or its translation) may generate."},
    )
    stale_after_days: int = field(
        default=182,
        metadata={"description": "A cited document older than this gets a stale_source warning."},
    )
    flagged_documents: str = field(
        default_factory=lambda: _env("GROUNDED_AGENT_FLAGGED_DOCUMENTS", "").strip().lower()
        or "exclude",
        metadata={
            "description": "exclude (default): documents the ingest-time screening flagged "
            "(instruction-like text or metadata) never reach an answer; include: they are "
            "searched like the others (their text is still neutralised when shown). "
            "GROUNDED_AGENT_FLAGGED_DOCUMENTS."
        },
    )
    wikipedia_language: str = field(
        default="en", metadata={"description": "Language edition of Wikipedia searched."}
    )
    call_tools_system_prompt: str = field(
        default=CALL_TOOLS_SYSTEM,
        metadata={"description": "System prompt of the tool-calling step."},
    )
    reformulate_query_system_prompt: str = field(
        default=REFORMULATE_QUERY_SYSTEM,
        metadata={"description": "System prompt of the query rewrite."},
    )
    route_request_system_prompt: str = field(
        default=ROUTE_REQUEST_SYSTEM,
        metadata={"description": "System prompt of the routing step (search, ask, or both)."},
    )
    answer_system_prompt: str = field(
        default=ANSWER_SYSTEM, metadata={"description": "System prompt of the answer step."}
    )
    judged_answer_system_prompt: str = field(
        default=JUDGED_ANSWER_SYSTEM,
        metadata={
            "description": "System prompt of the answer step when it also judges the confidence "
            "(the local signals did not decide it): one structured reply, level and answer."
        },
    )
    choose_one_source: bool = field(
        default=False,
        metadata={
            "description": "LLM mode: ask the model to choose the search even when one source is "
            "enabled and the request is a question the offline rule reads (it could only reword "
            "the query); False searches that source with the query and saves the call."
        },
    )
    judge_support: bool = field(
        default_factory=lambda: _env_flag("GROUNDED_AGENT_JUDGE_SUPPORT", default=True),
        metadata={
            "description": "LLM mode: sentences of the model's answer that do not quote whole "
            "sentences of their cited sources are judged by the model in one more call; False "
            "removes them (checked by quote only; GROUNDED_AGENT_JUDGE_SUPPORT=0)."
        },
    )
    judged_words_from_sources: bool = field(
        default_factory=lambda: _env_flag("GROUNDED_AGENT_JUDGED_WORDS_FROM_SOURCES"),
        metadata={
            "description": "LLM mode, for small local models whose support judgement confirms "
            "invented sentences: a sentence the model judged supported is kept only when every "
            "content word of it stands in the question or its cited passages. It also removes "
            "right paraphrases in other words (docs/how-to/local-model.md); off (the default), the "
            "judgement decides, figures still checked in code "
            "(GROUNDED_AGENT_JUDGED_WORDS_FROM_SOURCES=1)."
        },
    )
    judge_model_answers: bool = field(
        default_factory=lambda: _env_flag("GROUNDED_AGENT_JUDGE_MODEL_ANSWERS"),
        metadata={
            "description": "LLM mode, for small local models that rate weak evidence MEDIUM and "
            "quote what does not answer: the offline verdict decides whether there is an answer "
            "(the model judges no level, and reads the passages offline reads: low_threshold, not "
            "model_low_threshold), and the model's answer must pass the trained judge as "
            "an offline answer does (judge_veto, judge_margin) and be rated no lower than the "
            "offline answer, else the offline extract stands in, as it does for a model that "
            "says the sources do not answer. It also withholds right answers a capable model finds "
            "(docs/how-to/local-model.md); off (the default), the model judges and its answer stands "
            "(GROUNDED_AGENT_JUDGE_MODEL_ANSWERS=1)."
        },
    )
    check_support_system_prompt: str = field(
        default=CHECK_SUPPORT_SYSTEM,
        metadata={"description": "System prompt of the support judgement."},
    )
    translate_answer_system_prompt: str = field(
        default=TRANSLATE_ANSWER_SYSTEM,
        metadata={
            "description": "System prompt that translates a checked answer into the asked "
            "language when the sources are in another."
        },
    )
    local_judge_url: str = field(
        default_factory=lambda: _env("GROUNDED_AGENT_LOCAL_JUDGE_URL", ""),
        metadata={
            "description": "Offline only, opt-in: the base URL of a llama-server whose model judges "
            "whether the sentences an answer would quote state the answer, in place of the trained "
            "judge (docs/how-to/local-judge.md); empty (the default): the trained judge alone. "
            "Unreachable or slower than local_judge_timeout_s, the trained judge decides "
            "(GROUNDED_AGENT_LOCAL_JUDGE_URL)."
        },
    )
    local_judge_max_candidates: int = field(
        default=3,
        metadata={
            "description": "Sentences per question the local judge reads (1 to 50): the ones "
            "the answer quotes, then those the trained judge rates highest; the others count as "
            "not answering. 3 (a cost bound, set "
            "before any accuracy was measured): each sentence took 1-3.3 s on two shared cores "
            "with the 1.5B model, and the target is 5 s per question "
            "(benchmarks/results/local-judge.md)."
        },
    )
    local_judge_timeout_s: float = field(
        default_factory=lambda: _env_seconds("GROUNDED_AGENT_LOCAL_JUDGE_TIMEOUT_S", 15.0),
        metadata={
            "description": "Seconds the local judge may take per question; past it the trained "
            "judge decides (GROUNDED_AGENT_LOCAL_JUDGE_TIMEOUT_S)."
        },
    )
    local_judge_rule: str = field(
        default_factory=lambda: _env("GROUNDED_AGENT_LOCAL_JUDGE_RULE", "gate").strip().lower(),
        metadata={
            "description": "How the local judge decides: 'gate' (the default), a gate fitted on "
            "the tuning data over the agent's own signals and the local judge's reading, on the "
            "extract of the evidence (grounding/judge/local_gate.json); 'veto', the local "
            "judge's veto and margin over the sentences the rules quote "
            "(GROUNDED_AGENT_LOCAL_JUDGE_RULE)."
        },
    )
    local_judge_veto: float | None = field(
        default=None,
        metadata={
            "description": "The least probability the local judge must give the sentences an "
            "answer would quote (0 to 1); None takes the one chosen on the tuning split "
            "(grounding/judge/local_cutoffs.json)."
        },
    )
    local_judge_margin: float | None = field(
        default=None,
        metadata={
            "description": "How much higher the local judge may rate another sentence than the "
            "quoted ones (0 to 1); None takes the one chosen on the tuning split."
        },
    )
    local_judge_prompt: str = field(
        default=LOCAL_JUDGE_PROMPT,
        metadata={"description": "Prompt of the local judge (slots {question}, {title}, "
                  "{sentence}), in the served model's chat format."},
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.low_threshold <= self.found_threshold <= 1.0:
            raise ValueError("thresholds must satisfy 0 <= low_threshold <= found_threshold <= 1")
        if not 0.0 <= self.model_low_threshold <= 1.0:  # the run takes the lower floor
            raise ValueError("model_low_threshold must be between 0 and 1")
        if not 0.0 <= self.closest_threshold <= 1.0:
            raise ValueError("closest_threshold must be between 0 and 1")
        self.max_attempts = max(1, min(int(self.max_attempts), MAX_ATTEMPTS))
        if self.judge_veto is not None and not 0.0 <= self.judge_veto <= 1.0:
            raise ValueError("judge_veto must be between 0 and 1")
        if self.judge_margin is not None and not 0.0 <= self.judge_margin <= 1.0:
            raise ValueError("judge_margin must be between 0 and 1")
        if not 1 <= int(self.top_k) <= 10:
            raise ValueError("top_k must be between 1 and 10")
        self.sources = list(parse_sources(self.sources)) if self.sources else []
        if self.principal is not None:
            principal_named(self.principal)  # ValueError naming the rule
        if self.groups is not None:
            self.groups = list(parse_groups(self.groups) or ())
        for name in ("time_budget_s", "model_timeout_s"):
            if not float(getattr(self, name)) > 0:  # also refuses nan
                raise ValueError(f"{name} must be above 0")
        if self.local_judge_rule not in LOCAL_JUDGE_RULES:
            raise ValueError(
                f"local_judge_rule must be one of {', '.join(LOCAL_JUDGE_RULES)}, "
                f"not {str(self.local_judge_rule)[:40]!r}"
            )
        if self.flagged_documents not in FLAGGED_DOCUMENTS:
            raise ValueError(
                f"flagged_documents must be one of {', '.join(FLAGGED_DOCUMENTS)}, "
                f"not {str(self.flagged_documents)[:40]!r}"
            )
        for name in (
            "max_tool_calls_per_attempt",
            "max_model_rounds",
            "max_model_calls",
            "token_budget",
            "judgement_max_tokens",
            "rewrite_max_tokens",
            "answer_max_tokens",
        ):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1")

    @property
    def viewer(self) -> Viewer:
        """What this run's reads may return: everything without a principal or groups; with
        them, the public documents and those of the groups."""
        if self.principal is None and self.groups is None:
            return EVERYONE
        return Viewer(tuple(self.groups or ()), self.principal)

    @property
    def thresholds(self) -> Thresholds:
        """This run's relevance cut-offs, the only ones any result is classified by."""
        return Thresholds(found=self.found_threshold, low=self.low_threshold)

    def run_thresholds(self, with_model: bool) -> Thresholds:
        """The cut-offs this run classifies by: with a model, passages from model_low_threshold
        on reach it, because it reads what the calibrated score cannot (a question asked in other
        words than the document's); offline nothing judges them, so low_threshold holds, and so
        it does where the model's judgement is not trusted (judge_model_answers): the offline
        verdict, final there, must read the passages offline reads (else a weaker passage's
        sentence outranks the answer and the judge's doubt withdraws it)."""
        if not with_model or self.judge_model_answers:
            return self.thresholds
        return Thresholds(found=self.found_threshold,
                          low=min(self.low_threshold, self.model_low_threshold))

    @property
    def attempt_cap(self) -> int:
        """Attempts this run may make (max_attempts, clamped to 1..MAX_ATTEMPTS on creation)."""
        return self.max_attempts


# Keys only the endpoint sets in config["configurable"], after it authenticated the caller (a
# client that sends them gets a 400 there).
SERVER_CONFIGURABLE: frozenset[str] = frozenset({"principal", "groups"})

# Keys a remote client may set through config["configurable"]; prompts and budgets stay server-side.
CLIENT_CONFIGURABLE: frozenset[str] = frozenset(
    {
        "model",
        "sources",
        "found_threshold",
        "low_threshold",
        "model_low_threshold",
        "closest_threshold",
        "top_k",
        "wikipedia_language",
        "max_attempts",
    }
)


def context_for(
    context: Context | None, principal: str | None, groups: Sequence[str] | str | None
) -> Context:
    """`context` (default: Context()) with the principal and groups an application gave;
    ValueError naming the rule for a malformed name."""
    ctx = context or Context()
    if principal is None and groups is None:
        return ctx
    if principal is not None:
        principal_named(principal)
    return replace(ctx, principal=principal, groups=list(parse_groups(groups) or ()))


def context_from_config(
    configurable: dict[str, Any] | None, *, allowed: frozenset[str] | None = None
) -> Context:
    """One place that builds a Context from config["configurable"] (LangServe passes no context)."""
    names = {f.name for f in fields(Context)}
    allow = names if allowed is None else names & allowed
    kwargs = {k: v for k, v in (configurable or {}).items() if k in allow}
    return Context(**kwargs)
