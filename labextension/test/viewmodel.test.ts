import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { IExplain, IPreset, IQueue, IRun, IStatusEvent } from '../src/api/types';
import { chartOrder, compareRows } from '../src/models/comparemodel';
import {
  DEFAULT_NOTIFY,
  buildRunRequest,
  chartGeometry,
  clockOffset,
  clocks,
  configRows,
  explainView,
  filterQuery,
  formatDuration,
  formatMetric,
  groupCounts,
  humanReason,
  layerLabel,
  lockOf,
  longWaiters,
  waitedBy,
  waitingFromEvent,
  waitingRun,
  matchesFilter,
  noticeFor,
  ordinal,
  presetView,
  queueView,
  runRowView,
  splitArgs,
  markRead,
  phaseTime,
  readAgo,
  statusGroup,
  timelinePhases
} from '../src/models/viewmodel';
import { PHASE } from './wire';

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
  reason: 'QueuePaused',
  message: 'queue team-a-train is paused',
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

test('durations read as people say them', () => {
  assert.equal(formatDuration(null), '—');
  assert.equal(formatDuration(0), '0.0s');
  assert.equal(formatDuration(0.46), '0.4s');
  assert.equal(formatDuration(1.9), '1s');
  assert.equal(formatDuration(42.7), '42s');
  assert.equal(formatDuration(245), '4m 05s');
  assert.equal(formatDuration(2 * 3600 + 3 * 60 + 59), '2h 03m');
  assert.equal(formatDuration(3 * 86400 + 4 * 3600 + 100), '3d 4h');
  assert.equal(formatDuration(-3), '0.0s');
});

test('the three clocks are the service\'s; only the ticking one goes on, by the time since the read', () => {
  const waiting = clocks(base, 25);
  assert.deepEqual(
    waiting.map(c => [c.key, c.side, c.seconds, c.live]),
    [
      ['queue_wait', 'dispatch', 30, true],
      ['start_wait', 'execution', null, false],
      ['run', 'run', null, false]
    ]
  );
  const done = clocks({ clocks: { queue_wait_seconds: 60, start_wait_seconds: 2.5, run_seconds: 137.5, ticking: null } }, 5000);
  assert.deepEqual(done.map(c => c.text), ['1m 00s', '2s', '2m 17s']);
  assert.ok(done.every(c => !c.live));
  // dispatched by the status before the service had its time: the start wait counts from the read
  const starting = clocks({ clocks: { queue_wait_seconds: 10, start_wait_seconds: null, run_seconds: null, ticking: 'start_wait_seconds' } }, 5);
  assert.deepEqual(starting.map(c => [c.seconds, c.live]), [[10, false], [5, true], [null, false]]);
});

test('a preempted run shows the service\'s clocks: its wait again is start wait, not run time', () => {
  // started at 1010, preempted at 1040, its replacement waited until 1100, ended at 1130:
  // the service says 30 s + 30 s of run time and 10 s + 60 s of start wait (core/clocks.py).
  const run = {
    ...base,
    status: 'succeeded' as const,
    phase: 'end' as const,
    dispatched_at: 1000,
    started_at: 1010,
    finished_at: 1130,
    clocks: { queue_wait_seconds: 0, start_wait_seconds: 70, run_seconds: 60, ticking: null }
  };
  assert.deepEqual(
    clocks(run, 0).map(c => [c.key, c.seconds]),
    [
      ['queue_wait', 0],
      ['start_wait', 70],
      ['run', 60]
    ]
  );
  assert.equal(runRowView(run, 1430).phaseText, 'ran 1m 00s, 5m 00s ago');
  // waiting again for the executor, while running: the start wait goes on, the run time stands
  const live = clocks({ clocks: { ...run.clocks, ticking: 'start_wait_seconds' } }, 4);
  assert.deepEqual(live.map(c => [c.seconds, c.live]), [[0, false], [74, true], [60, false]]);
});

test('the server clock offset comes from an open clock', () => {
  // the server computed queue_wait 5 s at its now = 1005; we read it at 1007
  assert.equal(clockOffset(base, 1007), 2);
  assert.equal(clockOffset({ ...base, finished_at: 1100, clocks: { ...base.clocks, ticking: null } }, 1007), null);
});

