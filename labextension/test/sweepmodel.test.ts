import { test } from 'node:test';
import assert from 'node:assert/strict';

import { RunsModel } from '../src/models/runsmodel';
import {
  SweepRereader,
  flattenRows,
  paramsText,
  parseConcurrency,
  scatterGeometry,
  sweepView
} from '../src/models/sweepmodel';
import type { IRun } from '../src/api/types';
import { PHASE } from './wire';

function run(seq: number, over: Partial<IRun> = {}): IRun {
  return {
    id: `r-${seq}`,
    seq,
    project: 'team-a',
    user: 'alice',
    name: `train-${seq}`,
    kind: 'job',
    queue: 'team-a-train',
    status: 'queued',
    phase: PHASE[over.status ?? 'queued'],
    reason: 'Submitted',
    message: 'waiting',
    resources: { gpu: 1 },
    presets: [],
    devices: [],
    exit_code: null,
    clocks: { queue_wait_seconds: null, start_wait_seconds: null, run_seconds: null, ticking: null },
    created_at: 100 + seq,
    queued_at: 100 + seq,
    dispatched_at: null,
    started_at: null,
    finished_at: null,
    updated_at: 100 + seq,
    ...over
  };
}

function sweep(seq: number, byStatus: Record<string, number>, over: Partial<IRun> = {}): IRun {
  const total = Object.values(byStatus).reduce((a, b) => a + b, 0);
  const ended = Object.entries(byStatus).reduce((a, [s, n]) => a + (PHASE[s] === 'end' ? n : 0), 0);
  return run(seq, { kind: 'sweep', children: { total, by_status: byStatus, ended }, concurrency: 2, paused: false, ...over });
}

test('a sweep row counts its children by status, what moves first, and its progress', () => {
  const v = sweepView(sweep(1, { queued: 10, running: 2 }))!;
  assert.equal(v.countsText, '2 running · 10 queued');
  assert.equal(v.progressText, '0/12 ended');
  assert.equal(v.fraction, 0);
  assert.equal(v.concurrencyText, 'at most 2 at once');
  const later = sweepView(sweep(1, { succeeded: 3, failed: 1, running: 4, queued: 4 }, { concurrency: 4, paused: true }))!;
  assert.equal(later.countsText, '4 running · 4 queued · 3 succeeded · 1 failed');
  assert.equal(later.ended, 4);
  assert.equal(later.fraction, 4 / 12);
  assert.equal(later.concurrencyText, 'paused (at most 4 at once)');
  assert.equal(sweepView(run(2)), null); // not a sweep
});

test('the total is the sweep total, not the sum of what is counted so far', () => {
  const v = sweepView(sweep(1, { queued: 2 }, { children: { total: 10, by_status: { queued: 2, succeeded: 5 }, ended: 5 } }))!;
  assert.equal(v.progressText, '5/10 ended');
  assert.equal(v.fraction, 0.5);
});

test('params read in their order', () => {
  assert.equal(paramsText({ lr: 0.001, batch: 32, opt: 'adam', warm: true }), 'lr=0.001 · batch=32 · opt=adam · warm=true');
  assert.equal(paramsText(null), '');
});

test('the concurrency editor takes whole numbers from 1 to 10000 only', () => {
  assert.deepEqual(parseConcurrency(' 4 '), { value: 4 });
  assert.deepEqual(parseConcurrency('10000'), { value: 10000 });
  for (const bad of ['0', '10001', '2.5', '-1', '', 'four']) {
    assert.ok(parseConcurrency(bad).error, bad);
  }
  assert.match(parseConcurrency('0').error!, /between 1 and 10000, got 0/);
});

test("a sweep's children are not top-level rows while their sweep is listed", () => {
  const m = new RunsModel();
  const children = [run(14, { parent: 'r-10' }), run(13, { parent: 'r-10' }), run(12, { parent: 'r-10' })];
  m.addPage({ runs: [...children, run(11, { parent: 'r-99' })], next_before: 11 }, true);
  // the sweep's page has not come: its children are listed, and a child of an unlisted sweep too
  assert.deepEqual(m.runs.map(r => r.id), ['r-14', 'r-13', 'r-12', 'r-11']);
  // the sweep, older than the loaded pages, is listed on purpose (force) and stands for them
  m.upsert(sweep(10, { queued: 3 }));
  assert.deepEqual(m.runs.map(r => r.id), ['r-14', 'r-13', 'r-12', 'r-11']); // not forced: waits for its page
  m.upsert(sweep(10, { queued: 3 }), true);
  assert.deepEqual(m.runs.map(r => r.id), ['r-11', 'r-10']);
  assert.equal(m.all.length, 5);
  // a child's event updates it in place, still hidden
  m.applyEvent({ id: 1, run_id: 'r-13', project: 'team-a', queue: 'team-a-train', user: 'alice', name: 'x', status: 'running', phase: 'run', reason: 'Started', message: '', at: 500 });
  assert.equal(m.get('r-13')!.status, 'running');
  assert.deepEqual(m.runs.map(r => r.id), ['r-11', 'r-10']);
});

