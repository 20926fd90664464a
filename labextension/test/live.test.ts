import { test } from 'node:test';
import assert from 'node:assert/strict';

import { RunsModel } from '../src/models/runsmodel';
import { ServerClock, Ticker } from '../src/models/ticker';
import type { IExplain, IQueue, IRun } from '../src/api/types';
import {
  TOAST_MS,
  explainView,
  failureSummary,
  hiddenPendingText,
  presetsText,
  liveMessage,
  markRead,
  pendingCount,
  pendingRunText,
  pendingRuns,
  queueRulesText,
  queueView,
  runRowView,
  waitingOf
} from '../src/models/viewmodel';

const base: IRun = {
  id: 'r-1',
  seq: 1,
  project: 'team-a',
  user: 'alice',
  name: 'train.py',
  kind: 'job',
  queue: 'team-a-train',
  status: 'queued',
  phase: 'dispatch',
  reason: 'Submitted',
  message: 'submitted',
  resources: { gpu: 1, cpu: '4', memory: '16Gi' },
  presets: ['single-gpu'],
  devices: [],
  exit_code: null,
  clocks: { queue_wait_seconds: 5, start_wait_seconds: null, run_seconds: null, ticking: 'queue_wait_seconds' },
  created_at: 1000,
  queued_at: 1000,
  dispatched_at: null,
  started_at: null,
  finished_at: null,
  updated_at: 1000
};

const queue: IQueue = {
  name: 'team-a-train',
  priority: 10,
  concurrency: 2,
  quota: { gpu: 2 },
  max_per_user: 1,
  ordering: 'fifo',
  paused: false,
  usage: { runs: 2, gpu: 2 },
  pending: 2,
  head_wait: null
};

test('a waiting row says why it waits: the service field first, else a queue reason of its last event', () => {
  const why = { reason: 'QueueConcurrency', message: '2/2 runs dispatched in queue team-a-train' };
  const row = runRowView({ ...base, waiting: why } as IRun, 1087, 82);
  assert.equal(row.why, 'Queue concurrency: 2/2 runs dispatched in queue team-a-train');
  assert.equal(row.phaseText, 'waiting 1m 27s');
  assert.match(row.title, /Queue concurrency: 2\/2/);
  // no service field: the last event's reason, when it is one that says why
  assert.equal(runRowView({ ...base, reason: 'QueuePaused', message: 'queue team-a-train is paused' }, 1000).why, 'Queue paused: queue team-a-train is paused');
  assert.equal(runRowView(base, 1000).why, ''); // "Submitted" says nothing about why
  // a run that no longer waits says nothing, even with a stale field
  assert.equal(waitingOf({ ...base, status: 'running', phase: 'run', waiting: why } as IRun), null);
});

test('a queue lists its pending runs in order; other projects counted, not named', () => {
  const pending = [
    { id: null, name: null, project: 'team-b', user: null, position: 2 },
    { id: 'r-7', name: 'lr=0.1', project: 'team-a', user: 'alice', position: 1 }
  ];
  const q = { ...queue, pending_runs: pending } as IQueue;
  const runs = pendingRuns(q)!;
  assert.deepEqual(runs.map(pendingRunText), ['1st · lr=0.1 (alice)', '2nd · a team-b run']);
  assert.equal(pendingCount(q), 2);
  // the list in `pending` itself counts too
  const listed = { ...queue, pending } as unknown as IQueue;
  assert.equal(pendingCount(listed), 2);
  assert.equal(queueView(listed, null).pendingText, '2 pending');
  assert.equal(pendingRuns(queue), null); // an older server: a count only
  assert.equal(hiddenPendingText({ ...queue, pending_hidden: 2 } as IQueue), 'and 2 of other projects (not named)');
  assert.equal(hiddenPendingText({ ...queue, pending_hidden: 0 } as IQueue), '');
  assert.equal(queueRulesText(queue), 'ordering fifo · at most 1 dispatched per user');
  assert.equal(queueRulesText({ ...queue, max_per_user: null }), 'ordering fifo · no per-user limit');
});

test("explain's running for Ns is the run's clock: ticking while it runs, standing while a preempted run waits", () => {
  const msg = 'running for 0s on devices 0';
  const ran = (run_seconds: number, ticking: IRun['clocks']['ticking']) => ({
    clocks: { queue_wait_seconds: 1, start_wait_seconds: 2, run_seconds, ticking }
  });
  assert.equal(liveMessage(msg, ran(7, 'run_seconds'), 0), 'running for 7s on devices 0');
  assert.equal(liveMessage(msg, ran(7, 'run_seconds'), 118), 'running for 2m 05s on devices 0');
  // preempted, its replacement waiting: the run clock stands (the wait is start wait), though
  // started_at is 200 s ago; the old sidebar counted it from started_at
  assert.equal(liveMessage(msg, ran(30, 'start_wait_seconds'), 200), 'running for 30s on devices 0');
  assert.equal(liveMessage(msg, ran(60, null), 2000), 'running for 1m 00s on devices 0');
  assert.equal(liveMessage('queue is paused', ran(7, 'run_seconds'), 5), 'queue is paused');
  assert.equal(liveMessage(msg, null, 2000), msg);
  assert.equal(liveMessage(msg, { clocks: { ...ran(0, null).clocks, run_seconds: null } }, 2000), msg);
});

