import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { IExplain, IStatusEvent } from '../src/api/types';
import {
  ISessionRun,
  NOTICE_SETTLE_MS,
  devicesKnown,
  isSessionKernelName,
  newSessionPrompt,
  noticeDelayMs,
  restoreDecision,
  sessionNotice,
  stopConfirmation,
  endedText,
  idleReasonText,
  idleWarningText,
  isLaunchWait,
  leaseActions,
  noSpecMessage,
  queuedText,
  sessionBarView,
  sessionSpecs,
  shouldConnect,
  specFor,
  specOfRun
} from '../src/models/sessionmodel';
import { PHASE } from './wire';

const SPECS = {
  python3: { name: 'python3', display_name: 'Python 3 (ipykernel)', metadata: {} },
  'gpuplat-notebook': {
    name: 'gpuplat-notebook',
    display_name: 'Python 3 (GPU · notebook)',
    metadata: { gpuplat: { preset: 'notebook', project: 'team-a' }, kernel_provisioner: { provisioner_name: 'gpuplat-session' } }
  },
  'gpuplat-team-b--notebook': {
    name: 'gpuplat-team-b--notebook',
    display_name: 'Python 3 (GPU · notebook · team-b)',
    metadata: { gpuplat: { preset: 'notebook', project: 'team-b' } }
  },
  broken: { name: 'broken', metadata: { gpuplat: { preset: 3 } } }
};

const queued: ISessionRun = {
  id: 'r-2',
  project: 'team-a',
  queue: 'interactive',
  status: 'queued',
  phase: 'dispatch',
  reason: 'UserLimit',
  message: 'alice has 1/1 runs dispatched in queue interactive (max_per_user)',
  devices: [],
  presets: ['notebook']
};

const explain: IExplain = {
  run_id: 'r-2',
  status: 'queued',
  queue: 'interactive',
  layer: 'queue',
  layer_text: 'held by our queue (dispatch)',
  number_lines: [],
  wait_line: 'position 1 of 1 in interactive · UserLimit 1/1 · alice has 1/1 runs dispatched in queue interactive (max_per_user)',
  reason: 'UserLimit',
  message: 'alice has 1/1 runs dispatched in queue interactive (max_per_user)',
  position: 1,
  pending_in_queue: 1,
  numbers: { used: 1, limit: 1 },
  blockers: [],
  who_can_act: []
};

function ev(over: Partial<IStatusEvent>): IStatusEvent {
  const status = over.status ?? 'queued';
  return {
    id: 1,
    run_id: 'r-2',
    project: 'team-a',
    queue: 'interactive',
    user: 'alice',
    name: null,
    status,
    phase: PHASE[status],
    reason: 'UserLimit',
    message: '',
    at: 100,
    details: null,
    ...over
  };
}

test('session kernelspecs are found by their gpuplat metadata, per preset and project', () => {
  const specs = sessionSpecs(SPECS);
  assert.deepEqual(
    specs.map(s => s.name),
    ['gpuplat-notebook', 'gpuplat-team-b--notebook']
  );
  assert.equal(specFor(specs, 'notebook', 'team-a')?.name, 'gpuplat-notebook');
  assert.equal(specFor(specs, 'notebook', 'team-b')?.displayName, 'Python 3 (GPU · notebook · team-b)');
  assert.equal(specFor(specs, 'quick', 'team-a'), null);
  assert.equal(specOfRun(specs, { project: 'team-b', presets: ['small-disk', 'notebook'] })?.name, 'gpuplat-team-b--notebook');
  assert.equal(sessionSpecs(null).length, 0);
  assert.equal(
    noSpecMessage(specs, 'quick', 'team-a'),
    'No GPU session kernel for preset quick in project team-a; the server offers: notebook (team-a), notebook (team-b)'
  );
});

