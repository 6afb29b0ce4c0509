"""Real gateways for the protocol tests (AG-UI, A2A), as the gateway tests have them
(tests/gateway)."""

from __future__ import annotations

from tests.gateway.conftest import close_clients, module_server_factory, server_factory

__all__ = ["close_clients", "module_server_factory", "server_factory"]
