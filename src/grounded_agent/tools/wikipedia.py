"""Wikipedia as a source: search, read the best articles, return their most relevant sections.

The MediaWiki API is called with `requests` directly, per call and per language, rather than
through `wikipedia.page()`: the package's `_wiki_request` keeps the API URL in global state
(`set_lang`), sends no timeout, uses plain http and ignores the HTTP status, so a 429 or 503
would surface as a JSON error and could not be reported as rate_limit or unavailable. The
package's own exception types (PageError, DisambiguationError) still name the two page-level
cases, and the requests are the ones the package makes (list=search, prop=extracts|info with
ppprop=disambiguation), plus prop=revisions for the last edit date.
"""

from __future__ import annotations

import asyncio
import html
import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from urllib.parse import quote

import requests
from pydantic import BaseModel, Field

from grounded_agent.redaction import redacted_traceback
from grounded_agent.schemas import DEFAULT_THRESHOLDS, Finding, Thresholds, ToolOutcome
from grounded_agent.tools._retry import (
    Failure,
    RetryPolicy,
    SourceFailure,
    classify_exception,
    classify_status,
    run_with_retries_blocking,
    short,
    with_detail,
)
from grounded_agent.tools.base import RelevanceScorer, SourceTool, default_classify, guarded

log = logging.getLogger(__name__)

USER_AGENT = "grounded-agent/0.1 (https://github.com/grounded-agent; evidence-grounded QA bot)"
_LANGUAGE = re.compile(r"^[a-z][a-z0-9]{1,11}(-[a-z0-9]{1,12}){0,2}$")
_HEADING = re.compile(r"^(={2,6})\s*(.+?)\s*\1\s*$", re.MULTILINE)
_TAG = re.compile(r"<[^>]+>")
_SKIP_SECTIONS = frozenset(
    {
        "see also",
        "references",
        "external links",
        "further reading",
        "notes",
        "bibliography",
        "sources",
        "citations",
        "footnotes",
        "notes and references",
    }
)
_MAX_PASSAGE_CHARS = 1200
_AMBIGUITY_MARGIN = 0.05
"""A disambiguation option is followed only if it beats the runner-up by this much."""
_MAX_OPTIONS = 50

WIKIPEDIA_DESCRIPTION = (
    "Search Wikipedia for encyclopedic background: people, places, organisations, history, "
    "science, definitions. Reads the best-matching articles and returns their most relevant "
    "sections, each with article title, section, URL and last-edit date. Use it for established "
    "general knowledge, not for recent news or for the private knowledge base. Pass a short "
    "keyword query naming the topic (e.g. 'tidal locking Moon'), not a whole question. "
    "max_pages (1-3) limits how many articles are read."
)


class WikipediaArgs(BaseModel):
    """What the model may pass to the Wikipedia tool."""

    query: str = Field(min_length=1, max_length=300, description="Keywords naming the topic.")
    max_pages: int = Field(default=2, ge=1, le=3, description="How many articles to read (1-3).")


@dataclass(frozen=True)
class _Hit:
    pageid: int
    title: str
    snippet: str
    rank: int


@dataclass(frozen=True)
class _Page:
    pageid: int
    title: str
    url: str
    extract: str
    revision_id: int | None
    revised: date | None


@dataclass(frozen=True)
class _Passage:
    section: str | None
    text: str


