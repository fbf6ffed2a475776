"""The local judge: a small instruction model behind llama-server reads whether a sentence states
the answer, offline and opt-in (Context.local_judge_url, GROUNDED_AGENT_LOCAL_JUDGE_URL).

It scores what the shipped judge scores, (title, sentence) candidates for one question, behind the
same interface (`SentenceJudge`), so judge.reading applies its veto and margin unchanged, with the
local judge's own cut-offs (local_cutoffs.json, chosen on the tuning split by
benchmarks/bench_local_judge.py). A score is P(yes) / (P(yes) + P(no)) of the first token the
model writes after LOCAL_JUDGE_PROMPT, read from llama-server's `/completion` with `n_predict` 1 and
`n_probs`. Cost is bounded: `max_candidates` sentences are read, the answer's quoted ones first and
then those the shipped judge rates highest (the others score 0: not read, not trusted to answer;
an answer is never vetoed because its own sentence went unread), each question's prompt prefix stays
computed in the server (`cache_prompt`), and the whole question has `timeout_s`. Any failure
(unreachable, an HTTP error, too slow, a reply without yes or no among its top tokens) raises
LocalJudgeUnavailable, never a score: the caller then takes the shipped judge's outcome
(grounding.confidence.LocalJudgement), so a judge that is down is neither a "no" nor a "yes".
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import httpx

from grounded_agent.context import Context
from grounded_agent.grounding.judge import Judge, Manifest

CUTOFFS = Path(__file__).resolve().parent / "local_cutoffs.json"
TOP_TOKENS = 20
"""Top tokens asked for (`n_probs`): "yes" and "no" are among them for any reply the prompt gets."""
YES = frozenset({"yes"})
NO = frozenset({"no"})


class LocalJudgeUnavailable(RuntimeError):
    """The local judge gave no score: the shipped judge decides instead."""


@cache
def local_manifest(path: Path = CUTOFFS) -> Manifest:
    """The local judge's veto and margin (chosen on the tuning split, with how)."""
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return Manifest(veto=float(raw["veto"]), margin=float(raw["margin"]), max_len=0,
                    train_articles=frozenset(), tune_articles=frozenset(), raw=raw)


def _data(text: str) -> str:
    """Text placed in the prompt cannot open or close a chat turn (Qwen's <|...|> markers)."""
    return text.replace("<|", "< |").replace("|>", "| >")


def judge_prompt(template: str, question: str, title: str, sentence: str) -> str:
    """The judge's prompt for one candidate, every slot made safe as data."""
    return template.format(question=_data(question), title=_data(title).replace('"', "'"),
                           sentence=_data(sentence))


def yes_probability(reply: dict[str, Any]) -> float:
    """P(yes) / (P(yes) + P(no)) over the first generated token's top tokens ("Yes", " yes", ...
    count as yes); LocalJudgeUnavailable where neither is there or the reply has another shape."""
    try:
        top = reply["completion_probabilities"][0]["top_logprobs"]
        yes = no = 0.0
        for entry in top:
            word = str(entry["token"]).strip().lower()
            if word in YES:
                yes += math.exp(float(entry["logprob"]))
            elif word in NO:
                no += math.exp(float(entry["logprob"]))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise LocalJudgeUnavailable(f"a reply without token probabilities ({exc!r})") from exc
    if yes + no <= 0.0:
        raise LocalJudgeUnavailable("neither yes nor no among the reply's top tokens")
    return yes / (yes + no)


@dataclass
class LocalJudge:
    """Scores (title, sentence) candidates for one question through a llama-server (the same
    interface as the shipped Judge, whose ranking chooses which candidates are read)."""

    url: str
    """llama-server's base URL, without /v1 (`scripts/local_model.py serve` prints it with)."""
    shipped: Judge
    max_candidates: int = 3
    timeout_s: float = 15.0
    prompt: str = ""
    manifest: Manifest = field(default_factory=local_manifest)
    client: httpx.Client = field(default_factory=httpx.Client)
    name: str = "local judge"
    read_last: int = field(default=0, init=False)
    """How many candidates the last `score` sent to the model (for the trail)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"local_judge_url must be an http(s) URL, not {self.url[:60]!r}")
        self.url = self.url.rstrip("/").removesuffix("/v1")
        if not 1 <= int(self.max_candidates) <= 50:
            raise ValueError("local_judge_max_candidates must be between 1 and 50")
        if not float(self.timeout_s) > 0:
            raise ValueError("local_judge_timeout_s must be above 0")

    def score(self, question: str, candidates: Sequence[tuple[str, str]], quoted: int = 0
              ) -> list[float]:
        """P(yes) for `max_candidates` candidates, 0 for the rest: the first `quoted` (an
        answer's own sentences), then those the shipped judge rates highest. Raises
        LocalJudgeUnavailable (never a partial list) on any failure."""
        pairs = list(candidates)
        if not pairs:
            return []
        ranked = self.shipped.score(question, pairs)
        own = list(range(min(quoted, len(pairs))))
        others = sorted(range(len(own), len(pairs)), key=lambda i: -ranked[i])
        chosen = (own + others)[: self.max_candidates]
        deadline = time.monotonic() + self.timeout_s
        out = [0.0] * len(pairs)
        for i in sorted(chosen):  # in the passages' order: the shared prefix is read once
            title, sentence = pairs[i]
            out[i] = self._yes(question, title, sentence, deadline)
        self.read_last = len(chosen)
        return out

    def _yes(self, question: str, title: str, sentence: str, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise LocalJudgeUnavailable(f"slower than its {self.timeout_s:g} s per question")
        prompt = judge_prompt(self.prompt, question, title, sentence)
        body = {"prompt": prompt, "n_predict": 1, "n_probs": TOP_TOKENS, "temperature": 0.0,
                "cache_prompt": True}
        try:
            response = self.client.post(f"{self.url}/completion", json=body, timeout=left)
            response.raise_for_status()
            reply = response.json()
        except httpx.TimeoutException as exc:
            raise LocalJudgeUnavailable(
                f"slower than its {self.timeout_s:g} s per question") from exc
        except httpx.HTTPStatusError as exc:
            raise LocalJudgeUnavailable(f"HTTP {exc.response.status_code}") from exc
        except (httpx.HTTPError, ValueError) as exc:  # refused, reset, not JSON
            raise LocalJudgeUnavailable(f"unreachable at {self.url} ({type(exc).__name__})") \
                from exc
        if not isinstance(reply, dict):
            raise LocalJudgeUnavailable("a reply that is not a JSON object")
        return yes_probability(reply)


def local_judge_for(ctx: Context, shipped: Judge) -> LocalJudge | None:
    """The default factory (Deps.local_judge_factory): a LocalJudge where the run names a URL,
    else None (the shipped judge alone)."""
    if not ctx.local_judge_url.strip():
        return None
    manifest = local_manifest()
    if ctx.local_judge_veto is not None or ctx.local_judge_margin is not None:
        manifest = Manifest(
            veto=manifest.veto if ctx.local_judge_veto is None else ctx.local_judge_veto,
            margin=manifest.margin if ctx.local_judge_margin is None else ctx.local_judge_margin,
            max_len=0, train_articles=frozenset(), tune_articles=frozenset(), raw=manifest.raw)
    return LocalJudge(url=ctx.local_judge_url.strip(), shipped=shipped,
                      max_candidates=ctx.local_judge_max_candidates,
                      timeout_s=ctx.local_judge_timeout_s, prompt=ctx.local_judge_prompt,
                      manifest=manifest)
