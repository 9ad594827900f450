"""`make mutants`: a mutation run (mutmut 3) of the safety-critical modules; not part of CI.

Each target is one module and the test files that guard it. For each, a scratch copy of the
tracked tree is made under `var/mutants/<name>/` (mutmut writes its mutated copy and cache
there, never into the checkout), mutmut runs every mutant against the tests that covered the
mutated function, and the survivors are listed with their diff. Two named mutations from the
issue that mutmut's operators do not produce (the verification gate forced open, the answer
cache key losing the audience and segments) are applied as patches to a scratch copy and must
make their tests fail.

    python scripts/mutants.py [--only NAME ...] [--max-children N]

writes `docs/reports/mutants.md` (and the raw results, with the first run's scores as the
baseline, to `docs/reports/mutants.json`). A survivor is either killed
by a test or explained in `EXPLAINED` (why no test can or should see it).
"""

# ruff: noqa: S603, S607 - runs git, mutmut and pytest of this checkout
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "var" / "mutants"
REPORT = ROOT / "docs" / "reports" / "mutants.md"
MUTMUT = [str(ROOT / ".venv" / "bin" / "mutmut")]
PACKAGES = [
    "actions",
    "analytics",
    "bench",
    "chat",
    "config",
    "console",
    "conversations",
    "demo",
    "evals",
    "handoffs",
    "inference",
    "knowledge",
    "supportbot",
    "verification",
]
ALSO_COPY = ["conftest.py", "manage.py", "templates", "static", "scripts", "docs"]
# No engines or browsers; the order service the money tests call runs as a process of its own.
# One child at a time on one kept test database (--reuse-db): children at once would create,
# flush and drop the same database under each other, and count the wreck as kills.
PYTEST_ARGS = ["-p", "no:cacheprovider", "-q", "--reuse-db", "-m", "not browser and not vllm"]


@dataclass(frozen=True)
class Target:
    name: str
    module: str
    tests: list[str]
    promise: str


TARGETS = [
    Target(
        "decide",
        "actions/services/decide.py",
        [
            "actions/tests/test_services.py",
            "actions/tests/test_views.py",
            "actions/tests/test_decide.py",
        ],
        "approve / reject: who may, optimistic version, re-validation before execution",
    ),
    Target(
        "idempotency",
        "supportbot/idempotency.py",
        ["supportbot/tests/test_idempotency.py", "chat/tests/test_sse_idempotency.py"],
        "Idempotency-Key: one side effect per key, replayed response, mismatch refused",
    ),
    Target(
        "identity",
        "chat/identity.py",
        ["chat/tests/test_consumers_identity.py", "chat/tests/test_identity.py"],
        "signed customer identity, single-use tokens, sessions, visitor tokens",
    ),
    Target(
        "ratelimit",
        "supportbot/ratelimit.py",
        [
            "supportbot/tests/test_ratelimit.py",
            "supportbot/tests/test_login_throttle.py",
        ],
        "rate limits and login lockouts",
    ),
    Target(
        "verifier",
        "verification/verifier.py",
        ["verification/tests/test_alignment.py", "verification/tests/test_verification.py"],
        "the verification gate: a generated sentence is published only when supported",
    ),
    Target(
        "answer-cache",
        "chat/orchestrator/answer_cache.py",
        [
            "chat/tests/test_answer_cache_audience.py",
            "chat/tests/test_orchestrator.py",
            "chat/tests/test_answer_cache.py",
        ],
        "answer cache keyed by tenant, audience, segments and knowledge version",
    ),
    Target(
        "money",
        "actions/money.py",
        [
            "chat/tests/test_intents.py",
            "actions/tests/test_registry.py",
            "actions/tests/test_money.py",
        ],
        "amounts read from the customer's words (the refund amount)",
    ),
    Target(
        "tenant-filters",
        "knowledge/selectors/filters.py",
        [
            "knowledge/tests/test_selectors.py",
            "chat/tests/test_answer_cache_audience.py",
            "knowledge/tests/test_filters.py",
        ],
        "every search's WHERE clause: tenant, live, audience and segments",
    ),
]


@dataclass(frozen=True)
class NamedMutation:
    name: str
    path: str
    old: str
    new: str
    tests: list[str]