test('statuses group and count in display order', () => {
  // the group follows the service's phase; an ended run shows its final status
  assert.equal(statusGroup({ status: 'created', phase: 'dispatch' }), 'waiting');
  assert.equal(statusGroup({ status: 'dispatched', phase: 'execution' }), 'starting');
  assert.equal(statusGroup({ status: 'stopping', phase: 'run' }), 'running');
  assert.equal(statusGroup({ status: 'failed', phase: 'end' }), 'failed');
  const phases = { queued: 'dispatch', starting: 'execution', running: 'run' } as const;
  const c = groupCounts(
    ['queued', 'queued', 'starting', 'running', 'succeeded', 'failed', 'stopped'].map(status => ({
      status,
      phase: phases[status as keyof typeof phases] ?? ('end' as const)
    }))
  );
  assert.deepEqual(c, { waiting: 2, starting: 1, running: 1, succeeded: 1, failed: 1, stopped: 1 });
});

test('the timeline splits into dispatch, execution, run and end phases', () => {
  const tl = [
    { status: 'created', phase: 'dispatch', reason: 'Submitted', message: '', at: 10 },
    { status: 'queued', phase: 'dispatch', reason: 'Submitted', message: '', at: 10 },
    { status: 'queued', phase: 'dispatch', reason: 'QueuePaused', message: 'paused', at: 10.1 },
    { status: 'dispatched', phase: 'execution', reason: 'Admitted', message: '', at: 70 },
    { status: 'starting', phase: 'execution', reason: 'ImagePull', message: 'pulling', at: 71 },
    { status: 'running', phase: 'run', reason: 'Started', message: '', at: 75 },
    { status: 'succeeded', phase: 'end', reason: 'Completed', message: 'exit 0', at: 100 }
  ] as const;
  const phases = timelinePhases(tl.map(e => ({ ...e })));
  assert.deepEqual(
    phases.map(p => [p.phase, p.start, p.end, p.events.length]),
    [
      ['dispatch', 10, 70, 3],
      ['execution', 70, 75, 2],
      ['run', 75, 100, 1],
      ['end', 100, null, 1]
    ]
  );
  assert.match(phases[0].label, /our queue/);
  assert.match(phases[1].label, /executor/);
});

test("a timeline phase's time is the service's clock for it; a preempted run's Running is its run time", () => {
  // started 75, preempted 105 (still `running`, its replacement waiting), now 165: the service
  // says run 30 s and start wait 5 + 60 s, ticking; since the Running phase began is 90 s
  const tl = [
    { status: 'queued', phase: 'dispatch', reason: 'Submitted', message: '', at: 10 },
    { status: 'dispatched', phase: 'execution', reason: 'Admitted', message: '', at: 70 },
    { status: 'running', phase: 'run', reason: 'Started', message: '', at: 75 },
    { status: 'running', phase: 'run', reason: 'InsufficientGPU', message: 'pod preempted', at: 105 }
  ] as const;
  const phases = timelinePhases(tl.map(e => ({ ...e })));
  const run = {
    finished_at: null,
    clocks: { queue_wait_seconds: 60, start_wait_seconds: 65, run_seconds: 30, ticking: 'start_wait_seconds' as const }
  };
  assert.deepEqual(
    phases.map(p => phaseTime(p, phases, run, 4, 169)),
    [
      { text: '1m 00s', live: false },
      { text: '1m 09s', live: true },
      { text: '30s', live: false }
    ]
  );
  // a phase that comes back shows each group's own span, from its events' times
  const back = timelinePhases(
    [
      { status: 'queued', phase: 'dispatch', reason: 'Submitted', message: '', at: 10 },
      { status: 'dispatched', phase: 'execution', reason: 'Admitted', message: '', at: 20 },
      { status: 'queued', phase: 'dispatch', reason: 'Requeued', message: '', at: 25 }
    ].map(e => ({ ...e })) as typeof phases[number]['events']
  );
  const c = { finished_at: null, clocks: { queue_wait_seconds: 1, start_wait_seconds: 5, run_seconds: null, ticking: 'queue_wait_seconds' as const } };
  assert.deepEqual(back.map(p => phaseTime(p, back, c, 0, 40)?.text), ['10s', '5s', '15s']);
  assert.equal(phaseTime({ phase: 'end', label: '', start: 0, end: null, events: [] }, [], c, 0, 0), null);
});

