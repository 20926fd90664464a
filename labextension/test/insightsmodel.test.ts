import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  flavorTable,
  formatHours,
  formatPercent,
  goodputBars,
  insightsQuery,
  normalizeInsights,
  reasonBars,
  scopeOptions,
  usagePaths,
  waitBars
} from '../src/models/insightsmodel';
import { normalizeWhatIf, whatifBody } from '../src/models/whatifmodel';
import { busyCell, busyText, busyThreshold, idleHolderText, idleRunText, idleTitle } from '../src/models/insightsgpu';

const wait = (p50: number | null, p90: number | null, p99: number | null, n: number) => ({ n, p50, p90, p99, max: p99, mean: p50 });
const figures = {
  runs: 10,
  queue_wait: wait(60, 600, 1200, 10),
  start_wait: wait(2, 5, 9, 10),
  waits_by_reason: [{ reason: 'QueueQuota', category: 'quota', seconds: 6000, runs: 3 }],
  waits_by_category: { quota: 6000, concurrency: 3000, max_per_user: 0, capacity: 0, placement: 0, other: 0 },
  gpu_hours: 12.5,
  allowance_gpu_hours: 50,
  utilisation: 0.25,
  goodput: 0.75,
  ended_runs: 9,
  failures: [{ reason: 'ExitCode', count: 3 }]
};
const RAW = {
  since: 1000,
  until: 1000 + 7 * 86400,
  bucket_seconds: 10,
  queues: [
    { ...figures, name: 'team-a-train', quota_gpu: 2 },
    { ...figures, name: 'interactive', runs: 0, queue_wait: wait(null, null, null, 0), goodput: null, waits_by_category: {} }
  ],
  total: { ...figures, machine_gpu_hours: 100, machine_utilisation: 0.125 },
  series: [
    { start: 0, gpu_hours: 1, allowance_gpu_hours: 4 },
    { start: 10, gpu_hours: 4, allowance_gpu_hours: 4 },
    { start: 20, gpu_hours: 2, allowance_gpu_hours: null }
  ],
  refusals: [
    { rule: 'queue_not_allowed', count: 2 },
    { rule: 'gpu_limit', count: 5 }
  ],
  top_users: [{ user: 'alice', project: 'team-a', runs: 8, gpu_hours: 10 }]
};

test('scope options: all, then the queues and projects the service listed', () => {
  const opts = scopeOptions(['b-q', 'a-q'], ['team-a']);
  assert.deepEqual(
    opts.map(o => o.value),
    ['all:', 'queue:a-q', 'queue:b-q', 'project:team-a']
  );
});

test('the query names the scope, the range as a duration and a bucket to match', () => {
  assert.deepEqual(insightsQuery({ kind: 'queue', name: 'q' }, '24h'), { since: '24h', bucket: '1h', queue: 'q' });
  assert.deepEqual(insightsQuery({ kind: 'project', name: 'p' }, '7d'), { since: '7d', bucket: '6h', project: 'p' });
  assert.deepEqual(insightsQuery({ kind: 'all', name: '' }, '30d'), { since: '30d', bucket: '1d' });
});

test('normalized insights: percentiles, reasons largest first, counts from maps and lists', () => {
  const d = normalizeInsights(RAW);
  const q = d.queues[0];
  assert.equal(q.queueWait.p90, 600);
  assert.equal(q.runs, 10);
  assert.deepEqual(q.waitsByReason, [
    ['quota', 6000],
    ['concurrency', 3000]
  ]);
  assert.equal(d.utilisation, 0.25);
  assert.equal(d.machineUtilisation, 0.125);
  assert.deepEqual(d.refusals, [
    { key: 'gpu_limit', count: 5 },
    { key: 'queue_not_allowed', count: 2 }
  ]);
  assert.deepEqual(d.failures, [{ key: 'ExitCode', count: 3 }]);
  // an older server's answer has no busy figures: none shown (not "not measured")
  assert.deepEqual(d.topUsers, [{ user: 'alice', project: 'team-a', runs: 8, gpuHours: 10, busy: null }]);
  assert.deepEqual(d.queues[1].queueWait, { p50: null, p90: null, p99: null, count: 0 });
  assert.deepEqual(d.queues[1].waitsByReason, []);
});

