"""[llm] What a provider is to xclaw: its kind (the `<kind>:` of a model spec), the keys one entry
of `providers:` may hold, the variables it reads, its prices, and how it builds a `Model`.

The built-in providers (xclaw/llm/builtin_providers.py) and those a separate package adds
through the `xclaw.providers` entry point group (xclaw/llm/registry.py) are declared the same
way: a subclass of `Provider`. docs/llm-providers.md shows a whole provider package.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import Field

from xclaw.config.section import Section
from xclaw.llm.base import Model
from xclaw.llm.prices import Price, own_api

if TYPE_CHECKING:
    from xclaw.llm.settings import LlmSettings


class ProviderEntry(Section):
    """One link of the provider chain, as xclaw.yaml writes it: `model: <kind>:<name>`. A
    provider whose entries hold more keys declares them in a subclass."""

    model: str = Field(pattern=r"^[A-Za-z0-9_.-]+:.+$")

    @property
    def kind(self) -> str:
        return self.model.partition(":")[0]

    @property
    def model_name(self) -> str:
        """The model as its provider names it: the spec without `<kind>:`."""
        return self.model.partition(":")[2]

    def secrets(self) -> tuple[str, ...]:
        """Values the redactor must scrub (an API key)."""
        return ()


class KeyedEntry(ProviderEntry):
    """An entry of an HTTP API: a key and a server URL, each also read from the provider's
    variables (`Provider.key_variables`, `Provider.base_url_variables`) when not given."""

    api_key: str | None = None
    base_url: str | None = None

    def secrets(self) -> tuple[str, ...]:
        return (self.api_key,) if self.api_key else ()


E = TypeVar("E", bound=ProviderEntry)


class Provider(ABC, Generic[E]):
    """A kind of model. Subclasses set the class attributes and implement `build`."""

    # The `<kind>:` of a spec; for a provider package, also its entry point's name.
    kind: ClassVar[str]
    # The entry xclaw.yaml may write for this kind (the keys besides `model` it accepts).
    entry: type[E]
    # How a spec of this kind is written, for messages: "anthropic:<model>", "script:<path>".
    spec_form: ClassVar[str] = ""
    # Variables holding the API key and the server URL (the first set wins), read when the
    # entry does not give them; the key variables also switch the provider on by themselves.
    key_variables: ClassVar[tuple[str, ...]] = ()
    base_url_variables: ClassVar[tuple[str, ...]] = ()
    # With no chain configured and a key in the environment: this model, or the variable's.
    default_model: ClassVar[str | None] = None
    model_variable: ClassVar[str | None] = None
    # What to set to use this provider, for the "no provider is configured" message.
    setup_hint: ClassVar[str] = ""
    # Dollars per million tokens, by model name (xclaw.yaml's `prices:` overrides them).
    prices: ClassVar[Mapping[str, Price]] = {}
    # The hosts of the provider's own API. Its `prices` hold for a call answered there, or
    # by the SDK's default URL (no base URL): a model of the same name served elsewhere (a
    # local server, a proxy) is priced only by xclaw.yaml.
    hosts: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def own_api(cls, endpoint: str) -> bool:
        """A call answered by this provider's own API (`endpoint`: the base URL recorded,
        "" for none)."""
        return own_api(endpoint, cls.hosts)

    def form(self) -> str:
        return self.spec_form or f"{self.kind}:<model>"

    def configure(self, options: Mapping[str, Any], env: Mapping[str, str]) -> E:
        """The entry for one link (`options`: its xclaw.yaml mapping, `model` included), with
        the key and URL the environment gives when the mapping does not. Raises pydantic's
        ValidationError for a bad key or value (the settings reader words it)."""
        values = dict(options)
        if issubclass(self.entry, KeyedEntry):
            for key, names in (
                ("api_key", self.key_variables),
                ("base_url", self.base_url_variables),
            ):
                found = next((env[n] for n in names if env.get(n)), None)
                if not values.get(key) and found:
                    values[key] = found
        return self.entry.model_validate(values)

    def detect(self, env: Mapping[str, str]) -> str | None:
        """The spec to use when no chain is configured and the environment says to (a key
        variable is set), else None."""
        if self.default_model is None or not any(env.get(n) for n in self.key_variables):
            return None
        chosen = env.get(self.model_variable) if self.model_variable else None
        return f"{self.kind}:{chosen or self.default_model}"

    def variables(self) -> tuple[str, ...]:
        """Every variable this provider reads (docs/configuration.md lists them)."""
        model = (self.model_variable,) if self.model_variable else ()
        return (*self.key_variables, *self.base_url_variables, *model)

    @abstractmethod
    def build(self, entry: E, llm: LlmSettings) -> Model:
        """The bare model for one link (xclaw adds retries and the fallback chain). Raises
        ConfigError, naming the variable to set, when the entry cannot work (no key)."""