test("each record's clocks tick from when it was read", () => {
  const r = markRead({ ...base }, 1000);
  assert.equal(readAgo(r, 1012), 12);
  assert.equal(readAgo({ ...base }, 1012), 0); // not read from the service: its clocks stand
});

test("a row shows status, queue, preset, GPUs and the service's ticking clock", () => {
  // queue wait 5 s when read, read 120 s ago
  const v = runRowView(base, 1125, 120);
  assert.equal(v.phaseText, 'waiting 2m 05s');
  assert.equal(v.presets, 'single-gpu');
  assert.equal(v.gpus, '1 GPU');
  const started = { ...base, status: 'running' as const, phase: 'run' as const, dispatched_at: 1010, started_at: 1012 };
  const running = runRowView({ ...started, clocks: { queue_wait_seconds: 10, start_wait_seconds: 2, run_seconds: 6, ticking: 'run_seconds' } }, 1020, 2);
  assert.equal(running.phaseText, 'running 8s');
  // preempted at 1042, its replacement waits since: the service says 30 s run, 2 + 60 s start wait, the
  // start wait ticking; 1102 - started_at would say "running 1m 30s", the wait counted as run time
  const preempted = {
    ...started,
    reason: 'InsufficientGPU',
    clocks: { queue_wait_seconds: 10, start_wait_seconds: 62, run_seconds: 30, ticking: 'start_wait_seconds' as const }
  };
  assert.equal(runRowView(preempted, 1102, 0).phaseText, 'starting 1m 02s');
  assert.equal(runRowView(preempted, 1107, 5).phaseText, 'starting 1m 07s');
  // a row made from an event, its record not read yet: no clock to show
  const unread = { ...base, clocks: { queue_wait_seconds: null, start_wait_seconds: null, run_seconds: null, ticking: null } };
  assert.equal(runRowView(unread, 1125, 0).phaseText, 'waiting …');
  const ended = runRowView(
    {
      ...base,
      status: 'succeeded',
      phase: 'end',
      dispatched_at: 1010,
      started_at: 1012,
      finished_at: 1072,
      presets: [],
      clocks: { queue_wait_seconds: 10, start_wait_seconds: 2, run_seconds: 60, ticking: null }
    },
    1372
  );
  assert.equal(ended.phaseText, 'ran 1m 00s, 5m 00s ago');
  assert.equal(ended.presets, 'no preset');
  const fresh = runRowView({ ...base, presets: undefined, resources: {} }, 1000);
  assert.deepEqual([fresh.presets, fresh.gpus], ['…', '… GPUs']);
});

test("explain while waiting: the service's layer text and number lines, blockers and who can act", () => {
  const ex: IExplain = {
    run_id: 'r-9',
    status: 'queued',
    queue: 'team-a-train',
    layer: 'queue',
    layer_text: 'held by our queue (dispatch)',
    wait_line: 'position 1 of 1 in q · UserLimit 1/1',
    // as core/explain_text.number_lines words them: the sidebar says them, never its own
    number_lines: [
      { label: 'numbers', text: '2/2 in use' },
      { label: 'position', text: '2 of 3 waiting in queue team-a-train' },
      { label: 'queue', text: '2/2 runs, 2/2 GPUs in use, 3 pending; 1 GPU(s) free on the machine' }
    ],
    reason: 'QueueConcurrency',
    message: 'queue team-a-train is at its concurrency limit: 2/2 runs dispatched',
    numbers: { used: 2, limit: 2 },
    position: 2,
    pending_in_queue: 3,
    blockers: [
      { id: 'r-1', name: 'train.py', user: 'bob', project: 'team-a', status: 'running', gpu: 1, devices: [0] },
      { id: null, name: null, user: null, project: 'team-b', status: 'running', gpu: 2, devices: [1, 2] }
    ],
    queue_usage: { runs: 2, concurrency: 2, gpu: 2, gpu_quota: 2, pending: 3, free_gpus: 1 },
    who_can_act: [
      { who: 'ops', can: 'raise the concurrency of queue team-a-train' },
      { who: 'bob', can: 'stop their runs that hold the queue' }
    ]
  };
  const v = explainView(ex);
  assert.equal(v.side, 'dispatch');
  assert.equal(v.layerLabel, 'held by our queue (dispatch)');
  assert.equal(v.headline, 'Queue concurrency');
  // label: text, as the CLI and the widgets print them (client/explaining.py)
  assert.deepEqual(v.numbers, [
    'numbers: 2/2 in use',
    'position: 2 of 3 waiting in queue team-a-train',
    'queue: 2/2 runs, 2/2 GPUs in use, 3 pending; 1 GPU(s) free on the machine'
  ]);
  assert.deepEqual(v.blockers, ['r-1 (train.py, bob): running, 1 GPU on GPU 0', 'a team-b run: running, 2 GPUs on GPU 1,2']);
  assert.deepEqual(v.whoCanAct, ['ops can raise the concurrency of queue team-a-train', 'bob can stop their runs that hold the queue']);
});