test('wait bars share one scale (p99 is the full bar); reasons read as words', () => {
  const q = normalizeInsights(RAW).queues[0];
  const w = waitBars(q);
  assert.deepEqual(
    w.map(b => [b.label, b.text, b.fraction]),
    [
      ['queue wait p50', '1m 00s', 0.05],
      ['queue wait p90', '10m 00s', 0.5],
      ['queue wait p99', '20m 00s', 1],
      ['start wait p50', '2s', 2 / 1200],
      ['start wait p90', '5s', 5 / 1200],
      ['start wait p99', '9s', 9 / 1200]
    ]
  );
  assert.deepEqual(
    reasonBars(q).map(b => [b.label, b.fraction]),
    [
      ['Quota', 1],
      ['Concurrency', 0.5]
    ]
  );
});

test('goodput bars are fractions of 1; an unknown goodput is a dash', () => {
  const g = goodputBars(normalizeInsights(RAW).queues);
  assert.deepEqual(
    g.map(b => [b.label, b.text, b.fraction]),
    [
      ['team-a-train', '75%', 0.75],
      ['interactive', '—', 0]
    ]
  );
});

test('usage and allowance on one scale; no quota breaks the dashed line', () => {
  const p = usagePaths(normalizeInsights(RAW).usage, 100, 40);
  assert.equal(p.max, 4);
  assert.equal(p.used, 'M0.0,30.0L50.0,0.0L100.0,20.0');
  assert.equal(p.allowance, 'M0.0,0.0L50.0,0.0');
  assert.deepEqual(usagePaths([], 100, 40), { used: '', allowance: '', max: 0 });
});

test('what-if body: only what was set, quota as GPUs, bad numbers named', () => {
  const ok = whatifBody({ queue: 'q', since: '7d', values: { concurrency: '4', quota_gpu: ' 8 ', priority: '' }, ordering: 'strict_fifo' });
  assert.deepEqual(ok.body, {
    since: '7d',
    changes: { q: { concurrency: 4, quota: { gpu: 8 }, ordering: 'strict_fifo' } },
    queues: ['q'],
    max_runs: 0
  });
  assert.match(whatifBody({ queue: 'q', since: '7d', values: { concurrency: '2.5' }, ordering: '' }).error ?? '', /concurrency must be a whole number/);
  assert.match(whatifBody({ queue: 'q', since: '7d', values: { max_per_user: '-1' }, ordering: '' }).error ?? '', /max_per_user/);
  assert.equal(whatifBody({ queue: 'q', since: '7d', values: { priority: '-3' }, ordering: '' }).body?.changes.q.priority, -3);
  assert.equal(whatifBody({ queue: '', since: '7d', values: {}, ordering: '' }).error, 'Choose a queue.');
});

