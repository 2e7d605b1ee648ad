// The examples menu (what JAX users learn first) and the pipeline presets.
import type { PlayState } from "./state";
import type { Step } from "./transforms";

const step = (name: string, options: Record<string, string | boolean> = {}): Step => ({ name, options });

export interface Example {
  id: string;
  title: string;
  state: Omit<PlayState, "backend">;
}

export const EXAMPLES: Example[] = [
  {
    id: "grad-loss",
    title: "grad of a loss",
    state: {
      code: `import jax.numpy as jnp

def predict(w, x):
    return jnp.tanh(x @ w)

def f(w, x, y):
    # mean squared error of a one-layer model
    err = predict(w, x) - y
    return jnp.mean(err ** 2)
`,
      entry: "f",
      args: "(jnp.ones((3, 2)), jnp.ones((4, 3)), jnp.zeros((4, 2)))",
      steps: [step("grad"), step("jit")],
      compare: null,
      devices: 1,
      config: {},
    },
  },
  {
    id: "per-example",
    title: "per-example gradients (vmap of grad)",
    state: {
      code: `import jax.numpy as jnp

def f(w, x, y):
    # the loss of ONE example; vmap maps it over the batch
    pred = jnp.dot(x, w)
    return (pred - y) ** 2
`,
      entry: "f",
      args: "(jnp.ones(3), jnp.arange(12.0).reshape(4, 3), jnp.ones(4))",
      steps: [step("grad"), step("vmap", { in_axes: "(None, 0, 0)" }), step("jit")],
      compare: null,
      devices: 1,
      config: {},
    },
  },
  {
    id: "jacfwd-jacrev",
    title: "jacfwd vs jacrev",
    state: {
      code: `import jax.numpy as jnp

def f(x):
    # R^3 -> R^3: forward and reverse mode give the same Jacobian,
    # by different programs
    return jnp.sin(x) * jnp.cumsum(x)
`,
      entry: "f",
      args: "jnp.arange(1.0, 4.0)",
      steps: [step("jacfwd"), step("jit")],
      compare: [step("jacrev"), step("jit")],
      devices: 1,
      config: {},
    },
  },
  {
    id: "scan-vs-loop",
    title: "lax.scan vs a Python loop",
    state: {
      code: `import jax.numpy as jnp
from jax import lax

def step(h, x):
    h = jnp.tanh(h * 0.9 + x)
    return h, h

def python_loop(xs):
    # unrolled at trace time: one copy of step per element
    h = 0.0
    for x in xs:
        h, _ = step(h, x)
    return h

def f(xs):
    # one scan: the body is traced once, whatever the length
    h, _ = lax.scan(step, 0.0, xs)
    return h
`,
      entry: "f",
      args: "jnp.linspace(0.0, 1.0, 8)",
      steps: [step("jit")],
      compare: null,
      devices: 1,
      config: {},
    },
  },
  {
    id: "static-argnums",
    title: "static_argnums",
    state: {
      code: `import jax.numpy as jnp

def f(x, n):
    # n decides the shape of the program, so jit must see it as a constant
    for _ in range(n):
        x = jnp.sin(x)
    return x
`,
      entry: "f",
      args: "(jnp.ones(3), 3)",
      steps: [step("jit", { static_argnums: "1" })],
      compare: null,
      devices: 1,
      config: {},
    },
  },
  {
    id: "sharp-bit",
    title: "a sharp bit: if on a traced value",
    state: {
      code: `import jax.numpy as jnp

def f(x):
    # Python control flow on a traced value fails under jit;
    # the hint says what to use instead
    if x.sum() > 0:
        return x * 2
    return -x
`,
      entry: "f",
      args: "jnp.ones(3)",
      steps: [step("jit")],
      compare: null,
      devices: 1,
      config: {},
    },
  },
  {
    id: "pmap",
    title: "pmap on 4 virtual devices",
    state: {
      code: `import jax.numpy as jnp

def f(x):
    # pmap gives each of the 4 devices one row of x; the HLO shows
    # the per-device program, the value is stacked back together
    return jnp.tanh(x) * jnp.sum(x ** 2)
`,
      entry: "f",
      args: "jnp.arange(8.0).reshape(4, 2)",
      steps: [step("pmap", { axis_name: "devices" })],
      compare: null,
      devices: 4,
      config: {},
    },
  },
  // The sharding studio's examples (issue 14): the golden cases
  // tests/golden/cases/sharding_{dp_matmul,2d_layer,shard_map_psum}.json run the
  // same programs (without the comments) against JAX itself.
  {
    id: "sharding-dp-matmul",
    title: "sharding: data-parallel matmul",
    state: {
      code: `import jax
import jax.numpy as jnp

def f(x, w):
    # the batch (rows of x) is split over the 4 devices of the mesh;
    # w is replicated: each device multiplies its rows, no collective
    return jnp.tanh(x @ w)
`,
      entry: "f",
      args: "(jnp.arange(32.0).reshape(8, 4) / 32, jnp.ones((4, 3)))",
      steps: [step("jit")],
      compare: null,
      devices: 4,
      config: {},
      sharding: { mesh: { shape: "4", names: "batch", types: ["auto"] }, inShardings: ["P('batch', None)", ""], outShardings: "" },
    },
  },
  {
    id: "sharding-2d-layer",
    title: "sharding: a 2-D sharded layer (all-reduce)",
    state: {
      code: `import jax
import jax.numpy as jnp

def f(x, w, b):
    # x is split over both mesh axes, w's rows over y: each device holds
    # part of the contraction, and the partial sums meet in an all-reduce
    h = x @ w + b
    return jax.nn.relu(h)
`,
      entry: "f",
      args: "(jnp.arange(64.0).reshape(8, 8) / 64, jnp.ones((8, 4)), jnp.zeros(4))",
      steps: [step("jit")],
      compare: null,
      devices: 4,
      config: {},
      sharding: { mesh: { shape: "2, 2", names: "x, y", types: ["auto", "auto"] }, inShardings: ["P('x', 'y')", "P('y', None)", ""], outShardings: "P('x', None)" },
    },
  },
  {
    id: "sharding-shard-map-psum",
    title: "sharding: shard_map with psum",
    state: {
      code: `import jax
import jax.numpy as jnp
from jax import lax

def f(x):
    # runs once per device on its block of x; psum adds the blocks'
    # sums across the mesh axis i (an all-reduce in the HLO)
    total = lax.psum(jnp.sum(x), 'i')
    return x / total
`,
      entry: "f",
      args: "jnp.arange(1.0, 9.0)",
      steps: [step("shard_map", { in_specs: "P('i')", out_specs: "P('i')" }), step("jit")],
      compare: null,
      devices: 4,
      config: {},
      sharding: { mesh: { shape: "4", names: "i", types: ["explicit"] }, inShardings: ["P('i')"], outShardings: "" },
    },
  },
];