test('explain on the execution side shows what the executor said; GPUs the executor does not count (null) are not shown', () => {
  const v = explainView({
    run_id: 'r-2',
    status: 'starting',
    queue: 'q',
    layer: 'executor',
    layer_text: 'dispatched; the executor has not started it yet (execution)',
    number_lines: [],
    wait_line: 'in queue',
    reason: 'Unschedulable',
    message: '0/3 nodes are available: 3 Insufficient nvidia.com/gpu.',
    position: null,
    blockers: [],
    details: { layer: 'executor', raw: '0/3 nodes are available', nodes: 3, who_can_act: [] },
    who_can_act: [{ who: 'ops', can: 'check the executor' }]
  });
  assert.equal(v.side, 'execution');
  assert.equal(v.layerLabel, 'dispatched; the executor has not started it yet (execution)');
  assert.deepEqual(v.details, ['raw: 0/3 nodes are available', 'nodes: 3']);
  assert.deepEqual(v.numbers, []);
  const lines = [
    { label: 'numbers', text: 'requested 2, free 1' },
    { label: 'position', text: '1 of 1 waiting in queue q' },
    { label: 'queue', text: '0/∞ runs, 0/∞ GPUs in use, 1 pending' }
  ];
  const q = explainView({
    run_id: 'r-3', status: 'queued', queue: 'q', layer: 'queue', layer_text: 'held by our queue (dispatch)', number_lines: lines, wait_line: 'in q', reason: 'NoCapacity', message: 'm',
    numbers: { requested: 2, free: 1 }, position: 1, pending_in_queue: 1, blockers: [],
    queue_usage: { runs: 0, concurrency: null, gpu: 0, gpu_quota: null, pending: 1, free_gpus: null },
    who_can_act: []
  });
  // the numbers are the service's, not re-worded from `numbers`/`queue_usage` here
  assert.deepEqual(q.numbers, ['numbers: requested 2, free 1', 'position: 1 of 1 waiting in queue q', 'queue: 0/∞ runs, 0/∞ GPUs in use, 1 pending']);
});

test('explain lists each flavor where they wait differently, in the queue\'s order; not where that repeats the message', () => {
  const wait = (flavors: IExplain['flavors'], message: string): IExplain => ({
    run_id: 'r-4', status: 'queued', queue: 'typed', layer: 'queue', layer_text: 'held by our queue (dispatch)', number_lines: [], wait_line: 'in typed',
    reason: 'QueueQuota', message, numbers: {}, position: 1, pending_in_queue: 1, blockers: [], who_can_act: [], flavors
  });
  const h100 = "h100: 2/2 in use (4 more needed) (queue typed's h100 quota)";
  const a100 = "a100: 1/4 in use (1 more needed) (queue typed's a100 quota)";
  const both = explainView(wait([
    { name: 'h100', reason: 'QueueQuota', message: h100, numbers: { used: 2, requested: 4, limit: 2 }, blockers: [] },
    { name: 'a100', reason: 'QueueQuota', message: a100, numbers: { used: 1, requested: 4, limit: 4 }, blockers: [] }
  ], h100));
  assert.deepEqual(both.flavors, [h100, a100]);
  // one flavor asked for (placement.gpu_type): the message is its wait already
  assert.deepEqual(explainView(wait([{ name: 'h100', reason: 'QueueQuota', message: h100, numbers: {}, blockers: [] }], h100)).flavors, []);
  // a limit of the whole queue holds it on every flavor: said once
  const paused = 'queue typed is paused';
  const common = [
    { name: 'h100', reason: 'QueuePaused', message: paused, numbers: {}, blockers: [] },
    { name: 'a100', reason: 'QueuePaused', message: paused, numbers: {}, blockers: [] }
  ];
  assert.deepEqual(explainView(wait(common, paused)).flavors, []);
  // a queue-wide message differing from the top one is named by its flavor
  assert.deepEqual(explainView(wait(common, 'other')).flavors, [`h100: ${paused}`, `a100: ${paused}`]);
  assert.deepEqual(explainView(wait(undefined, h100)).flavors, []);
});