test('what-if answer: observed beside predicted, better/worse marked, assumptions kept', () => {
  const side = (p50: number, util: number) => ({
    wait_p50_seconds: p50,
    wait_p90_seconds: p50 * 2,
    wait_p99_seconds: p50 * 3,
    wait_mean_seconds: p50,
    gpu_hours: 10,
    utilisation: util,
    waiting_at_end: 0
  });
  const raw = {
    queues: [
      { name: 'other' },
      {
        name: 'team-a-train',
        runs: 12,
        observed: side(600, 0.5),
        predicted: side(60, 0.8),
        observed_settings: { priority: 10, concurrency: 2, quota: { gpu: 2, cpu: '16' }, max_per_user: null, ordering: 'best_effort_fifo' },
        settings: { priority: 10, concurrency: 4, quota: { gpu: 4, cpu: '16' }, max_per_user: null, ordering: 'best_effort_fifo' },
        notes: ['concurrency does not bind: the queue quota holds its runs']
      }
    ],
    assumptions: ['durations unchanged']
  };
  const v = normalizeWhatIf(raw, 'team-a-train');
  assert.equal(v.runs, 12);
  assert.deepEqual(v.assumptions, ['durations unchanged']);
  assert.deepEqual(v.notes, ['concurrency does not bind: the queue quota holds its runs']);  // shown as the service wrote them
  assert.deepEqual(v.settings, ['concurrency 2 → 4', 'quota gpu 2 → 4']);
  const byLabel = Object.fromEntries(v.rows.map(r => [r.label, r]));
  assert.deepEqual(byLabel['queue wait p50'], { label: 'queue wait p50', observed: '10m 00s', predicted: '1m 00s', change: -1 });
  assert.deepEqual(byLabel['utilisation'], { label: 'utilisation', observed: '50%', predicted: '80%', change: -1 });
  assert.equal(byLabel['GPU-hours'].change, 0);
  // a flat answer (one queue) reads the same
  assert.equal(normalizeWhatIf({ runs: 3, observed: side(5, 0.1), predicted: side(9, 0.1) }).rows[0].change, 1);
});

test('what-if per flavor: a flavor quota sent by name, figures and the binding flavor shown', () => {
  const ok = whatifBody({ queue: 'q', since: '7d', values: {}, ordering: '', flavors: ' h100=4, a100=8 ' });
  assert.deepEqual(ok.body?.changes, { q: { flavors: { h100: { gpu: 4 }, a100: { gpu: 8 } } } });
  assert.deepEqual(whatifBody({ queue: 'q', since: '7d', values: {}, ordering: '', flavors: '' }).body?.changes, { q: {} });
  assert.match(whatifBody({ queue: 'q', since: '7d', values: {}, ordering: '', flavors: 'h100:4' }).error ?? '', /name=GPUs, e.g. h100=4, not "h100:4"/);
  const fside = (runs: number, gh: number, util: number) => ({ runs, gpu_hours: gh, utilisation: util });
  const side = { wait_p50_seconds: 0, gpu_hours: 1, utilisation: 0.5, waiting_at_end: 0 };
  const flavors = (h100: number) => [
    { name: 'h100', quota: { gpu: h100 } },
    { name: 'a100', quota: { gpu: 2 } }
  ];
  const v = normalizeWhatIf({
    queues: [
      {
        name: 'q',
        runs: 4,
        observed: side,
        predicted: side,
        observed_settings: { priority: 0, concurrency: null, quota: {}, flavors: flavors(2) },
        settings: { priority: 0, concurrency: null, quota: {}, flavors: flavors(3) },
        flavors: [
          { name: 'h100', observed: fside(3, 2, 0.5), predicted: fside(4, 3, 0.6) },
          { name: 'a100', observed: fside(1, 1, 0.25), predicted: fside(0, 0, 0) }
        ],
        predicted_binding_text: "the queue's h100 quota (flavors.h100)",
        notes: []
      }
    ]
  });
  assert.deepEqual(v.settings, ['h100 quota gpu 2 → 3']);
  assert.equal(v.binding, "the queue's h100 quota (flavors.h100)");
  const byLabel = Object.fromEntries(v.rows.map(r => [r.label, r]));
  assert.deepEqual(byLabel['h100 utilisation'], { label: 'h100 utilisation', observed: '50%', predicted: '60%', change: -1 });
  assert.equal(byLabel['a100 GPU-hours'].change, 1);
  // a queue without flavors: no flavor rows, no binding line
  assert.equal(normalizeWhatIf({ runs: 1, observed: side, predicted: side }).binding, null);
});