test("a queued lease shows the service's wait line: its place in line, the reason code with its numbers, and why", () => {
  assert.equal(
    queuedText(queued, explain),
    'queued — position 1 of 1 in interactive · UserLimit 1/1 · alice has 1/1 runs dispatched in queue interactive (max_per_user)'
  );
  // before explain answered: the run's own reason
  assert.equal(queuedText({ ...queued, message: '' }, null), 'queued in interactive · UserLimit');
  const v = sessionBarView({ run: queued, explain, spec: null, submitting: false, idleDeadline: null, now: 0 });
  assert.equal(v.state, 'waiting');
  assert.match(v.text, /^GPU: queued — position 1 of 1 in interactive · UserLimit 1\/1 · /);
  assert.deepEqual([v.cancel, v.why, v.keep], [true, true, false]);
});

test('the wait line ends with the start estimate: a known one leads (a cut-short toolbar or notice keeps it), an unknown one stays', () => {
  const eta = { p50_at: 1, p90_at: 2, p50_seconds: 360, p90_seconds: 1500, basis: 'b', computed_at: 0, text: 'starts in ~6 min (p90 25 min)' };
  const known = { ...explain, eta, wait_line: `${explain.wait_line} · starts in ~6 min (p90 25 min)` };
  assert.equal(
    queuedText(queued, known),
    'starts in ~6 min (p90 25 min) · queued — position 1 of 1 in interactive · UserLimit 1/1 · alice has 1/1 runs dispatched in queue interactive (max_per_user)'
  );
  const unknown = { ...explain, eta: null, eta_unknown: 'r-1 has no time limit and no history', wait_line: `${explain.wait_line} · start unknown: r-1 has no time limit and no history` };
  assert.equal(queuedText(queued, unknown), `queued — ${unknown.wait_line}`);
  // a line that does not end with it (another wording): shown as the service wrote it
  assert.equal(queuedText(queued, { ...explain, eta }), `queued — ${explain.wait_line}`);
  const n = sessionNotice('waiting', queued, 'probe.ipynb', { explain: known, idleDeadline: null, now: 0 });
  assert.match(n?.message ?? '', /^GPU session for probe\.ipynb: starts in ~6 min \(p90 25 min\) · queued — position 1/);
});

test('the toolbar follows the lease: submitting, starting, running on its GPU, idle, ended', () => {
  const base = { explain: null, spec: null, submitting: false, idleDeadline: null, now: 1000 };
  assert.equal(sessionBarView({ ...base, run: null }).state, 'none');
  assert.equal(sessionBarView({ ...base, run: null, submitting: true }).text, 'GPU: asking for a GPU…');
  const starting = sessionBarView({ ...base, run: { ...queued, status: 'dispatched', phase: 'execution', devices: [2] } });
  assert.equal(starting.state, 'starting');
  assert.equal(starting.text, 'GPU 2 · notebook · kernel starting…');
  const session = { notebook: 'a.ipynb', kernel: 'ready' as const, kernel_id: 'k', busy: false, idle_seconds: 3, idle_deadline: 1003, last_activity: 1000 };
  const running = { ...queued, status: 'running' as const, phase: 'run' as const, reason: 'KernelReady', devices: [0], session };
  assert.deepEqual(sessionBarView({ ...base, run: running }), { state: 'running', text: 'GPU 0 · notebook', cancel: false, why: true, keep: false, start: false });
  assert.equal(sessionBarView({ ...base, run: { ...running, session: { ...session, kernel: 'starting' } } }).state, 'starting');
  assert.equal(sessionBarView({ ...base, run: { ...running, session: { ...session, busy: true } } }).text, 'GPU 0 · notebook · busy');
  const idle = sessionBarView({ ...base, run: running, idleDeadline: 1002.6 });
  assert.equal(idle.text, 'GPU 0 · notebook · idle: ends in 3 s');
  assert.equal(idle.keep, true);
  const spec = { name: 'gpuplat-team-a--big', displayName: 'x', project: 'team-a', preset: 'big' };
  assert.equal(sessionBarView({ ...base, run: { ...running, devices: [0, 1] }, spec }).text, 'GPUs 0, 1 · big');
  const ended = { ...running, status: 'stopped' as const, phase: 'end' as const, reason: 'IdleTimeout', message: 'no kernel activity for 3 s; GPU 0 returned' };
  const v = sessionBarView({ ...base, run: ended, idleDeadline: 1003 });
  assert.equal(v.state, 'ended');
  assert.equal(v.text, 'GPU session ended (IdleTimeout): no kernel activity for 3 s; GPU 0 returned');
  assert.equal(v.keep || v.cancel || v.start, false);
  assert.equal(endedText({ status: 'failed', reason: '', message: '' }), 'GPU session ended: failed');
  // Ended and not leasing again by itself: it says so and offers a new session.
  const offered = sessionBarView({ ...base, run: ended, offer: true });
  assert.equal(offered.text, "GPU session ended (IdleTimeout): no kernel activity for 3 s; GPU 0 returned — the kernel's state is gone");
  assert.deepEqual([offered.start, offered.why, offered.cancel], [true, true, false]);
  // `offer` only matters once the lease is over.
  assert.equal(sessionBarView({ ...base, run: running, offer: true }).start, false);
});