test('reasons and ordinals read as words', () => {
  assert.equal(humanReason('BehindQueueHead'), 'Behind queue head');
  assert.equal(humanReason('QueuePaused'), 'Queue paused');
  assert.deepEqual([1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal), ['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '22nd', '101st']);
});

test('the resolved config lists each leaf with the layer that set it', () => {
  const rows = configRows(
    {
      resources: { cpu: '4', gpu: 1 },
      env: [{ name: 'HF_HOME', value: '/tmp/hf' }],
      placement: { tolerations: [{ key: 'nvidia.com/gpu', effect: 'NoSchedule', operator: 'Exists' }] },
      queue: 'team-a-train',
      command: ['python', 'train.py']
    },
    {
      'resources.cpu': 'preset:single-gpu',
      'resources.gpu': 'run',
      'env[HF_HOME]': 'org',
      'placement.tolerations[nvidia.com/gpu:NoSchedule]': 'project:team-a/preset:base',
      queue: 'project:team-a'
    }
  );
  assert.deepEqual(
    rows.map(r => [r.path, r.value, r.layer, r.layerKind]),
    [
      ['resources.cpu', '4', 'preset:single-gpu', 'preset'],
      ['resources.gpu', '1', 'run', 'run'],
      ['env[HF_HOME]', '/tmp/hf', 'org', 'org'],
      ['placement.tolerations[nvidia.com/gpu:NoSchedule]', '{"operator":"Exists"}', 'project:team-a/preset:base', 'project'],
      ['queue', 'team-a-train', 'project:team-a', 'project'],
      ['command', '["python","train.py"]', 'request', 'request']
    ]
  );
});

test('a preset card says what it requests and where it places work', () => {
  // spread, not listed: PresetView gains `connections` in issue 13, `security` in 21 (no excess-property check on a spread)
  const later = { connections: null, security: null };
  const p: IPreset = {
    ...later,
    name: 'notebook',
    description: 'Interactive',
    kind: 'session',
    queue: 'interactive',
    resources: { gpu: 1, cpu: '2', memory: '8Gi' },
    placement: { gpu_type: 'a100', node_selector: { pool: 'gpu', zone: null }, tolerations: [{ key: 'nvidia.com/gpu' }] },
    image: null,
    env: null,
    termination: { idle_seconds: 3600, timeout_seconds: null },
    volumes: null,
    locked: ['queue'],
    merge: 'post_merge'
  };
  const v = presetView(p);
  assert.equal(v.requests, '1 GPU · 2 CPU · 8Gi memory');
  assert.equal(v.places, 'GPU type a100 · nodes pool=gpu · tolerates nvidia.com/gpu');
  assert.equal(v.queue, 'queue interactive');
  assert.equal(v.limits, 'idle stop 1h 00m');
  assert.equal(v.locked, 'locked: queue');
  assert.ok(v.session);
  assert.equal(presetView({ ...p, placement: null, queue: null, image: null }).places, 'anywhere the queue dispatches');
});

test('a queue row: GPUs and runs against their limits, pending, head wait, longest wait', () => {
  const q: IQueue = {
    name: 'team-a-train',
    priority: 10,
    concurrency: 2,
    quota: { gpu: 2 },
    max_per_user: null,
    ordering: 'best_effort_fifo',
    paused: false,
    usage: { runs: 2, gpu: 2 },
    pending: 3,
    head_wait: { reason: 'QueueConcurrency', message: 'queue team-a-train is at its concurrency limit: 2/2 runs dispatched' }
  };
  const v = queueView(q, 90);
  assert.equal(v.gpuText, '2/2 GPUs');
  assert.equal(v.gpuFraction, 1);
  assert.equal(v.runsText, '2/2 runs dispatched');
  assert.equal(v.pendingText, '3 pending');
  assert.match(v.waitText, /concurrency limit/);
  assert.equal(v.oldestWaitText, 'longest wait 1m 30s');
  const paused = queueView({ ...q, paused: true, concurrency: null, quota: {}, pending: 0 }, null);
  assert.equal(paused.waitText, 'paused: nothing is dispatched');
  assert.equal(paused.gpuText, '2 GPUs (no quota)');
  assert.equal(paused.runsFraction, null);
  assert.equal(paused.oldestWaitText, '');
});

test('a queue with flavors: one meter per flavor, in the order tried, with its free GPUs here', () => {
  const q: IQueue = {
    name: 'typed',
    priority: 0,
    concurrency: null,
    quota: {},
    max_per_user: null,
    ordering: 'best_effort_fifo',
    paused: false,
    usage: { runs: 3, gpu: 3 },
    pending: 1,
    head_wait: { reason: 'QueueQuota', message: "h100: 2/2 in use (1 more needed) (queue typed's h100 quota)" },
    flavors: [
      { name: 'h100', quota: { gpu: 2 }, usage: { gpu: 2 }, free_gpus: 0 },
      { name: 'a100', quota: { gpu: 4 }, usage: { gpu: 1 }, free_gpus: null }
    ]
  };
  const v = queueView(q, null);
  assert.deepEqual(v.flavors, [
    { name: 'h100', text: '2/2 GPUs · 0 free here', fraction: 1 },
    { name: 'a100', text: '1/4 GPUs', fraction: 0.25 }
  ]);
  assert.deepEqual(queueView({ ...q, flavors: [] }, null).flavors, []);
});

test('filters match live events as the service matches list queries', () => {
  const f = { project: 'team-a', queue: '', group: 'waiting' as const, search: 'train' };
  assert.ok(matchesFilter({ project: 'team-a', queue: 'x', status: 'queued', phase: 'dispatch', name: 'my-train' }, f));
  assert.ok(!matchesFilter({ project: 'team-a', queue: 'x', status: 'running', phase: 'run', name: 'my-train' }, f));
  assert.ok(!matchesFilter({ project: 'team-b', queue: 'x', status: 'queued', phase: 'dispatch', name: 'my-train' }, f));
  assert.ok(!matchesFilter({ project: 'team-a', queue: 'x', status: 'queued', phase: 'dispatch', name: null }, f));
  // a group is asked by its phase (the service knows its statuses), an ended one by its final status
  assert.deepEqual(filterQuery(f), { project: 'team-a', phase: 'dispatch', q: 'train' });
  assert.deepEqual(filterQuery({ ...f, group: 'running', search: '' }), { project: 'team-a', phase: 'run' });
  assert.deepEqual(filterQuery({ ...f, group: 'failed', search: '' }), { project: 'team-a', status: 'failed' });
});

test('notifications: my starts, finishes and failures; never other people runs', () => {
  const ev = (status: IStatusEvent['status'], reason: string, user = 'alice'): IStatusEvent => ({
    id: 1, run_id: 'r-1', project: 'team-a', queue: 'q', user, name: 'train.py', status, phase: PHASE[status], reason, message: 'exit code 1', at: 0
  });
  assert.equal(noticeFor(ev('running', 'Started'), 'alice', DEFAULT_NOTIFY)?.kind, 'started');
  assert.equal(noticeFor(ev('running', 'Reattached'), 'alice', DEFAULT_NOTIFY), null);
  assert.equal(noticeFor(ev('succeeded', 'Completed'), 'alice', DEFAULT_NOTIFY)?.type, 'success');
  assert.deepEqual(noticeFor(ev('failed', 'Error'), 'alice', DEFAULT_NOTIFY), {
    kind: 'failed', type: 'error', message: 'Run train.py failed: exit code 1'
  });
  assert.equal(noticeFor(ev('failed', 'Error', 'bob'), 'alice', DEFAULT_NOTIFY), null);
  assert.equal(noticeFor(ev('succeeded', 'Completed'), 'alice', { ...DEFAULT_NOTIFY, finished: false }), null);
  // The service's queue-wait clock, not now - queued_at: a requeued run queued at 1500 had waited 500 s before.
  const requeued = waitingRun({ ...base, id: 'r-4', queued_at: 1500, clocks: { ...base.clocks, queue_wait_seconds: 500 } }, 1500);
  const waiting = [
    waitingRun(base, 1005),
    waitingRun({ ...base, id: 'r-2', queued_at: 1500, clocks: { ...base.clocks, queue_wait_seconds: 0 } }, 1500),
    waitingRun({ ...base, id: 'r-3', user: 'bob' }, 1005),
    requeued
  ];
  assert.deepEqual(longWaiters(waiting, 'alice', 1000 + 600, DEFAULT_NOTIFY, new Set()).map(r => r.id), ['r-1', 'r-4']);
  assert.equal(waitedBy(requeued, 1700), 700);
  assert.deepEqual(longWaiters(waiting, 'alice', 1600, DEFAULT_NOTIFY, new Set(['r-1', 'r-4'])), []);
  assert.deepEqual(longWaiters(waiting, 'alice', 1600, { ...DEFAULT_NOTIFY, longWait: false }, new Set()), []);
  // A run seen entering the queue by its event: its clock starts at the event's time.
  const entered: IStatusEvent = { id: 9, run_id: 'r-5', project: 'team-a', queue: 'q', user: 'alice', name: 'x', status: 'queued', phase: 'dispatch', reason: 'Submitted', message: '', at: 2000 };
  assert.equal(waitedBy(waitingFromEvent(entered), 2600), 600);
});

test('arguments split like a shell line', () => {
  assert.deepEqual(splitArgs(''), []);
  assert.deepEqual(splitArgs('--epochs 3  --name "my run" \'a b\' c\\ d ""'), ['--epochs', '3', '--name', 'my run', 'a b', 'c d', '']);
});

test('the submit form sends only what the user set, or says what is missing', () => {
  const s = { script: '/train.py', args: '--lr 0.1', name: '', project: 'team-a', presets: ['single-gpu'], queue: '', gpu: '', cpu: '', memory: '', env: '' };
  assert.deepEqual(buildRunRequest(s), {
    request: { project: 'team-a', script: 'train.py', working_dir: '.', args: ['--lr', '0.1'], presets: ['single-gpu'] },
    errors: []
  });
  assert.equal(buildRunRequest({ ...s, script: 'exp/a/train.py' }).request?.working_dir, 'exp/a');
  // Submit again of a file run: the recorded absolute script and working directory are sent as they were.
  const recorded = { project: 'team-a', script: '/srv/root/exp/train.py', working_dir: '/srv/root/exp' };
  const again = buildRunRequest({ ...s, script: '/srv/root/exp/train.py' }, recorded).request;
  assert.deepEqual([again?.script, again?.working_dir], ['/srv/root/exp/train.py', '/srv/root/exp']);
  const over = buildRunRequest({ ...s, args: '', queue: 'interactive', gpu: '2', memory: '8Gi', env: 'A=1\n\nB=x=y' });
  assert.deepEqual(over.request, {
    project: 'team-a', script: 'train.py', working_dir: '.', presets: ['single-gpu'], queue: 'interactive',
    resources: { gpu: 2, memory: '8Gi' }, env: [{ name: 'A', value: '1' }, { name: 'B', value: 'x=y' }]
  });
  const bad = buildRunRequest({ ...s, script: 'notes.txt', gpu: '1.5', env: 'NOPE' });
  assert.equal(bad.request, null);
  assert.deepEqual(bad.errors, [
    'notes.txt is not a .py or .ipynb file.',
    'GPUs must be a whole number ≥ 0, not 1.5.',
    'Environment line "NOPE" is not NAME=value.'
  ]);
});

test('chart geometry scales into the box and breaks at missing values', () => {
  const g = chartGeometry([0, 1, 2, 3], [1, 3, null, 2], 30, 20);
  assert.equal(g.d, 'M0.0,20.0L10.0,0.0M30.0,10.0');
  assert.deepEqual([g.min, g.max, g.last, g.firstStep, g.lastStep], [1, 3, 2, 0, 3]);
  assert.equal(chartGeometry([5], [7], 30, 20).d, 'M15.0,10.0');
  assert.equal(chartGeometry([], [], 30, 20).d, '');
  assert.deepEqual([formatMetric(0.123456), formatMetric(12345.678), formatMetric(1e-5), formatMetric(null)], ['0.1235', '12350', '1.00e-5', '—']);
});

test('Compare charts: the server default metric first, then by how many runs logged each; code rows carry the diff', () => {
  const run = (id: string) => ({ id, name: id, project: 'p', user: 'u', queue: 'q', status: 'succeeded', phase: 'end', created_at: 0, params: {}, metrics: {} });
  const data = {
    runs: [run('r-1'), run('r-2')],
    metrics: ['a_extra', 'acc', 'loss'],
    metric_runs: { a_extra: 1, acc: 2, loss: 2 },
    default_metric: 'loss',
    direction: { a_extra: 'max', acc: 'max', loss: 'min' },
    params: { keys: [], differ: [] },
    config: { differ: [{ path: 'entrypoint.code', values: { 'r-1': "first run's code", 'r-2': 'code differs' }, diff: '-K = 1\n+K = 2' }] },
    curves: {}
  } as unknown as Parameters<typeof chartOrder>[0];
  assert.deepEqual(chartOrder(data), ['loss', 'acc', 'a_extra']);
  const code = compareRows(data, 'r-1').find(r => r.label === 'entrypoint.code');
  assert.equal(code?.diff, '-K = 1\n+K = 2');
  // "best" is the service's direction: min for a metric it says goes down, whatever its name
  const summary = (min: number, max: number) => ({ count: 2, min, max, last: max, last_step: 1 });
  const scored = {
    ...data,
    runs: [
      { ...run('r-1'), metrics: { acc: summary(0.2, 0.9), score: summary(3, 7) } },
      { ...run('r-2'), metrics: { acc: summary(0.1, 0.8), score: summary(2, 5) } }
    ],
    metrics: ['acc', 'score'],
    direction: { acc: 'max', score: 'min' }
  } as unknown as Parameters<typeof chartOrder>[0];
  const best = (label: string) => compareRows(scored, 'r-1').find(r => r.label === label)!.cells.map(c => c.text);
  assert.deepEqual(best('acc (best)'), ['0.9', '0.8']);
  assert.deepEqual(best('score (best)'), ['3', '2']);
});

test('Compare: a flavor row where any run ran on a flavor, none otherwise', () => {
  const run = (id: string, flavor: string | null) => ({ id, name: id, project: 'p', user: 'u', queue: 'q', flavor, status: 'succeeded', phase: 'end', created_at: 0, params: {}, metrics: {} });
  const data = (flavors: (string | null)[]) =>
    ({
      runs: flavors.map((f, i) => run(`r-${i}`, f)),
      metrics: [],
      metric_runs: {},
      default_metric: null,
      direction: {},
      params: { keys: [], differ: [] },
      config: { differ: [] },
      curves: {}
    }) as unknown as Parameters<typeof compareRows>[0];
  const flavor = compareRows(data(['h100', 'a100', null]), 'r-0').find(r => r.label === 'flavor');
  assert.deepEqual(flavor?.cells.map(c => c.text), ['h100', 'a100', '—']);
  assert.equal(flavor?.differ, true);
  assert.equal(compareRows(data([null, null]), 'r-0').find(r => r.label === 'flavor'), undefined);
});

test("the dialog's locks are the preview's: a field is locked by its path or a field above it", () => {
  // as `POST runs/preview` answers (core/merge.py: path → the first layer that locked it)
  const locks = { queue: 'preset:pinned', resources: 'project:team-a/preset:gpu-small' };
  assert.equal(lockOf(locks, 'queue'), 'preset:pinned');
  assert.equal(lockOf(locks, 'resources.gpu'), 'project:team-a/preset:gpu-small');
  assert.equal(lockOf({ 'resources.gpu': 'preset:one' }, 'resources.cpu'), undefined);
  assert.equal(lockOf({}, 'env'), undefined);
  // and said in the provenance's words
  assert.equal(layerLabel(lockOf(locks, 'resources.gpu')), 'project default preset gpu-small');
  assert.equal(layerLabel(lockOf(locks, 'queue')), 'preset pinned');
});