test('a small share stays visible: 0.14 GPU-h of a week is not 0.0%', () => {
  assert.deepEqual(
    [0, 0.5, 0.034, 0.0083, 0.00083, 0.000001].map(formatPercent),
    ['0%', '50%', '3.4%', '0.8%', '0.083%', '<0.001%']
  );
  assert.equal(formatPercent(null), '—');
});

const flavor = (name: string, gpuHours: number, quota: number | null, util: number | null, machine?: [number, number]) => ({
  ...figures,
  name,
  runs: 2,
  queue_wait: wait(1, 90, 120, 2),
  gpu_hours: gpuHours,
  quota_gpu: quota,
  utilisation: util,
  ...(machine ? { machine_gpus: machine[0], machine_gpu_hours: 1, machine_utilisation: machine[1] } : {})
});

test('per flavor: the service order kept, each figure formatted as a queue\'s, machine columns where given', () => {
  const raw = {
    ...RAW,
    // a100 before h100: the platform config's order, not sorted
    flavors: [flavor('a100', 0.0042, 4, 0.00083, [4, 0.0004]), flavor('h100', 12.5, null, null, [2, 0.25])],
    queues: [{ ...RAW.queues[0], flavors: [flavor('h100', 12.5, 2, 0.5), flavor('a100', 0.0042, 4, 0.00083)] }]
  };
  const d = normalizeInsights(raw);
  assert.deepEqual(
    d.flavors.map(f => [f.name, f.quotaGpu, f.machineGpus]),
    [
      ['a100', 4, 4],
      ['h100', null, 2]
    ]
  );
  assert.deepEqual(flavorTable(d.flavors), {
    head: ['Flavor', 'Runs', 'GPU-hours', 'Busy of measured GPU-h', 'Quota GPUs', 'Utilisation', 'Machine GPUs', 'Machine use', 'Wait p90'],
    rows: [
      ['a100', '2', '0.0042', '—', '4', '0.083%', '4', '0.04%', '1m 30s'],
      ['h100', '2', '12.5', '—', '—', '—', '2', '25%', '1m 30s']
    ]
  });
  // a queue's own flavors (the order it tries them): against its quota, no machine figures
  assert.deepEqual(flavorTable(d.queues[0].flavors), {
    head: ['Flavor', 'Runs', 'GPU-hours', 'Busy of measured GPU-h', 'Quota GPUs', 'Utilisation', 'Wait p90'],
    rows: [
      ['h100', '2', '12.5', '—', '2', '50%', '1m 30s'],
      ['a100', '2', '0.0042', '—', '4', '0.083%', '1m 30s']
    ]
  });
});

test('no flavors configured: empty lists, no rows', () => {
  const d = normalizeInsights(RAW);
  assert.deepEqual(d.flavors, []);
  assert.deepEqual(d.queues.map(q => q.flavors), [[], []]);
  assert.deepEqual(flavorTable([]).rows, []);
});

// GPU-hours held against busy (issue 27): the server's figures, formatted, never recomputed.
const busy = (measured: number, b: number | null, fraction: number | null) => ({
  gpu_hours_measured: measured,
  gpu_hours_busy: b,
  busy_fraction: fraction
});
const idleRun = (id: string, held: number, idle: number, fraction: number) => ({
  id,
  user: 'alice',
  project: 'team-a',
  queue: 'team-a-train',
  gpu_hours: held,
  gpu_hours_idle: idle,
  ...busy(held, held - idle, fraction)
});
const BUSY_RAW = {
  ...RAW,
  busy_percent: 5,
  total: { ...RAW.total, ...busy(8, 2, 0.25) },
  // the fraction as the server gave it (rounded there): used as is, not 1 / 3 recomputed here
  queues: [
    { ...RAW.queues[0], ...busy(3, 1, 0.333333), flavors: [{ ...flavor('h100', 12.5, 2, 0.5), ...busy(3, 1, 0.333333) }] },
    { ...RAW.queues[1], ...busy(0, null, null) }
  ],
  top_users: [{ ...RAW.top_users[0], ...busy(8, 2, 0.25) }],
  projects: [
    { project: 'team-a', runs: 8, gpu_hours: 10, ...busy(8, 2, 0.25) },
    { project: 'team-b', runs: 1, gpu_hours: 0.5, ...busy(0, null, null) }
  ],
  idle_holders: [
    {
      project: 'team-a',
      user: 'alice',
      gpu_hours: 10,
      gpu_hours_idle: 6,
      measured_runs: 2,
      ...busy(8, 2, 0.25),
      worst_runs: [idleRun('r-1', 6, 5, 0.166667), idleRun('r-2', 0.004, 0.003, 0.25)]
    }
  ]
};

