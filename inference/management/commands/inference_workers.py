"""`manage.py inference_workers start|stop|status`: the locally launched vLLM workers."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from inference import launcher, selectors
from inference.config import get_config
from inference.models import ModelWorker


class Command(BaseCommand):
    help = "Launch, stop (with draining) or list inference workers."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        start = sub.add_parser("start", help="launch workers and wait until they are ready")
        start.add_argument("--count", type=int, default=1)
        start.add_argument(
            "--role", default=ModelWorker.Role.PRIMARY, choices=[c.value for c in ModelWorker.Role]
        )
        start.add_argument("--name", default="", help="name (or name prefix with --count > 1)")
        start.add_argument("--port", type=int, default=None, help="first port (default: free)")
        stop = sub.add_parser("stop", help="drain and stop workers")
        stop.add_argument("names", nargs="*", help="worker names (default: all launched)")
        stop.add_argument("--drain-timeout", type=float, default=None)
        sub.add_parser("status", help="list registered workers")

    def handle(self, *args, **options):
        action = options["action"]
        if action == "start":
            self._start(options)
        elif action == "stop":
            self._stop(options)
        else:
            self._status()

    def _start(self, options) -> None:
        count = options["count"]
        if count < 1:
            raise CommandError("--count must be at least 1")
        cfg = get_config()
        device = launcher.detect_device(cfg)
        for i in range(count):
            base = options["name"] or f"{device}-{options['role']}"
            name = base if count == 1 and options["name"] else f"{base}-{i + 1}"
            existing = selectors.worker_get(name=name)
            if (
                existing is not None
                and existing.state == ModelWorker.State.READY
                and launcher.pid_alive(existing.pid)
            ):
                self.stdout.write(f"{name}: already running at {existing.base_url}")
                continue
            port = options["port"] + i if options["port"] else None
            self.stdout.write(f"{name}: starting ({device}) …")
            self.stdout.flush()
            try:
                worker = launcher.worker_launch(
                    name=name,
                    role=options["role"],
                    port=port,
                    gpu_index=i if device == "gpu" else None,
                    config=cfg,
                )
            except launcher.EngineError as exc:
                raise CommandError(f"{name}: {exc}") from exc
            self.stdout.write(f"{name}: ready at {worker.base_url} (pid {worker.pid})")

    def _stop(self, options) -> None:
        names = options["names"]
        workers = [
            w
            for w in selectors.workers_active()
            if (w.name in names if names else w.source == ModelWorker.Source.LAUNCHED)
        ]
        missing = set(names) - {w.name for w in workers}
        if missing:
            raise CommandError(f"no active worker named {', '.join(sorted(missing))}")
        if not workers:
            self.stdout.write("no launched worker is running")
        for worker in workers:
            self.stdout.write(f"{worker.name}: draining …")
            self.stdout.flush()
            drained = launcher.worker_stop(worker=worker, drain_timeout_s=options["drain_timeout"])
            note = "" if drained else " (drain timeout: in-flight requests were cancelled)"
            self.stdout.write(f"{worker.name}: stopped{note}")

    def _status(self) -> None:
        rows = selectors.worker_list()
        if not rows:
            self.stdout.write("no workers registered")
            return
        self.stdout.write(
            f"{'name':<22} {'role':<9} {'state':<9} {'health':<8} {'pid':<8} "
            f"{'queue':>5} {'run':>4} {'kv':>5}  url"
        )
        for w in rows:
            m = w.last_metrics or {}
            alive = launcher.pid_alive(w.pid) if w.source == ModelWorker.Source.LAUNCHED else None
            health = "up" if w.healthy else "down"
            if alive is False and w.state in (ModelWorker.State.READY, ModelWorker.State.DRAINING):
                health = "dead"
            self.stdout.write(
                f"{w.name:<22} {w.role:<9} {w.state:<9} {health:<8} {w.pid or '-'!s:<8} "
                f"{m.get('waiting', 0):>5.0f} {m.get('running', 0):>4.0f} "
                f"{m.get('kv_cache_usage', 0):>5.2f}  {w.base_url}"
            )
            if w.last_error and not w.healthy:
                self.stdout.write(f"    last error: {w.last_error[:200]}")
