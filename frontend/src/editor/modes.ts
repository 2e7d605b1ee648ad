// Small highlighting modes for what JAX prints: jaxprs, MLIR (StableHLO) and HLO.
// Token classes only; no parsing. Lezer tags via StreamLanguage's legacy names.
import { StreamLanguage, type StreamParser } from "@codemirror/language";

interface Depth {
  /** inside [...] params of a jaxpr equation */
  params: number;
}

const jaxprParser: StreamParser<Depth> = {
  name: "jaxpr",
  startState: () => ({ params: 0 }),
  token(stream, state) {
    if (stream.eatSpace()) return null;
    if (stream.match(/^(lambda|let|in)\b/)) return "keyword";
    // types: f32[3,4], i32[], bool[], key<fry>[]
    if (stream.match(/^(?:[a-z]+\d*(?:<[^>]*>)?)\[[\d,\s]*\](?:\{[^}]*\})?/)) return "type";
    if (stream.match(/^-?\d+(\.\d*)?(e[-+]?\d+)?(?=:)/)) return "number";
    if (stream.match(/^-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)\b/)) return "number";
    if (stream.match(/^(True|False|None)\b/)) return "atom";
    if (stream.match(/^'[^']*'|^"[^"]*"/)) return "string";
    if (stream.match("[")) {
      state.params++;
      return "bracket";
    }
    if (stream.match("]")) {
      state.params = Math.max(0, state.params - 1);
      return "bracket";
    }
    if (stream.match(/^[A-Za-z_][\w.]*(?==)/)) return state.params > 0 ? "attribute" : "variable";
    // `b:f32[] = sin a`: the primitive comes right after "= "
    if (stream.match(/^[A-Za-z_][\w.]*/)) {
      const before = stream.string.slice(0, stream.start).trimEnd();
      return before.endsWith("=") && state.params === 0 ? "builtin" : "variable";
    }
    if (stream.match(/^[=:;.,(){}]/)) return "punctuation";
    stream.next();
    return null;
  },
};

const mlirParser: StreamParser<null> = {
  name: "mlir",
  startState: () => null,
  token(stream) {
    if (stream.eatSpace()) return null;
    if (stream.match("//")) {
      stream.skipToEnd();
      return "comment";
    }
    if (stream.match(/^"(?:[^"\\]|\\.)*"/)) return "string";
    if (stream.match(/^%[\w.$#-]+(?::\d+)?/)) return "variable";
    if (stream.match(/^@[\w.$-]+/)) return "def";
    if (stream.match(/^#[\w.$-]+/)) return "meta";
    if (stream.match(/^\^[\w.$-]+/)) return "meta";
    if (stream.match(/^(tensor|memref|vector|complex|tuple)(?=<)/)) return "type";
    if (stream.match(/^(f16|bf16|f32|f64|i1|i8|i16|i32|i64|ui8|ui32|ui64|index|none)\b/)) return "type";
    if (stream.match(/^(module|func\.func|return|func\.return|public|private|attributes|dense|applies|across|dimensions|dims|init|loc|callsite|at|to|true|false)\b/)) return "keyword";
    if (stream.match(/^[a-z_]+\.[\w.]+/)) return "builtin";
    if (stream.match(/^-?(?:0x[0-9A-Fa-f]+|\d+\.?\d*(?:e[-+]?\d+)?)/)) return "number";
    if (stream.match(/^[A-Za-z_][\w.]*/)) return "attribute";
    if (stream.match(/^[<>()[\]{}=:,x*-]/)) return "punctuation";
    stream.next();
    return null;
  },
};

const hloParser: StreamParser<null> = {
  name: "hlo",
  startState: () => null,
  token(stream) {
    if (stream.eatSpace()) return null;
    if (stream.match("//")) {
      stream.skipToEnd();
      return "comment";
    }
    if (stream.match(/^"(?:[^"\\]|\\.)*"/)) return "string";
    if (stream.match(/^(HloModule|ENTRY|ROOT|FileNames|FunctionNames|FileLocations|StackFrames)\b/)) return "keyword";
    if (stream.match(/^%[\w.-]+/)) return "variable";
    if (stream.match(/^(pred|s8|s16|s32|s64|u8|u16|u32|u64|f16|bf16|f32|f64|c64|c128|token)\[[\d,\s]*\](?:\{[\d,\s:A-Z()]*\})?/)) return "type";
    if (stream.match(/^(pred|s32|f32|f64|token)\[\]/)) return "type";
    if (stream.match(/^(metadata|backend_config|frontend_attributes|sharding|calls|to_apply|kind|dimensions|slice|condition|body)(?==)/)) return "meta";
    if (stream.match(/^[a-z][\w-]*(?=\()/)) return "builtin";
    if (stream.match(/^[A-Za-z_][\w.]*(?==)/)) return "attribute";
    if (stream.match(/^-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)\b/)) return "number";
    if (stream.match(/^(true|false)\b/)) return "atom";
    if (stream.match(/^[A-Za-z_][\w.]*/)) return "variable";
    stream.next();
    return null;
  },
};

export const jaxprLanguage = StreamLanguage.define(jaxprParser);
export const mlirLanguage = StreamLanguage.define(mlirParser);
export const hloLanguage = StreamLanguage.define(hloParser);