test('busy figures: each view mapped as given; null busy reads "GPU use not measured", never 0%', () => {
  const d = normalizeInsights(BUSY_RAW);
  assert.equal(d.busyPercent, 5);
  assert.equal(busyThreshold(d.busyPercent), 'util ≥ 5%');
  assert.equal(d.gpuHours, 12.5);
  assert.deepEqual(d.busy, { measured: 8, busy: 2, fraction: 0.25 });
  assert.equal(busyText(d.busy), 'busy 2.00 of 8.00 measured GPU-hours (25%)');
  assert.equal(busyText(d.queues[0].busy), 'busy 1.00 of 3.00 measured GPU-hours (33%)');
  assert.deepEqual(d.queues[1].busy, { measured: 0, busy: null, fraction: null });
  assert.equal(busyText(d.queues[1].busy), 'GPU use not measured');
  assert.equal(busyCell(d.queues[1].busy), 'not measured');
  assert.equal(flavorTable(d.queues[0].flavors).rows[0][3], '1.00 of 3.00 (33%)');
  assert.equal(busyCell(d.topUsers[0].busy), '2.00 of 8.00 (25%)');
  assert.deepEqual(
    d.projects.map(p => [p.project, p.runs, p.gpuHours, busyCell(p.busy)]),
    [
      ['team-a', 8, 10, '2.00 of 8.00 (25%)'],
      ['team-b', 1, 0.5, 'not measured']
    ]
  );
  // the fraction is the server's, even where it disagrees with busy / measured
  assert.equal(busyText({ measured: 4, busy: 1, fraction: 0.5 }), 'busy 1.00 of 4.00 measured GPU-hours (50%)');
  // an older server's answer: no figures, nothing shown
  assert.equal(busyText(normalizeInsights(RAW).busy), '');
  assert.equal(busyThreshold(normalizeInsights(RAW).busyPercent), null);
  assert.deepEqual(normalizeInsights(RAW).idleHolders, []);
});

test('idle holders: in the server order, with their worst runs worded for links', () => {
  const [holder] = normalizeInsights(BUSY_RAW).idleHolders;
  assert.equal(holder.user, 'alice');
  assert.equal(idleHolderText(holder), 'alice (team-a): 6.00 GPU-hours idle of 8.00 measured (busy 25%) · 2 measured runs');
  assert.deepEqual(
    holder.worstRuns.map(r => [r.id, idleRunText(r)]),
    [
      ['r-1', ' · 5.00 GPU-hours idle of 6.00 measured (busy 17%) · 6.00 held on team-a-train'],
      ['r-2', ' · 0.003 GPU-hours idle of 0.004 measured (busy 25%) · 0.004 held on team-a-train']
    ]
  );
  assert.equal(idleTitle(5), 'Idle GPU time (measured, util < 5%)');
});

test('GPU-hours keep a small non-zero figure visible, as gpuplat report does', () => {
  assert.deepEqual(
    [0, 0.0042, 0.00005, 0.5, 12.5, 250].map(formatHours),
    ['0.00', '0.0042', '<0.0001', '0.50', '12.5', '250']
  );
});
