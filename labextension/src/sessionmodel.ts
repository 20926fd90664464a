/**
 * GPU sessions in a notebook, pure: which kernelspecs are session kernels, what the notebook
 * toolbar says about its lease, and what each status event of the lease asks the notebook to
 * do (re-read, restart its kernel once admitted, warn that it is idle, say why it ended).
 * sessions.ts wires this to JupyterLab; the unit tests drive it with plain objects.
 */

import { isFinal } from './lifecycle';
import type { IExplain, IRun, IStatusEvent } from './types';

/** The provisioner fails a kernel start still queued after its wait with this text. */
export const LAUNCH_WAIT_PREFIX = 'Waiting for a GPU';

export function isLaunchWait(message: string | null | undefined): boolean {
  return !!message && message.startsWith(LAUNCH_WAIT_PREFIX);
}

// ---- kernelspecs -------------------------------------------------------------------------------

/** What a kernelspec looks like in the KernelSpecManager's `specs.kernelspecs`. */
export interface ISpecLike {
  name: string;
  display_name?: string;
  metadata?: { [key: string]: unknown };
}

/** A gpuplat session kernelspec: `gpuplat-<preset>` or `gpuplat-<project>--<preset>`. */
export interface ISessionSpec {
  name: string;
  displayName: string;
  project: string;
  preset: string;
}

