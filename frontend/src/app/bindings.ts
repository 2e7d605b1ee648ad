// Controls <-> state: the plain fields of the top bar and the call row, one binding
// each. A binding reads its control into the state (on its event; false when the value
// is refused, e.g. devices out of 1..64) and writes the state into the control (a
// snippet, an example, the autosave shown). The controls with behaviour of their own
// (the editor, the pipelines, the mesh builder, the targets) are main.ts's.
import { Backend, RunRequest, type Output } from "../generated/request";
import { parsedOrNull } from "../util/narrow";
import { optInOutput } from "../model/registry";
import type { PlayState } from "../model/state";

/** What a binding needs of a control (an input, a select, a checkbox; a fake in tests). */
export interface Control {
  value: string;
  checked?: boolean;
  dataset: DOMStringMap;
  addEventListener(type: "input" | "change", listener: () => void): void;
}

export interface Binding {
  control: Control;
  event: "input" | "change";
  /** the control's value into `state`; false: refused, nothing changed */
  read: (control: Control, state: PlayState) => boolean;
  /** `state` into the control */
  write: (control: Control, state: PlayState) => void;
  /** after a change was read (other controls that follow it) */
  then?: () => void;
}

export class ControlsController {
  constructor(
    private readonly bindings: readonly Binding[],
    private readonly state: () => PlayState,
    private readonly changed: () => void,
  ) {
    for (const b of bindings) {
      b.control.addEventListener(b.event, () => {
        if (!b.read(b.control, this.state())) return;
        b.then?.();
        this.changed();
      });
    }
  }

  /** Puts `state` into every bound control. */
  show(state: PlayState): void {
    for (const b of this.bindings) b.write(b.control, state);
  }
}

/** The Pallas interpret mode's menu (its values are the request's `pallas_interpret`). */
function pallasBinding(control: Control): Binding {
  return {
    control,
    event: "change",
    read: (el, s) => {
      const mode = parsedOrNull(RunRequest.shape.pallas_interpret, el.value);
      if (!mode) return false;
      s.pallasInterpret = mode;
      return true;
    },
    write: (el, s) => void (el.value = s.pallasInterpret ?? "auto"),
  };
}

export interface FieldControls {
  entry: Control;
  args: Control;
  backend: Control;
  jaxVersion: Control;
  devices: Control;
  flags: Control;
  flagsB: Control;
  configBoxes: readonly Control[];
  outputBoxes: readonly Control[];
  /** how a pallas_call without interpret= runs on a CPU run (absent: not bound) */
  pallasInterpret?: Control;
  /** the export output's shapes and platforms as typed (absent: not bound) */
  exportShapes?: Control;
  exportPlatforms?: Control;
}

export interface FieldHooks {
  /** the entry changed: the args, the mesh and the pipeline summaries follow */
  entry?: () => void;
  /** the device count changed: the mesh builder follows */
  devices?: () => void;
}

/** The bindings of the plain fields. */
export function fieldBindings(c: FieldControls, hooks: FieldHooks = {}): Binding[] {
  const text = (control: Control, key: "entry" | "args" | "flags" | "compareFlags" | "exportShapes" | "exportPlatforms", then?: () => void): Binding => ({
    control,
    event: "input",
    read: (el, s) => ((s[key] = el.value), true),
    write: (el, s) => void (el.value = s[key] ?? ""),
    ...(then ? { then } : {}),
  });
  return [
    text(c.entry, "entry", hooks.entry),
    text(c.args, "args"),
    text(c.flags, "flags"),
    text(c.flagsB, "compareFlags"),
    {
      control: c.devices,
      event: "input",
      read: (el, s) => {
        const n = Number(el.value);
        if (!Number.isInteger(n) || n < 1 || n > 64) return false;
        s.devices = n;
        return true;
      },
      write: (el, s) => void (el.value = String(s.devices)),
      ...(hooks.devices ? { then: hooks.devices } : {}),
    },
    {
      control: c.backend,
      event: "change",
      // the menu lists only the server's Backend names, so this parses
      read: (el, s) => {
        const backend = parsedOrNull(Backend, el.value);
        if (backend === null) return false;
        s.backend = backend;
        return true;
      },
      write: () => {}, // main.ts adds a link's backend to the menu first
    },
    {
      control: c.jaxVersion,
      event: "change",
      read: (el, s) => ((s.jaxVersion = el.value), true),
      write: () => {}, // main.ts picks it (adding a version from a link)
    },
    ...(c.pallasInterpret ? [pallasBinding(c.pallasInterpret)] : []),
    ...(c.exportShapes ? [text(c.exportShapes, "exportShapes")] : []),
    ...(c.exportPlatforms ? [text(c.exportPlatforms, "exportPlatforms")] : []),
    ...c.configBoxes.map(
      (box): Binding => ({
        control: box,
        event: "change",
        read: (el, s) => {
          const name = el.dataset.config!;
          if (el.checked) s.config[name] = true;
          else delete s.config[name];
          return true;
        },
        write: (el, s) => void (el.checked = s.config[el.dataset.config!] === true),
      }),
    ),
    ...c.outputBoxes.map(
      (box): Binding => ({
        control: box,
        event: "change",
        read: (el, s) => {
          const name = optInOutput(el.dataset.output);
          if (name === null) return false; // app/layout.ts names each box after an opt-in output
          const others = (s.outputs ?? []).filter((o) => o !== name);
          s.outputs = el.checked ? [...others, name] : others;
          return true;
        },
        write: (el, s) => void (el.checked = (s.outputs ?? []).some((o: Output) => o === el.dataset.output)),
      }),
    ),
  ];
}