class _MediaWiki:
    """One call's MediaWiki client: language in the URL, a deadline on every request, and the
    retry rule web search uses (429 after Retry-After within the budget, 5xx and timeouts with
    backoff, never 401/403 or a malformed body)."""

    def __init__(
        self,
        language: str,
        deadline: float,
        session: requests.Session,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.language = language
        self.api_url = f"https://{language}.wikipedia.org/w/api.php"
        self.deadline = deadline
        self.session = session
        self.policy = policy or RetryPolicy()

    def get(self, params: dict[str, Any]) -> dict[str, Any]:
        """One API request, retried by the shared rule; raises SourceFailure with the last
        failure's kind, never returns junk."""
        if self.deadline - time.monotonic() <= 0:
            raise SourceFailure(Failure("timeout", False, "time budget spent before the request"))
        return run_with_retries_blocking(
            lambda remaining: self._get_once(params, remaining),
            classify=classify_exception,
            policy=self.policy,
            deadline=self.deadline,
            label="wikipedia",
        )

    def _get_once(self, params: dict[str, Any], remaining: float) -> dict[str, Any]:
        try:
            resp = self.session.get(
                self.api_url,
                params={"format": "json", "action": "query", **params},
                headers={"User-Agent": USER_AGENT},
                timeout=(min(remaining, 5.0), remaining),
            )
        except requests.RequestException as exc:
            raise SourceFailure(classify_exception(exc)) from None
        failure = classify_status(
            resp.status_code,
            retry_after=resp.headers.get("Retry-After"),
            detail=short(resp.text, 120),
        )
        if failure is not None:
            raise SourceFailure(failure)
        try:
            body = resp.json()
        except ValueError as exc:
            raise SourceFailure(Failure("bad_response", False, short(f"not JSON: {exc}"))) from None
        if not isinstance(body, dict):
            raise SourceFailure(Failure("bad_response", False, "JSON body is not an object"))
        if "error" in body:
            raise SourceFailure(_api_error(body["error"]))
        return body

    def search(self, query: str, *, limit: int, page_size: int) -> list[_Hit]:
        """list=search, following `continue` until `limit` hits.

        Coverage is all or nothing: a later page that fails, repeats a page id, or reports a
        different total than the first page makes the whole search a failure.
        """
        params: dict[str, Any] = {
            "list": "search",
            "srsearch": query,
            "srlimit": page_size,
            "srnamespace": 0,
            "srprop": "snippet|timestamp",
            "srinfo": "totalhits",
        }
        hits: list[_Hit] = []
        seen: set[int] = set()
        total: int | None = None
        cont: dict[str, str] = {}
        max_requests = math.ceil(limit / page_size) + 1
        for page_no in range(1, max_requests + 1):
            try:
                body = self.get({**params, **cont})
                batch, page_total, cont = _parse_search_page(body)
            except SourceFailure as exc:
                if page_no == 1:
                    raise
                raise SourceFailure(
                    with_detail(
                        exc.failure, f"search result page {page_no} failed after {page_no - 1} read"
                    )
                ) from None
            if page_total is not None:
                if total is not None and page_total != total:
                    raise SourceFailure(
                        Failure(
                            "bad_response",
                            False,
                            f"totalhits changed while paging: {total} then {page_total}",
                        )
                    )
                total = page_total
            for pageid, title, snippet in batch:
                if pageid in seen:
                    raise SourceFailure(
                        Failure(
                            "bad_response", False, f"page id {pageid} repeated across result pages"
                        )
                    )
                seen.add(pageid)
                hits.append(_Hit(pageid, title, snippet, rank=len(hits)))
            if len(hits) >= limit or not cont or not batch:
                break
        return hits[:limit]

    def page(self, *, pageid: int | None = None, title: str | None = None) -> _Page:
        """Text, URL and last revision of one article.

        Raises PageError for a missing page and DisambiguationError (with the linked titles as
        options) for a disambiguation page, as the `wikipedia` package does.
        """
        # imported here, not at the top: the `wikipedia` package brings BeautifulSoup, which
        # no question that stays in the knowledge base should pay for at start-up
        from wikipedia.exceptions import DisambiguationError, PageError

        params: dict[str, Any] = {
            "prop": "extracts|info|revisions|pageprops",
            "explaintext": 1,
            "exsectionformat": "wiki",
            "inprop": "url",
            "rvprop": "ids|timestamp",
            "ppprop": "disambiguation",
            "redirects": 1,
        }
        if pageid is not None:
            params["pageids"] = pageid
        else:
            params["titles"] = title
        page = _single_page(self.get(params))
        if "missing" in page or "invalid" in page:
            if pageid is not None:
                raise PageError(pageid=pageid)
            raise PageError(None, title)
        found_id, found_title = _page_identity(page)
        if "disambiguation" in (page.get("pageprops") or {}):
            raise DisambiguationError(found_title, self._links(found_id))
        extract = page.get("extract")
        if not isinstance(extract, str):
            raise SourceFailure(
                Failure("bad_response", False, f"page {found_id} came without text")
            )
        revision_id, revised = _last_revision(page)
        url = page.get("fullurl") or page.get("canonicalurl")
        if not isinstance(url, str) or not url:
            url = (
                f"https://{self.language}.wikipedia.org/wiki/{quote(found_title.replace(' ', '_'))}"
            )
        return _Page(found_id, found_title, url, extract, revision_id, revised)

    def _links(self, pageid: int) -> list[str]:
        """Article titles a disambiguation page links to (first batch only: they are options)."""
        body = self.get(
            {"prop": "links", "pageids": pageid, "plnamespace": 0, "pllimit": _MAX_OPTIONS}
        )
        links = _single_page(body).get("links") or []
        if not isinstance(links, list):
            raise SourceFailure(Failure("bad_response", False, "links is not a list"))
        return [
            str(link["title"]) for link in links if isinstance(link, dict) and link.get("title")
        ]


def _api_error(error: Any) -> Failure:
    """A MediaWiki `{"error": {...}}` body: readable, but the API refused the request."""
    code = str(error.get("code", "")) if isinstance(error, dict) else ""
    info = str(error.get("info", "")) if isinstance(error, dict) else str(error)
    detail = short(f"MediaWiki error {code}: {info}")
    if code in ("ratelimited", "maxlag"):
        return Failure("rate_limit", True, detail)
    if (
        code.startswith("internal_api_error")
        or code == "readonly"
        or info in ("HTTP request timed out.", "Pool queue is full")
    ):
        return Failure("unavailable", True, detail)
    return Failure("unknown", False, detail)


def _bad(detail: str) -> SourceFailure:
    return SourceFailure(Failure("bad_response", False, detail))


def _parse_search_page(
    body: dict[str, Any],
) -> tuple[list[tuple[int, str, str]], int | None, dict[str, str]]:
    """(hits, totalhits, continue params) of one list=search response; bad_response otherwise."""
    query = body.get("query")
    if not isinstance(query, dict) or not isinstance(query.get("search"), list):
        raise _bad("list=search response without query.search list")
    batch: list[tuple[int, str, str]] = []
    for item in query["search"]:
        if not isinstance(item, dict):
            raise _bad("search hit is not an object")
        pageid, title = item.get("pageid"), item.get("title")
        if not isinstance(pageid, int) or isinstance(pageid, bool) or not isinstance(title, str):
            raise _bad("search hit without integer pageid and title")
        snippet = item.get("snippet")
        batch.append((pageid, title, snippet if isinstance(snippet, str) else ""))
    info = query.get("searchinfo")
    total = info.get("totalhits") if isinstance(info, dict) else None
    if total is not None and (not isinstance(total, int) or isinstance(total, bool)):
        raise _bad("searchinfo.totalhits is not an integer")
    raw_cont = body.get("continue")
    cont: dict[str, str] = {}
    if isinstance(raw_cont, dict) and "sroffset" in raw_cont:
        cont = {str(k): str(v) for k, v in raw_cont.items()}
    return batch, total, cont


def _single_page(body: dict[str, Any]) -> dict[str, Any]:
    query = body.get("query")
    pages = query.get("pages") if isinstance(query, dict) else None
    if not isinstance(pages, dict) or len(pages) != 1:
        raise _bad("prop query without exactly one page")
    page = next(iter(pages.values()))
    if not isinstance(page, dict):
        raise _bad("page entry is not an object")
    return page


def _page_identity(page: dict[str, Any]) -> tuple[int, str]:
    pageid, title = page.get("pageid"), page.get("title")
    if not isinstance(pageid, int) or not isinstance(title, str):
        raise _bad("page without integer pageid and title")
    return pageid, title


def _last_revision(page: dict[str, Any]) -> tuple[int | None, date | None]:
    revisions = page.get("revisions")
    if not isinstance(revisions, list) or not revisions or not isinstance(revisions[0], dict):
        return None, None
    rev = revisions[0]
    revid = rev.get("revid") if isinstance(rev.get("revid"), int) else None
    stamp = rev.get("timestamp")
    revised = None
    if isinstance(stamp, str):
        try:
            revised = datetime.fromisoformat(stamp.replace("Z", "+00:00")).date()
        except ValueError:
            revised = None
    return revid, revised


def split_sections(extract: str) -> list[_Passage]:
    """Passages of a plain-text extract, cut at its `== Heading ==` lines.

    The lead has section None; subsections are named by their path ("History / Early years").
    Reference-like sections are dropped and long sections are cut at paragraph boundaries.
    """
    passages: list[_Passage] = []
    path: list[tuple[int, str]] = []
    pos = 0
    current: str | None = None
    skipping = False
    for match in _HEADING.finditer(extract):
        if not skipping:
            passages.extend(_chunks(current, extract[pos : match.start()]))
        level, name = len(match.group(1)), match.group(2).strip()
        path = [p for p in path if p[0] < level] + [(level, name)]
        current = " / ".join(n for _, n in path)
        skipping = path[0][1].lower() in _SKIP_SECTIONS
        pos = match.end()
    if not skipping:
        passages.extend(_chunks(current, extract[pos:]))
    return passages


def _chunks(section: str | None, body: str) -> list[_Passage]:
    paragraphs = [p.strip() for p in body.split("\n") if p.strip()]
    out: list[_Passage] = []
    buf = ""
    for para in paragraphs:
        while len(para) > _MAX_PASSAGE_CHARS:
            cut = para.rfind(" ", 0, _MAX_PASSAGE_CHARS)
            cut = cut if cut > 0 else _MAX_PASSAGE_CHARS
            if buf:
                out.append(_Passage(section, buf))
                buf = ""
            out.append(_Passage(section, para[:cut].strip()))
            para = para[cut:].strip()
        if buf and len(buf) + 1 + len(para) > _MAX_PASSAGE_CHARS:
            out.append(_Passage(section, buf))
            buf = ""
        buf = f"{buf}\n{para}" if buf else para
    if buf:
        out.append(_Passage(section, buf))
    return out


def _scores(scorer: RelevanceScorer, query: str, texts: Sequence[str]) -> list[float]:
    """Scorer output, checked and clamped to [0, 1] (Finding rejects anything else)."""
    if not texts:
        return []
    raw = list(scorer.score(query, texts))
    if len(raw) != len(texts):
        raise SourceFailure(Failure("unknown", False, "scorer returned a wrong number of scores"))
    return [0.0 if math.isnan(s) else min(1.0, max(0.0, float(s))) for s in raw]


def _clean_snippet(snippet: str) -> str:
    return html.unescape(_TAG.sub("", snippet))


@dataclass(frozen=True)
class _Settings:
    query: str
    language: str
    max_pages: int
    found_threshold: float
    low_threshold: float
    search_results: int
    search_page_size: int
    passages_per_page: int
    policy: RetryPolicy = field(default_factory=RetryPolicy)


def _read(
    settings: _Settings, scorer: RelevanceScorer, deadline: float
) -> tuple[list[Finding], list[tuple[str, Failure]]]:
    """The blocking part, run in a worker thread: search, choose pages, choose passages.

    Returns the findings and the pages that could not be read, each with its failure. A failed
    search, or every chosen page failing, raises SourceFailure: nothing was read.
    """
    s = settings
    with requests.Session() as session:
        wiki = _MediaWiki(s.language, deadline, session, s.policy)
        hits = wiki.search(s.query, limit=s.search_results, page_size=s.search_page_size)
        log.debug("wikipedia(%s): %d hits for %r", s.language, len(hits), s.query)
        if not hits:
            return [], []
        hit_scores = _scores(
            scorer, s.query, [f"{h.title}. {_clean_snippet(h.snippet)}" for h in hits]
        )
        ranked = sorted(zip(hits, hit_scores, strict=True), key=lambda hs: (-hs[1], hs[0].rank))
        findings: list[Finding] = []
        failed: list[tuple[str, Failure]] = []
        read: set[int] = set()
        tried = 0
        for hit, _ in ranked[: s.max_pages]:
            if hit.pageid in read:
                continue
            tried += 1
            try:
                findings.extend(_read_hit(wiki, hit, s, scorer, read))
            except SourceFailure as exc:  # in the outcome's detail, warned once by the graph
                log.info(
                    "wikipedia: page %r could not be read (%s): %s",
                    hit.title,
                    exc.failure.kind,
                    exc.failure.detail,
                )
                failed.append((hit.title, exc.failure))
        if failed and len(failed) == tried:
            title, failure = failed[-1]
            raise SourceFailure(with_detail(failure, f"no page could be read (last: {title!r})"))
        return findings, failed


def _read_hit(
    wiki: _MediaWiki, hit: _Hit, s: _Settings, scorer: RelevanceScorer, read: set[int]
) -> list[Finding]:
    """Findings from one search hit: the article, or the likely option of a disambiguation page."""
    from wikipedia.exceptions import DisambiguationError, PageError

    try:
        page = wiki.page(pageid=hit.pageid)
    except PageError:
        log.info("wikipedia: page %d (%r) is missing", hit.pageid, hit.title)
        read.add(hit.pageid)
        return []
    except DisambiguationError as dis:
        read.add(hit.pageid)
        options = [str(o) for o in dis.options][:_MAX_OPTIONS]
        option = _likely_option(scorer, s, options)
        if option is not None:
            try:
                page = wiki.page(title=option)
            except (PageError, DisambiguationError):
                log.info(
                    "wikipedia: option %r of %r did not resolve to an article", option, dis.title
                )
            else:
                if page.pageid in read:
                    return []
                read.add(page.pageid)
                return _page_findings(page, s, scorer, via=str(dis.title))
        return [_ambiguous_finding(wiki, hit, str(dis.title), options, s, scorer)]
    read.add(page.pageid)
    return _page_findings(page, s, scorer)


def _likely_option(scorer: RelevanceScorer, s: _Settings, options: list[str]) -> str | None:
    """The option clearly best for the query, or None when none or several are."""
    if not options:
        return None
    scores = _scores(scorer, s.query, options)
    order = sorted(range(len(options)), key=lambda i: -scores[i])
    best = scores[order[0]]
    runner_up = scores[order[1]] if len(order) > 1 else 0.0
    if best >= s.low_threshold and best - runner_up >= _AMBIGUITY_MARGIN:
        return options[order[0]]
    return None


def _ambiguous_finding(
    wiki: _MediaWiki,
    hit: _Hit,
    title: str,
    options: list[str],
    s: _Settings,
    scorer: RelevanceScorer,
) -> Finding:
    """The disambiguation page itself, scored below the answer threshold: it names candidates,
    it answers nothing."""
    text = (
        f"{title} may refer to: " + "; ".join(options) if options else f"{title} (disambiguation)"
    )
    score = _scores(scorer, s.query, [text])[0]
    capped = min(score, math.nextafter(s.found_threshold, 0.0))
    url = f"https://{wiki.language}.wikipedia.org/wiki/{quote(title.replace(' ', '_'))}"
    return Finding(
        source="wikipedia",
        source_id=url,
        title=title,
        text=text,
        url=url,
        language=s.language,
        score=capped,
        raw_score=score,
        chunk_index=0,
        extra={"pageid": hit.pageid, "disambiguation": True, "options": options},
    )


def _page_findings(
    page: _Page, s: _Settings, scorer: RelevanceScorer, via: str | None = None
) -> list[Finding]:
    passages = split_sections(page.extract)
    scores = _scores(
        scorer, s.query, [f"{page.title}. {p.section or ''}\n{p.text}" for p in passages]
    )
    best = sorted(range(len(passages)), key=lambda i: -scores[i])[: s.passages_per_page]
    extra: dict[str, Any] = {"pageid": page.pageid}
    if page.revision_id is not None:
        extra["revision_id"] = page.revision_id
    if via is not None:
        extra["via_disambiguation"] = via
    return [
        Finding(
            source="wikipedia",
            source_id=page.url,
            title=page.title,
            text=passages[i].text,
            section=passages[i].section,
            url=page.url,
            document_date=page.revised,
            version=str(page.revision_id) if page.revision_id is not None else None,
            language=s.language,
            chunk_index=i,
            score=scores[i],
            extra=dict(extra),
        )
        for i in best
    ]


async def search_wikipedia(
    query: str,
    *,
    scorer: RelevanceScorer,
    language: str = "en",
    max_pages: int = 2,
    timeout_s: float = 12.0,
    found_threshold: float = DEFAULT_THRESHOLDS.found,
    low_threshold: float = DEFAULT_THRESHOLDS.low,
    search_results: int = 10,
    search_page_size: int = 10,
    passages_per_page: int = 3,
    max_retries: int = 2,
    backoff_s: float = 0.5,
) -> ToolOutcome:
    """Search one language edition of Wikipedia and return its most relevant passages.

    Never raises: a completed read is classified by its best score (found / low_relevance /
    not_found with a finding_count); a read where some chosen pages failed is `partial` (the
    pages read are kept, finding_count None); anything that stopped the read is an error outcome
    whose error_kind says why and whose finding_count is None. Each request is retried by the
    rule web search uses (`tools._retry`), within `timeout_s`.
    """
    settings = _settings(
        query,
        language,
        max_pages,
        found_threshold,
        low_threshold,
        search_results=search_results,
        search_page_size=search_page_size,
        passages_per_page=passages_per_page,
        policy=RetryPolicy(max_retries=max_retries, backoff_s=backoff_s),
    )
    return await guarded(
        "wikipedia",
        query,
        lambda: _search(settings, scorer, timeout_s),
        timeout_s=timeout_s,
        classify=_wikipedia_failure,
    )


def _settings(
    query: str,
    language: str,
    max_pages: int,
    found_threshold: float,
    low_threshold: float,
    *,
    search_results: int = 10,
    search_page_size: int = 10,
    passages_per_page: int = 3,
    policy: RetryPolicy | None = None,
) -> _Settings:
    return _Settings(
        query,
        language,
        max_pages,
        found_threshold,
        low_threshold,
        max(1, search_results),
        max(1, search_page_size),
        max(1, passages_per_page),
        policy or RetryPolicy(),
    )


async def _search(settings: _Settings, scorer: RelevanceScorer, timeout_s: float) -> ToolOutcome:
    """The read itself, in a worker thread; raises SourceFailure for a classified failure."""
    if not _LANGUAGE.match(settings.language):
        raise SourceFailure(
            Failure("config", False, f"invalid language code {settings.language!r}")
        )
    started = time.perf_counter()
    # the requests stop a little before the tool's own timeout, so the pages already read
    # survive as a partial read instead of being lost to the outer timeout
    deadline = time.monotonic() + timeout_s - min(1.0, timeout_s * 0.1)
    items, failed = await asyncio.to_thread(_read, settings, scorer, deadline)
    if failed:
        # some pages were read, some not: usable, but absence is not established
        detail = short(
            "; ".join(f"page {title!r} not read: {f.kind} ({f.detail})" for title, f in failed)
        )
        return ToolOutcome.partial_read(
            "wikipedia",
            settings.query,
            items,
            detail=detail,
            thresholds=Thresholds(settings.found_threshold, settings.low_threshold),
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )
    return ToolOutcome.from_items(
        "wikipedia",
        settings.query,
        items,
        thresholds=Thresholds(settings.found_threshold, settings.low_threshold),
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )


def _wikipedia_failure(exc: Exception) -> Failure:
    if isinstance(exc, SourceFailure):  # the graph's one warning says it (nodes/call_tools)
        log.info("wikipedia failed (%s): %s", exc.failure.kind, exc.failure.detail)
        return exc.failure
    if isinstance(exc, TimeoutError):
        return default_classify("wikipedia")(exc)
    log.error("wikipedia failed unexpectedly: %s", redacted_traceback(exc))
    return Failure("unknown", False, short(f"{type(exc).__name__}: {exc}"))


def make_wikipedia_tool(
    scorer: RelevanceScorer,
    *,
    language: str = "en",
    timeout_s: float = 12.0,
    found_threshold: float = DEFAULT_THRESHOLDS.found,
    low_threshold: float = DEFAULT_THRESHOLDS.low,
    max_retries: int = 2,
    backoff_s: float = 0.5,
) -> SourceTool:
    """The allow-listed "wikipedia" tool: one read of at most `timeout_s`, retries included."""
    policy = RetryPolicy(max_retries=max_retries, backoff_s=backoff_s)

    async def wikipedia(args: WikipediaArgs) -> ToolOutcome:
        settings = _settings(
            args.query, language, args.max_pages, found_threshold, low_threshold, policy=policy
        )
        return await _search(settings, scorer, timeout_s)

    return SourceTool(
        name="wikipedia",
        description=WIKIPEDIA_DESCRIPTION,
        args_schema=WikipediaArgs,
        func=wikipedia,
        timeout_s=timeout_s,
        classify=_wikipedia_failure,
    )
