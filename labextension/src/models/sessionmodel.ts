/**
 * GPU sessions in a notebook, pure: which kernelspecs are session kernels, what the notebook
 * toolbar says about its lease, and what each status event of the lease asks the notebook to
 * do (re-read, restart its kernel once admitted, warn that it is idle, say why it ended).
 * sessions.ts wires this to JupyterLab; the unit tests drive it with plain objects.
 */

import { Phase, isFinal } from './lifecycle';
import { TOAST_MS } from './notices';
import type { IEtaEvent, IExplain, IRun, IStatusEvent } from '../api/types';

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

/** Waiting in our queue: the service's phase says so. */
export function isWaiting(x: { phase: Phase }): boolean {
  return x.phase === 'dispatch';
}

/** Admitted and not ending: placed or starting, or running (not stopping). */
export function isAdmitted(x: { phase: Phase; status: string }): boolean {
  return x.phase === 'execution' || (x.phase === 'run' && x.status !== 'stopping');
}

/** A lease as the notebook follows it: the run record (with its `session` part). */
export type ISessionRun = Pick<IRun, 'id' | 'project' | 'queue' | 'status' | 'phase' | 'reason' | 'message' | 'devices'> &
  Partial<Pick<IRun, 'presets' | 'session' | 'user' | 'resources' | 'name'>>;

/**
 * "queued — position 1 of 1 in interactive · UserLimit 1/1 · alice has 1/1 runs …": the service's wait line.
 * The line ends with the start estimate; a known one is moved to the front ("starts in ~6 min (p90 25 min) ·
 * queued — …"), where a toolbar cut short or a notice (JupyterLab cuts them at 140 characters) still shows it.
 */
