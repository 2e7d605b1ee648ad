"""The numbers both sides of the worker protocol agree on: its version, and every
bound of a request and of an event (a line over one is refused, whoever wrote it)."""

from __future__ import annotations

PROTOCOL_VERSION = 1

# --- requests ---
MAX_CODE_BYTES = 64 * 1024
MAX_EXPR_BYTES = 8 * 1024
MAX_TRANSFORMS = 16
MAX_COMPARE = 4
MAX_DEVICES = 64
MAX_COMPILER_OPTIONS = 16

# --- events ---
#: Largest single event line accepted from a worker (an HLO text of a big program).
MAX_EVENT_BYTES = 8 * 1024 * 1024
#: JSON values in one event line, at most (a value event's 65,536 numbers and the
#: source map of a long HLO text stay well under it)
MAX_EVENT_NODES = 300_000
#: How deep one event line may nest (the deepest real one, a complex value, is 5)
MAX_EVENT_DEPTH = 8
#: An IR text in one event; one stdout/stderr event (the engine splits longer output)
MAX_TEXT_CHARS = 2 * 1024 * 1024
#: A jaxpr, StableHLO or HLO text longer than this comes in parts of at most this
#: many characters (its event, then ``text_part`` events). A page takes each event in
#: one task of its main thread: the 1,000-layer MLP's 2 MiB parts made tasks of
#: 81-89 ms on a quiet 2-core machine (100-142 ms loaded), 256 Ki ones none over 50 ms.
TEXT_PART_CHARS = 256 * 1024
#: A whole jaxpr, StableHLO or HLO text: past this it is cut and says so.
#: A 1,000-layer MLP's StableHLO is 4.7 M characters.
MAX_FULL_TEXT_CHARS = 64 * 1024 * 1024
#: the parts one IR text may come in (its event's and the ``text_part`` events')
MAX_TEXT_PARTS = MAX_FULL_TEXT_CHARS // TEXT_PART_CHARS
MAX_STREAM_CHARS = 16 * 1024
#: An error's message (the engine cuts at 8 KiB and says so), a hint, a note
MAX_MESSAGE_CHARS = 16 * 1024
MAX_LABEL_CHARS = 1024
#: Source-map entries of one IR text
MAX_SOURCES = 65_536
#: A value: its leaves, the elements of one leaf's data, and all leaves' data
MAX_LEAVES = 4096
MAX_LEAF_DATA = 256
MAX_VALUE_DATA = 65_536
MAX_REPR_CHARS = 80 * 1024
MAX_TIMING_ROWS = 2 + MAX_COMPARE
MAX_NOTES = 16
#: blocks of one array in a sharding event, collectives in one program
MAX_SHARD_BLOCKS = 4096
MAX_COLLECTIVES = 4096
#: involuntary full rematerializations one sharding event reports
MAX_REMATS = 256
#: What one passes / asm / memory / remarks event may carry
MAX_PASS_ITEMS = 1024
MAX_PASSES_CHARS = 6 * 1024 * 1024
MAX_KERNELS = 256
MAX_BUFFERS = 4096
#: A memory timeline: its points (a longer schedule is cut into strides, each point
#: the most bytes of its stride), its bands (the code lines that hold most bytes; the
#: rest in one band)
MAX_MEMORY_POINTS = 512
MAX_MEMORY_BANDS = 12
MAX_REMARKS = 256
#: What one recompiles event may carry: call sites, and the misses listed per site
MAX_RECOMPILE_SITES = 256
MAX_RECOMPILE_MISSES = 32
#: What one export event may carry: the serialized artifact (before base64), the
#: round trip's calls
MAX_EXPORT_ARTIFACT_BYTES = 4 * 1024 * 1024
MAX_EXPORT_CALLS = 8
#: Spans of the user's code a shapes event may give (one per expression traced)
MAX_SHAPE_SPANS = 4096
#: What one profile event may carry: instruction rows, timeline events, leaf HLO
#: passes, and its trace (gzipped Chrome trace JSON, before base64)
MAX_PROFILE_ROWS = 1024
MAX_TIMELINE_EVENTS = 4096
MAX_PROFILE_PASSES = 2048
MAX_TRACE_GZ_BYTES = 1024 * 1024
#: Grid points of one pallas_call whose blocks the kernels output's grid map gives
#: (each BlockSpec's index map evaluated at each; the rest are cut, and it says so)
MAX_GRID_POINTS = 1024
#: What one autodiff event may carry: its stages (two paths, seven at most), their
#: texts and source maps together, the residuals listed per path, checkpoint policies
MAX_AUTODIFF_STAGES = 8
MAX_AUTODIFF_CHARS = 3 * 1024 * 1024
MAX_AUTODIFF_SOURCES = 40_000
MAX_RESIDUALS = 1024
MAX_POLICIES = 16
#: The trace_values output (sandbox/engine/outputs/trace_values/): rows kept (one per equation
#: stepped, or per loop iteration), the values they describe in all and per row, and what
#: stepping may cost: bytes of equation outputs evaluated, equations evaluated
MAX_TRACE_ROWS = 4096
MAX_TRACE_VALUES = 8192
MAX_TRACE_ROW_VALUES = 16
MAX_TRACE_BYTES = 256 * 1024 * 1024
MAX_TRACE_STEPS = 20_000
#: The numerics output (sandbox/engine/outputs/numerics/): rows kept (one per equation,
#: a loop's iterations folded), equations shadowed, and the default of a request's
#: numerics_max_values (values the program makes; the server's setting caps it)
MAX_NUMERICS_ROWS = 4096
MAX_NUMERICS_STEPS = 20_000
NUMERICS_MAX_VALUES = 4_000_000
