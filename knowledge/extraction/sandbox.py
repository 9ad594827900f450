"""Extraction in a child process that the limits can kill (`extract_isolated`).

Parsers hold what a hostile file makes them hold, and some of them (markdown-it, lxml,
pdfminer) run for a long time without a point where our deadline is checked. So indexing
never parses an upload in the worker: it starts `python -m knowledge.extraction.child`, which
- sets its own limits before reading anything: address space (`Limits.memory_bytes`,
  RLIMIT_AS: an allocation past it is a MemoryError, not a swapping machine), CPU seconds
  (RLIMIT_CPU, the deadline rounded up plus one: the kernel stops a child whose parent died),
  no core files and no files written;
- reads one request from stdin (a JSON header line: content type and limits; then the file's
  bytes), runs `extract` (guards first) and writes one JSON answer to stdout: the text and
  the blocks' (level, start, end) spans, or the error; with its peak memory either way.
The parent kills it at the deadline (plus KILL_GRACE for the child's own, clearer, error)
and maps every way it can end to an ExtractionError for the document: "took longer than N s",
"memory limit", a crash by signal, or the extractor's own reason. The answer is JSON, never
pickle: a child that a parser bug let an attacker steer still cannot run code in the worker.
The child gets no environment beyond what Python needs (no secrets, no database URL).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from knowledge.extraction.base import Extracted, ExtractionError, Limits

logger = logging.getLogger(__name__)

CHILD_MODULE = "knowledge.extraction.child"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Seconds the child has past the deadline to report its own timeout before it is killed.
KILL_GRACE = 1.0
_MIB = 1024 * 1024


@dataclass(frozen=True)
class Request:
    """What the child is asked to do: the header line it reads before the file's bytes."""

    content_type: str
    deadline: float  # time.monotonic() value: CLOCK_MONOTONIC is the same in every process
    seconds: float
    max_chars: int
    max_pages: int
    max_bytes: int
    max_stream_bytes: int
    max_total_stream_bytes: int
    max_image_pixels: int
    max_line_chars: int
    memory_bytes: int

    @classmethod
    def of(cls, content_type: str, limits: Limits) -> Request:
        deadline = limits.deadline if limits.deadline is not None else time.monotonic()
        fields = {k: v for k, v in asdict(limits).items() if k != "deadline"}
        return cls(content_type=content_type, deadline=deadline, **fields)

    def limits(self) -> Limits:
        fields = {k: v for k, v in asdict(self).items() if k != "content_type"}
        return Limits(**fields)


class SandboxError(ExtractionError):
    """Extraction failed in the child; `peak_bytes` is the child's peak address space when it
    could say (0 when it was killed)."""

    def __init__(self, message: str, *, peak_bytes: int = 0) -> None:
        super().__init__(message)
        self.peak_bytes = peak_bytes


@dataclass(frozen=True)
class Run:
    """A successful extraction and what it cost the child."""

    extracted: Extracted
    peak_bytes: int
    seconds: float


def extract_isolated(*, data: bytes, content_type: str, limits: Limits) -> Extracted:
    """Extract in a child process under `limits` (see the module docstring); raise
    ExtractionError (a SandboxError when the child was stopped) with the reason."""
    return extract_run(data=data, content_type=content_type, limits=limits).extracted


def extract_run(*, data: bytes, content_type: str, limits: Limits) -> Run:
    """`extract_isolated`, returning the child's peak memory and the time it took too."""
    if limits.deadline is None:
        limits = Limits.within(**{k: v for k, v in asdict(limits).items() if k != "deadline"})
    started = time.monotonic()
    if limits.deadline <= started:
        raise SandboxError(limits.time_message())
    request = Request.of(content_type, limits)
    header = json.dumps(asdict(request)).encode() + b"\n"
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module, no shell
        [sys.executable, "-m", CHILD_MODULE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=PROJECT_ROOT,
        env=_child_environment(),
    )
    try:
        out, err = process.communicate(
            header + data, timeout=limits.deadline - started + KILL_GRACE
        )
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        logger.warning("extraction child %s killed at its deadline", process.pid)
        raise SandboxError(limits.time_message(killed=True)) from None
    return _answer(process.returncode, out, err, limits, started)


def _child_environment() -> dict[str, str]:
    """Only what Python needs to find its modules and decode text: nothing secret."""
    keep = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "VIRTUAL_ENV")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    return env | {"PYTHONPATH": str(PROJECT_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


def _answer(returncode: int, out: bytes, err: bytes, limits: Limits, started: float) -> Run:
    """The child's answer as a Run, or the ExtractionError it stands for."""
    try:
        answer = json.loads(out) if out else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise _ended_without_answer(returncode, err, limits)
    peak = int(answer.get("peak_bytes") or 0)
    if not answer.get("ok"):
        if answer.get("reason") == "memory":
            raise SandboxError(memory_message(limits), peak_bytes=peak)
        raise SandboxError(str(answer.get("error") or "Extraction failed."), peak_bytes=peak)
    text = answer.get("text")
    spans = answer.get("blocks")
    if not isinstance(text, str) or not isinstance(spans, list):
        raise SandboxError("The extraction process sent back an invalid answer.")
    try:
        extracted = Extracted.of(text, [tuple(span) for span in spans], limits)
    except (TypeError, ValueError) as exc:
        raise SandboxError("The extraction process sent back an invalid answer.") from exc
    seconds = time.monotonic() - started
    logger.info(
        "extracted %s chars in a child in %.2f s, peak %s MiB", len(text), seconds, peak // _MIB
    )
    return Run(extracted=extracted, peak_bytes=peak, seconds=seconds)


def memory_message(limits: Limits) -> str:
    return (
        f"Extraction stopped at the memory limit ({limits.memory_bytes // _MIB} MiB per "
        "document): the file expands too much to read safely; split it or simplify it."
    )


def _ended_without_answer(returncode: int, err: bytes, limits: Limits) -> SandboxError:
    """The child died without answering: by the CPU limit (the deadline), by a signal (a
    parser crashing, usually out of memory inside C code), or with an error of its own."""
    tail = err.decode("utf-8", "replace").strip()[-500:]
    logger.warning("extraction child ended with %s without an answer: %s", returncode, tail)
    if returncode == -signal.SIGXCPU:
        return SandboxError(limits.time_message(killed=True))
    if "MemoryError" in tail:
        return SandboxError(memory_message(limits))
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return SandboxError(
            f"Extraction crashed ({name}) under the limits of {limits.memory_bytes // _MIB} MiB "
            "per document; the file cannot be read safely."
        )
    return SandboxError(f"Extraction failed: the extraction process exited with {returncode}.")
