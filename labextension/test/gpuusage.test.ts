import { test } from 'node:test';
import assert from 'node:assert/strict';

import { compareRows } from '../src/models/comparemodel';
import { gpuChartSeries, gpuStale, gpuView, splitSystem } from '../src/models/gpuusage';

const measured = {
  measured: true,
  reason: null,
  devices: [0],
  samples: 4,
  busy_fraction: 0.75,
  memory_peak_bytes: 3 * 2 ** 30,
  busy_percent: 5,
  text: 'GPU busy 75% of 40 s · mean util 68% · memory peak 3.0 GiB',
  busy_text: '75%',
  memory_peak_text: '3.0 GiB'
};
const blind = { measured: false, reason: 'no NVML on this machine', busy_percent: 5, text: 'GPU use not measured: no NVML on this machine' };
const curve = (count: number) => ({ steps: [0], values: [1], count });

test('GPU use: the server\'s words as they are; not measured says why and has no figures', () => {
  assert.deepEqual(gpuView({ gpu_usage: measured }), {
    measured: true,
    text: measured.text,
    facts: [
      { key: 'busy', label: 'GPU busy', value: '75%' },
      { key: 'memory_peak', label: 'Memory peak', value: '3.0 GiB' }
    ]
  });
  assert.deepEqual(gpuView({ gpu_usage: blind }), { measured: false, text: blind.text, facts: [] });
  assert.equal(gpuView({ gpu_usage: null }), null); // held no GPU: no section
});

test('GPU series are split from the run\'s own metrics; memory charted in GiB', () => {
  const m = { loss: curve(3), 'system/gpu0/util': curve(4), 'system/gpu0/memory_bytes': curve(4) };
  const { own, system } = splitSystem(m);
  assert.deepEqual(Object.keys(own), ['loss']);
  assert.deepEqual(Object.keys(system).sort(), ['system/gpu0/memory_bytes', 'system/gpu0/util']);
  assert.deepEqual(gpuChartSeries('system/gpu0/memory_bytes', [2 ** 31, null]), { label: 'system/gpu0/memory_bytes (GiB)', values: [2, null] });
  assert.deepEqual(gpuChartSeries('system/gpu0/util', [50]), { label: 'system/gpu0/util (%)', values: [50] });
  // the record is read again only once the series count more samples than it did
  assert.equal(gpuStale({ gpu_usage: measured }, system), false);
  assert.equal(gpuStale({ gpu_usage: measured }, { ...system, 'system/gpu0/util': curve(5) }), true);
  assert.equal(gpuStale({ gpu_usage: blind }, {}), false);
  assert.equal(gpuStale({ gpu_usage: null }, system), false);
});

test('Compare: the server\'s GPU rows, one cell per run, highlighted where they differ', () => {
  const run = (id: string) => ({ id, name: id, project: 'p', user: 'u', queue: 'q', status: 'running', phase: 'run', created_at: 0, params: {}, metrics: {} });
  const data = {
    runs: [run('r-1'), run('r-2')],
    metrics: [],
    metric_runs: {},
    default_metric: null,
    direction: {},
    params: { keys: [], differ: [] },
    config: { differ: [] },
    curves: {},
    gpu: [
      { key: 'busy_text', label: 'GPU busy', values: { 'r-1': '75%', 'r-2': 'not measured' } },
      { key: 'memory_peak_text', label: 'GPU memory peak', values: { 'r-1': '3.0 GiB', 'r-2': 'not measured' } }
    ]
  } as unknown as Parameters<typeof compareRows>[0];
  const gpu = compareRows(data, 'r-1').filter(r => r.section === 'GPU use');
  assert.deepEqual(
    gpu.map(r => [r.label, r.cells.map(c => c.text), r.differ]),
    [
      ['GPU busy', ['75%', 'not measured'], true],
      ['GPU memory peak', ['3.0 GiB', 'not measured'], true]
    ]
  );
  assert.deepEqual(compareRows({ ...data, gpu: [] }, 'r-1').filter(r => r.section === 'GPU use'), []);
});
