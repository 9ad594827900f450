"""`python -m demo.orders`: serve the reference order service with uvicorn (one process)."""

import uvicorn

from demo.orders import config
from demo.orders.app import create_app

if __name__ == "__main__":
    cfg = config.load()
    print(f"Order service at {cfg.base_url} (db {cfg.db_path})", flush=True)  # noqa: T201
    uvicorn.run(create_app(cfg), host=cfg.host, port=cfg.port, log_level="warning")