test('expanded sweeps list their children under their row', () => {
  const s = sweep(10, { queued: 2 });
  const top = [run(12), s, run(9)];
  const kids = [run(14, { parent: 'r-10' }), run(13, { parent: 'r-10' })];
  const rows = flattenRows(top, new Map([['r-10', kids]]));
  assert.deepEqual(rows.map(r => [r.run.id, r.depth]), [['r-12', 0], ['r-10', 0], ['r-14', 1], ['r-13', 1], ['r-9', 0]]);
  assert.equal(flattenRows(top, new Map()).length, 3);
});

test('a 10,000-child sweep expands in one pass', () => {
  const s = sweep(1, { queued: 10000 });
  const kids = Array.from({ length: 10000 }, (_, i) => run(i + 2, { parent: 'r-1' }));
  const t0 = performance.now();
  const rows = flattenRows([s], new Map([['r-1', kids]]));
  const ms = performance.now() - t0;
  assert.equal(rows.length, 10001);
  assert.ok(ms < 100, `${ms} ms`);
});

test('sweeps are re-read at most once per frame each, never twice at once', async () => {
  const frames: Array<() => void> = [];
  const reads: string[] = [];
  const pending: Array<() => void> = [];
  const r = new SweepRereader(
    id => {
      reads.push(id);
      return new Promise<void>(resolve => pending.push(resolve));
    },
    cb => frames.push(cb)
  );
  r.request('s1');
  r.request('s1');
  r.request('s2');
  assert.equal(frames.length, 1); // one frame asked for
  assert.deepEqual(reads, []); // nothing read before the frame
  frames.shift()!();
  assert.deepEqual(reads, ['s1', 's2']);
  // events while s1 is being read: one more read after it, not one per event
  r.request('s1');
  r.request('s1');
  assert.equal(frames.length, 0);
  pending.shift()!(); // s1's read ends
  await new Promise(resolve => setImmediate(resolve));
  assert.equal(frames.length, 1);
  frames.shift()!();
  assert.deepEqual(reads, ['s1', 's2', 's1']);
  pending.splice(0).forEach(done => done());
  await new Promise(resolve => setImmediate(resolve));
  assert.equal(r.inFlight, 0);
  assert.equal(frames.length, 0); // nothing more asked
});

test('a failed re-read does not stop later ones', async () => {
  const frames: Array<() => void> = [];
  let n = 0;
  const r = new SweepRereader(
    async () => {
      n += 1;
      throw new Error('gone');
    },
    cb => frames.push(cb)
  );
  r.request('s1');
  frames.shift()!();
  await new Promise(resolve => setImmediate(resolve));
  r.request('s1');
  frames.shift()!();
  await new Promise(resolve => setImmediate(resolve));
  assert.equal(n, 2);
  assert.equal(r.inFlight, 0);
});

test('the params-vs-metric chart scales numbers, spreads categories, marks the best and skips children without a value', () => {
  const pts = [
    { id: 'a', params: { lr: 0.1, opt: 'adam' }, value: 0.5 },
    { id: 'b', params: { lr: 0.2, opt: 'sgd' }, value: 1.0 },
    { id: 'c', params: { lr: 0.3, opt: 'adam' }, value: 0.0 },
    { id: 'd', params: { lr: 0.4, opt: 'sgd' }, value: null }
  ];
  const g = scatterGeometry(pts, 'lr', 'c', 100, 50, 0);
  assert.deepEqual(g.dots.map(d => [d.id, Math.round(d.cx), Math.round(d.cy), d.best]), [
    ['a', 0, 25, false],
    ['b', 50, 0, false], // the largest value at the top
    ['c', 100, 50, true]
  ]);
  assert.equal(g.missing, 1);
  assert.equal(g.log, false);
  assert.deepEqual([g.xMin, g.xMax, g.yMin, g.yMax], ['0.100', '0.300', '0', '1']);
  const cat = scatterGeometry(pts, 'opt', null, 100, 50, 0);
  assert.deepEqual(cat.dots.map(d => d.cx), [0, 100, 0]);
  assert.deepEqual([cat.xMin, cat.xMax], ['adam', 'sgd']);
});

test('a learning rate over decades is drawn on a log axis', () => {
  const pts = [1e-5, 1e-4, 1e-3].map((lr, i) => ({ id: `c${i}`, params: { lr }, value: i }));
  const g = scatterGeometry(pts, 'lr', null, 100, 10, 0);
  assert.equal(g.log, true);
  assert.deepEqual(g.dots.map(d => Math.round(d.cx)), [0, 50, 100]);
  assert.equal(scatterGeometry([], 'lr', null, 100, 10).dots.length, 0);
});
