import { test } from 'node:test';
import assert from 'node:assert/strict';

import { RunsModel } from '../src/models/runsmodel';
import type { IRun, IStatusEvent } from '../src/api/types';
import { EMPTY_FILTER, markRead, readAgo } from '../src/models/viewmodel';
import { DEFAULT_NOTIFY, GPU_MOSTLY_IDLE, noticeFor } from '../src/models/notices';
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
    presets: ['single-gpu'],
    devices: [],
    exit_code: null,
    clocks: { queue_wait_seconds: 1, start_wait_seconds: null, run_seconds: null, ticking: 'queue_wait_seconds' },
    created_at: 100 + seq,
    queued_at: 100 + seq,
    dispatched_at: null,
    started_at: null,
    finished_at: null,
    updated_at: 100 + seq,
    ...over
  };
}

function ev(id: string, status: IStatusEvent['status'], at: number, over: Partial<IStatusEvent> = {}): IStatusEvent {
  return {
    id: 1,
    run_id: id,
    project: 'team-a',
    queue: 'team-a-train',
    user: 'alice',
    name: null,
    status,
    phase: PHASE[status],
    reason: 'Admitted',
    message: 'm',
    at,
    ...over
  };
}

test('pages keep newest-first order; events update status and phase in place, the record is re-read', () => {
  const m = new RunsModel();
  let changes = 0;
  m.onChange(() => (changes += 1));
  m.addPage({ runs: [run(3), run(2)], next_before: 2 }, true);
  m.addPage({ runs: [run(1)], next_before: null }, false);
  assert.deepEqual(m.runs.map(r => r.seq), [3, 2, 1]);
  // every change re-reads the record: which clock ticks, and for how long, is the service's answer
  assert.equal(m.applyEvent(ev('r-2', 'dispatched', 200)), 'fetch');
  assert.equal(m.applyEvent(ev('r-2', 'running', 201, { reason: 'Started' })), 'fetch');
  const r2 = m.get('r-2')!;
  assert.equal(r2.status, 'running');
  assert.equal(r2.phase, 'run');
  // an end is shown at once and the record re-read: its final clocks are the service's
  assert.equal(m.applyEvent(ev('r-2', 'succeeded', 230)), 'fetch');
  assert.equal(m.get('r-2')!.phase, 'end');
  assert.equal(m.get('r-2')!.finished_at, 230);
  assert.equal(changes, 5);
  // a preempted run (still `running`, waiting again): its re-read record's clocks replace the row's,
  // and they tick from that read
  const preempted = run(2, {
    status: 'running',
    reason: 'InsufficientGPU',
    updated_at: 240,
    clocks: { queue_wait_seconds: 100, start_wait_seconds: 40, run_seconds: 20, ticking: 'start_wait_seconds' }
  });
  m.upsert(markRead(preempted, 1000));
  assert.equal(m.applyEvent(ev('r-2', 'running', 239, { reason: 'InsufficientGPU' })), 'ignored'); // the record has it
  const row = m.get('r-2')!;
  assert.equal(row.clocks.ticking, 'start_wait_seconds');
  assert.ok(readAgo(row) > 0);
});

test('stale events are ignored, unknown matching runs are fetched and inserted in order', () => {
  const m = new RunsModel();
  m.addPage({ runs: [run(5), run(3)], next_before: null }, true);
  assert.equal(m.applyEvent(ev('r-5', 'dispatched', 50)), 'ignored'); // older than the row
  assert.equal(m.applyEvent(ev('r-9', 'queued', 300)), 'fetch');
  m.upsert(run(9));
  m.upsert(run(4));
  assert.deepEqual(m.runs.map(r => r.seq), [9, 5, 4, 3]);
  assert.equal(m.applyEvent(ev('r-7', 'queued', 300, { project: 'team-b' })), 'fetch');
});

test('a new submission is listed from its first event, then completed by the fetched record', () => {
  const m = new RunsModel();
  m.addPage({ runs: [run(5)], next_before: null }, true);
  assert.equal(m.applyEvent(ev('r-6', 'created', 300, { reason: 'Submitted', name: 'new' })), 'fetch');
  assert.deepEqual(m.runs.map(r => [r.id, r.status, r.presets]), [['r-6', 'created', undefined], ['r-5', 'queued', ['single-gpu']]]);
  assert.equal(m.applyEvent(ev('r-6', 'queued', 300, { reason: 'Submitted' })), 'fetch');
  m.upsert(run(6, { updated_at: 300 }));
  assert.deepEqual(m.runs.map(r => [r.id, r.seq, r.presets]), [['r-6', 6, ['single-gpu']], ['r-5', 5, ['single-gpu']]]);
  // a run re-entering the list is not new: it waits for its record to find its place
  assert.equal(m.applyEvent(ev('r-2', 'queued', 300)), 'fetch');
  assert.equal(m.runs.length, 2);
});

test('a filter drops runs that stop matching and never fetches those that do not match', () => {
  const m = new RunsModel();
  m.setFilter({ ...EMPTY_FILTER, group: 'waiting' });
  m.addPage({ runs: [run(2), run(1)], next_before: null }, true);
  assert.equal(m.applyEvent(ev('r-2', 'dispatched', 500)), 'removed');
  assert.deepEqual(m.runs.map(r => r.id), ['r-1']);
  assert.equal(m.applyEvent(ev('r-8', 'running', 500)), 'ignored');
  m.upsert(run(8, { status: 'running' }));
  assert.deepEqual(m.runs.map(r => r.id), ['r-1']);
});

test('runs older than the loaded pages wait for their page', () => {
  const m = new RunsModel();
  m.addPage({ runs: [run(10), run(9)], next_before: 9 }, true);
  m.upsert(run(4));
  assert.deepEqual(m.runs.map(r => r.seq), [10, 9]);
});

test('a GPU-idle remark after the end changes no listed run, and is told to those it names', () => {
  const m = new RunsModel();
  m.addPage({ runs: [run(1, { status: 'succeeded', reason: 'Completed', message: 'exit 0', updated_at: 200, finished_at: 200 })], next_before: null }, true);
  const remark = ev('r-1', 'succeeded', 210, {
    reason: GPU_MOSTLY_IDLE,
    message: 'r-1 held GPU 0 for 12 min; busy 34% of it (util ≥ 5%)',
    details: { tell: ['alice', 'ops'] }
  });
  assert.equal(m.applyEvent(remark), 'ignored');
  const kept = m.get('r-1');
  assert.deepEqual([kept?.reason, kept?.finished_at], ['Completed', 200]);
  // The service's words, to the owner and the admins it names; never a second "succeeded" notice.
  for (const me of ['alice', 'ops']) {
    assert.deepEqual(noticeFor(remark, me, DEFAULT_NOTIFY), { kind: 'gpuIdle', type: 'warning', message: remark.message });
  }
  assert.equal(noticeFor(remark, 'bob', DEFAULT_NOTIFY), null);
});