NAMED = [
    NamedMutation(
        "verification gate forced open (an unsupported sentence kept: `if not check.supported:`"
        " -> `if False:`)",
        "chat/orchestrator/generate.py",
        "if not check.supported:",
        "if False:",
        ["chat/tests/test_verified_release.py"],
    ),
    NamedMutation(
        "answer-cache key without audience and segments",
        "chat/orchestrator/answer_cache.py",
        '            audience.kind,\n            ",".join(audience.segments),\n',
        "",
        ["chat/tests/test_answer_cache_audience.py"],
    ),
]

# Survivors that no test should kill, with the reason (mutant name -> why).
_QUERIES_ONLY = (
    "select_related only saves queries: the related row is read lazily with the same result"
)
_NO_POSITIONAL = "our DRF views are routed with keyword arguments only: `*args` is always empty"
_IDEM = "supportbot.idempotency.x"
_KEY_LABEL = "the label only names a secret inside sessions made by the same code; any label works"
_VISITOR_ID = "any length from 16 random bytes up keeps a visitor id unguessable"
_LOCALE_CASE = "babel parses locale names case-insensitively (`de_de` is `de_DE`)"
_TEXT_EDGE = "a made-up word at the text's edge is no currency, suffix or figure, as '' is not"
_NONCE = "any nonce of 12 random bytes or more keeps tokens unique"
_REASON_TEXT = (
    "a drop reason's wording (or None): the gate asks only whether any reason exists; the"
    " text is a diagnostic in the verification record"
)
_FLOAT_EDGE = "a score exactly equal to a float threshold: measured by calibration, not by a test"
_LONGER_MARK = "a used-mark kept longer than the token lives changes nothing a caller sees"
_MARK_NAME = (
    "the used-mark's namespace: any name no other mark uses behaves the same (None included)"
)
EXPLAINED: dict[str, str] = {
    "actions.services.decide.x_action_decide__mutmut_5": _QUERIES_ONLY,
    "actions.services.decide.x_action_decide__mutmut_6": _QUERIES_ONLY,
    f"{_IDEM}ǁReplayǁ__init____mutmut_1": (
        "the exception's message is never read: `handle_exception` answers from `exc.record`"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁdispatch__mutmut_1": (
        "`initial` sets the attribute to None before anything reads it"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁdispatch__mutmut_4": _NO_POSITIONAL,
    f"{_IDEM}ǁIdempotentPostMixinǁinitial__mutmut_4": _NO_POSITIONAL,
    f"{_IDEM}ǁIdempotentPostMixinǁinitial__mutmut_5": (
        "DRF's `initial` reads only a `format` suffix from kwargs; no route of ours has one"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁinitial__mutmut_25": (
        "`request.auth` is an ApiKey or None for both authentication classes we use "
        "(ApiKeyAuthentication, SessionAuthentication)"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁhandle_exception__mutmut_9": (
        "HTTP header names are case-insensitive (Django's response headers too)"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁhandle_exception__mutmut_10": (
        "HTTP header names are case-insensitive (Django's response headers too)"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁfinalize_response__mutmut_6": _NO_POSITIONAL,
    f"{_IDEM}ǁIdempotentPostMixinǁfinalize_response__mutmut_7": (
        "DRF calls `finalize_response` without keyword arguments"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁfinalize_response__mutmut_13": (
        "`dispatch` always sets the attribute first, so the default is never used"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁfinalize_response__mutmut_18": (
        "no streamed response of ours has status 300 (streams are 200)"
    ),
    f"{_IDEM}ǁIdempotentPostMixinǁfinalize_response__mutmut_19": (
        "no streamed response of ours has status 300 (streams are 200)"
    ),
    "chat.identity.x__secret_id__mutmut_3": _KEY_LABEL,
    "chat.identity.x__secret_id__mutmut_4": _KEY_LABEL,
    "chat.identity.x_identity_session_verify__mutmut_39": (
        "the one second in which `expires == now`: expiry is to the second, by design"
    ),
    "chat.identity.x_visitor_token_make__mutmut_3": _VISITOR_ID,
    "chat.identity.x_visitor_token_make__mutmut_4": _VISITOR_ID,
    "chat.identity.x_identity_token_redeem__mutmut_11": _LONGER_MARK,
    "chat.identity.x_identity_token_redeem__mutmut_14": _LONGER_MARK,
    "chat.identity.x_identity_token_redeem__mutmut_18": _MARK_NAME,
    "chat.identity.x_identity_token_redeem__mutmut_24": _MARK_NAME,
    "chat.identity.x_identity_token_redeem__mutmut_25": _MARK_NAME,
    "chat.identity.x_identity_token_make__mutmut_1": (
        "the default lifetime (one hour or one second more): sites set their own"
    ),
    "chat.identity.x_identity_token_make__mutmut_15": _NONCE,
    "chat.identity.x_identity_token_make__mutmut_16": _NONCE,
    "chat.identity.x__secrets_in_force__mutmut_6": (
        "the instant the rotation overlap ends (`until == now`), to the microsecond"
    ),
    "chat.identity.x_identity_token_verify__mutmut_80": (
        "the one second in which `expires == now`: expiry is to the second, by design"
    ),
    "chat.identity.x_identity_token_verify__mutmut_91": (
        "a token whose lifetime is exactly the maximum plus the clock skew, to the second"
    ),
    **{
        f"chat.orchestrator.answer_cache.x_cache_put__mutmut_{n}": (
            "the log line's wording and traceback when Redis is down: operators' text, no promise"
        )
        for n in (31, 32, 33, 34)
    },
    "actions.money.x__read_number__mutmut_7": _LOCALE_CASE,
    "actions.money.x__read_number__mutmut_8": _LOCALE_CASE,
    "actions.money.x_read_amounts__mutmut_17": _TEXT_EDGE,
    "actions.money.x_read_amounts__mutmut_26": _TEXT_EDGE,
    "actions.money.x__with_digits__mutmut_7": (
        "an order id becomes a word either way: no figure, currency or number word"
    ),
    "actions.money.x__currency_next_to__mutmut_13": (
        "the span of a figure with no currency before it is rewritten or unused (a bare number)"
    ),
    **{
        f"knowledge.selectors.filters.x_filter_sql__mutmut_{n}": "SQL keywords are case-insensitive"
        for n in (3, 12, 15, 22)
    },
    "knowledge.selectors.filters.xǁAudienceǁcustomer__mutmut_3": (
        "`customer` is the dataclass's default kind"
    ),
    "chat.identity.x__secret_id__mutmut_5": _KEY_LABEL,
    "chat.identity.x__b64d__mutmut_6": (
        "Python's base64 decoder ignores surplus padding, so adding 3 '=' instead of 1 decodes"
        " the same"
    ),
    **{
        f"chat.orchestrator.answer_cache.x_cache_put__mutmut_{n}": (
            "the log line's wording and traceback when Redis is down: operators' text, no promise"
        )
        for n in (35, 36, 37)
    },
    **{
        f"supportbot.ratelimit.{name}": why
        for names, why in (
            (
                ("xǁ_RedisStateǁ__init____mutmut_2", "xǁ_RedisStateǁ__init____mutmut_3"),
                'a state with no client or URL yet (None or "") connects on first use either way',
            ),
            (
                ("xǁ_RedisStateǁ__init____mutmut_5", "x_rate_limits_reset__mutmut_2"),
                "`down_until` 1.0 instead of 0.0: the monotonic clock is past it within a second",
            ),
            (
                ("xǁ_RedisStateǁget__mutmut_1",),
                "the instant the retry interval ends (`now == down_until`), to the nanosecond",
            ),
            (
                ("x__digest__mutmut_10",),
                '"UTF-8" and "utf-8" name the same codec',
            ),
            (
                (
                    "x_rate_limits_reset__mutmut_6",
                    "x_rate_limits_reset__mutmut_8",
                    "x_rate_limits_reset__mutmut_9",
                ),
                "SCAN's batch size (a hint to Redis): every matching key is visited either way",
            ),
            (
                (
                    "xǁ_RedisStateǁfailed__mutmut_1",
                    "x_mark_once__mutmut_11",
                    "x_mark_once__mutmut_40",
                    "x_lockout_remaining__mutmut_34",
                ),
                "a clock reading exactly equal to an expiry, to the nanosecond",
            ),
            (
                ("x__sliding_decision__mutmut_6", "x_rate_limit_hit__mutmut_6"),
                "int(a / b) and int(a // b) agree for the positive times and windows used",
            ),
            (
                ("x__sliding_decision__mutmut_19",),
                "`<` and `<=` differ only at exactly the 1e-9 tolerance added to the count",
            ),
            (
                ("x_rate_limit_hit__mutmut_13", "x_rate_limit_hit__mutmut_14"),
                "the pipeline is one round trip either way, and the previous window's GET does"
                " not depend on another client's INCRBY of this window in between",
            ),
            (
                (
                    "x_lockout_set__mutmut_11",
                    "x_lockout_set__mutmut_19",
                    "x_lockout_remaining__mutmut_21",
                    "x_mark_once__mutmut_9",
                    "x_mark_once__mutmut_24",
                    "x_mark_once__mutmut_38",
                    "x_mark_once__mutmut_43",
                ),
                "a lock's or mark's stored count is never read: only its presence and expiry",
            ),
            (
                (
                    "x_lockout_remaining__mutmut_22",
                    "x_mark_once__mutmut_10",
                    "x_mark_once__mutmut_39",
                ),
                "a default expiry of 0.0 or 1.0 (1970) is in the past either way",
            ),
            (
                ("x_lockout_remaining__mutmut_30",),
                "remaining is never negative (max with 0), and int(0 + 0.999) is 0",
            ),
            (
                ("x_mark_once__mutmut_5",),
                "the second look at this process's marks, under the same lock, decides too",
            ),
            (
                ("x_mark_once__mutmut_32",),
                "the cause in the fallback warning (a log line for operators)",
            ),
        )
        for name in names
    },
    **{
        f"chat.orchestrator.answer_cache.x_cache_key__mutmut_{n}": why
        for ns, why in (
            (
                (9, 16),
                "the tenant is kept apart twice, in the hashed text and in the tenant's own"
                " blind-index key: with either one left the isolation tests see different keys",
            ),
            (
                (8, 11),
                "another separator: no part before the question may hold '|' (ids, a revision,"
                " the audience kind, segments of [a-z0-9_-]) and the parts after it are"
                " constants, so the joined text is as unambiguous",
            ),
            (
                (14, 15, 17, 22, 23),
                "the key's prefix or blind-index purpose spelled otherwise, consistently: the"
                " same entries are written and read; nothing lists or deletes keys by prefix",
            ),
        )
        for n in ns
    },
    **{
        f"chat.orchestrator.answer_cache.x_cached_draft__mutmut_{n}": (
            "the log line's wording and traceback when Redis is down: operators' text, no promise"
        )
        for n in (3, 4, 5, 6, 7, 8, 9)
    },
    **{
        f"verification.verifier.xǁPassageVerifierǁ_check__mutmut_{n}": (
            "the wording of an internal error no caller shows (no passages is refused earlier)"
        )
        for n in (41, 42, 43)
    },
    "verification.verifier.xǁPassageVerifierǁ_check__mutmut_50": (
        "None and False are both 'not supported' to every reader of the flag"
    ),
    "verification.verifier.xǁPassageVerifierǁ_check__mutmut_5": _FLOAT_EDGE,
    "verification.verifier.xǁPassageVerifierǁ_check__mutmut_37": (
        "a tie between two candidates equally supported and equally close keeps either"
    ),
    "verification.verifier.x__word_vectors__mutmut_3": (
        "a token embedder other than the default is passed by no caller of the product"
    ),
    "verification.verifier.x_verify_answer__mutmut_5": (
        "every caller of verify_answer uses the default embedder"
    ),
    **{
        f"verification.verifier.xǁPassageVerifierǁ__init____mutmut_{n}": (
            "the empty matrix of a verifier with no passages is never read: every claim is"
            " refused as 'no passages' before any similarity is computed"
        )
        for n in (14, 21, 22)
    },
    **{
        f"verification.verifier.xǁPassageVerifierǁ{fn}__mutmut_{n}": (
            "float32 is a memory choice: float64 vectors give the same cosines to ~1e-7 and the"
            " same decisions"
        )
        for fn, n in (("__init__", 16), ("__init__", 18), ("check_many", 17), ("check_many", 19))
    },
    "verification.verifier.xǁPassageVerifierǁcheck_many__mutmut_34": _FLOAT_EDGE,
    **{
        f"verification.verifier.xǁPassageVerifierǁcheck_many__mutmut_{n}": (
            "`strict=True` only asserts equal lengths, which hold by construction (one vector"
            " per text asked for)"
        )
        for n in (44, 47, 48, 62, 65, 66)
    },
    "verification.verifier.x__check_against__mutmut_11": _REASON_TEXT,
    "verification.verifier.x__check_against__mutmut_12": _REASON_TEXT,
    "verification.verifier.x__check_against__mutmut_13": _REASON_TEXT,
    "verification.verifier.x__check_against__mutmut_15": _REASON_TEXT,
    "verification.verifier.x__check_against__mutmut_21": _REASON_TEXT,
    "verification.verifier.x__check_against__mutmut_14": _FLOAT_EDGE,
    "verification.verifier.x__check_against__mutmut_20": _FLOAT_EDGE,
    "verification.verifier.x__check_against__mutmut_16": (
        "the edge of UNLICENSED_MAX (exactly 4 unlicensed words): the licence also counts words"
        " the passage licenses by meaning, so no natural sentence lands on exactly 4; the"
        " calibration set (docs/reports) measures the threshold instead"
    ),
}


@dataclass
class Outcome:
    target: str
    counts: dict[str, int] = field(default_factory=dict)
    survivors: dict[str, str] = field(default_factory=dict)  # name -> "- old / + new"
    seconds: float = 0.0
    note: str = ""


def _scratch(name: str) -> Path:
    """A fresh copy of the tracked tree (the working-tree version of each file)."""
    path = WORK / name
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        if not (ROOT / rel).is_file():
            continue
        dest = path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest)
    (path / ".venv").symlink_to(ROOT / ".venv")
    return path


def _env(slot: int = 0) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SUPPORTBOT_ENV="test",
        SUPPORTBOT_REDIS_DB="1",
        # An embedded PostgreSQL and Valkey per job slot, apart from the checkout's own.
        SUPPORTBOT_VAR_DIR=str(WORK / f"services-{slot}"),
        # The scratch copy has no var/: the checkout's exported embedder (make setup).
        EMBEDDINGS_ONNX_DIR=str(ROOT / "var" / "models" / "minilm-onnx"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    return env


def _mutmut_config(target: Target) -> str:
    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        f"source_paths = {toml_list(PACKAGES)}\n"
        f"only_mutate = {toml_list([target.module])}\n"
        f"also_copy = {toml_list(ALSO_COPY)}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(target.tests)}\n"
        f"pytest_add_cli_args = {toml_list(PYTEST_ARGS)}\n"
        # torch and the encoder thread are not fork-safe: fork from a clean server process.
        'process_isolation = "forkserver"\n'
        "use_git_change_detection = false\n"
    )


def _changed_lines(diff: str) -> str:
    minus = [
        ln[1:].strip()
        for ln in diff.splitlines()
        if ln.startswith("-") and not ln.startswith("---")
    ]
    plus = [
        ln[1:].strip()
        for ln in diff.splitlines()
        if ln.startswith("+") and not ln.startswith("+++")
    ]
    return f"`{' '.join(minus)[:110]}` -> `{' '.join(plus)[:110]}`"


def run_target(
    target: Target, max_children: int, slot: int, deadline: float | None = None
) -> Outcome:
    started = time.monotonic()
    path = _scratch(target.name)
    with open(path / "pyproject.toml", "a") as f:
        f.write(_mutmut_config(target))
    log = path / "mutmut.log"
    with open(log, "w") as out:
        running = subprocess.Popen(
            [*MUTMUT, "run", "--max-children", str(max_children)],
            cwd=path,
            env=_env(slot),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its fork server and children end with it
        )
        try:
            running.wait(timeout=None if deadline is None else max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(running.pid, signal.SIGTERM)
            running.wait(30)
            outcome_note = "stopped at the run's deadline: the rest `not checked`"
        else:
            outcome_note = ""
    outcome = collect(target, slot, note=outcome_note)
    outcome.seconds = time.monotonic() - started
    return outcome


def _mutmut(*args: str, cwd: Path, slot: int) -> subprocess.CompletedProcess:
    """Run a mutmut command in a scratch copy, on a slot's services; output captured."""
    return subprocess.run(
        [*MUTMUT, *args], cwd=cwd, env=_env(slot), capture_output=True, text=True, check=False
    )


def collect(target: Target, slot: int, note: str = "") -> Outcome:
    """The outcome of the mutmut run in the target's scratch copy, finished or not."""
    path = WORK / target.name
    listed = _mutmut("results", "--all", "true", cwd=path, slot=slot).stdout
    outcome = Outcome(target.name, note=note)
    for line in listed.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if not name:
            continue
        outcome.counts[status] = outcome.counts.get(status, 0) + 1
        if status == "survived":
            shown = _mutmut("show", name, cwd=path, slot=slot).stdout
            outcome.survivors[name] = _changed_lines(shown)
    if outcome.counts.get("not checked") and not note:
        outcome.note = "run stopped before the end: the rest `not checked`"
    return outcome


def recheck(target: Target, outcome: dict, slot: int) -> None:
    """Run each survivor again, written into a copy of today's tree, against the target's
    tests as they are now (tests added after the mutmut run included): a failing test run
    kills it. The verdicts go to `outcome["rechecked"]`."""
    verdicts = outcome.setdefault("rechecked", {})
    survivors = [
        n
        for n in outcome.get("survivors", {})
        if n not in EXPLAINED and verdicts.get(n) != "killed"
    ]
    source_scratch = WORK / target.name
    if not survivors or not (source_scratch / "mutants").exists():
        return
    work = _scratch(f"recheck-{target.name}")
    module = source_scratch / target.module
    original = module.read_text()
    try:
        for name in survivors:
            applied = _mutmut("apply", name, cwd=source_scratch, slot=slot)
            if applied.returncode != 0 or module.read_text() == original:
                verdicts[name] = "could not be applied again"
                continue
            shutil.copy2(module, work / target.module)
            result = subprocess.run(
                [
                    str(ROOT / ".venv" / "bin" / "python"),
                    "-m",
                    "pytest",
                    *PYTEST_ARGS,
                    "-x",
                    *reversed(target.tests),
                ],
                cwd=work,
                env=_env(slot),
                capture_output=True,
                text=True,
                check=False,
            )
            verdicts[name] = {1: "killed", 0: "survived"}.get(result.returncode, "error")
            module.write_text(original)
    finally:
        module.write_text(original)
        shutil.copy2(ROOT / target.module, work / target.module)


def run_named(mutation: NamedMutation) -> dict:
    """Apply one named mutation to a scratch copy; its tests must fail."""
    path = _scratch("named")
    source = path / mutation.path
    text = source.read_text()
    if mutation.old not in text:
        return {"name": mutation.name, "result": f"not applied: `{mutation.old}` not found"}
    source.write_text(text.replace(mutation.old, mutation.new))
    result = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", *PYTEST_ARGS, *mutation.tests],
        cwd=path,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    summary = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
    killed = result.returncode == 1
    return {"name": mutation.name, "result": "killed" if killed else "SURVIVED", "tests": summary}


def _score(killed: int, survived: int) -> str:
    return f"{100 * killed / (killed + survived):.0f}%" if killed + survived else "-"


def _scores(outcome: dict) -> tuple[str, str]:
    """(score of the mutmut run, score now): now counts survivors a later test killed."""
    c = outcome["counts"]
    killed = c.get("killed", 0) + c.get("timeout", 0)
    survived = c.get("survived", 0)
    later = sum(v == "killed" for v in outcome.get("rechecked", {}).values())
    return _score(killed, survived), _score(killed + later, survived - later)


def _why(name: str, outcome: dict) -> str:
    if name in EXPLAINED:
        return EXPLAINED[name]
    verdict = outcome.get("rechecked", {}).get(name)
    if verdict == "killed":
        return "killed by a test added after the run (re-run against today's tests)"
    if verdict is not None:
        return f"**survives** (re-run: {verdict})"
    return "**not yet explained or killed**"


def report(outcomes: list[dict], named: list[dict], baseline: dict) -> str:
    lines = [
        "# Mutation testing of the safety-critical modules",
        "",
        "Generated by `make mutants` (scripts/mutants.py, mutmut 3; not part of CI). Each module",
        "is mutated function by function; every mutant runs the tests that covered the function",
        "(engines and browsers left out). Score = killed / (killed + survived); `no tests` are",
        "functions none of the listed tests reach; `not checked` were left when the run's time",
        "ran out. *Before*: the first run, before any test written for it; *run*: this mutmut",
        "run; *now*: with the survivors re-run against today's tests (`--recheck`).",
        "",
        "| module | promise | mutants | killed | survived | no tests | not checked |"
        " score before | score run | score now | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        t = next(t for t in TARGETS if t.name == o["target"])
        c = o["counts"]
        before = baseline.get(o["target"], {}).get("score", "-")
        run, now = _scores(o)
        if c.get("not checked"):
            run, now = f"{run} of {sum(c.values()) - c['not checked']}", f"{now} (partial)"
        lines.append(
            f"| `{t.module}` | {t.promise} | {sum(c.values())} | {c.get('killed', 0)} | "
            f"{c.get('survived', 0)} | {c.get('no tests', 0)} | {c.get('not checked', 0)} | "
            f"{before} | {run} | {now} | {o.get('note', '')} |"
        )
    lines += ["", "## Named mutations", "", "| mutation | result | tests |", "|---|---|---|"]
    for n in named:
        lines.append(f"| {n['name']} | {n['result']} | {n.get('tests', '')} |")
    lines += ["", "## Survivors", ""]
    for o in outcomes:
        if not o["survivors"]:
            continue
        lines += [
            f"### {o['target']}",
            "",
            "| mutant | change | why it survives |",
            "|---|---|---|",
        ]
        for name, change in o["survivors"].items():
            change = change.replace("|", "\\|")
            lines.append(f"| `{name}` | {change} | {_why(name, o)} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="target names")
    parser.add_argument("--max-children", type=int, default=1, help="mutmut children per job")
    parser.add_argument("--jobs", type=int, default=2, help="targets run at once")
    parser.add_argument(
        "--collect", action="store_true", help="read the scratch copies' results, run nothing"
    )
    parser.add_argument(
        "--recheck", action="store_true", help="re-run the survivors against today's tests"
    )
    parser.add_argument("--slot-offset", type=int, default=0, help="services of other slots")
    parser.add_argument(
        "--deadline-min", type=float, default=None, help="stop mutating after this many minutes"
    )
    return parser.parse_args(argv)


class Results:
    """docs/reports/mutants.json: each target's last outcome, and its first score."""

    def __init__(self) -> None:
        self.path = REPORT.with_suffix(".json")
        previous = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.outcomes = {o["target"]: o for o in previous.get("outcomes", [])}
        self.baseline = previous.get("baseline", {})

    def put(self, outcome: Outcome) -> None:
        self.outcomes[outcome.target] = outcome.__dict__
        self.baseline.setdefault(outcome.target, {"score": _scores(outcome.__dict__)[0]})
        self.save()

    def ordered(self) -> list[dict]:
        return [self.outcomes[t.name] for t in TARGETS if t.name in self.outcomes]

    def save(self) -> None:
        self.path.write_text(
            json.dumps({"outcomes": self.ordered(), "baseline": self.baseline}, indent=1)
        )


def _in_slots(args, targets: list[Target], work) -> list:
    """Run `work(target, slot)` for each target, `args.jobs` at once, each on a slot's
    services; return the results in completion order."""
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(args.slot_offset, args.slot_offset + args.jobs):
        slots.put(slot)

    def job(target: Target):
        slot = slots.get()
        try:
            print(f"{target.name}: {target.module} … (slot {slot})", flush=True)
            return work(target, slot)
        finally:
            slots.put(slot)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return [
            f.result()
            for f in concurrent.futures.as_completed([pool.submit(job, t) for t in targets])
        ]


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    results = Results()
    chosen = [t for t in TARGETS if not args.only or t.name in args.only]
    deadline = None if args.deadline_min is None else time.time() + 60 * args.deadline_min
    if args.collect:
        for target in chosen:
            if (WORK / target.name / "mutants").exists():
                results.put(collect(target, args.slot_offset))
    elif args.recheck:
        known = [t for t in chosen if t.name in results.outcomes]
        _in_slots(args, known, lambda t, slot: recheck(t, results.outcomes[t.name], slot))
        results.save()
    else:

        def mutate(target: Target, slot: int) -> Outcome:
            if deadline is not None and time.time() > deadline:
                return Outcome(target.name, note="not run: the run's deadline had passed")
            outcome = run_target(target, args.max_children, slot, deadline)
            print(f"{target.name}: {outcome.counts} in {outcome.seconds:.0f} s", flush=True)
            results.put(outcome)
            return outcome

        _in_slots(args, chosen, mutate)
    named = [run_named(m) for m in NAMED]
    for n in named:
        print(f"named: {n['name']}: {n['result']}", flush=True)
    REPORT.write_text(report(results.ordered(), named, results.baseline))
    for slot in range(args.slot_offset, args.slot_offset + args.jobs):
        subprocess.run(
            [str(ROOT / ".venv" / "bin" / "python"), "manage.py", "services", "stop"],
            cwd=ROOT,
            env=_env(slot),
            capture_output=True,
            check=False,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