/** The session kernelspecs among `specs` (those whose metadata names a gpuplat preset). */
export function sessionSpecs(specs: { [name: string]: ISpecLike | undefined } | null | undefined): ISessionSpec[] {
  const out: ISessionSpec[] = [];
  for (const [name, spec] of Object.entries(specs ?? {})) {
    const g = spec?.metadata?.gpuplat as { preset?: unknown; project?: unknown } | undefined;
    if (g && typeof g.preset === 'string' && typeof g.project === 'string') {
      out.push({ name, displayName: spec?.display_name || name, project: g.project, preset: g.preset });
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** The kernelspec that starts `preset` in `project`, or null when the server offers none. */
export function specFor(specs: ISessionSpec[], preset: string, project: string): ISessionSpec | null {
  return specs.find(s => s.preset === preset && s.project === project) ?? null;
}

/** The spec a lease runs on: its project and one of its presets. */
export function specOfRun(specs: ISessionSpec[], run: Pick<IRun, 'project' | 'presets'>): ISessionSpec | null {
  for (const preset of run.presets ?? []) {
    const s = specFor(specs, preset, run.project);
    if (s) {
      return s;
    }
  }
  return null;
}

/** Why no spec was found, with what the server does offer (for the sidebar's error). */
export function noSpecMessage(specs: ISessionSpec[], preset: string, project: string): string {
  const offered = specs.map(s => `${s.preset} (${s.project})`).join(', ') || 'none';
  return `No GPU session kernel for preset ${preset} in project ${project}; the server offers: ${offered}`;
}

// ---- what the notebook shows -------------------------------------------------------------------

const WAITING = new Set(['created', 'queued']);
const ADMITTED = new Set(['dispatched', 'starting', 'running']);

export function isWaiting(status: string): boolean {
  return WAITING.has(status);
}

export function isAdmitted(status: string): boolean {
  return ADMITTED.has(status);
}

/** A lease as the notebook follows it: the run record (with its `session` part). */
export type ISessionRun = Pick<IRun, 'id' | 'project' | 'queue' | 'status' | 'reason' | 'message' | 'devices'> &
  Partial<Pick<IRun, 'presets' | 'session' | 'user'>>;

/** "UserLimit 1/1": the reason code and its used/limit numbers when explain gives them. */
export function reasonWithNumbers(reason: string, numbers: { [k: string]: number | null } | null | undefined): string {
  const used = numbers?.used;
  const limit = numbers?.limit;
  return typeof used === 'number' && typeof limit === 'number' ? `${reason} ${used}/${limit}` : reason;
}

/** "queued — position 1 of 1 in interactive · UserLimit 1/1 · alice has 1/1 runs …" */
export function queuedText(run: ISessionRun, ex: IExplain | null): string {
  if (!ex) {
    return `queued in ${run.queue}` + (run.reason ? ` · ${run.reason}` : '') + (run.message ? ` · ${run.message}` : '');
  }
  const where =
    ex.position !== null && ex.position !== undefined
      ? `position ${ex.position} of ${ex.pending_in_queue ?? ex.position} in ${ex.queue}`
      : `in ${ex.queue}`;
  const parts = [`queued — ${where}`];
  if (ex.reason) {
    parts.push(reasonWithNumbers(ex.reason, ex.numbers));
  }
  if (ex.message) {
    parts.push(ex.message);
  }
  return parts.join(' · ');
}

export function devicesText(devices: number[] | null | undefined): string {
  if (!devices || !devices.length) {
    return 'no GPU';
  }
  return (devices.length === 1 ? 'GPU ' : 'GPUs ') + devices.join(', ');
}

/** The session preset of a lease (its first preset: the session's own is listed first or alone). */
export function presetOf(run: ISessionRun, spec?: ISessionSpec | null): string {
  return spec?.preset ?? run.presets?.[0] ?? '';
}

export function idleWarningText(deadline: number | null | undefined, now: number): string {
  const left = deadline === null || deadline === undefined ? null : Math.max(0, Math.round(deadline - now));
  return left === null ? 'Idle GPU session: it ends soon' : `Idle GPU session: it ends in ${left} s`;
}

export function endedText(run: Pick<ISessionRun, 'status' | 'reason' | 'message'>): string {
  const why = run.reason ? ` (${run.reason})` : '';
  return `GPU session ended${why}: ${run.message || run.status}`;
}

export type SessionBarState = 'none' | 'submitting' | 'waiting' | 'starting' | 'running' | 'ending' | 'ended';

export interface ISessionBarView {
  state: SessionBarState;
  /** The toolbar's text, in one line. */
  text: string;
  /** Cancel (stop the lease), Why? (open it in the sidebar), Keep session (restart its idle clock). */
  cancel: boolean;
  why: boolean;
  keep: boolean;
}

export interface ISessionBarInput {
  run: ISessionRun | null;
  explain: IExplain | null;
  spec: ISessionSpec | null;
  /** The notebook is starting a session kernel but its lease is not known yet. */
  submitting: boolean;
  /** The idle warning's deadline (server clock), while it stands. */
  idleDeadline: number | null;
  /** Now, on the server's clock. */
  now: number;
}

/** What the notebook toolbar shows for its lease. */
export function sessionBarView(i: ISessionBarInput): ISessionBarView {
  const off = { cancel: false, why: false, keep: false };
  const run = i.run;
  if (!run) {
    return i.submitting
      ? { state: 'submitting', text: 'GPU: asking for a GPU…', ...off }
      : { state: 'none', text: '', ...off };
  }
  const preset = presetOf(run, i.spec);
  if (isFinal(run.status)) {
    return { state: 'ended', text: endedText(run), ...off, why: true };
  }
  if (run.status === 'stopping') {
    return { state: 'ending', text: `GPU: session ending · ${run.message || run.reason}`, ...off, why: true };
  }
  if (isWaiting(run.status)) {
    return { state: 'waiting', text: `GPU: ${queuedText(run, i.explain)}`, cancel: true, why: true, keep: false };
  }
  const where = `${devicesText(run.devices)} · ${preset}`;
  const kernel = run.session?.kernel;
  if (run.status !== 'running' || (kernel !== 'ready' && kernel !== undefined)) {
    return { state: 'starting', text: `${where} · kernel starting…`, cancel: true, why: true, keep: false };
  }
  let text = where;
  if (run.session?.busy) {
    text += ' · busy';
  } else if (i.idleDeadline !== null) {
    text += ` · idle: ends in ${Math.max(0, Math.round(i.idleDeadline - i.now))} s`;
  }
  return { state: 'running', text, cancel: false, why: true, keep: i.idleDeadline !== null };
}

// ---- what each event of the lease asks for ---------------------------------------------------

export type LeaseAction =
  /** re-read the run record */
  | 'refresh'
  /** re-read the explain answer (its place in line may have moved) */
  | 'explain'
  /** the idle warning: show it with "Keep session" */
  | 'idleWarning'
  /** the warning no longer stands (kept, or the kernel was used) */
  | 'idleCleared'
  /** the lease was admitted: a notebook whose kernel start gave up waiting starts it again */
  | 'admitted'
  /** the lease ended: say why */
  | 'ended';

/**
 * The actions one status event asks of the notebook following lease `runId` (in `queue`,
 * last seen with `status`). Events of other runs matter only while the lease waits: a run
 * of its queue moving, or any run ending, can change its place in line.
 */
export function leaseActions(ev: IStatusEvent, runId: string, queue: string, status: string): LeaseAction[] {
  if (ev.run_id !== runId) {
    if (isWaiting(status) && (ev.queue === queue || isFinal(ev.status))) {
      return ['explain'];
    }
    return [];
  }
  const out: LeaseAction[] = ['refresh'];
  if (isFinal(ev.status)) {
    out.push('ended');
    return out;
  }
  if (isWaiting(ev.status)) {
    out.push('explain');
  } else if (isWaiting(status) || ev.reason === 'Admitted' || ev.reason === 'KernelStarting') {
    out.push('admitted');
  }
  if (ev.reason === 'IdleWarning') {
    out.push('idleWarning');
  } else if (ev.reason === 'KeepAlive' || ev.reason === 'KernelReady' || ev.reason === 'KernelRestarted') {
    out.push('idleCleared');
  }
  return out;
}

/** The notebook's kernel, as far as starting it again is concerned. */
export interface IKernelState {
  /** A kernel is connected (or connecting) to the notebook. */
  hasKernel: boolean;
  /** A kernel start (or change, or restart) is in flight. */
  starting: boolean;
}

/**
 * Whether the notebook should start its session kernel now: its lease is admitted and not
 * ended, it has no kernel and none is starting, and it has not tried for this lease yet
 * (one try per lease: a start that fails for another reason is not retried in a loop).
 */
export function shouldConnect(run: { id: string; status: string } | null, k: IKernelState, triedFor: string | null): boolean {
  return !!run && isAdmitted(run.status) && !k.hasKernel && !k.starting && triedFor !== run.id;
}
