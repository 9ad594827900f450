"""The extraction process: `python -m knowledge.extraction.child` (started by `sandbox`).

Sets its limits, reads one request from stdin, extracts, writes one JSON answer to stdout
(protocol in `sandbox`'s docstring). Imports no Django and opens nothing but its pipes.
"""

from __future__ import annotations

import json
import math
import resource
import sys

from knowledge.extraction import ExtractionError, extract
from knowledge.extraction.sandbox import Request

MAX_HEADER = 4096
# An error raised with the address space this close to its limit is the limit's doing.
NEAR_LIMIT = 0.9


def _limits_set(request: Request) -> None:
    """Address space, CPU seconds (the deadline rounded up, plus one), no files, no core."""
    resource.setrlimit(resource.RLIMIT_AS, (request.memory_bytes, request.memory_bytes))
    cpu = math.ceil(max(request.seconds, 0)) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _peak_bytes() -> int:
    """The process's peak address space (VmPeak: what RLIMIT_AS bounds), 0 if unknown."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmPeak:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _answer(body: dict) -> None:
    body["peak_bytes"] = _peak_bytes()
    sys.stdout.buffer.write(json.dumps(body, ensure_ascii=False).encode("utf-8", "replace"))
    sys.stdout.buffer.flush()


def main() -> None:
    header = sys.stdin.buffer.readline(MAX_HEADER)
    request = Request(**json.loads(header))
    _limits_set(request)
    data = sys.stdin.buffer.read()
    try:
        result = extract(data=data, content_type=request.content_type, limits=request.limits())
        del data
        spans = [(b.level, b.start, b.end) for b in result.blocks]
        _answer({"ok": True, "text": result.text, "blocks": spans})
    except MemoryError:  # what it held is released as the exception unwound
        _answer({"ok": False, "reason": "memory"})
    except ExtractionError as exc:
        _answer({"ok": False, "reason": "extraction", "error": str(exc)})
    except RecursionError:
        _answer({"ok": False, "reason": "extraction", "error": "The file nests too deeply."})
    except Exception as exc:  # a parser's bug on hostile input: the document's error
        if _peak_bytes() >= NEAR_LIMIT * request.memory_bytes:
            # C parsers report a failed allocation their own way (lxml: "unknown error").
            _answer({"ok": False, "reason": "memory"})
            return
        error = f"Extraction failed ({type(exc).__name__}): {str(exc)[:500]}".rstrip(": ")
        _answer({"ok": False, "reason": "extraction", "error": error})


if __name__ == "__main__":
    main()
