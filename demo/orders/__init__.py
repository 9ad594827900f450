"""The reference order system of the demo tenant: a small ASGI service with its own SQLite file.

A real tenant replaces it with their own order API; Supportbot only speaks HTTP to it
(`actions.providers`). Start it with `python -m demo.orders` (see `config.py` for the env).
"""