test('idle warning text counts down to the deadline, never below zero', () => {
  assert.equal(idleWarningText(1360, 1000), 'Idle GPU session: it ends in 360 s');
  assert.equal(idleWarningText(999, 1000), 'Idle GPU session: it ends in 0 s');
  assert.equal(idleWarningText(null, 1000), 'Idle GPU session: it ends soon');
});

test("the idle warning says the server's reason for it, after the countdown to the server's deadline", () => {
  // What judged it (session.idle_reason, worded by the server): GPU use, kernel activity, or not measured.
  const gpu = 'GPU 0 idle for 9 min (util < 5%)';
  const blind = 'GPU use is not measured here (no GPU sample of this session yet); idleness judged by kernel activity: no kernel activity for 2 s';
  const notice = (reason: string | null, deadline: number | null = 1052) =>
    sessionNotice('idle', { ...queued, status: 'running' }, 'a.ipynb', { explain: null, idleDeadline: deadline, now: 1000, idleReason: reason });
  const n = notice(gpu);
  assert.deepEqual(
    [n?.message, n?.type, n?.autoClose, n?.actions],
    ['GPU session for a.ipynb ends in 52 s unless kept: GPU 0 idle for 9 min (util < 5%)', 'warning', false, ['keep']]
  );
  assert.equal(notice('no kernel activity for 9 min', 999)?.message, 'GPU session for a.ipynb ends in 0 s unless kept: no kernel activity for 9 min');
  assert.equal(notice(gpu, null)?.message, `GPU session for a.ipynb ends soon unless kept: ${gpu}`);
  // The countdown is never cut off: JupyterLab shows a notice's first 140 characters.
  assert.match(notice(blind)?.message.slice(0, 140) ?? '', /^GPU session for a\.ipynb ends in 52 s unless kept: GPU use is not measured here \(/);
  // An older server says no reason: the old words.
  assert.equal(notice(null)?.message, 'Idle GPU session: it ends in 52 s (a.ipynb)');
  assert.equal(idleReasonText(1009.6, 1000, gpu), `ends in 10 s unless kept: ${gpu}`);

  // The toolbar says the same while the warning stands (a busy kernel says busy; no reason: the countdown).
  const session = { notebook: 'a.ipynb', kernel: 'ready' as const, kernel_id: 'k', busy: false, idle_seconds: 600, idle_deadline: 1052, last_activity: 0 };
  const running = { ...queued, status: 'running' as const, phase: 'run' as const, reason: 'IdleWarning', devices: [0], session };
  const bar = (idleReason: string | null, run: ISessionRun = running) =>
    sessionBarView({ run, explain: null, spec: null, submitting: false, idleDeadline: 1052, now: 1000, idleReason });
  assert.deepEqual([bar(gpu).text, bar(gpu).keep], [`GPU 0 · notebook · idle: ends in 52 s unless kept: ${gpu}`, true]);
  assert.equal(bar(null).text, 'GPU 0 · notebook · idle: ends in 52 s');
  assert.equal(bar(gpu, { ...running, session: { ...session, busy: true } }).text, 'GPU 0 · notebook · busy');
});

test('the launch wait message of the provisioner is recognised', () => {
  assert.equal(isLaunchWait('Waiting for a GPU: position 1 in interactive (x); this notebook connects when admitted'), true);
  assert.equal(isLaunchWait('GPU session refused: preset big is not allowed'), false);
  assert.equal(isLaunchWait(undefined), false);
});

test('each event of the lease asks for what changed', () => {
  // its own events: re-read; while waiting also explain
  assert.deepEqual(leaseActions(ev({}), 'r-2', 'interactive', { phase: PHASE.queued }), ['refresh', 'explain']);
  assert.deepEqual(leaseActions(ev({ status: 'dispatched', reason: 'Admitted' }), 'r-2', 'interactive', { phase: PHASE.queued }), ['refresh', 'admitted']);
  assert.deepEqual(leaseActions(ev({ status: 'running', reason: 'KernelStarting' }), 'r-2', 'interactive', { phase: PHASE.dispatched }), [
    'refresh',
    'admitted'
  ]);
  assert.deepEqual(leaseActions(ev({ status: 'running', reason: 'IdleWarning' }), 'r-2', 'interactive', { phase: PHASE.running }), [
    'refresh',
    'idleWarning'
  ]);
  assert.deepEqual(leaseActions(ev({ status: 'running', reason: 'KeepAlive' }), 'r-2', 'interactive', { phase: PHASE.running }), [
    'refresh',
    'idleCleared'
  ]);
  assert.deepEqual(leaseActions(ev({ status: 'stopped', reason: 'IdleTimeout' }), 'r-2', 'interactive', { phase: PHASE.running }), [
    'refresh',
    'ended'
  ]);
  // others' events: only while waiting, and only those that can move it in line
  const other = { run_id: 'r-1' };
  assert.deepEqual(leaseActions(ev({ ...other, status: 'running', reason: 'KernelReady' }), 'r-2', 'interactive', { phase: PHASE.queued }), ['explain']);
  assert.deepEqual(leaseActions(ev({ ...other, queue: 'batch', status: 'running' }), 'r-2', 'interactive', { phase: PHASE.queued }), []);
  assert.deepEqual(leaseActions(ev({ ...other, queue: 'batch', status: 'succeeded' }), 'r-2', 'interactive', { phase: PHASE.queued }), ['explain']);
  assert.deepEqual(leaseActions(ev({ ...other, status: 'stopped' }), 'r-2', 'interactive', { phase: PHASE.running }), []);
});

test('the notebook starts its kernel again once per admitted lease, never over a kernel or a start', () => {
  const free = { hasKernel: false, starting: false };
  const admitted = { id: 'r-2', status: 'running', phase: PHASE.running };
  assert.equal(shouldConnect(admitted, free, null), true);
  assert.equal(shouldConnect({ id: 'r-2', status: 'dispatched', phase: PHASE.dispatched }, free, 'r-1'), true);
  assert.equal(shouldConnect(admitted, free, 'r-2'), false); // tried already for this lease
  assert.equal(shouldConnect(admitted, { hasKernel: true, starting: false }, null), false);
  assert.equal(shouldConnect(admitted, { hasKernel: false, starting: true }, null), false); // the provisioner connects it
  assert.equal(shouldConnect({ id: 'r-2', status: 'queued', phase: PHASE.queued }, free, null), false);
  assert.equal(shouldConnect({ id: 'r-2', status: 'stopped', phase: PHASE.stopped }, free, null), false);
  assert.equal(shouldConnect(null, free, null), false);
});

test('a reopened notebook leases only when its newest lease says so', () => {
  assert.equal(restoreDecision(null), 'start'); // never had one: opening it is asking
  for (const status of ['created', 'queued', 'dispatched', 'starting', 'running'] as const) {
    assert.equal(restoreDecision({ status, phase: PHASE[status] }), 'attach', status);
  }
  assert.equal(restoreDecision({ status: 'stopping', phase: 'run' }), 'ending'); // nothing attaches to an ending lease
  for (const status of ['stopped', 'failed', 'succeeded'] as const) {
    assert.equal(restoreDecision({ status, phase: PHASE[status] }), 'offer', status);
  }
  assert.equal(isSessionKernelName('gpuplat-notebook', []), true); // before the specs loaded
  assert.equal(isSessionKernelName('python3', []), false);
  assert.equal(isSessionKernelName('', []), false);
  assert.equal(isSessionKernelName(null, []), false);
  assert.equal(
    newSessionPrompt({ status: 'stopped', reason: 'IdleTimeout' }),
    'The GPU session ended (IdleTimeout); its kernel and variables are gone. Start a new GPU session?'
  );
  assert.equal(newSessionPrompt({ status: 'failed', reason: '' }), 'The GPU session ended (failed); its kernel and variables are gone. Start a new GPU session?');
});

test('one notice per session: what each stage says, which close by themselves, admitted only with devices', () => {
  const ctx = { explain, idleDeadline: 1009, now: 1000 };
  const waiting = sessionNotice('waiting', queued, 'a.ipynb', ctx);
  assert.match(waiting?.message ?? '', /^GPU session for a\.ipynb: queued — position 1 of 1 in interactive/);
  assert.deepEqual([waiting?.type, waiting?.autoClose, waiting?.actions], ['in-progress', false, ['cancel', 'why']]);
  // Admitted from a record read before its devices are known: nothing yet (not "no GPU").
  assert.equal(sessionNotice('admitted', { ...queued, status: 'dispatched', devices: [] }, 'a.ipynb', ctx), null);
  const admitted = sessionNotice('admitted', { ...queued, status: 'running', phase: 'run', devices: [0] }, 'a.ipynb', ctx);
  assert.deepEqual(
    [admitted?.message, admitted?.type, admitted?.autoClose],
    ['GPU session for a.ipynb: admitted on GPU 0', 'success', 5000]
  );
  const cpu = { ...queued, status: 'running' as const, devices: [], resources: { gpu: 0 } };
  assert.equal(devicesKnown(cpu), true);
  assert.equal(sessionNotice('admitted', cpu, 'a.ipynb', ctx)?.message, 'GPU session for a.ipynb: admitted on no GPU');
  const idle = sessionNotice('idle', { ...queued, status: 'running' }, 'a.ipynb', ctx);
  assert.deepEqual([idle?.message, idle?.autoClose, idle?.actions], ['Idle GPU session: it ends in 9 s (a.ipynb)', false, ['keep']]);
  const kept = sessionNotice('kept', { ...queued, status: 'running' }, 'a.ipynb', ctx);
  assert.deepEqual([kept?.type, kept?.autoClose, kept?.actions], ['info', 5000, []]);
  const idleEnd = { ...queued, status: 'stopped' as const, reason: 'IdleTimeout', message: 'no kernel activity for 3 s; GPU 0 returned' };
  const ended = sessionNotice('ended', idleEnd, 'a.ipynb', ctx);
  assert.deepEqual(
    [ended?.message, ended?.type, ended?.autoClose, ended?.actions],
    ['GPU session ended (IdleTimeout): no kernel activity for 3 s; GPU 0 returned (a.ipynb)', 'warning', 10000, ['why']]
  );
  assert.deepEqual(
    [sessionNotice('ended', { ...idleEnd, status: 'failed', reason: 'KernelDied' }, 'a.ipynb', ctx)?.type, sessionNotice('ended', { ...idleEnd, reason: 'Stopped' }, 'a.ipynb', ctx)?.autoClose],
    ['error', 5000]
  );
  // Every stage that does not ask something closes by itself.
  for (const n of [admitted, kept, ended]) {
    assert.equal(typeof n?.autoClose, 'number');
  }
  // An update right after the notice was (re)shown waits until it settled.
  assert.equal(noticeDelayMs(1000, 1000), NOTICE_SETTLE_MS);
  assert.equal(noticeDelayMs(1000, 1000 + NOTICE_SETTLE_MS + 1), 0);
  assert.equal(noticeDelayMs(1000, 1300), NOTICE_SETTLE_MS - 300);
});

test("a session's stop confirmation says its kernel and variables go away", () => {
  const s = stopConfirmation({ id: 'r-1', name: 'a.ipynb', status: 'running', kind: 'session', devices: [0] });
  assert.equal(s.title, 'Stop this GPU session?');
  assert.match(s.body, /its kernel and the variables in it go away .* GPU 0 returned\.$/);
  assert.equal(s.button, 'Stop session');
  const job = stopConfirmation({ id: 'r-2', name: 'train', status: 'running', kind: 'job', devices: [1] });
  assert.deepEqual([job.title, job.button], ['Stop this run?', 'Stop run']);
});