test('blockers carry the run ids to link; other teams runs carry none', () => {
  const ex: IExplain = {
    run_id: 'r-2',
    status: 'queued',
    queue: 'q',
    layer: 'queue',
    layer_text: 'held by our queue (dispatch)',
    number_lines: [],
    wait_line: 'in queue',
    reason: 'QueueConcurrency',
    message: 'full',
    position: 1,
    blockers: [
      { id: 'r-714b8414e8', name: 'big', user: 'bob', project: 'team-a', status: 'running', gpu: 1, devices: [0] },
      { id: null, name: null, user: null, project: 'team-b', status: 'running', gpu: 1, devices: [] }
    ],
    who_can_act: []
  };
  const v = explainView(ex);
  assert.deepEqual(v.blockerIds, ['r-714b8414e8', null]);
  assert.ok(v.blockers[0].startsWith('r-714b8414e8'));
});

test('failures collapse into one notice: one run by name, more counted, newest first', () => {
  const f = (i: number) => ({ id: `r-${i}`, name: `run${i}`, message: 'exit code 1' });
  assert.equal(failureSummary([f(1)]), 'Run run1 failed: exit code 1');
  assert.equal(failureSummary([f(1), f(2), f(3)]), '3 runs failed: run3, run2, run1');
  assert.equal(failureSummary([1, 2, 3, 4, 5].map(f)), '5 runs failed: run5, run4, run3 and 2 more');
});

test("the longest wait of a queue among the runs held: each run's queue-wait clock, ticking since its read", () => {
  const m = new RunsModel();
  const waited = (id: string, seconds: number, over: Partial<IRun> = {}) =>
    markRead({ ...base, id, ...over, clocks: { ...base.clocks, queue_wait_seconds: seconds } }, 2000);
  m.addPage(
    {
      runs: [
        waited('a', 10),
        waited('b', 30),
        waited('c', 900, { queue: 'other' }),
        waited('d', 999, { status: 'running', phase: 'run' })
      ],
      next_before: null
    },
    true
  );
  assert.equal(m.longestWait('team-a-train', 2005), 35);
  assert.equal(m.longestWait('nothing', 2005), null);
});

test('the server clock takes the smallest offset seen', () => {
  const c = new ServerClock();
  assert.equal(c.offset, 0);
  c.sample(3);
  c.sample(1.5);
  c.sample(2);
  assert.equal(c.offset, 1.5);
});

/** Resolves once `cond` holds; fails after `ms` (a fixed sleep failed under load: fewer beats than expected). */
async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) {
      throw new Error('condition not met in time');
    }
    await new Promise(r => setTimeout(r, 5));
  }
}

test('the ticker runs while a clock counts and stops by itself when none does', async () => {
  let live = true;
  let ticks = 0;
  const states: boolean[] = [];
  const t = new Ticker(() => (ticks += 1), () => live, on => states.push(on), 5);
  // A failed assertion must not leave the interval running: it would keep node's test process alive.
  try {
    t.poke();
    assert.ok(t.running);
    await until(() => ticks >= 2);
    live = false;
    await until(() => !t.running); // its next beat sees nothing counts
    const after = ticks;
    await new Promise(r => setTimeout(r, 20)); // several intervals: none may beat
    assert.equal(ticks, after);
    t.poke(); // nothing counts: stays stopped
    assert.equal(t.running, false);
    assert.deepEqual(states, [true, false]);
  } finally {
    t.stop();
  }
});

test('a run shows the presets that made its spec, project defaults included', () => {
  assert.equal(presetsText({ presets: [], presets_applied: ['notebook'] }), 'notebook');
  assert.equal(presetsText({ presets: [], presets_applied: [] }), 'no preset');
  assert.equal(presetsText({ presets: ['single-gpu'] }), 'single-gpu'); // an older server
  assert.equal(presetsText({ presets: undefined }), '…'); // a row made from an event
  assert.equal(runRowView({ ...base, presets: [], presets_applied: ['multi-gpu'] }, 1000).presets, 'multi-gpu');
});

test('every toast closes by itself within seconds, failures last longest', () => {
  for (const [type, ms] of Object.entries(TOAST_MS)) {
    assert.ok(typeof ms === 'number' && ms > 0 && ms <= 15_000, `${type}: ${ms}`);
  }
  assert.ok(TOAST_MS.error >= TOAST_MS.warning && TOAST_MS.warning >= TOAST_MS.success);
});
