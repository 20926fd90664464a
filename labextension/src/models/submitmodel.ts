/** The submit form's state and the run request it makes (pure; submit.ts is the dialog). */

import type { IPreview, IResources, IRunDetail, IRunRequest } from '../api/types';
import { estimateLine, estimateView } from './estimates';

export interface ISubmitState {
  script: string;
  /** A command line instead of a file (a resubmitted command run). */
  command?: string;
  /** Run params, `key=value` one per line (numbers and true/false are typed). */
  params?: string;
  args: string;
  name: string;
  project: string;
  presets: string[];
  queue: string;
  gpu: string;
  cpu: string;
  memory: string;
  env: string;
}

/** Split a command line into arguments: whitespace separates, quotes group, backslash escapes. */
export function splitArgs(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | null = null;
  let has = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) {
        quote = null;
      } else if (c === '\\' && quote === '"' && i + 1 < text.length) {
        cur += text[++i];
      } else {
        cur += c;
      }
    } else if (c === '"' || c === "'") {
      quote = c;
      has = true;
    } else if (c === '\\' && i + 1 < text.length) {
      cur += text[++i];
      has = true;
    } else if (/\s/.test(c)) {
      if (has) {
        out.push(cur);
        cur = '';
        has = false;
      }
    } else {
      cur += c;
      has = true;
    }
  }
  if (has) {
    out.push(cur);
  }
  return out;
}

/**
 * The run request the form describes, or the reasons it cannot be sent. Only what the
 * user set is sent: everything else comes from the project defaults and the presets.
 */
export function buildRunRequest(
  s: ISubmitState,
  base?: IRunRequest | null
): { request: IRunRequest | null; errors: string[] } {
  const errors: string[] = [];
  // A file browser path may start with '/'; a resubmitted run's script is the absolute path the
  // server recorded (inside its root), kept as it is so its working directory still matches.
  const typed = s.script.trim();
  const script = base?.script && typed === base.script ? typed : typed.replace(/^\/+/, '');
  const command = splitArgs(s.command ?? '');
  if (!script && !command.length) {
    errors.push(s.command === undefined ? 'Choose a .py or .ipynb file.' : 'Choose a .py or .ipynb file, or give a command.');
  } else if (!script) {
    // a command run: nothing to check here
  } else if (!/\.(py|ipynb)$/.test(script)) {
    errors.push(`${script} is not a .py or .ipynb file.`);
  }
  if (!s.project) {
    errors.push('Choose a project.');
  }
  const resources: IResources = {};
  if (s.gpu.trim()) {
    const n = Number(s.gpu);
    if (!Number.isInteger(n) || n < 0) {
      errors.push(`GPUs must be a whole number ≥ 0, not ${s.gpu.trim()}.`);
    } else {
      resources.gpu = n;
    }
  }
  if (s.cpu.trim()) {
    resources.cpu = s.cpu.trim();
  }
  if (s.memory.trim()) {
    resources.memory = s.memory.trim();
  }
  const env: Array<{ name: string; value: string | null }> = [];
  for (const raw of s.env.split('\n')) {
    const line = raw.trim();
    if (!line) {
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) {
      errors.push(`Environment line "${line}" is not NAME=value.`);
      continue;
    }
    env.push({ name: line.slice(0, eq).trim(), value: line.slice(eq + 1) });
  }
  const params = parseParams(s.params ?? '', errors);
  if (errors.length) {
    return { request: null, errors };
  }
  const request: IRunRequest = { ...keptFields(base), project: s.project };
  if (script) {
    // The run starts in the file's directory, so the script's relative paths work there
    // (a resubmitted run of the same file keeps the directory it ran in).
    const slash = script.lastIndexOf('/');
    request.script = script;
    request.working_dir =
      base?.script === script && base.working_dir ? base.working_dir : slash > 0 ? script.slice(0, slash) : '.';
  } else {
    request.command = command;
    if (base?.working_dir) {
      request.working_dir = base.working_dir;
    }
  }
  const args = splitArgs(s.args);
  if (args.length) {
    request.args = args;
  }
  if (s.name.trim()) {
    request.name = s.name.trim();
  }
  if (s.presets.length) {
    request.presets = [...s.presets];
  }
  if (s.queue) {
    request.queue = s.queue;
  }
  if (Object.keys(resources).length) {
    request.resources = resources;
  }
  if (env.length) {
    request.env = env;
  }
  if (params) {
    request.params = params;
  }
  return { request, errors };
}

/** What the form edits; the rest of a resubmitted run's request (placement, image, …) is kept. */
const FORM_FIELDS = new Set(['project', 'script', 'command', 'args', 'name', 'presets', 'queue', 'resources', 'env', 'params', 'working_dir']);

function keptFields(base?: IRunRequest | null): Partial<IRunRequest> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(base ?? {})) {
    if (!FORM_FIELDS.has(k) && v !== null && v !== undefined) {
      out[k] = v;
    }
  }
  return out as Partial<IRunRequest>;
}

/** `lr=0.1` lines as typed params (numbers, true/false, else strings); null when none. */
export function parseParams(text: string, errors: string[] = []): Record<string, string | number | boolean> | null {
  const out: Record<string, string | number | boolean> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) {
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) {
      errors.push(`Param line "${line}" is not key=value.`);
      continue;
    }
    const v = line.slice(eq + 1).trim();
    out[line.slice(0, eq).trim()] = v === 'true' ? true : v === 'false' ? false : v !== '' && Number.isFinite(Number(v)) ? Number(v) : v;
  }
  return Object.keys(out).length ? out : null;
}

