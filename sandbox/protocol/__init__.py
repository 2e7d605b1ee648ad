"""The worker protocol: what goes into a run and what comes out of it.

This is the one package that the server (``backend``) and the sandbox share, so it
must stay free of JAX and of anything server-side. A run request goes in; a stream
of JSON events comes out, one object per line, ending with ``done``.
See SPEC.md §1 (request) and §2 (events), mirrored in docs/api.md.

One module a job: ``vocabulary`` (the words: output and stage names, statuses,
fixed reasons), ``limits`` (the version and every bound), ``events`` (one model
per event type; ``done_event``, the one maker of ``done``), ``output_table`` (what
each output is), ``requests`` (``RunRequest``), ``lines`` (an event as a line of
JSON, and a line read back as a checked event), ``text_parts`` (a long IR text's
parts joined back into its event, for whoever reads the whole text). The names below are the ones the
other layers use; import them from here or from their module.

The names are loaded when first used (PEP 562): ``import sandbox.protocol.limits``
or a client that needs only the words builds none of the event models, which take
a tenth of a second.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.protocol.events import (
        EVENT_ADAPTER,
        EVENT_FIELDS,
        EVENT_MODELS,
        AnyEvent,
        DoneEvent,
        DoneStatus,
        StageName,
        done_event,
        event_json_schema,
    )
    from sandbox.protocol.limits import (
        MAX_BUFFERS,
        MAX_CODE_BYTES,
        MAX_COLLECTIVES,
        MAX_COMPARE,
        MAX_COMPILER_OPTIONS,
        MAX_DEVICES,
        MAX_EVENT_BYTES,
        MAX_EVENT_DEPTH,
        MAX_EVENT_NODES,
        MAX_EXPR_BYTES,
        MAX_KERNELS,
        MAX_LABEL_CHARS,
        MAX_LEAF_DATA,
        MAX_LEAVES,
        MAX_MESSAGE_CHARS,
        MAX_NOTES,
        MAX_PASS_ITEMS,
        MAX_PASSES_CHARS,
        MAX_REMARKS,
        MAX_REPR_CHARS,
        MAX_SHARD_BLOCKS,
        MAX_SOURCES,
        MAX_STREAM_CHARS,
        MAX_TEXT_CHARS,
        MAX_TIMING_ROWS,
        MAX_TRANSFORMS,
        MAX_VALUE_DATA,
        PROTOCOL_VERSION,
    )
    from sandbox.protocol.lines import (
        BadEvent,
        ValidEvent,
        check_line_shape,
        encode_event,
        parse_event_line,
        validate_event,
    )
    from sandbox.protocol.output_table import (
        DEFAULT_OUTPUTS,
        OUTPUT_TABLE,
        OutputSpec,
    )
    from sandbox.protocol.requests import (
        COMPILER_OPTIONS_ALLOWED,
        CONFIG_ALLOWED,
        JAX_VERSION_PATTERN,
        SNIPPET_FILENAME,
        TRANSFORM_OPTIONS,
        Backend,
        CompilerOptions,
        Pipeline,
        RunRequest,
        Transform,
        TransformName,
        check_compiler_options,
    )
    from sandbox.protocol.vocabulary import (
        DOC_URL_PREFIXES,
        DONE_STATUSES,
        ERROR_STAGES,
        OUTPUTS,
        STAGES,
        TAMPERED_REASON,
        WORKER_DONE_REASONS,
        Output,
    )

__all__ = [
    "COMPILER_OPTIONS_ALLOWED",
    "CONFIG_ALLOWED",
    "DEFAULT_OUTPUTS",
    "DOC_URL_PREFIXES",
    "DONE_STATUSES",
    "ERROR_STAGES",
    "EVENT_ADAPTER",
    "EVENT_FIELDS",
    "EVENT_MODELS",
    "JAX_VERSION_PATTERN",
    "MAX_BUFFERS",
    "MAX_CODE_BYTES",
    "MAX_COLLECTIVES",
    "MAX_COMPARE",
    "MAX_COMPILER_OPTIONS",
    "MAX_DEVICES",
    "MAX_EVENT_BYTES",
    "MAX_EVENT_DEPTH",
    "MAX_EVENT_NODES",
    "MAX_EXPR_BYTES",
    "MAX_KERNELS",
    "MAX_LABEL_CHARS",
    "MAX_LEAF_DATA",
    "MAX_LEAVES",
    "MAX_MESSAGE_CHARS",
    "MAX_NOTES",
    "MAX_PASSES_CHARS",
    "MAX_PASS_ITEMS",
    "MAX_REMARKS",
    "MAX_REPR_CHARS",
    "MAX_SHARD_BLOCKS",
    "MAX_SOURCES",
    "MAX_STREAM_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_TIMING_ROWS",
    "MAX_TRANSFORMS",
    "MAX_VALUE_DATA",
    "OUTPUTS",
    "OUTPUT_TABLE",
    "PROTOCOL_VERSION",
    "SNIPPET_FILENAME",
    "STAGES",
    "TAMPERED_REASON",
    "TRANSFORM_OPTIONS",
    "WORKER_DONE_REASONS",
    "AnyEvent",
    "Backend",
    "BadEvent",
    "CompilerOptions",
    "DoneEvent",
    "DoneStatus",
    "Output",
    "OutputSpec",
    "Pipeline",
    "RunRequest",
    "StageName",
    "Transform",
    "TransformName",
    "ValidEvent",
    "check_compiler_options",
    "check_line_shape",
    "done_event",
    "encode_event",
    "event_json_schema",
    "parse_event_line",
    "validate_event",
]

#: where the names live, the cheapest to import first: a name is looked for in each
#: in turn, so the words and the limits never build the event models
_MODULES = (
    "sandbox.protocol.vocabulary",
    "sandbox.protocol.limits",
    "sandbox.protocol.events",
    "sandbox.protocol.lines",
    "sandbox.protocol.output_table",
    "sandbox.protocol.requests",
)


def __getattr__(name: str) -> Any:
    if name in __all__:
        for home in _MODULES:
            module = importlib.import_module(home)
            if name in vars(module):
                globals()[name] = value = vars(module)[name]  # looked up once
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
