"""Wire models: what goes over HTTP and the WebSocket, apart from internal ones.

The run request itself is ``sandbox.protocol.RunRequest``; the wire adds what only
the server cares about (``cache``) and turns an oversized ``code`` into a 413
instead of a 422. Every error leaves as one JSON shape, ``ErrorBody``.
The WebSocket speaks one envelope ``{type, seq, payload}`` (SPEC §3), a pydantic
discriminated union here and the same union in the page's TypeScript.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator
from pydantic_core import PydanticCustomError

from sandbox.protocol import (
    JAX_VERSION_PATTERN,
    MAX_CODE_BYTES,
    PROTOCOL_VERSION,
    AnyEvent,
    RunRequest,
)

#: pydantic error type that the error handlers answer with 413 instead of 422
TOO_LARGE = "too_large"
#: pydantic error type of text that is not Unicode (a lone surrogate); its context
#: names the field, which the error handlers report as the field at fault
UNENCODABLE = "unencodable"

#: version of the WebSocket envelope (the ``hello`` carries it)
WS_VERSION = 1


def _check_code_size(code: Any) -> Any:
    if isinstance(code, str) and len(code.encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
        raise PydanticCustomError(
            TOO_LARGE, "code is over {limit} KiB", {"limit": MAX_CODE_BYTES // 1024}
        )
    return code


def first_unencodable(value: Any, path: str = "") -> tuple[str, int, str] | None:
    """The first string (or key) in ``value`` that UTF-8 cannot encode (JSON's
    ``"\\ud800"`` decodes to a lone surrogate): its dotted path, index and character."""
    if isinstance(value, str):
        for index, char in enumerate(value):
            if "\ud800" <= char <= "\udfff":
                return path, index, char
        return None
    items: Any = value.items() if isinstance(value, dict) else None
    if items is None and isinstance(value, list | tuple):
        items = enumerate(value)
    for key, item in items or ():
        # A key may be the bad text itself: shown escaped, so the answer can be encoded.
        name = str(key).encode("utf-8", "backslashreplace").decode()
        where = f"{path}.{name}" if path else name
        found = first_unencodable(key, where) if isinstance(key, str) else None
        found = found or first_unencodable(item, where)
        if found is not None:
            return found
    return None


class SnippetBody(RunRequest):
    """A run request to store as a snippet."""

    # Strict: `"devices": "2"` or `"cache": 0` is a 422, as the schema says, not a guess.
    model_config = ConfigDict(strict=True)

    @model_validator(mode="before")
    @classmethod
    def _text_is_unicode(cls, data: Any) -> Any:
        found = first_unencodable(data)
        if found is not None:
            path, index, char = found
            raise PydanticCustomError(
                UNENCODABLE,
                "not valid Unicode text: a lone surrogate (U+{code}) at character {index}",
                {"field": path, "code": f"{ord(char):04X}", "index": index},
            )
        return data

    @field_validator("code", mode="before")
    @classmethod
    def _code_not_too_large(cls, code: Any) -> Any:
        return _check_code_size(code)

    def to_request(self) -> RunRequest:
        return RunRequest.model_validate(self.model_dump(exclude={"cache"}))


class RunBody(SnippetBody):
    """A run request as the API takes it: SPEC §1 plus ``cache``."""

    cache: bool = Field(
        default=True,
        description="Whether a cached result may answer this run (jaxplay extension). "
        "`false` always runs the code; the `cache=false` query parameter does the same.",
    )


# --- HTTP answers --------------------------------------------------------------------


#: One event of a run (SPEC §2): the protocol's typed union, one model per type
#: (sandbox/protocol/events.py; its JSON Schema is docs/events.schema.json).
Event = AnyEvent


class RunResult(BaseModel):
    events: list[Event] = Field(description="The run's events in order; `done` is last.")


class SnippetCreated(BaseModel):
    id: str = Field(description="The snippet's id: a prefix of the hash of its content.")
    url: str = Field(description="The playground page with the snippet loaded.")


class LibraryInfo(BaseModel):
    name: str = Field(description="The library as pip names it (`flax`, `dm-haiku`).")
    version: str = Field(description="Its version with this JAX version.")
    what: str = Field(
        default="", description="What it is, in one line (sandbox/environments/libraries.py)."
    )
    alternatives: list[str] = Field(
        default_factory=list,
        description="Other versions of it a request may pick (`libraries`: "
        '`{"optax": "0.2.6"}`), as the operator offers them; `version` is the default.',
    )


class VersionInfo(BaseModel):
    version: str = Field(description="A JAX version, as a request's `jax_version` names it.")
    installed: bool = Field(
        description="Whether it can run now; one not installed is offered: an operator adds "
        "it with `jaxplay versions add VERSION`."
    )
    default: bool = Field(description="Whether runs that name no `jax_version` get it.")
    running: bool = Field(
        default=False, description="Whether its warm pool is up now (the default's always is)."
    )
    libraries: list[LibraryInfo] = Field(
        default_factory=list,
        description="The libraries a run on this version may import (Flax, Optax, Equinox...),"
        " at the versions its committed library lock pins; one it does not offer is absent.",
    )


class WorkerInfo(BaseModel):
    name: str = Field(description="The backend a request names to reach it.")
    pool: str = Field(description="The pool implementation serving it.")
    backend: str | None = Field(default=None, description="The JAX backend the workers run.")
    platform: str | None = None
    device_kind: str | None = None
    devices: int | None = Field(default=None, description="Devices a run sees by default.")
    jax_version: str | None = None
    jaxlib_version: str | None = None
    queue_length: int = Field(default=0, description="Runs waiting for a worker now.")
    running: int | None = Field(default=None, description="Runs executing now.")
    capacity: int | None = Field(default=None, description="Runs the pool executes at once.")
    versions: list[VersionInfo] = Field(
        default_factory=list,
        description="The JAX versions a run may name, oldest first (one, the default, for "
        "remote workers).",
    )


class BackendsAnswer(BaseModel):
    backends: list[WorkerInfo]
    gpu_targets: list[str] = Field(
        default_factory=list,
        description="The `gpu_target` names a run may use (`JAXPLAY_GPU_TARGETS`); empty: "
        "deviceless GPU compiles are off.",
    )
    tpu_topologies: list[str] = Field(
        default_factory=list,
        description="The `tpu_topology` names a run may use (`JAXPLAY_TPU_TOPOLOGIES`); empty: "
        "deviceless TPU compiles are off.",
    )


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    protocol: int = PROTOCOL_VERSION
    pool: str
    jax_imported: bool = Field(description="Always false: the server never imports JAX.")


class FieldError(BaseModel):
    field: str
    message: str
    type: str


class ErrorBody(BaseModel):
    """Every error the API answers, whatever its status."""

    status: int = Field(description="The HTTP status, repeated.")
    error: str = Field(
        description="A short machine-readable name: `invalid_request`, `too_large`, ..."
    )
    message: str = Field(
        description="What went wrong, in words; names the field when one is at fault."
    )
    field: str | None = Field(
        default=None, description="The first field at fault, dotted (`transforms.0.name`)."
    )
    errors: list[FieldError] = Field(default_factory=list)
    retry_after_s: float | None = Field(
        default=None, description="For 429 and 503: when to try again."
    )


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {"model": ErrorBody, "description": "The body or `code` is too large."},
    422: {"model": ErrorBody, "description": "The request is malformed; `field` names where."},
    429: {
        "model": ErrorBody,
        "description": "Rate or per-tenant limit reached; see `Retry-After`.",
    },
    503: {
        "model": ErrorBody,
        "description": "Every worker is busy and the queue is full; see `Retry-After`.",
    },
}


# --- the WebSocket envelope ----------------------------------------------------------


class ClientHelloPayload(BaseModel):
    version: int = Field(default=WS_VERSION, description="The envelope version the client speaks.")


class ClientHello(BaseModel):
    type: Literal["hello"]
    seq: int = -1
    payload: ClientHelloPayload = Field(default_factory=ClientHelloPayload)


class ClientRun(BaseModel):
    type: Literal["run"]
    seq: int = Field(ge=0, description="The client's number for this run; its events carry it.")
    payload: RunBody


class ClientCancel(BaseModel):
    type: Literal["cancel"]
    seq: int = -1
    payload: dict[str, Any] | None = None


ClientMessage = Annotated[ClientHello | ClientRun | ClientCancel, Field(discriminator="type")]
CLIENT_MESSAGE: TypeAdapter[ClientHello | ClientRun | ClientCancel] = TypeAdapter(ClientMessage)


class HelloPayload(BaseModel):
    version: int = WS_VERSION
    protocol: int = PROTOCOL_VERSION
    server: str = Field(description="jaxplay's version.")
    timeouts: dict[str, float] = Field(description="The connection's named timeouts, in seconds.")
    limits: dict[str, int | float] = Field(
        description="Request limits: `max_code_bytes`, `max_timeout_s`, ..."
    )


class ServerHello(BaseModel):
    type: Literal["hello"] = "hello"
    seq: int = -1
    payload: HelloPayload


class ServerEvent(BaseModel):
    type: Literal["event"] = "event"
    seq: int
    payload: Event


class ErrorPayload(BaseModel):
    message: str
    status: int | None = Field(
        default=None, description="The HTTP status the same problem gets over REST."
    )
    field: str | None = None
    retry_after_s: float | None = None


class ServerError(BaseModel):
    type: Literal["error"] = "error"
    seq: int = -1
    payload: ErrorPayload


ServerMessage = Annotated[ServerHello | ServerEvent | ServerError, Field(discriminator="type")]
SERVER_MESSAGE: TypeAdapter[ServerHello | ServerEvent | ServerError] = TypeAdapter(ServerMessage)


#: most versions one request may compare (each is a run, one after the other)
MAX_ACROSS = 9


class AcrossBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request: RunBody = Field(description="A run request (without `jax_version`).")
    versions: Annotated[
        list[Annotated[str, Field(pattern=JAX_VERSION_PATTERN)]],
        Field(min_length=2, max_length=MAX_ACROSS),
    ] = Field(description="The JAX versions to run it on; they run and compare oldest first.")

    @field_validator("versions")
    @classmethod
    def _distinct(cls, versions: list[str]) -> list[str]:
        if len(set(versions)) != len(versions):
            raise ValueError("each version once")
        return versions