/** One argument as the form shows it (quoted when splitArgs would split it). */
export function quoteArg(a: string): string {
  return a === '' || /[\s"'\\]/.test(a) ? `"${a.replace(/["\\]/g, m => `\\${m}`)}"` : a;
}

/** The submit form prefilled from a run's record: what it was asked with, to edit and send again. */
export function stateFromRun(run: IRunDetail): ISubmitState {
  const req = (run.request ?? {}) as Partial<IRunRequest>;
  const res = (req.resources ?? {}) as Record<string, unknown>;
  const cmd = req.command;
  const params = req.params ?? {};
  return {
    script: req.script ?? '',
    command: req.script ? undefined : Array.isArray(cmd) ? cmd.map(quoteArg).join(' ') : cmd ?? '',
    args: (req.args ?? []).map(quoteArg).join(' '),
    name: req.name ?? '',
    project: req.project ?? run.project,
    presets: [...(req.presets ?? [])],
    queue: req.queue ?? '',
    gpu: res.gpu === undefined || res.gpu === null ? '' : String(res.gpu),
    cpu: res.cpu === undefined || res.cpu === null ? '' : String(res.cpu),
    memory: res.memory === undefined || res.memory === null ? '' : String(res.memory),
    env: (req.env ?? []).filter(e => e.value !== null && e.value !== undefined).map(e => `${e.name}=${e.value}`).join('\n'),
    params: Object.entries(params).map(([k, v]) => `${k}=${v}`).join('\n')
  };
}

/** The layer that locks `path` in a preview's `locks`: the path itself or a field above it (`resources`). */
export function lockOf(locks: Record<string, string>, path: string): string | undefined {
  const parts = path.split('.');
  for (let i = parts.length; i > 0; i--) {
    const layer = locks[parts.slice(0, i).join('.')];
    if (layer !== undefined) {
      return layer;
    }
  }
  return undefined;
}

/** `preset notebook`, `project team-a`, `project default preset gpu-small`, `org defaults`: who set a field. */
export function layerLabel(layer: string | undefined): string {
  if (!layer) {
    return 'this request';
  }
  if (layer === 'org') {
    return 'org defaults';
  }
  if (layer === 'run') {
    return 'this request';
  }
  const preset = layer.split('preset:')[1];
  if (preset) {
    return layer.startsWith('project:') ? `project default preset ${preset}` : `preset ${preset}`;
  }
  return layer.startsWith('project:') ? `project ${layer.slice('project:'.length)}` : layer;
}

// ---- when it would start ------------------------------------------------------------------------

export interface IPreviewEstimate {
  /** `would start: starts in ~12 min (p90 40 min)` (the service's words), or why it is unknown. */
  line: string;
  /** What the estimate rests on, or why there is none. */
  why: string;
  /** Ways to start sooner the policy accepts, soonest first, each with its own estimate. */
  sooner: ISoonerView[];
}

export interface ISoonerView {
  /** `use queue spare and ask for 1 GPU instead of 2` (the service's hint). */
  hint: string;
  /** Its estimate in the service's words (`starts now`), or `start unknown: …`. */
  eta: string;
  why: string;
  /** The form fields its change sets, or null where the form cannot make it (another flavor). */
  form: FormChange | null;
}

/** Form fields an alternative sets. */
export type FormChange = Partial<Pick<ISubmitState, 'queue' | 'gpu' | 'cpu' | 'memory'>>;

/**
 * When the previewed run would start if submitted now, and the sooner ways, as the service answered
 * (`eta`, `eta_unknown`, `alternatives`); null when it says nothing (a refused run, a sweep).
 */
export function previewEstimate(p: Pick<IPreview, 'verdict' | 'eta' | 'eta_unknown' | 'alternatives'>): IPreviewEstimate | null {
  const v = estimateView(p);
  if (!p.verdict.allowed || v.state === 'none') {
    return null;
  }
  return {
    line: v.state === 'known' ? `would start: ${v.text}` : `would start: unknown (${v.why})`,
    why: v.why,
    sooner: (p.alternatives ?? []).map(a => ({ hint: a.hint, eta: estimateLine(a), why: estimateView(a).why, form: formChange(a.changes) }))
  };
}

/**
 * The form fields an alternative's changes set (its queue; its GPUs, CPU or memory), or null when it
 * changes what the form does not edit (placement: another flavor).
 */
export function formChange(changes: Record<string, unknown>): FormChange | null {
  const out: FormChange = {};
  for (const [key, value] of Object.entries(changes)) {
    if (key === 'queue' && typeof value === 'string') {
      out.queue = value;
    } else if (key === 'resources' && value !== null && typeof value === 'object') {
      for (const [r, amount] of Object.entries(value as Record<string, unknown>)) {
        if ((r !== 'gpu' && r !== 'cpu' && r !== 'memory') || (typeof amount !== 'number' && typeof amount !== 'string')) {
          return null;
        }
        out[r] = String(amount);
      }
    } else {
      return null;
    }
  }
  return out;
}
