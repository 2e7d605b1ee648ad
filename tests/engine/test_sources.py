"""Source-mapping parsers on texts shaped like what JAX prints."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from sandbox.engine.core.sources import (
    hlo_sources,
    jaxpr_sources,
    mlir_sources,
    printed_jaxpr,
    spans_sources,
)
from sandbox.protocol.requests import SNIPPET_FILENAME

PLAIN = """module @jit_f {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = stablehlo.sine %arg0 : tensor<3xf32>
    %1 = stablehlo.cosine %0 : tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}"""

DEBUG = """#loc1 = loc("x")
module @jit_f {
  func.func public @main(%arg0: tensor<3xf32> loc("x")) -> (tensor<3xf32>) {
    %0 = stablehlo.sine %arg0 : tensor<3xf32> loc(#loc6)
    %1 = stablehlo.cosine %0 : tensor<3xf32> loc(#loc7)
    return %1 : tensor<3xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("snippet.py":4:11 to :21)
#loc3 = loc("snippet.py":9:8 to :12)
#loc4 = loc("g"(#loc2))
#loc5 = loc("f"(#loc3))
#loc6 = loc("jit(f)/sin"(callsite(#loc4 at #loc5)))
#loc7 = loc("jit(f)/cos"("/usr/lib/python3/jax/numpy.py":100:1 to :5))"""


def test_mlir_innermost_user_frame_wins_and_library_frames_are_skipped() -> None:
    assert mlir_sources(PLAIN, DEBUG) == [{"out_line": 3, "line": 4}]


def test_mlir_texts_that_do_not_line_up_map_nothing() -> None:
    assert mlir_sources(PLAIN.replace("cosine", "tanh"), DEBUG) == []


# several locations on one line, quotes inside a name location, a call site spelled
# inline with its callee's name around it
DEBUG_NESTED = """#loc1 = loc("x")
module @jit_f {
  func.func public @main(%arg0: tensor<3xf32> loc("x \\"q\\" (1)")) -> (tensor<3xf32>) {
    %0 = stablehlo.sine %arg0 : tensor<3xf32> loc(#loc6)
    %1 = stablehlo.cosine %0 : tensor<3xf32> loc(callsite("h"("/lib/jax.py":3:1 to :2) at #loc5))
    return %1 : tensor<3xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("snippet.py":4:11 to :21)
#loc3 = loc("snippet.py":9:8 to :12)
#loc4 = loc("g"(#loc2))
#loc5 = loc("f"(#loc3))
#loc6 = loc("jit(f)/a \\"(q\\" at )"(callsite(#loc4 at #loc5)))"""


def test_mlir_quoted_names_and_inline_call_sites() -> None:
    assert mlir_sources(PLAIN, DEBUG_NESTED) == [
        {"out_line": 3, "line": 4},
        {"out_line": 4, "line": 9},
    ]


def _snippet_jaxpr() -> Any:
    code = "import jax.numpy as jnp\n\ndef f(x):\n    y = jnp.sin(x)\n    return jnp.sum(y * 2.0)\n"
    namespace: dict[str, Any] = {}
    exec(compile(code, SNIPPET_FILENAME, "exec"), namespace)
    return jax.make_jaxpr(jax.grad(namespace["f"]))(jnp.ones(3))


def test_printed_jaxpr_is_str_of_the_jaxpr_mapped_as_jaxpr_sources_maps_it() -> None:
    closed = _snippet_jaxpr()
    text, spans = printed_jaxpr(closed)
    assert text == str(closed)
    sources = spans_sources(spans, text)
    assert sources == jaxpr_sources(closed, text)
    assert {s["line"] for s in sources} == {4, 5}


class _NoSourceMaps:
    """A jaxpr of a JAX whose pretty printer takes no ``source_map``."""

    def pretty_print(self, **options: Any) -> str:
        if options:
            raise TypeError(f"unexpected keyword arguments {sorted(options)}")
        return "{ lambda ; a:f32[]. let  in (a,) }"

    def __str__(self) -> str:
        return self.pretty_print()


def test_printed_jaxpr_without_source_maps_is_the_text_alone() -> None:
    text, spans = printed_jaxpr(_NoSourceMaps())
    assert (text, spans) == ("{ lambda ; a:f32[]. let  in (a,) }", None)
    assert spans_sources(spans, text) == []


HLO = """HloModule jit_f

FileNames
1 "snippet.py"
2 "lib.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=4 end_line=4 column=8 end_column=18}
2 {file_name_id=2 function_name_id=1 line=50 end_line=50 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}

ENTRY %main (x: f32[3]) -> f32[3] {
  %x = f32[3]{0} parameter(0), metadata={op_name="x"}
  %a = f32[3]{0} sine(%x), metadata={op_name="jit(f)/sin" stack_frame_id=1}
  %b = f32[3]{0} cosine(%a), metadata={op_name="jit(f)/cos" stack_frame_id=2}
  ROOT %c = f32[3]{0} tanh(%b), metadata={op_name="jit(f)/tanh" source_file="snippet.py" source_line=7}
}"""


def test_hlo_stack_frames_follow_parents_to_the_user_frame() -> None:
    assert hlo_sources(HLO) == [
        {"out_line": 20, "line": 4},
        {"out_line": 21, "line": 4},
        {"out_line": 22, "line": 7},
    ]
