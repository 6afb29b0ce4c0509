"""Real `xclaw serve` processes, as the gateway tests use them."""

from tests.gateway.conftest import (  # noqa: F401  (fixtures)
    close_clients,
    module_server_factory,
    server_factory,
)
