"""The gateway tests' client clean-up (tests/gateway/conftest.py): every client a test opens is
closed when it ends, failed or not."""

from __future__ import annotations

from tests.gateway.conftest import close_clients

__all__ = ["close_clients"]
