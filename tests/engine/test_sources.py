"""Source-mapping parsers on texts shaped like what JAX prints."""

from __future__ import annotations

from sandbox.engine.sources import hlo_sources, mlir_sources

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