export function queuedText(run: ISessionRun, ex: IExplain | null): string {
  if (!ex) {
    return `queued in ${run.queue}` + (run.reason ? ` · ${run.reason}` : '') + (run.message ? ` · ${run.message}` : '');
  }
  const tail = ex.eta ? ` · ${ex.eta.text}` : '';
  if (tail && ex.wait_line.endsWith(tail)) {
    return `${ex.eta?.text} · queued — ${ex.wait_line.slice(0, -tail.length)}`;
  }
  return `queued — ${ex.wait_line}`;
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

/** "ends in 52 s" to the server's deadline (never below zero), "ends soon" without one. */
export function idleEndsText(deadline: number | null | undefined, now: number): string {
  return deadline === null || deadline === undefined ? 'ends soon' : `ends in ${Math.max(0, Math.round(deadline - now))} s`;
}

/** The idle warning of a server that does not say why (no `session.idle_reason`). */
export function idleWarningText(deadline: number | null | undefined, now: number): string {
  return `Idle GPU session: it ${idleEndsText(deadline, now)}`;
}

/**
 * The idle warning in the server's words: "ends in 52 s unless kept: GPU 0 idle for 9 min (util < 5%)".
 * The countdown comes first: a notice is cut at 140 characters, and a reason that says why GPU use
 * is not measured is long. The reason is `session.idle_reason` as read since the warning; the
 * client only counts down to the server's deadline, it judges nothing.
 */
export function idleReasonText(deadline: number | null | undefined, now: number, reason: string): string {
  return `${idleEndsText(deadline, now)} unless kept: ${reason}`;
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
  /** Start a new session (the lease ended and the notebook does not lease again by itself). */
  start: boolean;
}

export interface ISessionBarInput {
  run: ISessionRun | null;
  explain: IExplain | null;
  spec: ISessionSpec | null;
  /** The notebook is starting a session kernel but its lease is not known yet. */
  submitting: boolean;
  /** The idle warning's deadline (server clock), while it stands. */
  idleDeadline: number | null;
  /** The server's words for what judged it idle (`session.idle_reason` read since the warning); null: none. */
  idleReason?: string | null;
  /** Now, on the server's clock. */
  now: number;
  /** The lease ended and the notebook waits for the user to ask for a new one. */
  offer?: boolean;
}

/** The bar's words after the end of a lease the notebook no longer leases again by itself. */
export const STATE_GONE = "the kernel's state is gone";

/** What the notebook toolbar shows for its lease. */
export function sessionBarView(i: ISessionBarInput): ISessionBarView {
  const off = { cancel: false, why: false, keep: false, start: false };
  const run = i.run;
  if (!run) {
    return i.submitting
      ? { state: 'submitting', text: 'GPU: asking for a GPU…', ...off }
      : { state: 'none', text: '', ...off };
  }
  const preset = presetOf(run, i.spec);
  if (isFinal(run)) {
    const text = i.offer ? `${endedText(run)} — ${STATE_GONE}` : endedText(run);
    return { state: 'ended', text, ...off, why: true, start: !!i.offer };
  }
  if (run.status === 'stopping') {
    return { state: 'ending', text: `GPU: session ending · ${run.message || run.reason}`, ...off, why: true };
  }
  if (isWaiting(run)) {
    return { state: 'waiting', text: `GPU: ${queuedText(run, i.explain)}`, ...off, cancel: true, why: true };
  }
  const where = `${devicesText(run.devices)} · ${preset}`;
  const kernel = run.session?.kernel;
  if (run.status !== 'running' || (kernel !== 'ready' && kernel !== undefined)) {
    return { state: 'starting', text: `${where} · kernel starting…`, ...off, cancel: true, why: true };
  }
  let text = where;
  if (run.session?.busy) {
    text += ' · busy';
  } else if (i.idleDeadline !== null) {
    const idle = i.idleReason ? idleReasonText(i.idleDeadline, i.now, i.idleReason) : idleEndsText(i.idleDeadline, i.now);
    text += ` · idle: ${idle}`;
  }
  return { state: 'running', text, ...off, why: true, keep: i.idleDeadline !== null };
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
export function leaseActions(ev: IStatusEvent, runId: string, queue: string, lease: { phase: Phase }): LeaseAction[] {
  if (ev.run_id !== runId) {
    if (isWaiting(lease) && (ev.queue === queue || isFinal(ev))) {
      return ['explain'];
    }
    return [];
  }
  const out: LeaseAction[] = ['refresh'];
  if (isFinal(ev)) {
    out.push('ended');
    return out;
  }
  if (isWaiting(ev)) {
    out.push('explain');
  } else if (isWaiting(lease) || ev.reason === 'Admitted' || ev.reason === 'KernelStarting') {
    out.push('admitted');
  }
  if (ev.reason === 'IdleWarning') {
    out.push('idleWarning');
  } else if (ev.reason === 'KeepAlive' || ev.reason === 'KernelReady' || ev.reason === 'KernelRestarted') {
    out.push('idleCleared');
  }
  return out;
}

/**
 * What an `eta` event asks of the notebook following lease `runId`: a waiting lease it names re-reads
 * why it waits (the service's wait line ends with the new estimate; the bar and notice show that line).
 */
export function etaActions(ev: IEtaEvent, runId: string, lease: { phase: Phase }): LeaseAction[] {
  return isWaiting(lease) && ev.runs.some(r => r.run_id === runId) ? ['explain'] : [];
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
export function shouldConnect(
  run: { id: string; status: string; phase: Phase } | null,
  k: IKernelState,
  triedFor: string | null
): boolean {
  return !!run && isAdmitted(run) && !k.hasKernel && !k.starting && triedFor !== run.id;
}

// ---- reopening a notebook: lease again only when asked ------------------------------------------

/** A session kernel's name: one the server offers now, or its naming (specs may not be loaded yet). */
export function isSessionKernelName(name: string | null | undefined, specs: ISessionSpec[]): boolean {
  return !!name && (name.startsWith('gpuplat-') || specs.some(s => s.name === name));
}

/**
 * What a notebook reopened on a session kernel (not one the user just chose) does, from the
 * newest lease the server has for it (`GET runs?notebook=`, ended ones too):
 * - `start`: it never had one: opening it is asking (as a kernel choice is);
 * - `attach`: its lease is unfinished: its kernel attaches to it (re-adopted as it is);
 * - `ending`: its lease is stopping: nothing attaches to an ending lease; it offers a new one once ended;
 * - `offer`: its lease ended: say why and offer a new session, no lease until the user asks.
 */
export type RestoreDecision = 'start' | 'attach' | 'ending' | 'offer';

export function restoreDecision(latest: Pick<ISessionRun, 'status' | 'phase'> | null | undefined): RestoreDecision {
  if (!latest) {
    return 'start';
  }
  if (isFinal(latest)) {
    return 'offer';
  }
  return latest.status === 'stopping' ? 'ending' : 'attach';
}

/** The question before a cell runs in a notebook whose session ended (nothing leases before the answer). */
export function newSessionPrompt(run: Pick<ISessionRun, 'reason' | 'status'> | null): string {
  const why = run ? ` (${run.reason || run.status})` : '';
  return `The GPU session ended${why}; its kernel and variables are gone. Start a new GPU session?`;
}

/** The sidebar's stop confirmation; a session's stop ends its kernel and the variables in it. */
export function stopConfirmation(run: Pick<IRun, 'id' | 'name' | 'status' | 'kind' | 'devices'>): {
  title: string;
  body: string;
  button: string;
} {
  const who = `${run.name || run.id} (${run.id})`;
  if (run.kind === 'session') {
    return {
      title: 'Stop this GPU session?',
      body:
        `${who} is ${run.status}. Stopping ends the session: its kernel and the variables in it go away ` +
        `(save what you need first) and ${run.devices?.length ? devicesText(run.devices) : 'its GPUs'} returned.`,
      button: 'Stop session'
    };
  }
  return {
    title: 'Stop this run?',
    body: `${who} is ${run.status}. Stopping ends it for good; its logs and outputs are kept.`,
    button: 'Stop run'
  };
}

// ---- one notice per session ---------------------------------------------------------------------

export type NoticeStage = 'waiting' | 'admitted' | 'idle' | 'kept' | 'ended';
export type NoticeAction = 'cancel' | 'why' | 'keep';

export interface ISessionNotice {
  stage: NoticeStage;
  message: string;
  type: 'in-progress' | 'success' | 'info' | 'warning' | 'error';
  /** ms, or false while it asks something of the user (waiting: Cancel; idle: Keep session). */
  autoClose: number | false;
  actions: NoticeAction[];
}

/** Whether the lease's devices are known (a record read after admission), so "admitted on" can name them. */
export function devicesKnown(run: Pick<ISessionRun, 'devices' | 'resources'>): boolean {
  return !!run.devices?.length || run.resources?.gpu === 0;
}

/**
 * The one notice of a session at `stage` (the same notification, updated in place). Only the
 * stages that ask something stay until they are replaced: the wait (Cancel) and the idle
 * warning (Keep session); admitted, kept and ended close by themselves like run notices.
 * Admitted waits for a record whose devices are known (null until then).
 */
export function sessionNotice(
  stage: NoticeStage,
  run: ISessionRun,
  notebook: string,
  ctx: { explain: IExplain | null; idleDeadline: number | null; now: number; idleReason?: string | null }
): ISessionNotice | null {
  const on = `GPU session for ${notebook}`;
  switch (stage) {
    case 'waiting':
      return { stage, message: `${on}: ${queuedText(run, ctx.explain)}`, type: 'in-progress', autoClose: false, actions: ['cancel', 'why'] };
    case 'admitted':
      if (!devicesKnown(run)) {
        return null;
      }
      return { stage, message: `${on}: admitted on ${devicesText(run.devices)}`, type: 'success', autoClose: TOAST_MS.success, actions: [] };
    case 'idle':
      return {
        stage,
        message: ctx.idleReason
          ? `${on} ${idleReasonText(ctx.idleDeadline, ctx.now, ctx.idleReason)}`
          : `${idleWarningText(ctx.idleDeadline, ctx.now)} (${notebook})`,
        type: 'warning',
        autoClose: false,
        actions: ['keep']
      };
    case 'kept':
      return { stage, message: `${on} kept: its idle clock restarted`, type: 'info', autoClose: TOAST_MS.info, actions: [] };
    case 'ended': {
      const type = run.status === 'failed' ? 'error' : run.reason === 'IdleTimeout' ? 'warning' : 'info';
      return { stage, message: `${endedText(run)} (${notebook})`, type, autoClose: TOAST_MS[type], actions: ['why'] };
    }
  }
}

/**
 * A notice updated this soon after it was (re)shown can lose the update: the toast is not
 * displayed yet, so JupyterLab re-creates it under the same id and the toast library drops
 * the duplicate, leaving the first text and its autoClose (an idle warning that stayed).
 */
export const NOTICE_SETTLE_MS = 1000;

/** How long an update of a notice shown at `shownAt` waits (ms; 0: now). */
export function noticeDelayMs(shownAt: number, now: number): number {
  return Math.max(0, shownAt + NOTICE_SETTLE_MS - now);
}