/** Pipeline presets: they set the pipeline for the code in the editor. The two that
 * only make sense for code of a certain shape (a per-example loss, a function with
 * a collective) load their example instead, code included (Ctrl+Z in the editor
 * brings the code back). */
export interface Preset {
  id: string;
  title: string;
  steps: Step[];
  compare: Step[] | null;
  /** load this example instead of changing the pipeline alone */
  example?: string;
}

export const PRESETS: Preset[] = [
  {
    id: "per-example",
    title: "per-example gradients: vmap(grad(f)) (loads its example)",
    steps: [],
    compare: null,
    example: "per-example",
  },
  { id: "hessian", title: "Hessian: jit(hessian(f))", steps: [step("hessian"), step("jit")], compare: null },
  {
    id: "jacfwd-jacrev",
    title: "jacfwd vs jacrev (compare mode)",
    steps: [step("jacfwd"), step("jit")],
    compare: [step("jacrev"), step("jit")],
  },
  {
    id: "checkpoint",
    title: "checkpointed gradient: jit(grad(checkpoint(f)))",
    steps: [step("checkpoint", { policy: "dots_saveable" }), step("grad"), step("jit")],
    compare: [step("grad"), step("jit")],
  },
  {
    id: "pmap4",
    title: "pmap on 4 virtual devices (loads its example)",
    steps: [],
    compare: null,
    example: "pmap",
  },
  { id: "grad-jit", title: "gradient: jit(grad(f))", steps: [step("grad"), step("jit")], compare: null },
  { id: "none", title: "f as written (no transforms)", steps: [], compare: null },
];

export const DEFAULT_STATE: PlayState = { ...EXAMPLES[0]!.state, backend: "auto" };
